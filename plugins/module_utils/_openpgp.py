# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Read OpenPGP public keys in pure Python: armor, packets, fingerprints.

Enough of RFC 4880 and RFC 9580 to decide which primary keys a key file
holds, without a gpg binary: the check must run in check mode and on minimal
hosts. Signatures are not verified here; the fingerprint pin is the trust
anchor, and apt/gpgv or rpm verify the binding signatures of subkeys when they
load the keyring.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct

PUBLIC_KEY_BLOCK = 'PGP PUBLIC KEY BLOCK'

TAG_SECRET_KEY = 5
TAG_PUBLIC_KEY = 6
TAG_SECRET_SUBKEY = 7
TAG_MARKER = 10
TAG_TRUST = 12

_TAG_NAMES = {
    1: 'public-key encrypted session key',
    2: 'signature',
    3: 'symmetric-key encrypted session key',
    4: 'one-pass signature',
    5: 'secret key',
    6: 'public key',
    7: 'secret subkey',
    8: 'compressed data',
    9: 'symmetrically encrypted data',
    10: 'marker',
    11: 'literal data',
    12: 'trust',
    13: 'user ID',
    14: 'public subkey',
    17: 'user attribute',
    18: 'encrypted and integrity protected data',
    21: 'padding',
}

_ARMOR_LINE = re.compile(r'^-----(BEGIN|END) (PGP [A-Z0-9 ,/]+)-----\s*$')
_ARMOR_HEADER = re.compile(r'^[A-Za-z][A-Za-z0-9-]*: ')
_FINGERPRINT_LENGTHS = (40, 64)  # v4 (SHA-1); v5 and v6 (SHA-256)


class OpenPGPError(ValueError):
    """The data is not a usable OpenPGP public key; the message says why."""


def tag_name(tag):
    return '%s (tag %d)' % (_TAG_NAMES.get(tag, 'unknown packet'), tag)


def crc24(data):
    """The armor checksum of RFC 4880, section 6.1."""
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def is_armored(data):
    return b'-----BEGIN PGP ' in data or b'-----END PGP ' in data


def dearmor(data):
    """Decode every ASCII-armored public key block in data; return the binary.

    Several blocks in one file are concatenated, as they would be in a
    keyring. Text outside the blocks (a comment above the key) is ignored.
    """
    try:
        text = data.decode('utf-8')  # armor headers may be UTF-8, the body is ASCII
    except UnicodeDecodeError:
        raise OpenPGPError('the armored key is not UTF-8 text')
    lines = text.splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        match = _ARMOR_LINE.match(lines[index])
        index += 1
        if not match:
            continue
        kind, label = match.groups()
        if kind == 'END':
            raise OpenPGPError('found "-----END %s-----" without its BEGIN line' % label)
        if label != PUBLIC_KEY_BLOCK:
            raise OpenPGPError(
                'the armor is a "%s", not a "%s"%s'
                % (label, PUBLIC_KEY_BLOCK,
                   ': refusing to install secret key material' if 'PRIVATE' in label else ''))
        binary, index = _dearmor_block(lines, index, label)
        blocks.append(binary)
    if not blocks:
        raise OpenPGPError('no "-----BEGIN %s-----" line found' % PUBLIC_KEY_BLOCK)
    return b''.join(blocks)


def _dearmor_block(lines, index, label):
    """Decode one block whose BEGIN line is just before lines[index]."""
    # Armor headers (Version:, Comment:, ...) end at the first blank line.
    # A base64 line never contains ': ', so a block without headers and
    # without the blank line is still read correctly.
    while index < len(lines) and _ARMOR_HEADER.match(lines[index]):
        index += 1
    body = []
    checksum = None
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        match = _ARMOR_LINE.match(line)
        if match:
            if match.groups() != ('END', label):
                raise OpenPGPError(
                    'the "%s" block ends with "%s" instead of its END line' % (label, line))
            break
        if line.startswith('='):
            checksum = line[1:]
        elif checksum is not None and line:
            raise OpenPGPError('the armored body continues after its checksum line')
        else:
            body.append(line)
    else:
        raise OpenPGPError('the "%s" block has no "-----END %s-----" line: truncated?' % (label, label))

    try:
        binary = base64.b64decode(''.join(body), validate=True)
    except (binascii.Error, ValueError):
        raise OpenPGPError('the armored body is not valid base64')
    if not binary:
        raise OpenPGPError('the "%s" block is empty' % label)
    # RFC 9580 armor may omit the checksum; when it is there it must match.
    if checksum is not None:
        try:
            expected = base64.b64decode(checksum, validate=True)
        except (binascii.Error, ValueError):
            expected = b''
        if len(expected) != 3:
            raise OpenPGPError('the armor checksum line "=%s" is not 4 base64 characters' % checksum)
        expected = struct.unpack('>I', b'\0' + expected)[0]
        actual = crc24(binary)
        if actual != expected:
            raise OpenPGPError(
                'armor checksum mismatch (CRC24 of the data is %06X, the "=" line says %06X): '
                'the key file is corrupt or truncated' % (actual, expected))
    return binary, index


def armor(binary, label=PUBLIC_KEY_BLOCK):
    """ASCII-armor binary OpenPGP data, with the CRC24 line.

    RFC 9580 lets writers drop the checksum, but rpm (behind dnf's gpgkey)
    rejects armor without it.
    """
    body = base64.b64encode(binary).decode('ascii')
    lines = ['-----BEGIN %s-----' % label, '']
    lines.extend(body[start:start + 64] for start in range(0, len(body), 64))
    lines.append('=' + base64.b64encode(struct.pack('>I', crc24(binary))[1:]).decode('ascii'))
    lines.append('-----END %s-----' % label)
    return ('\n'.join(lines) + '\n').encode('ascii')


