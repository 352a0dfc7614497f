# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.modules import node_state

# Captured on a Debian 12 node: `systemctl show --property=ActiveState,UnitFileState --
# e2scrub_reap.service systemd-journald.service docker.service`, before and after
# `systemctl disable e2scrub_reap.service; systemctl stop systemd-journald.service`,
# and a stanza of its dpkg status file.
FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'state'
UNITS = ['e2scrub_reap.service', 'systemd-journald.service', 'docker.service']


class Systemctl:
    """Answers run_command from a captured `systemctl show` of UNITS, in the order the units are asked for."""

    def __init__(self, capture):
        self.capture = capture
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append(args)
        blocks = dict(zip(UNITS, (FIXTURES / self.capture).read_text().strip().split('\n\n')))
        return 0, '\n\n'.join(blocks[unit] for unit in args[args.index('--') + 1:]) + '\n', ''


@pytest.fixture
def node(tmp_path, monkeypatch, module_in_tmp):
    """A node under tmp_path: a dpkg status file, an os-release, an /etc/docker, and systemctl."""
    root = tmp_path / 'node'
    (root / 'etc' / 'docker').mkdir(parents=True)
    (root / 'etc' / 'docker' / 'daemon.json').write_text('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}\n')
    (root / 'var' / 'lib' / 'dpkg').mkdir(parents=True)
    shutil.copy(FIXTURES / 'dpkg-status', root / 'var' / 'lib' / 'dpkg' / 'status')
    shutil.copy(FIXTURES / 'os-release', root / 'etc' / 'os-release')
    (root / 'proc').mkdir()
    (root / 'proc' / 'cmdline').write_text('BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=/dev/nvme0n1p1 ro\n')
    monkeypatch.setattr(node_state, 'KERNEL_CMDLINE', str(root / 'proc' / 'cmdline'))
    monkeypatch.setattr(node_state, 'DPKG_STATUS', str(root / 'var' / 'lib' / 'dpkg' / 'status'))
    monkeypatch.setattr(node_state, 'OS_RELEASE', str(root / 'etc' / 'os-release'))
    systemctl = Systemctl('systemctl-show-before.txt')
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda module, args, **kwargs: systemctl(args, **kwargs))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: '/usr/bin/' + name)
    run = module_in_tmp(node_state.main)
    record = str(root / 'var' / 'lib' / 'accel-nodes' / 'state.json')

    class Node:
        pass

    n = Node()
    n.root, n.systemctl, n.record = root, systemctl, record
    n.run = lambda **args: run(path=record, **args)
    n.write = lambda **args: n.run(state='recorded', inputs='digest-1', paths=[str(root / 'etc' / 'docker')],
                                   services=UNITS, **args)
    return n


def test_no_record_is_drift(node):
    result = node.run(inputs='digest-1')
    assert result['converged'] is False and result['changed'] is False
    assert result['drift'] == ['no state record at %s' % node.record]
    assert result['validated'] is False and result['recorded_at'] is None


def test_a_fresh_record_matches(node):
    written = node.write(validated=True)
    assert written['changed'] is True
    assert oct(os.stat(node.record).st_mode & 0o777) == '0o600'
    record = json.loads(Path(node.record).read_text())
    assert record['fingerprints']['services'] == {
        'e2scrub_reap.service': 'inactive/enabled', 'systemd-journald.service': 'active/static', 'docker.service': 'inactive/-'}
    assert record['fingerprints']['packages'].startswith('dpkg ')
    compared = node.run(inputs='digest-1')
    assert compared['converged'] is True and compared['drift'] == []
    assert compared['validated'] is True and compared['recorded_at'] == record['written']
    # Comparing asks systemctl about the units in the record, in one call.
    assert sorted(node.systemctl.calls[-1][-3:]) == sorted(UNITS)


def test_recording_the_same_state_again_is_no_change(node):
    first = node.write()
    again = node.write()
    assert again['changed'] is False and again['recorded_at'] == first['recorded_at']


@pytest.mark.parametrize('edit, expected', [
    (lambda root: (root / 'etc' / 'docker' / 'daemon.json').write_text('{}\n'), '/etc/docker changed'),
    (lambda root: os.chmod(root / 'etc' / 'docker' / 'daemon.json', 0o600), '/etc/docker changed'),
    (lambda root: (root / 'etc' / 'docker' / 'extra.json').write_text('{}'), '/etc/docker changed'),
    (lambda root: os.symlink('daemon.json', root / 'etc' / 'docker' / 'link.json'), '/etc/docker changed'),
    (lambda root: shutil.rmtree(root / 'etc' / 'docker'), '/etc/docker changed'),
    (lambda root: (root / 'etc' / 'os-release').write_text('ID=debian\nVERSION_ID="13"\n'), '/etc/os-release changed'),
    (lambda root: (root / 'proc' / 'cmdline').write_text('BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=/dev/nvme0n1p1 ro '
                                                         'systemd.unified_cgroup_hierarchy=0\n'), 'the kernel command line changed'),
])
def test_a_changed_path_is_drift(node, edit, expected):
    node.write()
    edit(node.root)
    result = node.run(inputs='digest-1')
    assert result['converged'] is False
    assert [line.replace(str(node.root), '') for line in result['drift']] == [expected]


