# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What an interrupted run leaves, read from what a real one left.

tests/fixtures/interrupted/docker-io-unpack holds dpkg's status file, its journal
and apt's history from a Debian 12 node whose `apt-get install docker.io` was
killed with SIGKILL while dpkg unpacked docker.io (README.md there).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg, _interrupted

KILLED = Path(__file__).parents[3] / 'fixtures' / 'interrupted' / 'docker-io-unpack'
STATUS = (KILLED / 'status').read_text()
HISTORY = (KILLED / 'history.log').read_text()


def test_the_journal_holds_what_the_status_file_does_not_yet():
    journal = _dpkg.journal(str(KILLED / 'updates'))
    assert _dpkg.unfinished(STATUS) == {}
    left = _dpkg.unfinished(STATUS, journal)
    assert left['docker.io'] == 'half-installed (reinstreq)'
    assert left['containerd'] == 'unpacked' and left['runc'] == 'unpacked'
    assert left['libc-bin'] == 'triggers-pending'
    assert len(left) == 16
    assert _dpkg.journal_pending(str(KILLED / 'updates'))


def test_a_finished_node_has_nothing_unfinished(tmp_path):
    assert _dpkg.unfinished('Package: a\nStatus: install ok installed\n') == {}
    assert _dpkg.journal(str(tmp_path)) == '' and not _dpkg.journal_pending(str(tmp_path))
    assert not _dpkg.journal_pending(str(tmp_path / 'absent'))
    (tmp_path / 'tmp.i').write_text('')  # dpkg's own temporary file is not a journal entry
    assert not _dpkg.journal_pending(str(tmp_path))


def test_a_later_journal_entry_wins_and_architectures_count_apart():
    text = ('Package: libfoo1\nStatus: install ok unpacked\nArchitecture: amd64\n\n'
            'Package: libfoo1\nStatus: install ok installed\nArchitecture: i386\n')
    assert _dpkg.unfinished(text) == {'libfoo1': 'unpacked'}
    assert _dpkg.unfinished(text, 'Package: libfoo1\nStatus: install ok installed\nArchitecture: amd64\n') == {}


def test_apts_history_names_the_transaction_that_did_not_end():
    transaction = _interrupted.unfinished_transaction(HISTORY)
    assert transaction['asked'] == ['docker.io']
    assert 'containerd' in transaction['pulled'] and 'runc' in transaction['pulled']
    assert _interrupted.unfinished_transaction(HISTORY + 'End-Date: 2026-11-27  03:38:29\n') is None
    assert _interrupted.unfinished_transaction('') is None


def test_packages_pulled_in_for_the_collections_own_are_its_own():
    left = _dpkg.unfinished(STATUS, _dpkg.journal(str(KILLED / 'updates')))
    assert _interrupted.foreign(left, HISTORY) == []
    # Without the history, only the collection's own names and triggers count: perl and friends are foreign.
    assert 'perl' in _interrupted.foreign(left, None)
    assert 'docker.io' not in _interrupted.foreign(left, None)
    assert 'libc-bin' not in _interrupted.foreign(left, None)


def test_a_transaction_that_asked_for_another_package_is_not_the_collections():
    history = HISTORY.replace('Commandline: apt-get install -y docker.io', 'Commandline: apt-get install -y docker.io postgresql')
    history = history.replace('Install: ', 'Install: postgresql:amd64 (15+248), ', 1)
    left = {'postgresql': 'unpacked', 'docker.io': 'half-installed (reinstreq)', 'perl': 'unpacked'}
    assert _interrupted.foreign(left, history) == ['perl', 'postgresql']
    assert _interrupted.foreign(left, history, extra=['postgresql']) == []


def test_leftovers_of_atomic_writes_are_ours_and_dpkgs_are_reported(tmp_path):
    etc = tmp_path / 'docker'
    etc.mkdir()
    for name in ('daemon.json', '.daemon.json.k2j4hd1x.tmp', 'daemon.json.dpkg-dist', 'daemon.json.1234.2026-11-27@03:00:00~',
                 '.other.json.abc.tmp'):
        (etc / name).write_text('{}')
    found = _interrupted.leftovers([str(etc / 'daemon.json'), str(tmp_path / 'absent' / 'x.toml')])
    assert found == {'ours': [str(etc / '.daemon.json.k2j4hd1x.tmp')], 'dpkg': [str(etc / 'daemon.json.dpkg-dist')]}