def parse_packets(binary):
    """Split binary OpenPGP data into a list of (tag, body) tuples.

    Reads old-format headers (1-, 2-, 4-octet and indeterminate lengths) and
    new-format headers (1-, 2-, 5-octet and partial body lengths).
    """
    data = binary
    packets = []
    offset = 0
    while offset < len(data):
        start = offset
        header = data[offset]
        offset += 1
        if not header & 0x80:
            raise OpenPGPError(
                'byte 0x%02X at offset %d is not an OpenPGP packet header' % (header, start))
        if header & 0x40:
            tag = header & 0x3F
            body, offset = _new_format_body(data, offset, start)
        else:
            tag = (header >> 2) & 0x0F
            length_type = header & 0x03
            if length_type == 3:
                length = len(data) - offset
            else:
                size = (1, 2, 4)[length_type]
                length = _read_int(data, offset, size, start)
                offset += size
            body = _take(data, offset, length, start)
            offset += length
        packets.append((tag, body))
    return packets


def _new_format_body(data, offset, start):
    chunks = []
    while True:
        first = _read_int(data, offset, 1, start)
        offset += 1
        if first < 192:
            length = first
        elif first < 224:
            length = ((first - 192) << 8) + _read_int(data, offset, 1, start) + 192
            offset += 1
        elif first == 255:
            length = _read_int(data, offset, 4, start)
            offset += 4
        else:
            # A partial body length: this chunk, then another length follows.
            length = 1 << (first & 0x1F)
            chunks.append(_take(data, offset, length, start))
            offset += length
            continue
        chunks.append(_take(data, offset, length, start))
        return b''.join(chunks), offset + length


def _read_int(data, offset, size, start):
    if offset + size > len(data):
        raise OpenPGPError(
            'the packet header at offset %d is cut off: the key file is truncated' % start)
    return int.from_bytes(data[offset:offset + size], 'big')


def _take(data, offset, length, start):
    if offset + length > len(data):
        raise OpenPGPError(
            'the packet at offset %d declares %d bytes but only %d remain: the key file is truncated'
            % (start, length, len(data) - offset))
    return data[offset:offset + length]


def fingerprint(body):
    """The fingerprint of a public key packet body, as upper-case hex."""
    if not body:
        raise OpenPGPError('a public key packet is empty')
    version = body[0]
    if version == 4:
        digest = hashlib.sha1(b'\x99' + struct.pack('>H', len(body)) + body)
    elif version == 5:
        digest = hashlib.sha256(b'\x9a' + struct.pack('>I', len(body)) + body)
    elif version == 6:
        digest = hashlib.sha256(b'\x9b' + struct.pack('>I', len(body)) + body)
    elif version in (2, 3):
        raise OpenPGPError(
            'the key is a version %d key, which RFC 9580 retired (MD5 fingerprints); '
            'ask the vendor for its current key' % version)
    else:
        raise OpenPGPError('the key has unknown public key version %d' % version)
    return digest.hexdigest().upper()


def primary_fingerprints(binary):
    """Check that binary is a set of OpenPGP public keys; return their fingerprints.

    The fingerprints of all primary keys are returned, in file order; subkeys
    are not primary keys and are left out.
    """
    packets = parse_packets(binary)
    if not packets:
        raise OpenPGPError('the key file is empty')
    tags = [tag for tag, body in packets]
    if TAG_SECRET_KEY in tags or TAG_SECRET_SUBKEY in tags:
        raise OpenPGPError(
            'the data contains secret key material: refusing to install a private key as a keyring')
    leading = [tag for tag in tags if tag not in (TAG_MARKER, TAG_TRUST)]
    if not leading or leading[0] != TAG_PUBLIC_KEY:
        raise OpenPGPError(
            'the data is OpenPGP but not a public key: it starts with a %s packet'
            % tag_name(leading[0] if leading else tags[0]))
    return [fingerprint(body) for tag, body in packets if tag == TAG_PUBLIC_KEY]


def read_keys(data):
    """Read a key file, armored or binary; return (binary, fingerprints).

    Anything that is not an OpenPGP public key (an HTML error page, a
    signature, a secret key) raises OpenPGPError with a message saying what
    it looks like.
    """
    if not data or not data.strip():
        raise OpenPGPError('the key file is empty')
    if is_armored(data):
        binary = dearmor(data)
    elif data[0] & 0x80:
        binary = data
    else:
        raise OpenPGPError(
            'this is neither an armored nor a binary OpenPGP key; it begins with %s%s'
            % (_preview(data),
               ' (an HTML page: is the URL right, and does it need a login or a proxy?)'
               if _looks_like_html(data) else ''))
    return binary, primary_fingerprints(binary)


def _looks_like_html(data):
    head = data[:512].lstrip().lower()
    return head.startswith(b'<!doctype html') or head.startswith(b'<html') or b'<html' in head


def _preview(data):
    text = data[:60].decode('ascii', 'replace')
    return repr(re.sub(r'\s+', ' ', text).strip())


def normalize_fingerprint(value):
    """'eb69 3b30 ...' -> 'EB693B30...'; raise OpenPGPError if it is not one."""
    text = re.sub(r'\s+', '', value or '').upper()
    if text.startswith('0X'):
        text = text[2:]
    if not re.match(r'^[0-9A-F]+$', text) or len(text) not in _FINGERPRINT_LENGTHS:
        raise OpenPGPError(
            '%r is not a full fingerprint: give 40 hex digits (v4 key) or 64 (v5/v6 key), '
            'as printed by "gpg --show-keys --with-fingerprint KEYFILE"; short key IDs are not accepted'
            % value)
    return text
