#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: daemon_json
short_description: Merge top-level keys into Docker's daemon.json, keeping every other key
version_added: 0.2.0
description:
  - Sets the top-level keys of O(options) in Docker's C(daemon.json). Each key replaces the value of the same
    key in the file, except C(features), which is merged one key deeper. Every other key keeps its value and
    its place, and new keys go at the end.
  - The file is rewritten only when its content changes, atomically, in the indent it had (2 spaces for a new
    file), after a backup. An existing file keeps its owner and mode; a new one is C(root:root) C(0644), in a
    directory created with mode C(0755) if needed.
  - A C(daemon.json) that is not a JSON object is refused and left as it is.
  - Where C(dockerd) can check a configuration file (Docker 23 and later, C(dockerd --validate)), the merged
    file is checked before it replaces the old one, and a file dockerd rejects is not written. Older dockerd
    (Debian 12's C(docker.io) 20.10) cannot, and RV(validated) is then V(false).
  - Runtimes belong to M(accel.nodes.container_runtime); this module does not look at them.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads, merges and validates, writes nothing, and reports the change it would make.
  diff_mode:
    support: full
options:
  path:
    description:
      - The C(daemon.json) that dockerd reads.
    type: path
    default: /etc/docker/daemon.json
  options:
    description:
      - Top-level keys to set, with their values.
    type: dict
    required: true
  validate:
    description:
      - Check the merged file with C(dockerd --validate --config-file) before writing it, where dockerd has that
        flag. V(false) never runs dockerd.
    type: bool
    default: true
  backup:
    description:
      - Copy the file to a timestamped backup next to it before changing it.
    type: bool
    default: true
seealso:
  - module: accel.nodes.container_runtime
  - name: dockerd --validate
    description: Validate the daemon configuration and exit; added in Docker 23.0 (moby/moby#42393).
    link: https://docs.docker.com/reference/cli/dockerd/
"""

EXAMPLES = r"""
- name: Set log options and turn on containerd's image store, keeping the rest of daemon.json
  accel.nodes.daemon_json:
    options:
      log-driver: json-file
      log-opts: {max-size: 100m}
      features: {containerd-snapshotter: true}
  notify: accel_nodes_restart_docker
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
backup_file:
  description: The backup made before the file was changed.
  returned: when a backup was made
  type: str
  sample: /etc/docker/daemon.json.31847.2026-11-24@06:15:42~
validated:
  description: Whether dockerd checked the merged file (only when it changes, and where dockerd can).
  returned: always
  type: bool
  sample: false
"""

import os
import tempfile
from typing import Any, Dict, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc


def dockerd_validates(module: AnsibleModule) -> Optional[str]:
    """The path of a dockerd that has --validate (Docker 23 and later), or None.

    The flag came with moby/moby#42393 (cmd/dockerd/options.go: "validate",
    "Validate daemon configuration and exit"); dockerd 20.10 lists no such flag
    in its --help.
    """
    dockerd = module.get_bin_path('dockerd')
    if not dockerd:
        return None
    rc_, out, err = module.run_command([dockerd, '--help'], environ_update={'LANG': 'C', 'LC_ALL': 'C'})
    return dockerd if rc_ == 0 and '--validate' in out + err else None


def validate(module: AnsibleModule, text: str, path: str) -> bool:
    """Check text with dockerd --validate; fail the module where dockerd rejects it. Returns whether it checked."""
    dockerd = dockerd_validates(module)
    if not dockerd:
        return False
    fd, tmp = tempfile.mkstemp(prefix='daemon.', suffix='.json', dir=module.tmpdir)
    with os.fdopen(fd, 'w', encoding='utf-8') as handle:
        handle.write(text)
    rc_, out, err = module.run_command([dockerd, '--validate', '--config-file', tmp],
                                       environ_update={'LANG': 'C', 'LC_ALL': 'C'})
    os.remove(tmp)
    if rc_ != 0:
        module.fail_json(msg='dockerd rejects %s with the merged options, so it was left as it is: %s'
                         % (path, (err or out).strip()), path=path)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default=rc.DOCKER_CONFIG),
            options=dict(type='dict', required=True),
            validate=dict(type='bool', default=True),
            backup=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = p['path']
    try:
        before = _files.read_text(path)
    except (ValueError, OSError) as exc:
        module.fail_json(msg='Cannot read %s: %s' % (path, exc), path=path)
    try:
        current = rc.read_daemon_json(before, path)
    except rc.ConfigError:
        module.fail_json(
            msg='%s is not a valid JSON object, so the options cannot be merged into it. It was left as it is. '
                'Fix or remove the file and run again (dockerd would refuse to start with it too).' % path,
            path=path)
    try:
        data = rc.daemon_options_merged(current, p['options'], path)
    except rc.ConfigError as exc:
        module.fail_json(msg=str(exc), path=path)
    result: Dict[str, Any] = dict(path=path, validated=False)
    after = before if data == current else rc.render_daemon_json(data, before)
    if after != before and p['validate']:
        result['validated'] = validate(module, after, path)
    update = _files.update_file(module, path, before, after, p['backup'])
    result['changed'] = update['changed']
    if update['backup_file']:
        result['backup_file'] = update['backup_file']
    if module._diff:
        result['diff'] = update['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