def test_a_held_package_is_drift(node):
    node.write()
    status = Path(node_state.DPKG_STATUS)
    status.write_text(status.read_text().replace('Status: install ok installed', 'Status: hold ok installed', 1))
    assert node.run(inputs='digest-1')['drift'] == ['installed packages changed']


def test_changed_inputs_kernel_and_services_are_drift(node, monkeypatch):
    node.write()
    node.systemctl.capture = 'systemctl-show-after.txt'
    uname = os.uname()
    monkeypatch.setattr(node_state.os, 'uname', lambda: (uname[0], uname[1], '6.1.0-99-amd64'))
    result = node.run(inputs='digest-2')
    assert result['drift'] == [
        'inputs changed (variables, collection files or hardware)',
        'kernel 6.1.0-99-amd64, was %s' % uname[2],
        'e2scrub_reap.service: inactive/disabled, was inactive/enabled',
        'systemd-journald.service: inactive/static, was active/static',
    ]


def test_without_systemd_every_unit_is_unknown(node, monkeypatch):
    monkeypatch.setattr(AnsibleModule, 'run_command',
                        lambda self, args, **kw: (1, '', 'System has not been booted with systemd as init system (PID 1).'))
    node.write()
    assert set(json.loads(Path(node.record).read_text())['fingerprints']['services'].values()) == {'unknown'}
    assert node.run(inputs='digest-1')['converged'] is True


@pytest.mark.parametrize('text, why', [
    (b'\xff\xfe{', 'is damaged'),
    ('{"schema_version": 1', 'is damaged'),
    ('{"schema_version": 1, "fingerprints": {}}', 'is damaged'),
    ('[]', 'is damaged'),
    ('{"schema_version": 0}', 'has schema 0, not 1'),
])
def test_a_damaged_record_is_drift_and_is_replaced(node, text, why):
    Path(node.record).parent.mkdir(parents=True)
    if isinstance(text, bytes):
        Path(node.record).write_bytes(text)
    else:
        Path(node.record).write_text(text)
    result = node.run(inputs='digest-1')
    assert result['converged'] is False and why in result['drift'][0]
    assert node.write()['changed'] is True
    assert node.run(inputs='digest-1')['converged'] is True


def test_check_mode_writes_nothing_and_tells_the_truth(node):
    assert node.write(_ansible_check_mode=True)['changed'] is True
    assert not os.path.exists(node.record)
    node.write()
    assert node.run(state='absent', _ansible_check_mode=True)['changed'] is True
    assert os.path.exists(node.record)
    # Comparing runs in check mode as in a normal run.
    assert node.run(inputs='digest-1', _ansible_check_mode=True)['converged'] is True


def test_absent_removes_the_record(node):
    node.write(validated=True)
    removed = node.run(state='absent', _ansible_diff=True)
    assert removed['changed'] is True and removed['validated'] is False
    assert removed['diff']['after_header'].endswith('(absent)')
    assert not os.path.exists(node.record)
    assert node.run(state='absent')['changed'] is False


def test_inputs_are_required_to_compare_or_record(node):
    result = node.run()
    assert result['failed'] is True and 'inputs' in result['msg']


def test_recording_again_without_lists_keeps_those_of_the_record(node):
    node.write()
    (node.root / 'etc' / 'docker' / 'daemon.json').write_text('{}\n')
    assert node.run(state='recorded', inputs='digest-1', validated=True)['changed'] is True
    record = json.loads(Path(node.record).read_text())
    assert list(record['fingerprints']['paths']) == [str(node.root / 'etc' / 'docker')]
    assert sorted(record['fingerprints']['services']) == sorted(UNITS)
    assert node.run(inputs='digest-1')['converged'] is True


def test_an_unreadable_file_is_fingerprinted_not_fatal(node, monkeypatch):
    real = node_state._file_sha256
    secret = str(node.root / 'etc' / 'docker' / 'key.json')
    Path(secret).write_text('{}')

    def denied(path):
        if path == secret:
            raise PermissionError(13, 'Permission denied')
        return real(path)

    monkeypatch.setattr(node_state, '_file_sha256', denied)
    assert node.write()['changed'] is True
    assert node.run(inputs='digest-1')['converged'] is True
    os.chmod(secret, 0o600)
    assert [line.replace(str(node.root), '') for line in node.run(inputs='digest-1')['drift']] == ['/etc/docker changed']
