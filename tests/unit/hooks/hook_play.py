# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Run the scheduler hooks (extras/hooks) the way playbooks/site.yml runs them, with a real ansible-playbook.

site_play() copies the two tasks of site.yml's rolling play that include accel_nodes_pre_batch_tasks and
accel_nodes_post_batch_tasks, as they are, with the play's serial and max_fail_percentage; in place of the tasks
between them (provisioning, reboot, validation) one task fails the hosts named in failing_validation. A change to
that interface of site.yml shows in the hooks' tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

TOP = Path(__file__).parents[3]
HOOKS = TOP / 'extras' / 'hooks'
SITE = TOP / 'playbooks' / 'site.yml'
LOCAL = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}


def site_play() -> List[Dict[str, Any]]:
    plays = yaml.safe_load(SITE.read_text())
    rolling = next(play for play in plays if 'serial' in play)
    tasks = rolling['tasks']
    pre = next(t for t in tasks if t.get('ansible.builtin.include_tasks') == '{{ accel_nodes_pre_batch_tasks }}')
    post = next(t for t in tasks if t.get('ansible.builtin.include_tasks') == '{{ accel_nodes_post_batch_tasks }}')
    assert tasks.index(pre) < tasks.index(post)
    play = {'name': 'The rolling play of site.yml, its hooks as they are', 'hosts': 'fleet', 'gather_facts': False}
    play.update((key, rolling[key]) for key in ('serial', 'max_fail_percentage') if key in rolling)
    play['tasks'] = [pre, {
        'name': 'Stand in for provisioning and validation',
        'ansible.builtin.fail': {'msg': 'validation failed'},
        'when': 'inventory_hostname in failing_validation | default([])',
    }, post]
    return [play]


def hooks(pre: str, post: str) -> List[str]:
    """The -e arguments that hand site.yml the two hook files of extras/hooks."""
    return ['-e', 'accel_nodes_pre_batch_tasks=%s' % (HOOKS / pre), '-e', 'accel_nodes_post_batch_tasks=%s' % (HOOKS / post)]


def run(tmp_path: Path, play: List[Dict[str, Any]], hosts: Dict[str, Dict[str, Any]], env: Dict[str, Optional[str]],
        *args: str) -> Tuple[subprocess.CompletedProcess, Dict[str, str]]:
    """ansible-playbook on local hosts (group fleet). Returns the run and the last failure message of each host
    that failed (a rescue's, where a block was rescued). env is added to this process's; None removes a name."""
    (tmp_path / 'inventory.yml').write_text(json.dumps({'fleet': {'hosts': {h: dict(LOCAL, **v) for h, v in hosts.items()}}}))
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(play, sort_keys=False))
    full = dict(os.environ)
    full.update(ANSIBLE_COLLECTIONS_PATH=os.environ.get('PYTHONPATH', ''), ANSIBLE_HOME=str(tmp_path / 'ansible-home'),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    for name, value in env.items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    done = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), '-i', str(tmp_path / 'inventory.yml'),
                           str(tmp_path / 'play.yml'), *args],
                          env=full, capture_output=True, text=True, timeout=120, check=False)
    failed = {}
    for match in re.finditer(r'^fatal: \[([^\]]+)\]: FAILED! => (\{.*\})$', done.stdout, re.M):
        failed[match.group(1).split(' -> ')[0]] = json.loads(match.group(2)).get('msg', '')
    return done, failed
