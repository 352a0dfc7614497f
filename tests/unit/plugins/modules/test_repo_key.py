# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import hashlib
import http.server
import os
import stat
import threading
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils._openpgp import dearmor
from ansible_collections.accel.nodes.plugins.modules import repo_key

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'openpgp'

RSA = 'CB46C553B095A24A90274F878EA7A5D5237FE158'
ED25519 = 'A5B440836C27DF444964208D607B667479FB903F'
DOCKER = '9DC858229FC7DD38854AE2D88D81803C0EBFCD88'
CUDA = 'EB693B3035CD5710E231E123A4B469963BF863CC'
RFC9580_V6 = 'CB186C4F0609A697E4D52DFA6C722B0C1F1E27C18A56708F6525EC27BAD9ACC9'


def fixture(name):
    return (FIXTURES / name).read_bytes()


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def repo_key_run(run_module, tmp_path):
    """repo_key_run(**args) -> result. Module temp files go under tmp_path."""
    moduletmp = tmp_path / 'moduletmp'
    moduletmp.mkdir()

    def _run(**args):
        args.setdefault('_ansible_tmpdir', str(moduletmp))
        return run_module(repo_key.main, args)
    return _run


@pytest.fixture
def serve(tmp_path):
    """serve(name, data) -> a file:// URL of data, as our tests serve throwaway keys."""
    served = tmp_path / 'served'
    served.mkdir()

    def _serve(name, data):
        (served / name).write_bytes(data)
        return (served / name).as_uri()
    return _serve


@pytest.fixture
def dest(tmp_path):
    return tmp_path / 'etc' / 'apt' / 'keyrings' / 'vendor.gpg'


@pytest.mark.parametrize('source', ['rsa2048.asc', 'rsa2048.gpg'])
def test_installs_a_binary_keyring_from_either_form(repo_key_run, serve, dest, source):
    result = repo_key_run(url=serve(source, fixture(source)), fingerprint=[RSA], dest=str(dest))
    assert result['changed'] is True
    assert 'failed' not in result
    assert result['fingerprints'] == [RSA]
    assert result['dest'] == str(dest)
    assert dest.read_bytes() == fixture('rsa2048.gpg')
    assert mode_of(dest) == 0o644


def test_creates_missing_parent_directories_0755(repo_key_run, serve, dest, tmp_path):
    umask = os.umask(0o077)
    try:
        repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    finally:
        os.umask(umask)
    for directory in (tmp_path / 'etc', tmp_path / 'etc' / 'apt', dest.parent):
        assert mode_of(directory) == 0o755
    assert mode_of(dest) == 0o644


@pytest.mark.parametrize('source', ['rsa2048.asc', 'rsa2048.gpg'])
def test_armored_output_round_trips(repo_key_run, serve, dest, source):
    result = repo_key_run(url=serve(source, fixture(source)), fingerprint=[RSA], dest=str(dest), format='armored')
    assert result['changed'] is True
    # Same bytes as gpg --armor --export, whatever the source form.
    assert dest.read_bytes() == fixture('rsa2048.asc')
    assert dearmor(dest.read_bytes()) == fixture('rsa2048.gpg')


def test_src_on_the_target(repo_key_run, dest, tmp_path):
    src = tmp_path / 'ed25519.gpg'
    src.write_bytes(fixture('ed25519.gpg'))
    result = repo_key_run(src=str(src), fingerprint=[ED25519], dest=str(dest))
    assert result['changed'] is True
    assert dest.read_bytes() == fixture('ed25519.gpg')


def test_second_run_is_not_changed(repo_key_run, serve, dest):
    args = dict(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    assert repo_key_run(**args)['changed'] is True
    before = os.stat(dest)
    second = repo_key_run(**args)
    assert second['changed'] is False
    assert second['fingerprints'] == [RSA]
    assert os.stat(dest).st_ino == before.st_ino


def test_binary_and_armored_sources_give_the_same_keyring(repo_key_run, serve, dest):
    repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    assert repo_key_run(url=serve('k.gpg', fixture('rsa2048.gpg')), fingerprint=[RSA], dest=str(dest))['changed'] is False


def test_format_change_rewrites_the_file(repo_key_run, serve, dest):
    url = serve('k.asc', fixture('rsa2048.asc'))
    repo_key_run(url=url, fingerprint=[RSA], dest=str(dest))
    assert repo_key_run(url=url, fingerprint=[RSA], dest=str(dest), format='armored')['changed'] is True
    assert dest.read_bytes() == fixture('rsa2048.asc')


def test_check_mode_writes_nothing_and_reports_the_change(repo_key_run, serve, dest, tmp_path):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest),
                          _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True
    assert result['fingerprints'] == [RSA]
    assert result['diff']['before'] == {'state': 'absent'}
    assert result['diff']['after']['fingerprints'] == [RSA]
    assert result['diff']['after']['mode'] == '0644'
    assert not (tmp_path / 'etc').exists()


