#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_restart
short_description: Restart Docker or containerd, check that it answers, or bring back its last known good configuration
version_added: 0.2.0
description:
  - Restarts C(docker.service) or C(containerd.service) after a configuration change, and checks the result.
  - First clears systemd's start limit of the unit (C(systemctl reset-failed)), since a deliberate restart after a
    configuration change is not a crash loop, then restarts the unit and waits up to O(timeout) seconds for the
    engine to answer (C(docker info) without server errors, C(ctr version)).
  - Docker must then list every runtime that O(config_path) registers, and use its C(default-runtime). Otherwise
    the module fails and says which flag or file overrides C(daemon.json).
  - B(A failed restart is undone.) If the engine does not start or answer, the module reads the engine's own
    error from its journal since the restart, puts back the last known good configuration, starts the engine
    again with it, and fails with what the engine said. For Docker, the rejected C(daemon.json) is kept in the
    state directory and the last good one comes back, or C(daemon.json) is removed if Docker last ran without one.
    For containerd, the whole rejected O(containerd_dir) moves aside, so that drop-ins added since do not survive,
    and the last good tree is unpacked.
  - After a successful restart, the configuration the engine now runs with becomes the last known good one.
    M(accel.nodes.engine_state) keeps it on every run as well.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
  - accel.nodes.engine_paths
attributes:
  check_mode:
    support: full
    details:
      - Restarts nothing and changes nothing; reports that the engine would be restarted.
  diff_mode:
    support: none
options:
  engine:
    description:
      - The engine to restart.
    type: str
    choices: [docker, containerd]
    required: true
  timeout:
    description:
      - Seconds to wait for the engine to answer after each start.
    type: int
    default: 60
notes:
  - The C(accel.nodes.docker) role runs this module from its handlers, on the topics C(accel_nodes_restart_docker)
    and C(accel_nodes_restart_containerd).
seealso:
  - module: accel.nodes.engine_state
  - name: systemd.unit(5), StartLimitIntervalSec=
    description: Why C(systemctl reset-failed) comes before a deliberate restart.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html#StartLimitIntervalSec=interval
"""

EXAMPLES = r"""
- name: Restart Docker, check it, or bring back the last good daemon.json
  accel.nodes.engine_restart:
    engine: docker
    timeout: 60

- name: Restart containerd, check it, or bring back the last good /etc/containerd
  accel.nodes.engine_restart:
    engine: containerd
"""

RETURN = r"""
msg:
  description: What happened, or why the module failed (with the engine's own error).
  returned: always
  type: str
  sample: Docker answers with runtimes io.containerd.runc.v2, nvidia, runc, default runc.
runtimes:
  description: The runtimes Docker lists after the restart.
  returned: when O(engine=docker) and Docker answered
  type: list
  elements: str
  sample: [io.containerd.runc.v2, nvidia, runc]
default_runtime:
  description: Docker's default runtime after the restart.
  returned: when O(engine=docker) and Docker answered
  type: str
  sample: runc
restored:
  description: Whether the last known good configuration was put back, with a failure.
  returned: when the restart failed
  type: bool
  sample: true
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _engine
from ansible_collections.accel.nodes.plugins.module_utils._engine import Host


def docker_failed(host: Host, since: int, failure: str) -> dict:
    """Docker did not come back: restore the last good daemon.json, start it again, and say what happened."""
    said = _engine.engine_said(host.journal('docker', since), failure)
    restorable, kept = host.restore_docker()
    back = False
    if restorable and host.restart('docker', 'docker.socket') is None:
        back = host.wait_for('docker') is not None
    path = host.daemon_json
    if back:
        state = 'The last known good daemon.json was restored and Docker runs again with it. '
    elif restorable:
        state = 'It did not start with the last known good daemon.json either, so Docker is DOWN on this node. '
    else:
        state = 'No last known good daemon.json was recorded, so nothing was restored and Docker is DOWN on this node. '
    return dict(restored=restorable, msg=(
        'Docker did not start with the changed %s. %sDocker said: %s %s'
        'Fix the change that the role notifying accel_nodes_restart_docker made, and run again; '
        '`journalctl -u docker.service` has the whole story.' % (
            path, state, said,
            'The rejected daemon.json is kept in %s. ' % host.paths['rejected'] if kept else '')))


def containerd_failed(host: Host, since: int, failure: str) -> dict:
    """containerd did not come back: restore the last good tree, start it again, and say what happened."""
    said = _engine.engine_said(host.journal('containerd', since), failure)
    restored = host.restore_containerd()
    back = False
    if restored and host.restart('containerd') is None:
        back = host.wait_for('containerd') is not None
    if back:
        state = ('The last known good %s was restored and containerd runs again with it. ' % host.containerd_dir)
    elif restored:
        state = 'It did not start with the last known good configuration either, so containerd is DOWN on this node. '
    else:
        state = ('No last known good configuration was recorded, so nothing was restored and containerd is DOWN '
                 'on this node. ')
    return dict(restored=restored, msg=(
        'containerd did not start with its changed configuration. %scontainerd said: %s %s'
        'Fix the change that the role notifying accel_nodes_restart_containerd made, and run again; '
        '`journalctl -u containerd.service` has the whole story.' % (
            state, said,
            'The rejected configuration is kept in %s. ' % host.paths['containerd_rejected'] if restored else '')))


def checked_restart(host: Host, engine: str) -> dict:
    """Restart engine and check it. Returns the result; 'failed' is set where the restart did not hold."""
    since = int(host.clock())
    failure = host.restart(engine)
    answer = host.wait_for(engine) if failure is None else None
    if answer is None:
        if engine == 'docker':
            result = docker_failed(host, since, failure or 'Docker did not answer within %ds' % host.timeout)
        else:
            result = containerd_failed(host, since, failure or 'containerd did not answer')
        result['failed'] = True
        return result
    if engine == 'containerd':
        host.keep_containerd()
        return dict(msg='containerd answers.')
    result = dict(runtimes=sorted(answer.get('Runtimes') or {}), default_runtime=answer.get('DefaultRuntime'))
    problem = _engine.runtimes_not_used(_engine.read_daemon_json(host.daemon_json), answer, host.daemon_json)
    if problem:
        result.update(failed=True, msg=problem)
        return result
    host.keep_docker()
    result['msg'] = 'Docker answers with runtimes %s, default %s.' % (', '.join(result['runtimes']),
                                                                      result['default_runtime'])
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type='str', required=True, choices=['docker', 'containerd']),
            timeout=dict(type='int', default=60),
            **_engine.PATH_OPTIONS
        ),
        supports_check_mode=True,
    )
    p = module.params
    engine = p['engine']
    if module.check_mode:
        module.exit_json(changed=True, msg='Check mode: %s would be restarted.' % _engine.UNITS[engine])
    host = Host(module, p['config_path'], p['containerd_dir'], p['state_dir'], p['timeout'])
    result = checked_restart(host, engine)
    result['changed'] = True
    if result.pop('failed', False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
