# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A node with Docker and containerd under systemd, for the engine_* module tests.

FakeNode answers run_command for systemctl, docker, ctr and journalctl as
Debian 12's docker.io 20.10.24 and containerd 1.6.20 do: dockerd refuses a
daemon.json key that its unit also gives as a flag, containerd refuses a
config.toml that is not TOML, and each writes its error to the journal. The
engines' error lines are those they wrote on the node of the Molecule scenario
container_runtime; the systemd lines around them are systemd 252's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg
from ansible_collections.accel.nodes.plugins.module_utils._engine import Host
from ansible_collections.accel.nodes.plugins.modules import engine_restart, engine_state

# `docker info --format '{{json .}}'` of docker.io 20.10.24 on that node, the
# keys the modules read (the rest describe the host and are left out).
DOCKER_INFO = {
    'ServerVersion': '20.10.24+dfsg1',
    'Driver': 'vfs',
    'Runtimes': {'io.containerd.runc.v2': {'path': 'runc'}, 'io.containerd.runtime.v1.linux': {'path': 'runc'},
                 'runc': {'path': 'runc'}},
    'DefaultRuntime': 'runc',
    'CgroupDriver': 'cgroupfs',
}

DOCKER_DOWN = ('Cannot connect to the Docker daemon at unix:///var/run/docker.sock. '
               'Is the docker daemon running?\n')
JOB_FAILED = ('Job for {unit} failed because the control process exited with error code.\n'
              'See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.\n')

# What journalctl --output cat shows of a start that dockerd and containerd refuse.
DOCKER_JOURNAL = [
    'Starting Docker Application Container Engine...',
    'unable to configure the Docker daemon with file /etc/docker/daemon.json: the following directives are '
    'specified both as a flag and in the configuration file: hosts: (from flag: [fd://], from file: '
    '[unix:///var/run/docker.sock])',
    'docker.service: Main process exited, code=exited, status=1/FAILURE',
    "docker.service: Failed with result 'exit-code'.",
    'Failed to start Docker Application Container Engine.',
]
CONTAINERD_JOURNAL = [
    'Starting containerd container runtime...',
    'containerd: failed to load TOML: /etc/containerd/config.toml: (10, 6): was expecting token =, but got "is" instead',
    'containerd.service: Main process exited, code=exited, status=1/FAILURE',
    "containerd.service: Failed with result 'exit-code'.",
    'Failed to start containerd container runtime.',
]


class Unit:
    def __init__(self, name: str, installed: bool = True, enabled: str = 'enabled', pid: int = 0,
                 started: Optional[float] = None) -> None:
        self.name = name
        self.installed = installed
        self.enabled = enabled
        self.pid = pid
        self.started = started
        self.failed = False
        self.journal: List[str] = []

    def show(self) -> str:
        if not self.installed:
            return 'MainPID=0\nId=%s\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n' % self.name
        return 'MainPID=%d\nId=%s\nLoadState=loaded\nActiveState=%s\nUnitFileState=%s\n' % (
            self.pid, self.name, 'active' if self.pid else ('failed' if self.failed else 'inactive'), self.enabled)


