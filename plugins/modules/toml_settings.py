#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: toml_settings
short_description: Set or remove individual keys of a TOML file, keeping the rest of it as it is
version_added: 0.1.0
description:
  - Edits a TOML file one key at a time, for example C(/etc/nvidia-container-runtime/config.toml).
    Keys that are not named, comments, blank lines, key order and quoting stay byte for byte as they were.
  - A key that already has the wanted value is not a change, and the file is then not written.
  - A new key goes right after its commented-out default (such as C(#no-cgroups = false)), which stays;
    without one, after the last key of its table. A key whose table does not exist yet gets the table
    appended at the end of the file.
  - Every edit is parsed back before the file is written; the module fails rather than write a file
    in which anything but the named keys changed.
  - Writes are atomic (temporary file, then rename). An existing file keeps its owner and mode unless
    O(mode) is given.
  - Works on Python 3.8 and later with no TOML library on the target.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Computes the new text and reports the change; writes nothing.
      - A missing file with O(create=false) gives a warning and V(changed) in check mode, since the package
        that ships it may be installed by an earlier task of the same run.
  diff_mode:
    support: full
options:
  path:
    description:
      - The TOML file to edit.
    type: path
    required: true
  settings:
    description:
      - The keys to set (O(state=present)) or remove (O(state=absent)), with their values.
      - Each key is a TOML dotted key, as it would be written in the file, naming the table and then the key,
        for example C(nvidia-container-runtime.mode) or C(nvidia-container-cli.no-cgroups).
        A top-level key has no dot, for example C(accept-nvidia-visible-devices-as-volume-mounts).
      - A part that itself contains a dot, or other characters than letters, digits, C(-) and C(_), is quoted
        as in TOML, for example C(plugins."io.containerd.grpc.v1.cri".enable_cdi).
      - Values are strings, booleans, integers, floats, or lists of those, and are written with their YAML type,
        so V(true) becomes C(true) while V("true") becomes C("true").
        There is no null in TOML; to take a key out, use O(state=absent).
      - To set the keys of a table, name each key; a table as a value is refused.
      - With O(state=absent) the values are ignored, and a key that names a table removes the whole table.
    type: dict
    required: true
  state:
    description:
      - V(present) sets the keys in O(settings) to their values. V(absent) removes them; a key that is not
        there is no change.
    type: str
    choices: [present, absent]
    default: present
  remove:
    description:
      - Keys to remove in the same run, as with O(state=absent), so that a file whose keys are set and removed
        together is read, written and backed up once. A key that is not there is no change.
      - A key may not be both in O(settings) and here.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  create:
    description:
      - Create O(path) if it does not exist. If V(false), a missing O(path) fails the task
        (with O(state=present)); with O(state=absent) it is no change.
    type: bool
    default: false
  mode:
    description:
      - Permissions of O(path), as for M(ansible.builtin.file).
      - When not given, an existing file keeps its mode, and a new file gets C(0644).
    type: raw
  backup:
    description:
      - Copy O(path) to a timestamped backup next to it before changing it.
    type: bool
    default: true
seealso:
  - name: TOML 1.0
    description: The file format.
    link: https://toml.io/en/v1.0.0
"""

EXAMPLES = r"""
- name: Configure the NVIDIA Container Runtime, keeping every key not named here
  accel.nodes.toml_settings:
    path: /etc/nvidia-container-runtime/config.toml
    settings:
      nvidia-container-runtime.mode: cdi
      nvidia-container-runtime.debug: /var/log/nvidia-container-runtime.log
      nvidia-container-cli.debug: /var/log/nvidia-container-toolkit.log
      nvidia-container-cli.no-cgroups: false
      nvidia-container-cli.ldconfig: "@/sbin/ldconfig"
      nvidia-container-cli.load-kmods: true
      accept-nvidia-visible-devices-as-volume-mounts: true
      accept-nvidia-visible-devices-envvar-when-unprivileged: false
  register: nvidia_container_toolkit_config

- name: Set the mode and take the debug logs out, in one write
  accel.nodes.toml_settings:
    path: /etc/nvidia-container-runtime/config.toml
    settings:
      nvidia-container-runtime.mode: cdi
    remove: [nvidia-container-runtime.debug, nvidia-container-cli.debug]

- name: Turn the debug logs off again
  accel.nodes.toml_settings:
    path: /etc/nvidia-container-runtime/config.toml
    state: absent
    settings:
      nvidia-container-runtime.debug:
      nvidia-container-cli.debug:

- name: Set a key whose table name contains dots
  accel.nodes.toml_settings:
    path: /etc/containerd/config.toml
    settings:
      plugins."io.containerd.grpc.v1.cri".enable_cdi: true
"""

RETURN = r"""
path:
  description: The file edited.
  returned: always
  type: str
  sample: /etc/nvidia-container-runtime/config.toml
changed_keys:
  description: The keys of O(settings) that were set or removed (or would be, in check mode), in the order given.
  returned: always
  type: list
  elements: str
  sample: [nvidia-container-runtime.mode, nvidia-container-cli.no-cgroups]
backup_file:
  description: Backup of O(path) made before it was changed.
  returned: when a backup was made
  type: str
  sample: /etc/nvidia-container-runtime/config.toml.4211.2026-11-21@10:15:42~
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils._toml import SettingsError, TomlDocument, TomlError, apply_settings


def edit(module, doc, settings, state):
    """Apply settings to doc; the keys that changed it."""
    try:
        return apply_settings(doc, settings, state, module.params['path'])
    except SettingsError as exc:
        module.fail_json(msg=exc.msg, changed_keys=exc.changed_keys)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            settings=dict(type='dict', required=True),
            state=dict(type='str', default='present', choices=['present', 'absent']),
            remove=dict(type='list', elements='str', default=[]),
            create=dict(type='bool', default=False),
            mode=dict(type='raw'),
            backup=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path, state = p['path'], p['state']
    result = dict(changed=False, path=path, changed_keys=[])
    both = [key for key in p['remove'] if key in p['settings']]
    if both:
        module.fail_json(msg='%s both in settings and in remove: name each key once' % ', '.join(both), **result)
    try:
        before = _files.read_text(path)
    except (ValueError, OSError) as exc:
        module.fail_json(msg='Cannot read %s: %s' % (path, exc), **result)
    if before is None and (state == 'absent' or not p['create']):
        if state == 'present':
            if not module.check_mode:
                module.fail_json(msg='%s does not exist. Install the package that ships it first, or set create=true.'
                                 % path, **result)
            module.warn('%s does not exist (yet). A real run fails unless an earlier task, such as a package '
                        'install, creates it.' % path)
            result['changed'] = True
            result['changed_keys'] = list(p['settings'])
        module.exit_json(**result)
    try:
        doc = TomlDocument(before or '')
    except TomlError as exc:
        module.fail_json(msg='%s is not valid TOML: %s. Fix the file; it was left as it was.' % (path, exc), **result)
    result['changed_keys'] = edit(module, doc, p['settings'], state)
    result['changed_keys'] += edit(module, doc, dict.fromkeys(p['remove']), 'absent')
    update = _files.update_file(module, path, before, doc.text(), p['backup'],
                                p['mode'] if p['mode'] is not None else _files.NEW_FILE_MODE)
    result['changed'] = update['changed']
    if update['backup_file']:
        result['backup_file'] = update['backup_file']
    if p['mode'] is not None and (os.path.exists(path) or module.check_mode):
        result['changed'] = module.set_mode_if_different(path, p['mode'], result['changed'])
    if module._diff:
        result['diff'] = update['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
