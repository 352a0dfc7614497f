# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report (plugins/plugin_utils/_fleet_report.py, plugins/callback/fleet_report.py): built from real
validation reports of the H100 (tests/fixtures/hardware), checked against tests/schemas/fleet-report.schema.json,
and produced by a real ansible-playbook run with the callback enabled: a node that passes, one whose validation
fails, one that waits for a reboot, one whose task fails, one that cannot be reached, and one that the run never
reaches because max_fail_percentage stopped it. With fail_threshold set, the same runs end with the exit status
the report decides."""

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
                                          'detail': 'Install the NVIDIA driver: No package matching', 'findings': []}]
    assert any(r['check'] == 'reboot' for r in nodes['gpu-c']['reasons'])
    screen = _fleet_report.text(report)
    assert screen.splitlines()[:2] == ['accel.nodes fleet report: 7 node(s)',
                                       '  1 unreachable, 1 needs_reboot, 2 fail, 1 pass, 1 not_validated, 1 not_run']
    assert max(len(line) for line in screen.splitlines()) <= 100
    assert 'cri/cri_nvidia_cdi: ' in screen


# A finding as accel.nodes.diagnose_findings gives it (module_utils/_diagnose.py), and one that only will break.
SKEW = {'id': 'toolkit.packages.version_skew', 'severity': 'broken', 'summary': 'The toolkit packages differ.',
        'evidence': ['package libnvidia-container-tools 1.17.8-1'], 'fix': 'Run accel.nodes.nvidia_container_toolkit.',
        'source': 'packaging/debian/control'}
SHADOWED = dict(SKEW, id='cdi.spec.shadowed', severity='will_break', fix='Remove the /etc/cdi copy.')


def test_each_node_lists_its_findings_and_each_failed_check_those_that_explain_it():
    from ansible_collections.accel.nodes.plugins.filter.validation_checks import validation_report
    explained = validation_report(FAILING['checks'], {'vendors': ['nvidia']}, findings=[SKEW, SHADOWED])
    report = _fleet_report.build({'validated': {'validation': explained},
                                  'diagnosed': {'findings': [SHADOWED]},
                                  'healthy': {'validation': PASSING}}, 'site.yml', '2026-11-28T02:00:00Z')
    check_schema(report)
    nodes = {n['host']: n for n in report['nodes']}
    # The toolkit's packages break CRI pods: every failed cri check names the broken finding, not the will_break one.
    assert nodes['validated']['reasons'] and all(r['findings'] == ['toolkit.packages.version_skew']
                                                 for r in nodes['validated']['reasons'])
    assert [f['id'] for f in nodes['validated']['findings']] == ['toolkit.packages.version_skew', 'cdi.spec.shadowed']
    assert nodes['diagnosed']['findings'] == [dict((k, SHADOWED[k]) for k in ('id', 'severity', 'summary', 'fix'))]
    assert nodes['diagnosed']['status'] == 'not_validated' and nodes['healthy']['findings'] == []
    screen = _fleet_report.text(report).splitlines()
    assert '      explained by toolkit.packages.version_skew' in screen
    assert '    [will_break] cdi.spec.shadowed: Remove the /etc/cdi copy.' in screen
    suites = dict((s.get('name'), s) for s in ElementTree.fromstring(_fleet_report.junit(report)).findall('testsuite'))
    assert suites['validated'].find("testcase[@name='diagnosis']/failure").get('message') == (
        'toolkit.packages.version_skew: Run accel.nodes.nvidia_container_toolkit.')
    assert suites['diagnosed'].find("testcase[@name='diagnosis']/failure") is None
    assert suites['healthy'].find("testcase[@name='diagnosis']") is None


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
    # A false one after a true one of the other role leaves the node waiting.
    - name: Stand in for the Neuron driver role
      ansible.builtin.set_fact:
        neuron_driver_reboot_required: "{{ inventory_hostname == 'neuron-waits' }}"
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
        report_file: "{{ passing if inventory_hostname is match('good') else failing }}"
'''


def run_playbook(tmp_path, hosts, threshold=None, playbooks=1, callbacks='accel.nodes.fleet_report',
                 collections=()):
    """ansible-playbook on PLAYBOOK (playbooks times on its command line) with the callback enabled and
    fail_threshold set to threshold (None: unset). The JSON report is None where the run wrote none."""
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(json.dumps({'fleet': {'hosts': hosts}}))
    playbook = tmp_path / 'site.yml'
    playbook.write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CALLBACKS_ENABLED=callbacks,
               ACCEL_NODES_FLEET_REPORT_JSON=str(tmp_path / 'fleet.json'),
               ACCEL_NODES_FLEET_REPORT_JUNIT=str(tmp_path / 'fleet.xml'),
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join((os.environ.get('PYTHONPATH', ''),) + tuple(collections)),
               ANSIBLE_HOST_KEY_CHECKING='False', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1')
    env.pop('ACCEL_NODES_FLEET_REPORT_FAIL_THRESHOLD', None)
    if threshold is not None:
        env['ACCEL_NODES_FLEET_REPORT_FAIL_THRESHOLD'] = threshold
    reports = 'passing=%s failing=%s' % (HW / 'h100-2026-11-27-issue26' / 'validation.json',
                                         HW / 'h100-2026-11-27-issue26-cgroup' / 'validation.json')
    done = subprocess.run([str(Path(sys.executable).parent / 'ansible-playbook'), '-i', str(inventory)] +
                          [str(playbook)] * playbooks + ['-e', reports],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    if not (tmp_path / 'fleet.json').exists():
        return done, None
    report = json.loads((tmp_path / 'fleet.json').read_text())
    check_schema(report)
    ElementTree.parse(tmp_path / 'fleet.xml')
    return done, report


LOCAL = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}


def test_a_run_with_the_callback_reports_every_node(tmp_path):
    done, report = run_playbook(tmp_path, {
        'good': LOCAL, 'needs-reboot': LOCAL, 'neuron-waits': LOCAL, 'cri-broken': LOCAL,
        # Nothing listens on port 1 of the loopback: ssh fails at once.
        'gone': {'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1', 'ansible_port': 1},
    })
    status = {n['host']: n['status'] for n in report['nodes']}
    assert done.returncode == 4, done.stdout  # unreachable
    assert report['threshold'] is None
    assert status == {'good': 'pass', 'needs-reboot': 'needs_reboot', 'neuron-waits': 'needs_reboot',
                      'cri-broken': 'fail', 'gone': 'unreachable'}, done.stdout
    assert 'ACCEL.NODES FLEET REPORT' in done.stdout
    assert 'accel.nodes fleet report: 5 node(s)' in done.stdout


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
                                  'detail': 'A task that fails on one node: the driver package is missing',
                                  'findings': []}]


def test_the_threshold_verdict():
    nodes = [{'status': s} for s in ('pass', 'pass', 'not_validated', 'fail', 'unreachable', 'needs_reboot',
                                     'not_run', 'pass')]
    assert _fleet_report.verdict(nodes, None) is None
    # 4 of 8 bad: not_validated counts among the nodes, not as bad. At the threshold is within it.
    assert _fleet_report.verdict(nodes, 50.0) == {'fail_percentage': 50.0, 'bad': 4, 'nodes': 8,
                                                  'bad_percentage': 50.0, 'exit_status': 0}
    assert _fleet_report.verdict(nodes, 49.9)['exit_status'] == 2
    assert _fleet_report.verdict(nodes, 0.0, decided=False)['exit_status'] is None
    assert _fleet_report.verdict([], 0.0)['exit_status'] == 0
    assert _fleet_report.fail_threshold('7.5') == 7.5
    assert _fleet_report.fail_threshold(None) is None
    for bad in ('abc', '-1', '100.1', 'nan', 'inf', True):
        with pytest.raises(ValueError, match='fail_threshold is a percentage of nodes, from 0 to 100'):
            _fleet_report.fail_threshold(bad)


GOOD = dict(('good-%d' % i, LOCAL) for i in (1, 2, 3))
GONE = {'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1', 'ansible_port': 1}


@pytest.mark.parametrize('hosts, threshold, ansible_alone, returncode, bad', [
    # broken's task fails in the last batch: Ansible alone exits 2; 1 of 4 bad is at the threshold.
    (dict(GOOD, broken=LOCAL), '25', 2, 0, 1),
    (dict(GOOD, broken=LOCAL), '24.9', 2, 2, 1),
    # No task fails, but a node waits for a reboot: Ansible alone exits 0.
    (dict(GOOD, **{'needs-reboot': LOCAL}), '20', 0, 2, 1),
    (dict(GOOD, **{'needs-reboot': LOCAL}), None, 0, 0, None),
    # Ansible alone exits 4 for an unreachable node.
    (dict(GOOD, gone=GONE), '25', 4, 0, 1),
    # The stopped roll: broken fails, late-1 and late-2 are not_run (bad); cri-broken, not_validated, is not.
    (dict((h, LOCAL) for h in ('good', 'broken', 'cri-broken', 'late-1', 'late-2')), '60', 2, 0, 3),
])
def test_the_threshold_sets_the_exit_status(tmp_path, hosts, threshold, ansible_alone, returncode, bad):
    done, report = run_playbook(tmp_path, hosts, threshold)
    assert done.returncode == returncode, done.stdout + done.stderr
    assert 'PLAY RECAP' in done.stdout and done.stdout.index('PLAY RECAP') < done.stdout.index('ACCEL.NODES FLEET')
    if threshold is None:
        assert report['threshold'] is None
        assert 'fail_threshold' not in done.stdout
        return
    assert report['threshold'] == {'fail_percentage': float(threshold), 'bad': bad, 'nodes': len(hosts),
                                   'bad_percentage': 100.0 * bad / len(hosts), 'exit_status': returncode}
    assert ('fail_threshold %s%%: %d of %d node(s) (%s%%) are unreachable, needs_reboot, fail or not_run\n'
            '  %s the threshold: exit status %d\n' % (threshold, bad, len(hosts), '%g' % (100.0 * bad / len(hosts)),
                                                      'over' if returncode else 'within', returncode)) in done.stdout
    # Without the threshold, the same run ends with Ansible's own status.
    assert run_playbook(tmp_path, hosts)[0].returncode == ansible_alone


@pytest.mark.parametrize('threshold, why', [
    ('abc', "'abc'"),
    ('100.5', 'not 100.5'),
])
def test_a_bad_threshold_stops_the_run_before_its_first_play(tmp_path, threshold, why):
    done, report = run_playbook(tmp_path, dict(GOOD), threshold)
    assert done.returncode == 5, done.stdout + done.stderr
    assert report is None
    assert 'PLAY [' not in done.stdout
    error = ' '.join(done.stderr.split())
    assert 'accel.nodes.fleet_report: ' in error and why in error
    assert 'Set ACCEL_NODES_FLEET_REPORT_FAIL_THRESHOLD or [accel_nodes_fleet_report] fail_threshold to a number ' \
           'from 0 to 100, or unset it. No play was run.' in error


MARK = '''
from ansible.plugins.callback import CallbackBase
DOCUMENTATION = """
name: mark
type: aggregate
short_description: marks the end of the run
description: [marks the end of the run]
options:
  path:
    description: the file to write
    env: [{name: MARK_PATH}]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'test.later.mark'
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_stats(self, stats):
        with open(self.get_option('path'), 'a', encoding='utf-8') as handle:
            handle.write('end of a playbook\\n')
