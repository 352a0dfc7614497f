# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.interrupted_run on the state a killed `apt-get install docker.io` left (tests/fixtures/interrupted).

The fake dpkg and apt-get below do what the real ones did on that node (README.md there): `dpkg --configure -a`
folds the journal in and configures what was unpacked, and leaves docker.io half-installed, which only
`apt-get install --reinstall` finishes. The kill tier (tests/interrupt/) runs the real ones."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg, _interrupted
from ansible_collections.accel.nodes.plugins.modules import interrupted_run

KILLED = Path(__file__).parents[3] / 'fixtures' / 'interrupted' / 'docker-io-unpack'
CONFIGURE = ['dpkg', '--configure', '-a', '--force-confdef', '--force-confold']


class FakeDpkg:
    def __init__(self, root: Path) -> None:
        self.status = root / 'status'
        self.updates = root / 'updates'
        self.history = root / 'history.log'
        self.calls = []
        self.reinstall_works = True

    def _fold(self) -> str:
        text = self.status.read_text() + '\n\n' + _dpkg.journal(str(self.updates))
        shutil.rmtree(self.updates)
        self.updates.mkdir()
        return text

    def __call__(self, argv, environ_update=None, **kwargs):
        assert environ_update == {'LANG': 'C', 'LC_ALL': 'C', 'DEBIAN_FRONTEND': 'noninteractive'}
        self.calls.append(argv)
        if argv == CONFIGURE:
            text = re.sub(r'^Status: install ok (unpacked|half-configured|triggers-pending|triggers-awaited)$',
                          'Status: install ok installed', self._fold(), flags=re.M)
            self.status.write_text(text)
            return 0, 'Setting up containerd (1.6.20~ds1-1+b1) ...\n', ''
        if argv[:3] == ['apt-get', 'install', '--reinstall']:
            if self.reinstall_works:
                names = [a for a in argv if not a.startswith('-') and a not in ('apt-get', 'install')]
                text = self.status.read_text()
                for name in names:
                    text = text.replace('Package: %s\nStatus: install reinstreq half-installed' % name,
                                        'Package: %s\nStatus: install ok installed' % name)
                self.status.write_text(text)
            return 0, '', ''
        if argv == ['dpkg', '--audit']:
            return 0, 'The following packages are in a mess ...\n docker.io\n', ''
        raise AssertionError(argv)


@pytest.fixture
def dpkg(tmp_path, monkeypatch):
    fake = FakeDpkg(tmp_path)
    shutil.copy(KILLED / 'status', fake.status)
    shutil.copytree(KILLED / 'updates', fake.updates)
    shutil.copy(KILLED / 'history.log', fake.history)
    monkeypatch.setattr(_dpkg, 'STATUS_FILE', str(fake.status))
    monkeypatch.setattr(_dpkg, 'UPDATES_DIR', str(fake.updates))
    monkeypatch.setattr(_interrupted, 'HISTORY', str(fake.history))
    monkeypatch.setattr(_interrupted, 'FRONTEND_LOCK', str(tmp_path / 'lock-frontend'))
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda module, argv, **kw: fake(argv, **kw))
    return fake


@pytest.fixture
def run(module_in_tmp):
    return module_in_tmp(interrupted_run.main)


def test_a_killed_install_of_the_collections_packages_is_finished(dpkg, run):
    result = run()
    assert result['changed'] is True
    assert result['interrupted']['docker.io'] == 'half-installed (reinstreq)' and result['journal'] is True
    assert result['foreign'] == []
    assert dpkg.calls[0] == CONFIGURE
    assert dpkg.calls[1][:3] == ['apt-get', 'install', '--reinstall'] and dpkg.calls[1][-1] == 'docker.io'
    assert len(dpkg.calls) == 2
    assert _dpkg.unfinished(dpkg.status.read_text(), _dpkg.journal(str(dpkg.updates))) == {}
    assert result['messages'][0].startswith('An interrupted run had left containerd (unpacked), docker.io '
                                            '(half-installed (reinstreq))')
    again = run()
    assert again['changed'] is False and again['interrupted'] == {} and again['commands'] == []


