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
    C(nvidia_driver_reboot_required), failed and unreachable hosts - so it also reports a run that stopped part-way (a
    failed batch under C(max_fail_percentage)), and lists the nodes that no task reached as C(not_run).
  - 'A node is V(unreachable), V(needs_reboot), V(fail) (a failed validation check or task), V(pass), V(not_validated)
    or V(not_run).'
  - Enable it with C(ANSIBLE_CALLBACKS_ENABLED=accel.nodes.fleet_report), or C(callbacks_enabled) in C(ansible.cfg).
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
'''

import datetime
import os

from ansible.plugins.callback import CallbackBase

from ansible_collections.accel.nodes.plugins.plugin_utils import _fleet_report


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

    def _host(self, name):
        return self._seen.setdefault(name, {'ran': False})

    def _ran_on(self, name):
        self._ran.add(name)
        return self._host(name)

    def _end_play(self):
        for name in self._targets:
            self._host(name)['ran'] = name in self._ran

    def v2_playbook_on_start(self, playbook):
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
        if 'nvidia_driver_reboot_required' in facts:
            seen['reboot_required'] = str(facts['nvidia_driver_reboot_required']).lower() in ('true', '1', 'yes')

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
        report = _fleet_report.build(self._seen, self._playbook,
                                     datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'))
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
