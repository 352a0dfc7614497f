# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report (plugins/plugin_utils/_fleet_report.py, plugins/callback/fleet_report.py): built from real
validation reports of the H100 (tests/fixtures/hardware), checked against tests/schemas/fleet-report.schema.json,
and produced by a real ansible-playbook run with the callback enabled: a node that passes, one whose validation
fails, one that waits for a reboot, one whose task fails, one that cannot be reached, and one that the run never
reaches because max_fail_percentage stopped it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ansible_collections.accel.nodes.plugins.plugin_utils import _fleet_report

TOP = Path(__file__).parents[4]
HW = TOP / 'tests' / 'fixtures' / 'hardware'
PASSING = json.loads((HW / 'h100-2026-11-27-issue26' / 'validation.json').read_text())
FAILING = json.loads((HW / 'h100-2026-11-27-issue26-cgroup' / 'validation.json').read_text())
SCHEMA = json.loads((TOP / 'tests' / 'schemas' / 'fleet-report.schema.json').read_text())


def check_schema(report):
    jsonschema = pytest.importorskip('jsonschema')
    jsonschema.validate(report, SCHEMA)


def test_each_status_and_its_reasons():
    report = _fleet_report.build({
        'gpu-a': {'validation': PASSING},
        'gpu-b': {'validation': FAILING},
        'gpu-c': {'validation': FAILING, 'reboot_required': True},
        'gpu-d': {'failed': {'task': 'Install the NVIDIA driver', 'msg': 'No package matching'}},
        'gpu-e': {'unreachable': 'Failed to connect to the host via ssh'},
        'gpu-f': {'ran': False},
        'gpu-g': {},
    }, 'site.yml', '2026-11-27T15:00:00Z')
    check_schema(report)
    status = {n['host']: n['status'] for n in report['nodes']}
    assert status == {'gpu-a': 'pass', 'gpu-b': 'fail', 'gpu-c': 'needs_reboot', 'gpu-d': 'fail',
                      'gpu-e': 'unreachable', 'gpu-f': 'not_run', 'gpu-g': 'not_validated'}
    assert report['counts'] == {'unreachable': 1, 'needs_reboot': 1, 'fail': 2, 'pass': 1, 'not_validated': 1,
                                'not_run': 1}
    nodes = {n['host']: n for n in report['nodes']}
    # The CRI pods of the cgroup run failed at the sandbox: each failed check is a reason, with the layer.
    assert {(r['layer'], r['check']) for r in nodes['gpu-b']['reasons']} == {
        ('cri', c['name']) for c in FAILING['checks'] if c['status'] == 'fail'}
    assert nodes['gpu-b']['layers'] == FAILING['layers']
    assert nodes['gpu-d']['reasons'] == [{'check': 'task', 'layer': 'ansible',
                                          'detail': 'Install the NVIDIA driver: No package matching'}]
    assert any(r['check'] == 'reboot' for r in nodes['gpu-c']['reasons'])
    screen = _fleet_report.text(report)
    assert screen.splitlines()[:2] == ['accel.nodes fleet report: 7 node(s)',
                                       '  1 unreachable, 1 needs_reboot, 2 fail, 1 pass, 1 not_validated, 1 not_run']
    assert max(len(line) for line in screen.splitlines()) <= 100
    assert 'cri/cri_nvidia_cdi: ' in screen


def test_junit_counts_what_the_report_says():
    report = _fleet_report.build({'a': {'validation': PASSING}, 'b': {'validation': FAILING},
                                  'c': {'unreachable': 'no route'}}, 'validate.yml', '2026-11-27T15:00:00Z')
    root = ElementTree.fromstring(_fleet_report.junit(report))
    suites = {s.get('name'): s for s in root.findall('testsuite')}
    assert suites['a'].get('failures') == '0' and suites['a'].get('tests') == '4'
    assert [c.get('name') for c in suites['b'].findall('testcase') if c.find('failure') is not None] == ['cri']
    assert 'cri_nvidia_visible_devices' in suites['b'].find("testcase[@name='cri']/failure").get('message')
    assert suites['c'].find('testcase/error').get('message') == 'no route'
    assert root.get('failures') == '1' and root.get('errors') == '1' and root.get('tests') == '9'


