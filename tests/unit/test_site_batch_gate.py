# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""site.yml's batch gate counts the nodes a batch lost to unreachability (issue 27), which
Ansible's max_fail_percentage leaves out. A real ansible-playbook run of the collection's
site.yml on local nodes without accelerators (no role runs; validation off); the pre-batch
hook turns one node of the first batch unreachable (its connection becomes ssh to a closed
port), as a node that hangs after a driver change does. Every hook run is logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SITE = Path(__file__).parents[2] / 'playbooks' / 'site.yml'
LOCAL = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}

HOOK = '''
- name: Log the pre-batch hook
  ansible.builtin.lineinfile:
    path: "{{ log }}"
    line: "pre {{ inventory_hostname }}"
    create: true
    mode: "0644"
  delegate_to: localhost
  throttle: 1

- name: Lose the node that is to hang
  ansible.builtin.set_fact:
    ansible_connection: ssh
    ansible_host: 127.0.0.1
    ansible_port: 1
  when: inventory_hostname == 'hangs'

- name: Reach the node
  ansible.builtin.ping:
'''

POST = '''
- name: Log the post-batch hook
  ansible.builtin.lineinfile:
    path: "{{ log }}"
    line: "post {{ inventory_hostname }}"
    create: true
    mode: "0644"
  delegate_to: localhost
  throttle: 1
'''


def roll(tmp_path, max_fail):
    (tmp_path / 'pre.yml').write_text(HOOK)
    (tmp_path / 'post.yml').write_text(POST)
    inventory = tmp_path / 'inventory.yml'
    hosts = dict((h, LOCAL) for h in ('first', 'hangs', 'late-1', 'late-2'))
    inventory.write_text(json.dumps({'fleet': {'hosts': hosts}}))
    log = tmp_path / 'hooks.log'
    extra = {'accel_nodes_serial': [2, 2], 'accel_nodes_max_fail_percentage': max_fail, 'accel_nodes_validate': False,
             'accel_nodes_pre_batch_tasks': str(tmp_path / 'pre.yml'),
             'accel_nodes_post_batch_tasks': str(tmp_path / 'post.yml'), 'log': str(log),
             'accel_nodes_instance_type': 'm5.large'}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.environ.get('PYTHONPATH', ''), ANSIBLE_HOST_KEY_CHECKING='False',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='False')
    done = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), '-i', str(inventory), str(SITE),
                           '-e', json.dumps(extra)], env=env, capture_output=True, text=True, timeout=300, check=False)
    return done, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize('max_fail', [0, 49])
def test_a_batch_that_lost_a_node_stops_the_roll(tmp_path, max_fail):
    done, log = roll(tmp_path, max_fail)
    assert done.returncode == 4, done.stdout[-3000:]  # the unreachable node
    assert sorted(log) == ['post first', 'pre first', 'pre hangs'], done.stdout[-3000:]
    assert 'This batch lost 1 of its 2 nodes (hangs: failed or unreachable)' in done.stdout


def test_a_gate_that_allows_the_loss_lets_the_roll_go_on(tmp_path):
    done, log = roll(tmp_path, 50)
    assert done.returncode == 4, done.stdout[-3000:]
    assert sorted(log) == ['post first', 'post late-1', 'post late-2', 'pre first', 'pre hangs', 'pre late-1',
                           'pre late-2'], done.stdout[-3000:]
