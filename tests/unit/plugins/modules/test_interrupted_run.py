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
# The version the killed run was installing (the journal's docker.io entry), not apt's candidate: the roles pin
# and hold versions below the newest.
REINSTALL_DOCKER_IO = ['apt-get', 'install', '--reinstall', '--no-install-recommends', '--allow-change-held-packages',
                       '--allow-downgrades', '-y', '-q', '-o=Dpkg::Options::=--force-confdef',
                       '-o=Dpkg::Options::=--force-confold', 'docker.io=20.10.24+dfsg1-1+deb12u1+b6']
# An unpacked package that depends on the half-installed docker.io: dpkg --configure -a fails on it.
DEPENDANT = ('Package: docker-compose\nStatus: install ok unpacked\nArchitecture: all\nVersion: 1.29.2-3\n'
             'Depends: docker.io (>= 1.9.0), python3:any\n')


class FakeDpkg:
    def __init__(self, root: Path) -> None:
        self.status = root / 'status'
        self.updates = root / 'updates'
        self.history = root / 'history.log'
        self.calls = []
        self.reinstall_works = True
        self.configure_error = None

    def _fold(self) -> str:
        text = self.status.read_text() + '\n\n' + _dpkg.journal(str(self.updates))
        shutil.rmtree(self.updates)
        self.updates.mkdir()
        return text

    def _configure(self):
        """dpkg --configure -a as dpkg does it: the journal folded in, a half-installed package skipped, and an
        unpacked package that depends on one left unpacked ("dependency problems prevent configuration")."""
        records = {}  # the journal's entries over the status file's, a package's last entry winning
        for stanza in re.split(r'\n\s*\n', self._fold()):
            if stanza.strip():
                records[re.search(r'^Package: (\S+)', stanza, re.M).group(1),
                        (re.findall(r'^Architecture: (\S+)', stanza, re.M) or [''])[0]] = stanza.strip()
        stanzas = list(records.values())
        half = {name for (name, dummy), stanza in records.items()
                if re.search(r'^Status: \S+ \S+ half-installed$', stanza, re.M)}
        blocked = []
        for i, stanza in enumerate(stanzas):
            depends = re.search(r'^Depends: (.*)$', stanza, re.M)
            if depends and half & {d.split()[0] for d in depends.group(1).split(',')}:
                blocked.append(re.search(r'^Package: (\S+)', stanza, re.M).group(1))
                continue
            stanzas[i] = re.sub(r'^Status: install ok (unpacked|half-configured|triggers-pending|triggers-awaited)$',
                                'Status: install ok installed', stanza, flags=re.M)
        self.status.write_text('\n\n'.join(stanzas) + '\n')
        if self.configure_error:
            return 1, '', self.configure_error
        if blocked:
            return 1, '', ''.join('dpkg: dependency problems prevent configuration of %s:\n' % n for n in blocked)
        return 0, 'Setting up containerd (1.6.20~ds1-1+b1) ...\n', ''

    def __call__(self, argv, environ_update=None, **kwargs):
        assert environ_update == {'LANG': 'C', 'LC_ALL': 'C', 'DEBIAN_FRONTEND': 'noninteractive'}
        self.calls.append(argv)
        if argv == CONFIGURE:
            return self._configure()
        if argv[:3] == ['apt-get', 'install', '--reinstall']:
            # apt refuses to run while dpkg's journal holds entries not folded in.
            assert not _dpkg.journal_pending(str(self.updates))
            if self.reinstall_works:
                names = [a.split('=')[0] for a in argv if not a.startswith('-') and a not in ('apt-get', 'install')]
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
    assert dpkg.calls[1] == REINSTALL_DOCKER_IO
    assert len(dpkg.calls) == 2
    assert _dpkg.unfinished(dpkg.status.read_text(), _dpkg.journal(str(dpkg.updates))) == {}
    assert result['messages'][0].startswith('An interrupted run had left containerd (unpacked), docker.io '
                                            '(half-installed (reinstreq))')
    again = run()
    assert again['changed'] is False and again['interrupted'] == {} and again['commands'] == []