def test_detect_says_nothing_on_a_finished_node(tmp_path, monkeypatch):
    monkeypatch.setattr(_dpkg, 'UPDATES_DIR', str(tmp_path / 'updates'))
    assert _interrupted.detect([], 'Package: a\nStatus: install ok installed\n') == []
    shutil.copytree(KILLED / 'updates', tmp_path / 'updates')
    found = _interrupted.detect([], STATUS)
    assert 'docker.io: half-installed (reinstreq)' in found
    assert found[-1] == 'dpkg journal: %s' % (tmp_path / 'updates')


def test_a_lock_another_process_holds_makes_the_frontend_busy(tmp_path):
    lock = tmp_path / 'lock-frontend'
    assert not _interrupted.frontend_busy(str(lock))
    holder = subprocess.Popen([sys.executable, '-c', 'import fcntl, os, sys, time\n'
                               'fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n'
                               'fcntl.lockf(fd, fcntl.LOCK_EX)\nprint("locked", flush=True)\ntime.sleep(30)',
                               str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        assert _interrupted.frontend_busy(str(lock))
    finally:
        holder.kill()
        holder.wait()
    assert not _interrupted.frontend_busy(str(lock))


def test_names_a_role_passes_are_matched_exactly_not_as_regular_expressions():
    # docker_extra_packages comes from the user: g++ is not a pattern (on Python 3.11 a possessive g+ that
    # matches every name starting with g, before it an re.error), and the dot of a name is a dot.
    assert _interrupted.ours('g++', ['g++']) and not _interrupted.ours('gcc', ['g++'])
    assert not _interrupted.ours('g', ['g++']) and not _interrupted.ours('g++-12', ['g++'])
    assert _interrupted.ours('libfoo.bar', ['libfoo.bar']) and not _interrupted.ours('libfooxbar', ['libfoo.bar'])
    # A version, architecture or release as apt takes it is not part of the name.
    assert _interrupted.ours('docker-buildx-plugin', ['docker-buildx-plugin=0.10.5-1~debian.12~bookworm'])
    assert _interrupted.ours('libfoo.bar', ['libfoo.bar:amd64']) and _interrupted.ours('g++', ['g++/bookworm'])
    # The collection's own families stay patterns.
    assert _interrupted.ours('nvidia-driver-535', ['g++']) and _interrupted.ours('containerd.io')
    left = {'g++': 'unpacked', 'gcc': 'unpacked', 'libfoo.bar': 'unpacked', 'libfooxbar': 'unpacked'}
    assert _interrupted.foreign(left, None, ['g++', 'libfoo.bar']) == ['gcc', 'libfooxbar']


def test_the_version_dpkg_was_installing_is_read_from_the_journal_over_the_status_file():
    journal = _dpkg.journal(str(KILLED / 'updates'))
    found = _interrupted.versions(STATUS, journal)
    assert found['docker.io'] == '20.10.24+dfsg1-1+deb12u1+b6'
    assert set(found) <= set(_dpkg.unfinished(STATUS, journal))
    text = ('Package: docker.io\nStatus: hold ok installed\nArchitecture: amd64\nVersion: 20.10.24+dfsg1-1+deb12u1\n\n'
            'Package: nolabel\nStatus: install reinstreq half-installed\nArchitecture: amd64\n')
    later = 'Package: docker.io\nStatus: hold reinstreq half-installed\nArchitecture: amd64\nVersion: 20.10.24+dfsg1-1+deb12u1+b6\n'
    assert _interrupted.versions(text) == {}
    assert _interrupted.versions(text, later) == {'docker.io': '20.10.24+dfsg1-1+deb12u1+b6'}


def test_a_reinstall_asks_for_the_version_and_may_change_a_held_or_newer_package():
    argv = _interrupted.reinstall_argv(['docker.io', 'nolabel'], {'docker.io': '20.10.24+dfsg1-1+deb12u1+b6'})
    assert argv == ['apt-get', 'install', '--reinstall', '--no-install-recommends', '--allow-change-held-packages',
                    '--allow-downgrades', '-y', '-q', '-o=Dpkg::Options::=--force-confdef',
                    '-o=Dpkg::Options::=--force-confold', 'docker.io=20.10.24+dfsg1-1+deb12u1+b6', 'nolabel']