def test_check_mode_says_what_it_would_run_and_runs_nothing(dpkg, run):
    result = run(_ansible_check_mode=True)
    assert result['changed'] is True
    assert result['commands'] == [' '.join(CONFIGURE), ' '.join(_interrupted.REINSTALL + ['docker.io'])]
    assert dpkg.calls == []
    assert _dpkg.journal_pending(str(dpkg.updates))


def test_another_tools_transaction_is_left_alone_with_the_commands_to_run(dpkg, run):
    dpkg.history.write_text(dpkg.history.read_text().replace('Commandline: apt-get install -y docker.io',
                                                             'Commandline: apt-get install -y docker.io perl'))
    dpkg.history.write_text(dpkg.history.read_text().replace('Install: ', 'Install: perl:amd64 (5.36.0-7+deb12u3), ', 1))
    result = run()
    assert result['failed'] is True
    assert 'perl' in result['foreign'] and 'docker.io' not in result['foreign']
    assert 'dpkg --configure -a' in result['msg'] and 'apt-get install -f' in result['msg']
    assert dpkg.calls == []


def test_a_package_still_unfinished_fails_with_dpkgs_audit(dpkg, run):
    dpkg.reinstall_works = False
    result = run()
    assert result['failed'] is True
    assert result['msg'].startswith('dpkg is still not finished after dpkg --configure -a')
    assert 'docker.io (half-installed (reinstreq))' in result['msg'] and 'dpkg --audit says' in result['msg']


def test_temporary_files_of_interrupted_writes_go_and_dpkgs_are_reported(dpkg, run, tmp_path):
    dpkg.status.write_text('Package: docker.io\nStatus: install ok installed\n')
    shutil.rmtree(dpkg.updates)
    etc = tmp_path / 'etc'
    etc.mkdir()
    (etc / 'daemon.json').write_text('{}')
    (etc / '.daemon.json.x1y2.tmp').write_text('{')
    (etc / 'daemon.json.dpkg-dist').write_text('{}')
    result = run(paths=[str(etc / 'daemon.json')])
    assert result['changed'] is True and result['removed'] == [str(etc / '.daemon.json.x1y2.tmp')]
    assert not (etc / '.daemon.json.x1y2.tmp').exists()
    assert result['dpkg_leftovers'] == [str(etc / 'daemon.json.dpkg-dist')]
    assert 'diff -u FILE FILE.dpkg-dist' in result['messages'][0]
    assert dpkg.calls == []


def test_a_package_manager_still_running_is_waited_for_not_taken_for_interrupted(dpkg, run, monkeypatch):
    # A run whose controller was killed leaves its apt running on the node (issue 24, T02): the next run must
    # wait for it. Here it finishes while the module waits.
    answers = [True, True, False]

    def busy(path=None):
        if answers[0] is False:
            dpkg.status.write_text('Package: docker.io\nStatus: install ok installed\n')
            shutil.rmtree(dpkg.updates)
        return answers.pop(0)
    monkeypatch.setattr(_interrupted, 'frontend_busy', busy)
    monkeypatch.setattr(interrupted_run.time, 'sleep', lambda seconds: None)
    result = run()
    assert result['changed'] is False and result['interrupted'] == {} and dpkg.calls == []
    assert result['messages'] == ['Waited for a package manager that was still running.']


def test_a_package_manager_that_keeps_the_lock_fails_with_what_to_look_at(dpkg, run, monkeypatch):
    monkeypatch.setattr(_interrupted, 'frontend_busy', lambda path=None: True)
    monkeypatch.setattr(interrupted_run.time, 'sleep', lambda seconds: None)
    result = run(lock_timeout=0)
    assert result['failed'] is True and 'apt or dpkg is running on this node' in result['msg']
    assert dpkg.calls == []