def test_check_mode_says_what_it_would_run_and_runs_nothing(dpkg, run):
    result = run(_ansible_check_mode=True)
    assert result['changed'] is True
    assert result['commands'] == [' '.join(CONFIGURE), ' '.join(REINSTALL_DOCKER_IO)]
    assert dpkg.calls == []
    assert _dpkg.journal_pending(str(dpkg.updates))


def test_a_package_whose_version_dpkg_does_not_record_is_reinstalled_by_its_name(dpkg, run):
    entry = dpkg.updates / '0043'
    entry.write_text(re.sub(r'^Version: .*\n', '', entry.read_text(), flags=re.M))
    result = run()
    assert result['changed'] is True and 'failed' not in result
    assert dpkg.calls[1] == REINSTALL_DOCKER_IO[:-1] + ['docker.io']


def test_a_configure_that_fails_on_a_dependant_of_a_half_installed_package_goes_on_to_reinstall(dpkg, run):
    # dpkg --configure -a skips the half-installed docker.io and fails on docker-compose, which depends on it:
    # the reinstall and a second configure finish both, and the next run has nothing to do.
    (dpkg.updates / '0044').write_text(DEPENDANT)
    result = run(packages=['docker-compose'])
    assert 'failed' not in result and result['changed'] is True
    assert dpkg.calls == [CONFIGURE, REINSTALL_DOCKER_IO, CONFIGURE]
    assert result['commands'] == [' '.join(CONFIGURE), ' '.join(REINSTALL_DOCKER_IO), ' '.join(CONFIGURE)]
    assert _dpkg.unfinished(dpkg.status.read_text(), _dpkg.journal(str(dpkg.updates))) == {}
    assert 'docker-compose (unpacked)' in result['messages'][0]
    again = run(packages=['docker-compose'])
    assert again['changed'] is False and again['interrupted'] == {} and again['commands'] == []


def test_a_configure_that_fails_with_nothing_to_reinstall_fails_at_once(dpkg, run):
    dpkg.status.write_text('Package: containerd\nStatus: install ok unpacked\nArchitecture: amd64\n')
    shutil.rmtree(dpkg.updates)
    dpkg.updates.mkdir()
    dpkg.configure_error = 'dpkg: error processing package containerd (--configure):\n'
    result = run()
    assert result['failed'] is True and dpkg.calls == [CONFIGURE]
    assert result['msg'].startswith('dpkg --configure -a --force-confdef --force-confold failed (rc 1): dpkg: error')


def test_a_dependant_still_unconfigured_after_the_reinstall_fails_with_the_commands_output(dpkg, run):
    (dpkg.updates / '0044').write_text(DEPENDANT)
    dpkg.reinstall_works = False
    result = run(packages=['docker-compose'])
    assert result['failed'] is True
    assert dpkg.calls[:3] == [CONFIGURE, REINSTALL_DOCKER_IO, CONFIGURE] and dpkg.calls[3] == ['dpkg', '--audit']
    assert result['msg'].startswith('dpkg is still not finished after dpkg --configure -a')
    assert 'docker-compose (unpacked), docker.io (half-installed (reinstreq))' in result['msg']
    assert 'dpkg --configure -a --force-confdef --force-confold failed (rc 1): dpkg: dependency problems prevent ' \
           'configuration of docker-compose' in result['msg']


def test_the_roles_extra_packages_are_names_not_regular_expressions(dpkg, run):
    # docker_extra_packages comes from the user: g++ is that package, not every name that starts with g.
    for number, name in enumerate(('g++', 'gcc', 'libfoo.bar', 'libfooxbar'), start=44):
        (dpkg.updates / ('%04d' % number)).write_text('Package: %s\nStatus: install ok unpacked\n' % name)
    result = run(packages=['g++', 'libfoo.bar=1'])
    assert result['failed'] is True and result['foreign'] == ['gcc', 'libfooxbar']
    assert dpkg.calls == []


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