def test_check_mode_on_a_replaced_key_leaves_the_old_one(repo_key_run, serve, dest):
    dest.parent.mkdir(parents=True)
    dest.write_bytes(fixture('ed25519.gpg'))
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest),
                          _ansible_check_mode=True)
    assert result['changed'] is True
    assert dest.read_bytes() == fixture('ed25519.gpg')


def test_check_mode_still_verifies_the_key(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[ED25519], dest=str(dest),
                          _ansible_check_mode=True)
    assert result['failed'] is True
    assert RSA in result['msg']


def test_check_mode_after_a_real_run_is_not_changed(repo_key_run, serve, dest):
    args = dict(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    repo_key_run(**args)
    assert repo_key_run(_ansible_check_mode=True, **args)['changed'] is False


def test_wrong_fingerprint_fails_and_writes_nothing(repo_key_run, serve, dest, tmp_path):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[CUDA], dest=str(dest))
    assert result['failed'] is True
    assert RSA in result['msg'] and CUDA in result['msg']
    assert 'Nothing was written' in result['msg']
    assert result['fingerprints'] == [RSA]
    assert result['expected'] == [CUDA]
    assert not (tmp_path / 'etc').exists()


def test_wrong_fingerprint_keeps_the_installed_key(repo_key_run, serve, dest):
    dest.parent.mkdir(parents=True)
    dest.write_bytes(fixture('ed25519.gpg'))
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[ED25519], dest=str(dest))
    assert result['failed'] is True
    assert dest.read_bytes() == fixture('ed25519.gpg')
    assert os.listdir(dest.parent) == ['vendor.gpg']


