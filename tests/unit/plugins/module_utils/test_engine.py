# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _engine

sys.path.insert(0, str(Path(__file__).parents[1]))
from fake_engines import CONTAINERD_JOURNAL, DOCKER_INFO, DOCKER_JOURNAL  # noqa: E402  pylint: disable=wrong-import-position

# dockerd 20.10 as it logs with the default text formatter.
ERRORS = [
    'time="2026-11-24T06:10:01.1Z" level=info msg="Starting up"',
    'time="2026-11-24T06:10:01.2Z" level=error msg="failed to mount overlay: invalid argument" storage-driver=overlay2',
    'time="2026-11-24T06:10:01.3Z" level=error msg="[graphdriver] prior storage driver overlay2 failed: driver not supported"',
    'time="2026-11-24T06:10:01.3Z" level=error msg="[graphdriver] prior storage driver overlay2 failed: driver not supported"',
]


def test_said_prefers_the_fatal_line_then_error_lines_then_the_tail_then_systemd():
    assert _engine.engine_said(DOCKER_JOURNAL, 'x') == DOCKER_JOURNAL[1]
    assert _engine.engine_said(CONTAINERD_JOURNAL, 'x') == CONTAINERD_JOURNAL[1]
    assert _engine.engine_said(ERRORS, 'x') == ' | '.join(ERRORS[1:3])
    tail = ['line %d' % i for i in range(8)]
    assert _engine.engine_said(tail, 'x') == ' | '.join(tail[-5:])
    assert _engine.engine_said([], 'Unable to restart service docker.service: Job failed') == \
        'Unable to restart service docker.service: Job failed'


def test_pending_runtimes_compare_name_and_path_and_the_default():
    info = dict(DOCKER_INFO, Runtimes=dict(DOCKER_INFO['Runtimes'], nvidia={'path': '/usr/bin/nvidia-container-runtime'}))
    same = {'runtimes': {'nvidia': {'path': '/usr/bin/nvidia-container-runtime'}}}
    assert _engine.pending_runtimes(same, info) == []
    assert _engine.pending_runtimes({}, info) == []
    moved = {'runtimes': {'nvidia': {'path': '/usr/local/bin/nvidia-container-runtime', 'runtimeArgs': []}},
             'default-runtime': 'nvidia'}
    assert _engine.pending_runtimes(moved, info) == ['nvidia=/usr/local/bin/nvidia-container-runtime',
                                                     'default-runtime=nvidia']
    assert _engine.pending_runtimes({'default-runtime': 'runc'}, info) == []


def test_runtimes_not_used_names_what_docker_lacks():
    assert _engine.runtimes_not_used({'runtimes': {'runc-x': {'path': 'x'}}}, DOCKER_INFO, '/d.json') == (
        'Docker restarted but does not use the runtimes in /d.json: missing runtimes: runc-x. Check that dockerd reads '
        'this file (no --config-file elsewhere) and that no --add-runtime or --default-runtime flag in its unit '
        'overrides it.')
    assert _engine.runtimes_not_used({'default-runtime': 'runc'}, DOCKER_INFO, '/d.json') is None
    crun = _engine.runtimes_not_used({'default-runtime': 'crun'}, DOCKER_INFO, '/d.json')
    assert 'default runtime is runc, not crun. ' in crun


@pytest.mark.skipif(not all(shutil.which(t) for t in ('bash', 'find', 'xargs', 'sha256sum')), reason='needs GNU tools')
def test_tree_digest_is_the_one_earlier_releases_stored(tmp_path):
    tree = tmp_path / 'containerd'
    (tree / 'conf.d').mkdir(parents=True)
    (tree / 'config.toml').write_text('version = 2\n')
    (tree / 'conf.d' / '99-accel-nodes.toml').write_text('# Managed by accel.nodes.container_runtime\n')
    (tree / 'conf.d' / 'Z.toml').write_text('')
    os.symlink('config.toml', tree / 'link.toml')
    shell = subprocess.run(
        ['bash', '-c', 'set -eu -o pipefail; cd "$1" && find . -type f -print0 | sort -z | xargs -0r sha256sum '
                       '| sha256sum | cut -d" " -f1', '-', str(tree)],
        env={'LANG': 'C', 'LC_ALL': 'C', 'PATH': os.environ['PATH']}, capture_output=True, text=True, check=True)
    assert _engine.tree_digest(str(tree)) == shell.stdout.strip()
    assert _engine.tree_digest(str(tmp_path / 'none')) == 'absent'


def test_process_started_reads_proc_as_ps_does(tmp_path):
    (tmp_path / '812').mkdir()
    # proc(5): the command name may hold spaces and parentheses.
    (tmp_path / '812' / 'stat').write_text(
        '812 (dockerd (x) y) S 1 812 812 0 -1 4194560 25380 0 4 0 310 129 0 0 20 0 16 0 123456 2188210176 '
        '19850 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n')
    (tmp_path / 'stat').write_text('cpu  1 2 3\nbtime 1763960000\nprocesses 9000\n')
    hz = os.sysconf('SC_CLK_TCK')
    assert _engine.process_started(812, str(tmp_path)) == 1763960000 + 123456 / hz
    assert _engine.process_started(813, str(tmp_path)) is None


def test_parse_show_splits_the_units():
    text = ('MainPID=0\nId=containerd.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n\n'
            'MainPID=812\nId=docker.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n')
    first, second = _engine.parse_show(text)
    assert first['LoadState'] == 'not-found' and first['UnitFileState'] == ''
    assert second == {'MainPID': '812', 'Id': 'docker.service', 'LoadState': 'loaded', 'ActiveState': 'active',
                      'UnitFileState': 'enabled'}