'''


def test_only_the_last_playbook_sets_the_exit_status_and_later_callbacks_are_named(tmp_path, monkeypatch):
    # site.yml twice on one command line, within the threshold: the first report leaves the exit status to the
    # second, so the second playbook runs. A collection callback listed after this one misses the end of the run.
    plugin = tmp_path / 'collections' / 'ansible_collections' / 'test' / 'later' / 'plugins' / 'callback' / 'mark.py'
    plugin.parent.mkdir(parents=True)
    plugin.write_text(MARK)
    monkeypatch.setenv('MARK_PATH', str(tmp_path / 'first'))
    done, report = run_playbook(tmp_path, dict(GOOD, **{'needs-reboot': LOCAL}), '25', playbooks=2,
                                callbacks='accel.nodes.fleet_report,test.later.mark',
                                collections=(str(tmp_path / 'collections'),))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count('ACCEL.NODES FLEET REPORT') == 2
    assert done.stdout.count("the last playbook's report sets the exit status, if Ansible runs it") == 1
    assert report['threshold']['exit_status'] == 0
    assert 'list accel.nodes.fleet_report last in callbacks_enabled' in ' '.join(done.stderr.split())
    assert 'before test.later.mark got the end of the run' in ' '.join(done.stderr.split())
    assert (tmp_path / 'first').read_text().splitlines() == ['end of a playbook']  # the first only
    # Listed last, the threshold is set the same, and the other callback gets the end of the run.
    monkeypatch.setenv('MARK_PATH', str(tmp_path / 'second'))
    done = run_playbook(tmp_path, dict(GOOD, **{'needs-reboot': LOCAL}), '20',
                        callbacks='test.later.mark,accel.nodes.fleet_report',
                        collections=(str(tmp_path / 'collections'),))[0]
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'callbacks_enabled' not in done.stderr
    assert (tmp_path / 'second').read_text().splitlines() == ['end of a playbook']


def test_a_node_failed_for_its_pending_reboot_says_why_no_reload_could_load_the_driver():
    # site.yml's "Stop a node that waits for a reboot" carries driver_reload's reason (molecule/fleet sees it).
    msg = ('fleet-2 needs a reboot to load the new driver (after the reload the driver reports None, not 580.95.05: '
           'Unable to determine the device handle for GPU00000000:00:1B.0: GPU is lost).')
    report = _fleet_report.build({
        'fleet-2': {'reboot_required': True, 'failed': {'task': 'Stop a node that waits for a reboot', 'msg': msg}},
        'fleet-3': {'reboot_required': True},
    }, 'site.yml', '2026-11-27T15:00:00Z')
    check_schema(report)
    reasons = dict((n['host'], [r['detail'] for r in n['reasons']]) for n in report['nodes'])
    assert [n['status'] for n in report['nodes']] == ['needs_reboot', 'needs_reboot']
    assert reasons == {'fleet-2': [msg],
                       'fleet-3': ['a new driver is installed and the node has not been rebooted to load it']}
