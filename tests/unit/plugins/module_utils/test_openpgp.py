# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils._openpgp import (
    OpenPGPError,
    armor,
    crc24,
    dearmor,
    normalize_fingerprint,
    parse_packets,
    read_keys,
)

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'openpgp'

RSA = 'CB46C553B095A24A90274F878EA7A5D5237FE158'
ED25519 = 'A5B440836C27DF444964208D607B667479FB903F'
DOCKER = '9DC858229FC7DD38854AE2D88D81803C0EBFCD88'
RFC9580_V6 = 'CB186C4F0609A697E4D52DFA6C722B0C1F1E27C18A56708F6525EC27BAD9ACC9'
DRAFT_V5 = '19347BC9872464025F99DF3EC2E0000ED9884892E1F7B3EA4C94009159569B54'


def fixture(name):
    return (FIXTURES / name).read_bytes()


def old_packet(tag, body, length_type):
    header = bytes([0x80 | tag << 2 | length_type])
    if length_type == 3:
        return header + body
    return header + len(body).to_bytes((1, 2, 4)[length_type], 'big') + body


def new_length(length, size):
    if size == 1:
        assert length < 192
        return bytes([length])
    if size == 2:
        assert 192 <= length < 8384
        return bytes([((length - 192) >> 8) + 192, (length - 192) & 0xFF])
    return b'\xff' + struct.pack('>I', length)


def new_packet(tag, body, size):
    return bytes([0xC0 | tag]) + new_length(len(body), size) + body


def partial_packet(tag, body):
    """Chunks of 16 and 8 octets with partial lengths, then the rest."""
    assert len(body) >= 24
    out = bytes([0xC0 | tag]) + b'\xe4' + body[:16] + b'\xe3' + body[16:24]
    rest = body[24:]
    return out + new_length(len(rest), 1 if len(rest) < 192 else 2) + rest


@pytest.mark.parametrize('name, fingerprints', [
    ('rsa2048.asc', [RSA]),
    ('rsa2048.gpg', [RSA]),
    ('ed25519.asc', [ED25519]),
    ('ed25519.gpg', [ED25519]),
    ('docker.asc', [DOCKER]),
    ('rfc9580-sample-v6.asc', [RFC9580_V6]),
    ('v5-draft-sample-primary.gpg', [DRAFT_V5]),
])
def test_fingerprints_match_the_published_ones(name, fingerprints):
    assert read_keys(fixture(name))[1] == fingerprints


@pytest.mark.parametrize('key', ['rsa2048', 'ed25519'])
def test_armored_and_binary_exports_read_the_same(key):
    assert read_keys(fixture(key + '.asc'))[0] == fixture(key + '.gpg')


def test_subkeys_are_not_primary_keys():
    binary = read_keys(fixture('docker.asc'))[0]
    assert 14 in [tag for tag, body in parse_packets(binary)]
    assert read_keys(binary)[1] == [DOCKER]


def test_every_primary_key_of_a_keyring_is_returned_in_order():
    keyring = fixture('ed25519.gpg') + fixture('rsa2048.gpg')
    assert read_keys(keyring)[1] == [ED25519, RSA]


def test_several_armored_blocks_make_one_keyring():
    data = b'Our keys:\n' + fixture('rsa2048.asc') + b'\n' + fixture('ed25519.asc')
    binary, fingerprints = read_keys(data)
    assert fingerprints == [RSA, ED25519]
    assert binary == fixture('rsa2048.gpg') + fixture('ed25519.gpg')


@pytest.mark.parametrize('key', ['rsa2048', 'ed25519'])
def test_armor_writes_what_gpg_writes(key):
    assert armor(fixture(key + '.gpg')) == fixture(key + '.asc')


def test_armor_round_trips_a_key_with_subkeys():
    binary = dearmor(fixture('docker.asc'))
    assert dearmor(armor(binary)) == binary


@pytest.mark.skipif(shutil.which('gpg') is None, reason='needs gpg')
def test_gpg_reads_our_armor(tmp_path):
    binary = dearmor(fixture('docker.asc'))
    (tmp_path / 'key.asc').write_bytes(armor(binary))
    home = tmp_path / 'home'
    home.mkdir(mode=0o700)
    out = subprocess.run(
        ['gpg', '--batch', '--homedir', str(home), '--with-colons', '--show-keys', str(tmp_path / 'key.asc')],
        check=True, capture_output=True, text=True).stdout
    assert 'fpr:::::::::%s:' % DOCKER in out