PLAYBOOK = '''
- name: Discover, on every node at once, as site.yml does
  hosts: fleet
  gather_facts: false
  tasks:
    - name: Stand in for accel.nodes.accelerator_facts
      ansible.builtin.set_fact:
        discovered: true

- name: Provision, in batches, as site.yml does
  hosts: fleet
  gather_facts: false
  serial: [1, 2, 100%]
  max_fail_percentage: 0
  tasks:
    - name: Reach the node
      ansible.builtin.ping:
    - name: Stand in for the driver role
      ansible.builtin.set_fact:
        nvidia_driver_reboot_required: "{{ inventory_hostname == 'needs-reboot' }}"
    - name: A task that fails on one node
      ansible.builtin.fail:
        msg: the driver package is missing
      when: inventory_hostname == 'broken'
    - name: A rescued failure is not a failure
      block:
        - name: Fail
          ansible.builtin.fail:
            msg: rescued
      rescue:
        - name: Rescue
          ansible.builtin.debug:
            msg: rescued
    - name: Stand in for accel.nodes.accelerator_validation
      ansible.builtin.set_fact:
        accelerator_validation: "{{ lookup('file', report_file) | from_json }}"
        cacheable: true
      vars:
        report_file: "{{ passing if inventory_hostname == 'good' else failing }}"
'''


def run_playbook(tmp_path, hosts):
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(json.dumps({'fleet': {'hosts': hosts}}))
    playbook = tmp_path / 'site.yml'
    playbook.write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED='accel.nodes.fleet_report',
               ACCEL_NODES_FLEET_REPORT_JSON=str(tmp_path / 'fleet.json'),
               ACCEL_NODES_FLEET_REPORT_JUNIT=str(tmp_path / 'fleet.xml'),
               ANSIBLE_COLLECTIONS_PATH=os.environ.get('PYTHONPATH', ''), ANSIBLE_HOST_KEY_CHECKING='False',
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1')
    reports = 'passing=%s failing=%s' % (HW / 'h100-2026-11-27-issue26' / 'validation.json',
                                         HW / 'h100-2026-11-27-issue26-cgroup' / 'validation.json')
    done = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), '-i', str(inventory), str(playbook),
                           '-e', reports], env=env, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads((tmp_path / 'fleet.json').read_text())
    check_schema(report)
    ElementTree.parse(tmp_path / 'fleet.xml')
    return done, report


LOCAL = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}


def test_a_run_with_the_callback_reports_every_node(tmp_path):
    done, report = run_playbook(tmp_path, {
        'good': LOCAL, 'needs-reboot': LOCAL, 'cri-broken': LOCAL,
        # Nothing listens on port 1 of the loopback: ssh fails at once.
        'gone': {'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1', 'ansible_port': 1},
    })
    status = {n['host']: n['status'] for n in report['nodes']}
    assert done.returncode == 4, done.stdout  # unreachable
    assert status == {'good': 'pass', 'needs-reboot': 'needs_reboot', 'cri-broken': 'fail', 'gone': 'unreachable'}, \
        done.stdout
    assert 'ACCEL.NODES FLEET REPORT' in done.stdout
    assert 'accel.nodes fleet report: 4 node(s)' in done.stdout


def test_a_roll_that_stops_lists_the_batches_it_never_reached(tmp_path):
    # serial [1, 2, 100%]: good, then broken and cri-broken, then late-1 and late-2. broken stops the roll at
    # once (max_fail_percentage 0), so cri-broken, in the same batch, never gets to its validation.
    done, report = run_playbook(tmp_path, dict((h, LOCAL) for h in ('good', 'broken', 'cri-broken', 'late-1', 'late-2')))
    status = {n['host']: n['status'] for n in report['nodes']}
    assert done.returncode == 2, done.stdout
    assert status == {'good': 'pass', 'broken': 'fail', 'cri-broken': 'not_validated', 'late-1': 'not_run',
                      'late-2': 'not_run'}, done.stdout
    broken = next(n for n in report['nodes'] if n['host'] == 'broken')
    assert broken['reasons'] == [{'check': 'task', 'layer': 'ansible',
                                  'detail': 'A task that fails on one node: the driver package is missing'}]
