#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: dev_char_symlinks
short_description: Create the /dev/char symlinks of the NVIDIA device nodes with nvidia-ctk, reporting only real changes
version_added: 0.2.0
description:
  - Runs C(nvidia-ctk system create-dev-char-symlinks), which links C(/dev/char/<major>:<minor>) to each NVIDIA
    device node, so that systemd keeps the nodes in the device cgroups of running containers after a
    C(systemctl daemon-reload).
  - The tool (1.17.8) logs C(Creating link ...) for every device node on every call, also for links that already
    exist, and then warns that it could not create them. So the module first asks the tool which links it would
    create (C(--dry-run)), keeps those that do not exist yet, and runs the tool for real only when there are any.
    The task is changed exactly when a link was missing.
  - After the real run every link the tool named must exist; otherwise the module fails with the tool's output.
  - With O(udev_rule), the module also keeps the udev rule that NVIDIA's troubleshooting guide gives, which
    runs the tool with C(--create-all) whenever the driver binds, so that the links come back after a reboot.
    Rule and links are one module run; O(state=absent) removes the rule.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Runs only the tool's C(--dry-run), and reports the links that would be created.
  diff_mode:
    support: full
options:
  ctk_path:
    description:
      - The C(nvidia-ctk) binary.
    type: path
    default: /usr/bin/nvidia-ctk
  create_all:
    description:
      - Pass C(--create-all), NVIDIA's documented workaround, which links every device node the loaded driver can
        have (read from C(/proc/devices) and the PCI devices), whether the node exists yet or not. It needs a
        loaded driver.
      - V(false) links only the device nodes that exist now (C(/dev/nvidia*) and C(/dev/nvidia-caps/nvidia-*)).
    type: bool
    default: true
  dev_char_path:
    description:
      - Where the links go (the tool's C(--dev-char-path)).
    type: path
    default: /dev/char
  udev_rule:
    description:
      - Path of the udev rule file to keep (O(state=present)) or remove (O(state=absent)), for example
        C(/etc/udev/rules.d/71-nvidia-dev-char.rules). Missing parent directories are created with mode C(0755).
      - Omitted, the module touches no udev rule.
    type: path
  links:
    description:
      - Create the links now. V(false) keeps only the udev rule, for a node whose driver is not loaded yet or
        which is not running (an image being baked).
    type: bool
    default: true
  state:
    description:
      - V(present) keeps the rule and creates the links. V(absent) removes O(udev_rule) and nothing else.
    type: str
    choices: [present, absent]
    default: present
notes:
  - A link that exists but points somewhere else is left alone, as the tool leaves it; the module warns about it.
seealso:
  - name: NVIDIA Container Toolkit troubleshooting
    description: Containers losing access to GPUs after systemctl daemon-reload, and the /dev/char workaround.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/troubleshooting.html
"""

EXAMPLES = r"""
- name: Create the /dev/char symlinks for the NVIDIA device nodes
  accel.nodes.dev_char_symlinks:
    ctk_path: /usr/bin/nvidia-ctk
"""

RETURN = r"""
udev_rule_changed:
  description: Whether the udev rule is (in check mode, would be) written or removed.
  returned: always
  type: bool
links:
  description: Every link the tool names for this host, as C(path => target).
  returned: always
  type: dict
  sample: {"/dev/char/195:0": "/dev/nvidia0", "/dev/char/195:255": "/dev/nvidiactl"}
created:
  description: The links that were missing and are created (in check mode, would be created).
  returned: always
  type: list
  elements: str
  sample: ["/dev/char/195:1"]
"""

import os
from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._dev_char import dry_run_argv, link_drift, parse_links, udev_rule
from ansible_collections.accel.nodes.plugins.module_utils._files import list_directory, read_text, update_file


def _run(module: AnsibleModule, argv: List[str]) -> str:
    rc, out, err = module.run_command(argv, environ_update={'LANG': 'C', 'LC_ALL': 'C'})
    if rc != 0:
        module.fail_json(msg='%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()), rc=rc,
                         stdout=out, stderr=err)
    return out + '\n' + err


def keep_rule(module: AnsibleModule, want: Optional[str]) -> Dict[str, Any]:
    """Write (want is text) or remove (want is None) the udev rule; update_file's result."""
    path = module.params['udev_rule']
    try:
        before = read_text(path)
    except ValueError as exc:
        module.fail_json(msg='udev_rule: %s' % exc)
    return update_file(module, path, before, want, mode=0o644)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            ctk_path=dict(type='path', default='/usr/bin/nvidia-ctk'),
            create_all=dict(type='bool', default=True),
            dev_char_path=dict(type='path', default='/dev/char'),
            udev_rule=dict(type='path'),
            links=dict(type='bool', default=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
        ),
        required_if=[('state', 'absent', ('udev_rule',))],
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, udev_rule_changed=False, links={}, created=[])  # type: Dict[str, Any]
    diffs = []
    if params['udev_rule']:
        rule = keep_rule(module, udev_rule(params['ctk_path']) if params['state'] == 'present' else None)
        result['udev_rule_changed'] = rule['changed']
        diffs.append(rule['diff'])
    if params['state'] == 'present' and params['links']:
        argv = dry_run_argv(params['ctk_path'], params['dev_char_path'], params['create_all'])
        links = parse_links(_run(module, argv))
        # The same judgement as the filter dev_char_symlinks_in_place makes from node_probe's listing.
        entries = list_directory(params['dev_char_path'])
        drift = link_drift(links, params['dev_char_path'], entries)
        created = drift['missing']
        for path in drift['wrong']:
            module.warn('%s points to %s, not %s; it is left as it is' % (path, entries[os.path.basename(path)], links[path]))
        result.update(links=links, created=created)
        diffs.append(dict(before=''.join('%s\n' % p for p in links if p not in created),
                          after=''.join('%s\n' % p for p in links),
                          before_header=params['dev_char_path'], after_header=params['dev_char_path']))
        if created and not module.check_mode:
            output = _run(module, argv[:-1])
            still = link_drift(links, params['dev_char_path'], list_directory(params['dev_char_path']))['missing']
            if still:
                module.fail_json(msg='nvidia-ctk did not create %s: %s' % (', '.join(still), output.strip()), **result)
    result['changed'] = bool(result['udev_rule_changed'] or result['created'])
    if module._diff:
        result['diff'] = diffs[0] if len(diffs) == 1 else diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