def test_crc24_of_nothing_is_the_initial_value():
    assert crc24(b'') == 0xB704CE


def test_a_wrong_crc_line_fails():
    text = fixture('rsa2048.asc')
    good = b'=6zno\n'
    assert good in text
    with pytest.raises(OpenPGPError, match=r'checksum mismatch .*says 000000'):
        dearmor(text.replace(good, b'=AAAA\n'))


def test_a_corrupt_body_fails_the_crc():
    lines = fixture('rsa2048.asc').split(b'\n')
    line = lines[4]
    lines[4] = line[:10] + (b'A' if line[10:11] != b'A' else b'B') + line[11:]
    with pytest.raises(OpenPGPError, match='checksum mismatch'):
        dearmor(b'\n'.join(lines))


def test_a_malformed_crc_line_fails():
    with pytest.raises(OpenPGPError, match='not 4 base64 characters'):
        dearmor(fixture('rsa2048.asc').replace(b'=6zno\n', b'=6zn\n'))


def test_the_crc_line_is_optional():
    text = fixture('rsa2048.asc').replace(b'=6zno\n', b'')
    assert read_keys(text)[1] == [RSA]


def test_armor_headers_crlf_and_surrounding_text_are_accepted():
    text = fixture('rsa2048.asc').replace(
        b'-----\n\n', b'-----\nVersion: GnuPG v2\nComment: https://example.invalid/key\n\n', 1)
    text = b'Vendor key, see the install guide\n' + text + b'trailing words\n'
    assert read_keys(text.replace(b'\n', b'\r\n'))[1] == [RSA]


def test_armor_without_the_blank_line_is_accepted():
    assert read_keys(fixture('rsa2048.asc').replace(b'-----\n\n', b'-----\n', 1))[1] == [RSA]


@pytest.mark.parametrize('mangle, message', [
    (lambda t: t.replace(b'-----END PGP PUBLIC KEY BLOCK-----\n', b''), 'no "-----END'),
    (lambda t: t.replace(b'-----END PGP PUBLIC KEY BLOCK-----', b'-----END PGP SIGNATURE-----'),
     'ends with "-----END PGP SIGNATURE-----"'),
    (lambda t: t.replace(b'mQENBG', b'mQ*NBG'), 'not valid base64'),
    (lambda t: t.replace(b'=6zno\n', b'=6zno\nAAAA\n'), 'continues after its checksum'),
    (lambda t: t.replace(b'PUBLIC KEY BLOCK', b'PRIVATE KEY BLOCK'), 'refusing to install secret key material'),
    (lambda t: t.replace(b'PUBLIC KEY BLOCK', b'SIGNATURE'), 'is a "PGP SIGNATURE", not a "PGP PUBLIC KEY BLOCK"'),
    (lambda t: t.split(b'-----END')[0][len(b'-----BEGIN PGP PUBLIC KEY BLOCK-----\n'):]
     + b'-----END PGP PUBLIC KEY BLOCK-----\n', 'without its BEGIN line'),
])
def test_broken_armor_fails_clearly(mangle, message):
    text = mangle(fixture('rsa2048.asc'))
    with pytest.raises(OpenPGPError, match=message.replace('*', r'\*').replace('(', r'\(')):
        read_keys(text)


@pytest.mark.parametrize('frame', [
    pytest.param(lambda tag, body: old_packet(tag, body, 1), id='old-2-octet'),
    pytest.param(lambda tag, body: old_packet(tag, body, 2), id='old-4-octet'),
    pytest.param(lambda tag, body: new_packet(tag, body, 2 if len(body) >= 192 else 1), id='new-1-or-2-octet'),
    pytest.param(lambda tag, body: new_packet(tag, body, 5), id='new-5-octet'),
    pytest.param(partial_packet, id='new-partial'),
])
def test_every_length_encoding_reads_the_same_packets(frame):
    packets = parse_packets(fixture('rsa2048.gpg')) + parse_packets(fixture('ed25519.gpg'))
    reframed = b''.join(frame(tag, body) for tag, body in packets)
    assert parse_packets(reframed) == packets
    assert read_keys(reframed)[1] == [RSA, ED25519]


