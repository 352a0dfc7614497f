# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""site.yml rolls one unit per batch (issue 27): one serial play provisions, restarts the engines, reboots,
validates and runs the post-batch hook, so that a batch over max_fail_percentage stops the roll before any
later batch is touched. With a play per step, every batch was provisioned before any was validated."""

from __future__ import annotations

from pathlib import Path

import yaml

SITE = Path(__file__).parents[2] / 'playbooks' / 'site.yml'


def test_one_serial_play_holds_every_step_of_a_batch_in_order():
    plays = yaml.safe_load(SITE.read_text())
    serial = [play for play in plays if 'serial' in play]
    assert len(serial) == 1, [play['name'] for play in serial]
    play = serial[0]
    assert play['max_fail_percentage'] == "{{ accel_nodes_max_fail_percentage | default(0) }}"
    assert play['hosts'] == "{{ accel_nodes_hosts | default('all') }}"
    steps = []
    for task in play['tasks']:
        if 'ansible.builtin.include_tasks' in task:
            steps.append(task['ansible.builtin.include_tasks'])
        elif 'ansible.builtin.meta' in task:
            steps.append('meta: ' + task['ansible.builtin.meta'])
        elif 'ansible.builtin.reboot' in task:
            steps.append('reboot')
        elif 'block' in task and any('accel.nodes.accelerator_validation' in str(t) for t in task['block']):
            steps.append('validate')
    assert steps == ['{{ accel_nodes_pre_batch_tasks }}', 'tasks/provision-nvidia.yml', 'tasks/provision-neuron.yml',
                     'meta: flush_handlers', 'reboot', 'validate', '{{ accel_nodes_post_batch_tasks }}',
                     'tasks/batch-gate.yml']
    # The plays before it only discover: no role runs outside the rolling play.
    for other in plays:
        if other is not play:
            assert 'include_role' not in str(other) and 'roles' not in other, other['name']