def test_an_extra_key_in_the_file_fails(repo_key_run, serve, dest):
    url = serve('two.gpg', fixture('rsa2048.gpg') + fixture('ed25519.gpg'))
    result = repo_key_run(url=url, fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert result['fingerprints'] == [RSA, ED25519]
    assert 'holds 2 primary keys' in result['msg']
    assert '%s is not accepted' % ED25519 in result['msg']
    assert not dest.exists()


def test_a_keyring_passes_when_every_key_is_accepted(repo_key_run, serve, dest):
    url = serve('two.gpg', fixture('rsa2048.gpg') + fixture('ed25519.gpg'))
    result = repo_key_run(url=url, fingerprint=[ED25519, RSA, CUDA], dest=str(dest))
    assert result['changed'] is True
    assert result['fingerprints'] == [RSA, ED25519]
    assert dest.read_bytes() == fixture('rsa2048.gpg') + fixture('ed25519.gpg')


def test_a_bad_crc_fails(repo_key_run, serve, dest):
    url = serve('k.asc', fixture('rsa2048.asc').replace(b'=6zno\n', b'=6znp\n'))
    result = repo_key_run(url=url, fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert 'checksum mismatch' in result['msg']
    assert not dest.exists()


def test_an_html_error_page_fails_clearly(repo_key_run, serve, dest):
    url = serve('gpg', b'<!DOCTYPE html>\n<html><body><h1>Access denied</h1></body></html>\n')
    result = repo_key_run(url=url, fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert 'not a usable OpenPGP public key' in result['msg']
    assert 'an HTML page' in result['msg']
    assert url in result['msg']
    assert not dest.exists()


def test_a_missing_file_url_fails(repo_key_run, dest, tmp_path):
    result = repo_key_run(url=(tmp_path / 'nope.asc').as_uri(), fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert result['msg'].startswith('Could not download the key from file://')


def test_a_missing_src_fails(repo_key_run, dest, tmp_path):
    result = repo_key_run(src=str(tmp_path / 'nope.asc'), fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert 'is not a file on the target' in result['msg']


def test_vendor_key_with_a_spaced_lower_case_fingerprint(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('gpg', fixture('docker.asc')),
                          fingerprint=['9dc8 5822 9fc7 dd38 854a  e2d8 8d81 803c 0ebf cd88'], dest=str(dest))
    assert result['changed'] is True
    assert result['fingerprints'] == [DOCKER]
    assert dest.read_bytes() == dearmor(fixture('docker.asc'))


def test_vendor_key_under_another_vendors_fingerprint_fails(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('gpg', fixture('docker.asc')), fingerprint=[CUDA], dest=str(dest))
    assert result['failed'] is True
    assert 'has fingerprint %s, which is not accepted (accepted: %s)' % (DOCKER, CUDA) in result['msg']


def test_v6_key(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('v6.asc', fixture('rfc9580-sample-v6.asc')), fingerprint=[RFC9580_V6],
                          dest=str(dest), format='armored')
    assert result['changed'] is True
    assert result['fingerprints'] == [RFC9580_V6]
    assert dearmor(dest.read_bytes()) == dearmor(fixture('rfc9580-sample-v6.asc'))


def test_a_short_key_id_is_refused(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=['237FE158'], dest=str(dest))
    assert result['failed'] is True
    assert 'not a full fingerprint' in result['msg']
    assert not dest.exists()


def test_an_empty_fingerprint_list_is_refused(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[], dest=str(dest))
    assert result['failed'] is True
    assert not dest.exists()


def test_other_url_schemes_are_refused(repo_key_run, dest):
    result = repo_key_run(url='ftp://example.invalid/key.asc', fingerprint=[RSA], dest=str(dest))
    assert result['failed'] is True
    assert 'url must start with https://' in result['msg']


@pytest.mark.parametrize('args, message', [
    (dict(fingerprint=[RSA]), 'state is present but any of the following are missing: url, src'),
    (dict(url='file:///k', src='/k', fingerprint=[RSA]), 'mutually exclusive'),
    (dict(url='file:///k'), 'fingerprint'),
])
def test_argument_rules(repo_key_run, dest, args, message):
    result = repo_key_run(dest=str(dest), **args)
    assert result['failed'] is True
    assert message in result['msg']


def test_dest_that_is_a_directory_fails(repo_key_run, serve, tmp_path):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(tmp_path))
    assert result['failed'] is True
    assert 'is a directory' in result['msg']


def test_mode_is_applied_and_corrected(repo_key_run, serve, dest):
    args = dict(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    repo_key_run(mode='0600', **args)
    assert mode_of(dest) == 0o600

    check = repo_key_run(_ansible_check_mode=True, _ansible_diff=True, **args)
    assert check['changed'] is True
    assert check['diff']['before']['mode'] == '0600'
    assert check['diff']['after']['mode'] == '0644'
    assert mode_of(dest) == 0o600

    assert repo_key_run(**args)['changed'] is True
    assert mode_of(dest) == 0o644
    assert repo_key_run(**args)['changed'] is False


def test_diff_describes_the_keys_not_the_bytes(repo_key_run, serve, dest):
    url = serve('k.asc', fixture('rsa2048.asc'))
    dest.parent.mkdir(parents=True)
    dest.write_bytes(fixture('ed25519.gpg'))
    os.chmod(dest, 0o644)
    result = repo_key_run(url=url, fingerprint=[RSA], dest=str(dest), format='armored', _ansible_diff=True)
    assert result['diff'] == {
        'before': {'state': 'present', 'format': 'binary', 'fingerprints': [ED25519],
                   'sha256': hashlib.sha256(fixture('ed25519.gpg')).hexdigest(), 'mode': '0644'},
        'after': {'state': 'present', 'format': 'armored', 'fingerprints': [RSA],
                  'sha256': hashlib.sha256(fixture('rsa2048.asc')).hexdigest(), 'mode': '0644'},
    }


def test_diff_of_a_file_that_is_not_a_key(repo_key_run, serve, dest):
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b'junk\n')
    result = repo_key_run(url=serve('k.gpg', fixture('rsa2048.gpg')), fingerprint=[RSA], dest=str(dest),
                          _ansible_diff=True)
    assert result['changed'] is True
    assert result['diff']['before']['fingerprints'][0].startswith('(not an OpenPGP public key')
    assert dest.read_bytes() == fixture('rsa2048.gpg')


def test_no_diff_without_diff_mode(repo_key_run, serve, dest):
    result = repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))
    assert 'diff' not in result


def test_absent_removes_the_keyring(repo_key_run, serve, dest):
    repo_key_run(url=serve('k.asc', fixture('rsa2048.asc')), fingerprint=[RSA], dest=str(dest))

    check = repo_key_run(dest=str(dest), state='absent', _ansible_check_mode=True, _ansible_diff=True)
    assert check['changed'] is True
    assert check['diff']['before']['fingerprints'] == [RSA]
    assert check['diff']['after'] == {'state': 'absent'}
    assert dest.exists()

    assert repo_key_run(dest=str(dest), state='absent')['changed'] is True
    assert not dest.exists()
    assert repo_key_run(dest=str(dest), state='absent')['changed'] is False


class _KeyServer(http.server.BaseHTTPRequestHandler):
    files = {}

    def do_GET(self):
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body if body is not None else b'<html>not found</html>')

    def log_message(self, *args):
        pass


@pytest.fixture
def http_base(monkeypatch):
    for name in ('http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY'):
        monkeypatch.delenv(name, raising=False)
    server = http.server.HTTPServer(('127.0.0.1', 0), _KeyServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _KeyServer.files = {'/gpg': fixture('docker.asc')}
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_http_download(repo_key_run, http_base, dest):
    result = repo_key_run(url=http_base + '/gpg', fingerprint=[DOCKER], dest=str(dest))
    assert result['changed'] is True
    assert dest.read_bytes() == dearmor(fixture('docker.asc'))


def test_http_error_fails_with_the_status(repo_key_run, http_base, dest):
    result = repo_key_run(url=http_base + '/missing', fingerprint=[DOCKER], dest=str(dest))
    assert result['failed'] is True
    assert result['status'] == 404
    assert 'Could not download the key from %s/missing: HTTP Error 404' % http_base in result['msg']
    assert not dest.exists()
