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
    result = _engine.checked_restart(host, engine)
    result.pop('kept', None)
    result['changed'] = True
    if result.pop('failed', False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
