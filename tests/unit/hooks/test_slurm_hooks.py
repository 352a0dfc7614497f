# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The Slurm batch hooks (extras/hooks/slurm-drain.yml, slurm-resume.yml), run by a real ansible-playbook the way
site.yml includes them (hook_play.py), against a recorded fake of the sinfo and scontrol command lines put first
on PATH (fake_slurm.py: what it models and what it assumes). No slurmctld runs here: this proves the hooks'
logic and the command lines they send, not Slurm's answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
import hook_play  # noqa: E402  pylint: disable=wrong-import-position
from hook_play import HOOKS, hooks, site_play  # noqa: E402  pylint: disable=wrong-import-position

MARK = 'accel.nodes driver rollout'


def fake_slurm(tmp_path: Path, nodes):
    """sinfo and scontrol first on PATH, both the fake; returns the environment and the call log."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    fake = Path(__file__).with_name('fake_slurm.py')
    for tool in ('sinfo', 'scontrol'):
        wrapper = bin_dir / tool
        wrapper.write_text('#!/bin/sh\nexec "%s" "%s" %s "$@"\n' % (sys.executable, fake, tool))
        wrapper.chmod(0o755)
    state, log = tmp_path / 'slurm.json', tmp_path / 'slurm.log'
    state.write_text(json.dumps(nodes))
    log.touch()
    env = {'PATH': '%s%s%s' % (bin_dir, os.pathsep, os.environ['PATH']), 'FAKE_SLURM_STATE': str(state),
           'FAKE_SLURM_LOG': str(log)}
    return env, state, log


def calls_for(log: Path, node: str):
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [c for c in calls if any(a in ('--nodes=' + node, 'NodeName=' + node) for a in c)]


def test_nodes_drain_wait_for_their_jobs_and_only_ours_resume(tmp_path):
    env, state, log = fake_slurm(tmp_path, {
        'gpu-a': {'drain': False, 'reason': '', 'jobs': 2, 'jobs_end_per_poll': 1},
        # Drained by an administrator before the roll, for its own reason.
        'gpu-hbm': {'drain': True, 'reason': 'HBM errors, ticket 1234', 'jobs': 0},
        'gpu-busy': {'drain': False, 'reason': '', 'jobs': 1, 'jobs_end_per_poll': 0},
        'gpu-bad': {'drain': False, 'reason': '', 'jobs': 0},
    })
    hosts = {'gpu-a': {}, 'gpu-hbm': {}, 'gpu-busy': {'accel_nodes_slurm_drain_timeout': 2},
             'gpu-bad': {}, 'gpu-typo': {'accel_nodes_slurm_node_name': 'gpu-a100-07'}}
    done, failed = hook_play.run(tmp_path, site_play(), hosts, env, *hooks('slurm-drain.yml', 'slurm-resume.yml'),
                                 '-e', 'accel_nodes_max_fail_percentage=100', '-e', 'accel_nodes_slurm_poll_interval=1',
                                 '-e', '{"failing_validation": ["gpu-bad"]}')
    assert done.returncode == 2, done.stdout + done.stderr
    assert sorted(failed) == ['gpu-bad', 'gpu-busy', 'gpu-typo'], done.stdout
    nodes = json.loads(state.read_text())
    sinfo = ['sinfo', '--noheader', '--nodes=gpu-a', '--format=%T|%E']

    # Drained with the roll's reason, polled until its two jobs had ended, resumed after it passed, checked.
    assert calls_for(log, 'gpu-a') == [
        sinfo, ['scontrol', 'update', 'NodeName=gpu-a', 'State=DRAIN', 'Reason=' + MARK], sinfo, sinfo, sinfo,
        sinfo, ['scontrol', 'update', 'NodeName=gpu-a', 'State=RESUME'], sinfo]
    assert nodes['gpu-a'] == {'drain': False, 'reason': '', 'jobs': 0, 'jobs_end_per_poll': 1}
    # The administrator's drain and reason are kept, before and after; it passed, and says why it stays drained.
    assert not [c for c in calls_for(log, 'gpu-hbm') if c[0] == 'scontrol']
    assert nodes['gpu-hbm']['drain'] and nodes['gpu-hbm']['reason'] == 'HBM errors, ticket 1234'
    assert "it was drained with the reason 'HBM errors, ticket 1234', not by this roll" in done.stdout
    # A job that does not end: the hook gives up after the timeout, and the node stays draining.
    assert 'still draining (reason: %s) after accel_nodes_slurm_drain_timeout (2 s)' % MARK in failed['gpu-busy']
    assert nodes['gpu-busy']['drain'] and nodes['gpu-busy']['reason'] == MARK
    # Failed validation: drained, never resumed.
    assert nodes['gpu-bad'] == {'drain': True, 'reason': MARK, 'jobs': 0}
    assert not [c for c in calls_for(log, 'gpu-bad') if 'State=RESUME' in c]
    # A NodeName Slurm does not know, said before anything is updated.
    assert 'sinfo lists no node gpu-a100-07' in failed['gpu-typo']
    assert [c[0] for c in calls_for(log, 'gpu-a100-07')] == ['sinfo']


def test_check_mode_reads_and_changes_nothing(tmp_path):
    env, state, log = fake_slurm(tmp_path, {'gpu-a': {'drain': False, 'reason': '', 'jobs': 1}})
    before = state.read_text()
    done, failed = hook_play.run(tmp_path, site_play(), {'gpu-a': {}}, env, '--check',
                                 *hooks('slurm-drain.yml', 'slurm-resume.yml'))
    assert done.returncode == 0 and not failed, done.stdout + done.stderr
    assert {c[0] for c in calls_for(log, 'gpu-a')} == {'sinfo'}
    assert json.loads(state.read_text()) == json.loads(before)


def test_the_hooks_parse_as_site_yml_would_include_them(tmp_path):
    """ansible-playbook --syntax-check of a play that imports each hook file (include_tasks is not parsed by it)."""
    play = [{'name': 'Parse', 'hosts': 'all', 'gather_facts': False,
             'tasks': [{'name': name, 'ansible.builtin.import_tasks': str(HOOKS / name)}
                       for name in ('slurm-drain.yml', 'slurm-resume.yml')]}]
    (tmp_path / 'play.json').write_text(json.dumps(play))
    done = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), '--syntax-check', '-i', 'localhost,',
                           str(tmp_path / 'play.json')],
                          env=dict(os.environ, ANSIBLE_HOME=str(tmp_path / 'ansible-home'), ANSIBLE_NOCOLOR='1'),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