@pytest.mark.parametrize('frame', [
    pytest.param(lambda tag, body: old_packet(tag, body, 0), id='old-1-octet'),
    pytest.param(lambda tag, body: new_packet(tag, body, 1), id='new-1-octet'),
])
def test_one_octet_lengths_read_the_same_packets(frame):
    packets = parse_packets(fixture('ed25519.gpg'))
    assert all(len(body) < 192 for tag, body in packets)
    reframed = b''.join(frame(tag, body) for tag, body in packets)
    assert parse_packets(reframed) == packets


def test_a_partial_length_of_64_kib():
    body = bytes(range(256)) * 256 + b'tail'
    data = b'\xcd\xf0' + body[:65536] + new_length(4, 1) + body[65536:]
    assert parse_packets(data) == [(13, body)]


def test_an_indeterminate_length_runs_to_the_end():
    packets = parse_packets(fixture('rsa2048.gpg'))
    (tag, body), rest = packets[-1], packets[:-1]
    reframed = b''.join(old_packet(t, b, 1) for t, b in rest) + old_packet(tag, body, 3)
    assert parse_packets(reframed) == packets


@pytest.mark.parametrize('cut', [1, 2, 100, 648])
def test_truncated_binary_fails(cut):
    with pytest.raises(OpenPGPError, match='truncated'):
        read_keys(fixture('rsa2048.gpg')[:cut])


@pytest.mark.parametrize('data, message', [
    (b'', 'empty'),
    (b'  \n', 'empty'),
    (b'<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n', 'an HTML page'),
    (b'<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>', "neither an armored nor a binary"),
    (b'\x1f\x8b\x08\x00', "neither an armored nor a binary"),
])
def test_data_that_is_not_a_key_fails_clearly(data, message):
    with pytest.raises(OpenPGPError, match=message):
        read_keys(data)


def test_a_signature_is_not_a_public_key():
    signature = [old_packet(tag, body, 1) for tag, body in parse_packets(fixture('rsa2048.gpg')) if tag == 2][0]
    with pytest.raises(OpenPGPError, match=r'not a public key: it starts with a signature \(tag 2\) packet'):
        read_keys(signature)


def test_marker_and_trust_packets_may_come_first():
    data = new_packet(10, b'PGP', 1) + new_packet(12, b'\x00\x00', 1) + fixture('rsa2048.gpg')
    assert read_keys(data)[1] == [RSA]


@pytest.mark.parametrize('tag', [5, 7])
def test_secret_key_packets_are_refused(tag):
    data = fixture('rsa2048.gpg') + new_packet(tag, b'\x04secret', 1)
    with pytest.raises(OpenPGPError, match='secret key material'):
        read_keys(data)


@pytest.mark.parametrize('version, message', [
    (3, 'version 3 key, which RFC 9580 retired'),
    (9, 'unknown public key version 9'),
])
def test_unsupported_key_versions_fail(version, message):
    with pytest.raises(OpenPGPError, match=message):
        read_keys(new_packet(6, bytes([version]) + b'\x00' * 12, 1))


@pytest.mark.parametrize('value', [
    'CB46C553B095A24A90274F878EA7A5D5237FE158',
    'cb46c553b095a24a90274f878ea7a5d5237fe158',
    'CB46 C553 B095 A24A 9027  4F87 8EA7 A5D5 237F E158',
    '0xCB46C553B095A24A90274F878EA7A5D5237FE158',
])
def test_fingerprints_are_normalized(value):
    assert normalize_fingerprint(value) == RSA


def test_a_v6_fingerprint_is_accepted():
    assert normalize_fingerprint(RFC9580_V6.lower()) == RFC9580_V6


@pytest.mark.parametrize('value', ['237FE158', '8EA7A5D5237FE158', RSA + '0', 'G' * 40, '', None])
def test_short_ids_and_junk_are_not_fingerprints(value):
    with pytest.raises(OpenPGPError, match='not a full fingerprint'):
        normalize_fingerprint(value)
