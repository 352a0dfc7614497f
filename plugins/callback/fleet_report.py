# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r'''
name: fleet_report
type: aggregate
short_description: One report of the fleet at the end of a run, on screen and as JSON and JUnit XML
version_added: 0.2.0
description:
  - At the end of an C(ansible-playbook) run, prints one screen with a line per node (its status and each validation
    layer's) and the reason for every failure, and writes the same as JSON and as JUnit XML where paths are set.
  - It reads what the run itself returned - the C(accelerator_validation) fact of the C(accel.nodes.accelerator_validation) role,
    C(nvidia_driver_reboot_required) and C(neuron_driver_reboot_required), failed and unreachable hosts - so it also reports a run that stopped part-way (a
    failed batch under C(max_fail_percentage)), and lists the nodes that no task reached as C(not_run).
  - Each node also lists its findings (C(accel.nodes.diagnose), issue 28), with each one's fix - those of the validation report
    (the role diagnoses a node that fails a check, and each failed check names the findings that explain it) or those of
    the C(accel.nodes.diagnose) playbook (its C(accel_nodes_diagnosis) fact) - on the screen, in the JSON and as a
    JUnit test case C(diagnosis).
  - 'A node is V(unreachable), V(needs_reboot), V(fail) (a failed validation check or task), V(pass), V(not_validated)
    or V(not_run).'
  - Enable it with C(ANSIBLE_CALLBACKS_ENABLED=accel.nodes.fleet_report), or C(callbacks_enabled) in C(ansible.cfg).
  - With O(fail_threshold) set, the report also sets the run's exit status, so that a pipeline can accept a fleet
    where a few nodes failed and stop on one where many did.
requirements:
  - enabled in configuration
options:
  json_path:
    description: Where to write the report as JSON (schema C(tests/schemas/fleet-report.schema.json) of the repository).
    type: path
    env:
      - name: ACCEL_NODES_FLEET_REPORT_JSON
    ini:
      - section: accel_nodes_fleet_report
        key: json_path
  junit_path:
    description: Where to write the report as JUnit XML, a test suite per node and a test case per layer.
    type: path
    env:
      - name: ACCEL_NODES_FLEET_REPORT_JUNIT
    ini:
      - section: accel_nodes_fleet_report
        key: junit_path
  fail_threshold:
    description:
      - The share of the report's nodes, in percent from 0 to 100, that may end the run V(unreachable),
        V(needs_reboot), V(fail) or V(not_run). V(not_validated) nodes count among the nodes, not as bad.
      - Set, it replaces Ansible's exit status with the fleet report's verdict - 0 when the share of bad nodes is
        at most O(fail_threshold), 2 (what C(ansible-playbook) returns for failed hosts) when it is more - after
        the report is printed and written. The screen and the JSON's C(threshold) say the verdict.
      - Unset, the exit status is Ansible's own.
      - A value that is not a number from 0 to 100 stops the run before its first play, with exit status 5.
      - With several playbooks on one command line, the last one's report sets the exit status. A run that
        Ansible stops before its last playbook keeps Ansible's own, non-zero, exit status.
      - Collection callbacks listed after this one in C(callbacks_enabled) do not get the end of the run (the
        exit happens in this callback's turn), and the run warns about each. List this callback last.
    type: float
    env:
      - name: ACCEL_NODES_FLEET_REPORT_FAIL_THRESHOLD
    ini:
      - section: accel_nodes_fleet_report
        key: fail_threshold
'''

import datetime
import os

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import callback_loader

from ansible_collections.accel.nodes.plugins.plugin_utils import _fleet_report

# The facts in which the driver roles say that their new driver waits for a reboot.
REBOOT_FACTS = ('nvidia_driver_reboot_required', 'neuron_driver_reboot_required')


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'accel.nodes.fleet_report'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._seen = {}
        self._playbook = ''
        # The play now running (its uuid: under serial each batch starts a copy of it), the hosts it targets,
        # and those a task ran on in it. A host's "ran" is judged by the last play that targeted it: site.yml's
        # discovery play runs on every node, its rolling play only on the batches it reached.
        self._play = None
        self._targets = []
        self._ran = set()
        self._threshold = None
        self._playbooks = 0

    def set_options(self, task_keys=None, var_options=None, direct=None):
        # Called while the run loads its callbacks, before the first play, inside PlaybookExecutor.run's
        # try/finally. An exception here would only make Ansible skip this callback with a warning (TQM.load_callbacks
        # catches Exception) and run without the threshold, so a bad threshold ends the run instead, with
        # Ansible's status for bad options.
        try:
            super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
            self._threshold = _fleet_report.fail_threshold(self.get_option('fail_threshold'))
        except (AnsibleError, ValueError) as exc:
            self._display.error('accel.nodes.fleet_report: %s. Set ACCEL_NODES_FLEET_REPORT_FAIL_THRESHOLD or '
                                '[accel_nodes_fleet_report] fail_threshold to a number from 0 to 100, or unset it. '
                                'No play was run.' % str(exc).rstrip('.'))
            raise SystemExit(5) from exc

    def _host(self, name):
        return self._seen.setdefault(name, {'ran': False})

    def _ran_on(self, name):
        self._ran.add(name)
        return self._host(name)

    def _end_play(self):
        for name in self._targets:
            self._host(name)['ran'] = name in self._ran

    def v2_playbook_on_start(self, playbook):
        self._playbooks += 1
        self._playbook = os.path.basename(getattr(playbook, '_file_name', '') or '')

    def v2_playbook_on_play_start(self, play):
        uuid = getattr(play, '_uuid', None)
        if uuid is None or uuid != self._play:
            self._end_play()
            self._play, self._targets, self._ran = uuid, [], set()
        # Every host the play targets, so that a batch the run never reached is listed too. Under serial the
        # inventory is restricted to the batch when this is called (PlaybookExecutor.run): look past that.
        try:
            hosts = play.get_variable_manager()._inventory.get_hosts(play.hosts, ignore_restrictions=True)
        except Exception:  # pylint: disable=broad-except
            return
        for host in hosts:
            name = host.get_name()
            self._host(name)
            if name not in self._targets:
                self._targets.append(name)

    def v2_runner_on_ok(self, result):
        seen = self._ran_on(result._host.get_name())
        facts = result._result.get('ansible_facts') or {}
        if isinstance(facts.get('accelerator_validation'), dict):
            seen['validation'] = facts['accelerator_validation']
        if isinstance(facts.get('accel_nodes_diagnosis'), list):
            seen['findings'] = facts['accel_nodes_diagnosis']
        # Each driver role's own fact, the last value of each: a node waits for a reboot while either says so.
        waits = seen.setdefault('reboot_facts', {})
        for fact in REBOOT_FACTS:
            if fact in facts:
                waits[fact] = str(facts[fact]).lower() in ('true', '1', 'yes')
                seen['reboot_required'] = any(waits.values())

    def v2_runner_on_skipped(self, result):
        self._ran_on(result._host.get_name())

    def v2_runner_on_failed(self, result, ignore_errors=False):
        seen = self._ran_on(result._host.get_name())
        if not ignore_errors:
            seen['failure'] = {'task': result._task.get_name(), 'msg': result._result.get('msg', '')}

    def v2_runner_on_unreachable(self, result):
        seen = self._ran_on(result._host.get_name())
        seen['unreachable_msg'] = result._result.get('msg', 'unreachable')

    def v2_playbook_on_stats(self, stats):
        self._end_play()
        for name, seen in self._seen.items():
            # Only what the run ended with: a rescued failure, or an unreachable the task ignored, is not counted.
            seen['failed'] = seen.get('failure') if stats.failures.get(name) else None
            seen['unreachable'] = seen.get('unreachable_msg') if stats.dark.get(name) else None
        # ansible-playbook sends this once per playbook on its command line (ansible, once): only the last sets the
        # exit status, or the playbooks after it would not run.
        playbooks = context.CLIARGS.get('args')
        last = not isinstance(playbooks, (list, tuple)) or self._playbooks >= len(playbooks)
        report = _fleet_report.build(self._seen, self._playbook,
                                     datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
                                     self._threshold, last)
        self._display.banner('ACCEL.NODES FLEET REPORT')
        self._display.display(_fleet_report.text(report))
        for option, render in (('json_path', _fleet_report.to_json), ('junit_path', _fleet_report.junit)):
            path = self.get_option(option)
            if path:
                try:
                    with open(path, 'w', encoding='utf-8') as handle:
                        handle.write(render(report))
                    self._display.display('fleet report: %s' % path)
                except OSError as exc:
                    self._display.warning('accel.nodes.fleet_report could not write %s: %s' % (path, exc))
        if report['threshold'] and report['threshold']['exit_status'] is not None:
            self._exit(report['threshold']['exit_status'])

    def _exit(self, status):
        """End ansible-playbook with this status. PlaybookExecutor.run sends v2_playbook_on_stats inside a
        try/finally whose finally cleans up the task queue manager; TaskQueueManager.send_callback, which has just
        given the stdout callback its PLAY RECAP, catches Exception (core 2.18: a warning; 2.19: the callback
        dispatch error handler) but not SystemExit; and CLI.cli_executor catches AnsibleError, KeyboardInterrupt
        and Exception before its own sys.exit. A SystemExit raised here therefore passes all three and is the
        process's exit status. It also ends send_callback's loop: the callbacks after this one get no
        v2_playbook_on_stats, so name them."""
        enabled = list(C.CALLBACKS_ENABLED or [])
        skipped = []
        for name in enabled[enabled.index(self.CALLBACK_NAME) + 1:] if self.CALLBACK_NAME in enabled else []:
            # Ansible loads its own callbacks, and those of callback_plugins directories, first; only collection
            # callbacks follow the order of callbacks_enabled.
            plugin = callback_loader.get(name, class_only=True)
            if plugin and not plugin.ansible_name.startswith(('ansible.builtin.', 'ansible.legacy.')) and \
                    getattr(plugin, 'CALLBACK_TYPE', '') != 'stdout':
                skipped.append(plugin.ansible_name)
        if skipped:
            self._display.warning('accel.nodes.fleet_report set the exit status with fail_threshold before %s got '
                                  'the end of the run: list accel.nodes.fleet_report last in callbacks_enabled.'
                                  % ', '.join(skipped))
        raise SystemExit(status)
