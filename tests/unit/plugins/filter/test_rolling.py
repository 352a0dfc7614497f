# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.rolling_serial (plugins/filter/rolling.py): site.yml's batch sizes, checked, and loaded in the
controller's own process, so that the forked workers inherit the collection's filters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.utils.helpers import pct_to_int

from ansible_collections.accel.nodes.plugins.filter.rolling import FilterModule, rolling_serial

TOP = Path(__file__).parents[4]
SITE = TOP / 'playbooks' / 'site.yml'


@pytest.mark.parametrize('value, batches', [
    ('100%', ['100%']), (5, [5]), ('5', [5]), (0, [0]), ([1, '10%', '100%'], [1, '10%', '100%']),
    ((2, ' 50 % '), [2, '50%']),
])
def test_batch_sizes_as_the_play_takes_them(value, batches):
    assert rolling_serial(value) == batches


def test_the_batches_are_what_ansible_cuts_the_fleet_into():
    """ansible-core's pct_to_int reads each of them: 10% of 40 nodes is 4, 0 is every node."""
    assert [pct_to_int(b, 40) for b in rolling_serial([1, '10%', '100%', 0])] == [1, 4, 40, 0]


@pytest.mark.parametrize('value', ['ten', '10.5%', '-1', -3, [], [1, 'all'], True, None, {'size': 1}, '%'])
def test_a_bad_value_is_a_clear_error(value):
    with pytest.raises(AnsibleFilterError, match='accel_nodes_serial must be a batch size'):
        rolling_serial(value)


def test_the_filter_is_registered():
    assert FilterModule().filters() == {'rolling_serial': rolling_serial}


def test_site_yml_checks_its_batches_in_the_rolling_play_header():
    plays = yaml.safe_load(SITE.read_text())
    rolling = [p for p in plays if 'serial' in p]
    assert len(rolling) == 1 and 'accel.nodes.rolling_serial' in rolling[0]['serial']


# Run in a fresh interpreter: no filter of the collection is loaded before the play header is templated.
HEADER = '''
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook import Playbook
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar
from ansible.vars.manager import VariableManager
init_plugin_loader(sys.argv[2].split(':'))
loader = DataLoader()
variables = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources='localhost,'))
variables._extra_vars = json.loads(sys.argv[3])
play = [p for p in Playbook.load(sys.argv[1], variable_manager=variables, loader=loader).get_plays() if p.serial][0]
prefix = 'ansible_collections.accel.nodes.plugins.filter.'
before = sorted(m for m in sys.modules if m.startswith(prefix))
play.post_validate(Templar(loader=loader, variables=variables.get_vars(play=play)))
print(json.dumps({'serial': play.serial, 'before': before,
                  'after': sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix))}))
'''


# The README's advice ("Speed") for a playbook of one's own that runs the roles.
OWN = """
- name: Provision my GPU nodes
  hosts: all
  gather_facts: false
  serial: "{{ accel_nodes_serial | default('100%') | accel.nodes.rolling_serial }}"
  roles:
    - role: accel.nodes.accelerator_validation
"""


def header(extra, playbook=SITE):
    env = dict(os.environ, ANSIBLE_HOME=os.environ.get('ANSIBLE_HOME') or '/tmp/accel-nodes-test-ansible-home')
    return subprocess.run([sys.executable, '-c', HEADER, str(playbook), os.environ.get('PYTHONPATH', ''),
                           json.dumps(extra)], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_readme_gives_the_same_header_for_a_playbook_of_ones_own():
    readme = (TOP / 'README.md').read_text()
    assert OWN.split('serial: ')[1].splitlines()[0] in readme


@pytest.mark.parametrize('own', [False, True])
def test_templating_the_play_header_loads_every_filter_of_the_collection(own, tmp_path):
    """What the controller does before it forks the play's first worker: afterwards every filter file of the
    collection is loaded in its process, for the workers to inherit."""
    playbook = SITE
    if own:
        playbook = tmp_path / 'own.yml'
        playbook.write_text(OWN)
    done = header({'accel_nodes_serial': [1, '10%']}, playbook)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded['serial'] == [1, '10%'] and loaded['before'] == []
    files = sorted(p.stem for p in (TOP / 'plugins' / 'filter').glob('*.py') if p.stem != '__init__')
    assert [f for f in files if f not in loaded['after']] == []


def test_a_bad_batch_size_stops_before_the_play():
    done = header({'accel_nodes_serial': '10 nodes'})
    assert done.returncode != 0
    assert 'accel_nodes_serial must be a batch size' in done.stderr
