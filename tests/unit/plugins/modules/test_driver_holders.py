# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.driver_holders: what it counts as work, and its stop switch, over a
fake Docker Engine API and fake processes (the reading itself is tested in
module_utils/test_holders.py, and on the H100 by tests/hardware/holders.sh)."""

from __future__ import annotations

import json
import signal

import pytest

from ansible.module_utils import basic

from ansible_collections.accel.nodes.plugins.module_utils import _holders
from ansible_collections.accel.nodes.plugins.modules import driver_holders

CID = 'ab' * 32


class Node:
    def __init__(self):
        self.containers = {CID: {'Id': CID, 'Name': '/trainer', 'Config': {'Image': 'cuda:13'},
                                 'HostConfig': {'Runtime': 'nvidia', 'DeviceRequests': None, 'Devices': []}}}
        self.processes = {
            1180: {'pid': 1180, 'comm': 'nvidia-persiste', 'cmdline': 'nvidia-persistenced', 'devices': ['/dev/nvidiactl'],
                   'container': None},
            4242: {'pid': 4242, 'comm': 'python3', 'cmdline': 'python3 train.py', 'devices': ['/dev/nvidia0'],
                   'container': CID},
            977: {'pid': 977, 'comm': 'python3', 'cmdline': 'python3 bench.py', 'devices': ['/dev/nvidia0'],
                  'container': None},
        }
        self.calls = []
        self.stubborn = set()

    def call(self, method, url, body=None, query=None, timeout=None):
        self.calls.append((method, url))
        if url == '/containers/json':
            return 200, json.dumps([{'Id': i} for i in self.containers]).encode()
        if method == 'POST' and url.endswith('/stop'):
            cid = url.split('/')[2]
            self.containers.pop(cid, None)
            for pid in [p for p, v in self.processes.items() if v['container'] == cid]:
                del self.processes[pid]
            return 204, b''
        cid = url.split('/')[2]
        return (200, json.dumps(self.containers[cid]).encode()) if cid in self.containers else (404, b'{}')

    def kill(self, pid, sig):
        assert sig == signal.SIGTERM
        self.calls.append(('kill', pid))
        if pid not in self.stubborn:
            self.processes.pop(pid, None)


@pytest.fixture
def node(monkeypatch, tmp_path):
    n = Node()
    socket = tmp_path / 'docker.sock'
    socket.write_text('')
    monkeypatch.setattr(driver_holders, 'DockerAPI', lambda *a, **k: n)
    monkeypatch.setattr(_holders, 'device_processes', lambda vendor, proc='/proc', skip=(): [dict(p) for p in n.processes.values()])
    monkeypatch.setattr(driver_holders.os, 'kill', n.kill)
    real_exists = driver_holders.os.path.exists
    monkeypatch.setattr(driver_holders.os.path, 'exists',
                        lambda p: int(p.split('/')[2]) in n.processes if p.startswith('/proc/') else real_exists(p))
    monkeypatch.setattr(driver_holders.time, 'sleep', lambda s: None)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: '/bin/systemctl')
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda self, argv, **k: (
        0, 'Id=nvidia-persistenced.service\nActiveState=active\nMainPID=1180\n\n'
           'Id=nvidia-fabricmanager.service\nActiveState=inactive\nMainPID=0\n\n'
           'Id=nvidia-dcgm.service\nActiveState=inactive\nMainPID=0\n', ''))
    n.socket = str(socket)
    return n


def run(run_module, node, **args):
    return run_module(driver_holders.main, dict(vendor='nvidia', docker_socket=node.socket, **args))


def test_work_is_the_containers_and_processes_not_the_services(node, run_module):
    result = run(run_module, node)
    assert result['held'] and not result['changed']
    assert [(c['name'], c['why'], c['pids']) for c in result['containers']] == [('trainer', ['runtime nvidia'], [4242])]
    assert [p['pid'] for p in result['processes']] == [977]
    assert result['services'] == [{'name': 'nvidia-persistenced', 'pid': 1180}]
    assert result['summary'] == 'containers: trainer (runtime nvidia); processes: 977 python3 (/dev/nvidia0)'


def test_check_mode_names_what_it_would_stop_and_stops_nothing(node, run_module):
    result = run(run_module, node, stop=True, _ansible_check_mode=True)
    assert result['changed'] and result['stopped'] == {'containers': ['trainer'], 'processes': [977]}
    assert not [c for c in node.calls if c[0] in ('POST', 'kill')]


def test_stop_stops_the_work_and_leaves_the_services(node, run_module):
    result = run(run_module, node, stop=True)
    assert result['changed'] and not result['held']
    assert ('POST', '/containers/%s/stop' % CID) in node.calls and ('kill', 977) in node.calls
    assert ('kill', 1180) not in node.calls and 1180 in node.processes


def test_a_process_that_does_not_stop_fails_the_module_with_its_name(node, run_module):
    node.stubborn.add(977)
    result = run(run_module, node, stop=True, stop_timeout=0)
    assert result['failed'] and result['held']
    assert result['msg'] == 'Still holding the nvidia devices after stopping them: processes: 977 python3 (/dev/nvidia0)'