class FakeNode:
    """Docker and containerd on a node whose files lie under root; the clock moves only when something waits."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemon_json = root / 'etc' / 'docker' / 'daemon.json'
        self.containerd_dir = root / 'etc' / 'containerd'
        self.state_dir = root / 'var' / 'lib' / 'accel-nodes' / 'docker'
        self.daemon_json.parent.mkdir(parents=True)
        self.containerd_dir.mkdir(parents=True)
        (self.containerd_dir / 'config.toml').write_text('version = 2\n')
        self.now = 1_800_000_000.0
        self.next_pid = 800
        self.units: Dict[str, Unit] = {u: Unit(u) for u in ('docker.service', 'containerd.service')}
        self.docker_info: Optional[dict] = None
        self.docker_answers = True
        self.calls: List[List[str]] = []
        # What rpm -q finds, on a node without dpkg's status file: {name: NEVRA}.
        self.rpm: Optional[Dict[str, str]] = None
        self.dpkg_status = root / 'var' / 'lib' / 'dpkg' / 'status'

    # time

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def started(self, pid: int) -> Optional[float]:
        return next((u.started for u in self.units.values() if u.pid == pid and pid), None)

    def touch(self, path: Path, text: str) -> None:
        """Write path now, and let a second pass."""
        import os
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (self.now, self.now))
        self.now += 1

    # the engines

    def start(self, unit: Unit) -> bool:
        self.now += 1
        if unit.name == 'docker.service':
            config = json.loads(self.daemon_json.read_text()) if self.daemon_json.exists() else {}
            if 'hosts' in config:
                return self.fail(unit, DOCKER_JOURNAL)
            runtimes = dict(DOCKER_INFO['Runtimes'])
            runtimes.update({k: {'path': v['path']} for k, v in config.get('runtimes', {}).items()})
            self.docker_info = dict(DOCKER_INFO, Runtimes=runtimes,
                                    DefaultRuntime=config.get('default-runtime', 'runc'))
        else:
            main = self.containerd_dir / 'config.toml'
            if main.exists() and '= =' in main.read_text():
                return self.fail(unit, CONTAINERD_JOURNAL)
        self.next_pid += 1
        unit.pid, unit.started, unit.failed = self.next_pid, self.now, False
        self.now += 1
        return True

    def fail(self, unit: Unit, journal: List[str]) -> bool:
        unit.pid, unit.failed = 0, True
        unit.journal.extend(journal)
        if unit.name == 'docker.service':
            self.docker_info = None
        self.now += 1
        return False

    def boot(self, *units: str) -> None:
        for name in units:
            assert self.start(self.units[name])

    # run_command

    def __call__(self, argv: List[str], environ_update: Optional[dict] = None, **kwargs) -> tuple:
        assert environ_update == {'LANG': 'C', 'LC_ALL': 'C'}
        self.calls.append(list(argv))
        tool, args = argv[0], argv[1:]
        if tool == 'systemctl':
            return self.systemctl(args)
        if tool == 'docker':
            assert args == ['info', '--format', '{{json .}}']
            if self.docker_info is None or not self.docker_answers:
                return 1, '', DOCKER_DOWN
            return 0, json.dumps(self.docker_info) + '\n', ''
        if tool == '/usr/bin/rpm':
            # rpm -q prints each package's NEVRA, or "package NAME is not installed" (on stdout), and exits with
            # the count of those missing (rpm 4.16, EL 9).
            assert args[0] == '-q'
            lines = [self.rpm.get(n, 'package %s is not installed' % n) for n in args[1:]]
            return len([n for n in args[1:] if n not in self.rpm]), ''.join(line + '\n' for line in lines), ''
        if tool == 'ctr':
            return (0, 'Client:\n  Version:  1.6.20~ds1\n', '') if self.units['containerd.service'].pid else (
                1, '', 'ctr: failed to dial "/run/containerd/containerd.sock": connection refused\n')
        if tool == 'journalctl':
            unit = self.units[args[args.index('--unit') + 1]]
            return 0, ''.join(line + '\n' for line in unit.journal), ''
        raise AssertionError('unexpected command %s' % argv)

    def systemctl(self, args: List[str]) -> tuple:
        verb = args[0]
        if verb == 'show':
            names = [a for a in args[1:] if not a.startswith('--')]
            return 0, '\n'.join(self.units[n].show() for n in names), ''
        if verb == 'reset-failed':
            for name in args[1:]:
                if name in self.units:
                    self.units[name].failed = False
            return 0, '', ''
        unit = self.units[args[1]]
        if verb == 'is-enabled':
            if not unit.installed:
                return 1, '', 'Failed to get unit file state for %s: No such file or directory\n' % unit.name
            return (0 if unit.enabled == 'enabled' else 1), unit.enabled + '\n', ''
        if verb == 'enable':
            unit.enabled = 'enabled'
            return 0, '', ''
        if verb in ('start', 'restart'):
            if verb == 'restart' or not unit.pid:
                unit.pid = 0
                if not self.start(unit):
                    return 1, '', JOB_FAILED.format(unit=unit.name)
            return 0, '', ''
        raise AssertionError('unexpected systemctl %s' % args)

    def verbs(self) -> List[str]:
        """The commands run, as 'tool verb' (systemctl show, docker info, ...)."""
        return [' '.join(c[:2]) for c in self.calls]


def engine_node(tmp_path, monkeypatch, module_in_tmp):
    """The `node` fixture of the engine_* module tests (modules/conftest.py): a FakeNode, with
    run(which, **args) running engine_state (which='state', the default, with both engines unless
    told otherwise) or engine_restart (which='restart') on it."""
    fake = FakeNode(tmp_path)
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda module, argv, **kw: fake(argv, **kw))
    monkeypatch.setattr(Host, 'clock', staticmethod(fake.clock))
    monkeypatch.setattr(Host, 'sleep', staticmethod(fake.sleep))
    monkeypatch.setattr(Host, 'started', staticmethod(fake.started))
    monkeypatch.setattr(_dpkg, 'STATUS_FILE', str(fake.dpkg_status))
    monkeypatch.setattr(_dpkg, 'UPDATES_DIR', str(fake.dpkg_status.parent / 'updates'))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda module, name, *a, **kw: '/usr/bin/rpm' if name == 'rpm' and fake.rpm is not None else None)
    mains = {'restart': module_in_tmp(engine_restart.main), 'state': module_in_tmp(engine_state.main)}

    def run(which='state', **args):
        args.setdefault('config_path', str(fake.daemon_json))
        args.setdefault('containerd_dir', str(fake.containerd_dir))
        args.setdefault('state_dir', str(fake.state_dir))
        if which == 'state':
            args.setdefault('engines', ['containerd', 'docker'])
        return mains[which](**args)
    fake.run = run
    return fake
