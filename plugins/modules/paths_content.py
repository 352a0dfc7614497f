#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: paths_content
short_description: Write or remove a set of small text files in one run
version_added: 0.2.0
description:
  - Gives each file of O(files) its content, owner, group and mode, or removes it, as M(ansible.builtin.copy)
    with C(content) and M(ansible.builtin.file) with C(state=absent) do for one file each, but for the whole
    set in one module run. M(ansible.builtin.copy) and M(ansible.builtin.template) take two module runs per
    file on a node that already has it (C(stat), then C(file)).
  - A file is written only when its content differs, atomically (a temporary file in the same directory,
    renamed over it). Its directory must exist.
  - With a O(files[].marker), a file that exists without the marker is someone else's. It is never changed or
    removed; one that should be written fails the task before anything is written.
  - The task is changed exactly when a file's content, owner, group or mode is (or would be) changed, or a
    file is (or would be) removed.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Writes and removes nothing. A file whose directory does not exist yet is reported in
        RV(missing_directories) instead of failing the task, as a package that a real run installs first may
        create that directory.
  diff_mode:
    support: full
options:
  files:
    description: The files.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      state:
        description: V(present) writes O(files[].content); V(absent) removes the file.
        type: str
        choices: [present, absent]
        default: present
      content:
        description: The text of the file, written as UTF-8. Required with O(files[].state=present).
        type: str
      mode:
        description: The mode, as M(ansible.builtin.file) takes it.
        type: raw
        default: '0644'
      owner:
        description: The owner. Left as it is when not given.
        type: str
      group:
        description: The group. Left as it is when not given.
        type: str
      marker:
        description:
          - A string that every file this task writes contains. An existing file without it is not the
            task's own. It is left alone with O(files[].state=absent), and fails the task with
            O(files[].state=present).
        type: str
seealso:
  - module: ansible.builtin.copy
  - module: accel.nodes.paths_absent
"""

EXAMPLES = r"""
- name: Write the hook config and the runtime wrapper
  accel.nodes.paths_content:
    files:
      - path: /opt/aws/neuron/share/oci_neuron_hook_config.json
        content: "{{ {'hooks': {'prestart': [{'path': '/opt/aws/neuron/bin/oci_neuron_hook'}]}} | to_nice_json }}\n"
        owner: root
        group: root
      - path: /opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh
        content: "{{ lookup('ansible.builtin.template', 'oci_neuron_hook_wrapper.sh.j2') }}"
        mode: '0755'

- name: Remove a shim, only if this role wrote it
  accel.nodes.paths_content:
    files:
      - path: /usr/local/sbin/update-pciids
        state: absent
        marker: "written by accel.nodes"
"""

RETURN = r"""
changed_paths:
  description: The files that are (in check mode, would be) written, given other attributes, or removed.
  returned: always
  type: list
  elements: str
  sample: [/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh]
foreign:
  description: Existing files that lack their O(files[].marker), left alone.
  returned: always
  type: list
  elements: str
  sample: []
missing_directories:
  description: In check mode, the directories that do not exist yet, of files that would be written.
  returned: always
  type: list
  elements: str
  sample: [/opt/aws/neuron/share]
"""

import os
from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files


def _read(path: str) -> Optional[str]:
    """The text of path; None when it does not exist. A file that is not UTF-8 reads as ''."""
    try:
        return _files.read_text(path)
    except ValueError:
        if os.path.isdir(path):
            raise
        return ''


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', required=True, options=dict(
                path=dict(type='path', required=True),
                state=dict(type='str', choices=['present', 'absent'], default='present'),
                content=dict(type='str'),
                mode=dict(type='raw', default='0644'),
                owner=dict(type='str'),
                group=dict(type='str'),
                marker=dict(type='str', no_log=False),
            ), required_if=[('state', 'present', ['content'])]),
        ),
        supports_check_mode=True,
    )
    entries = module.params['files']
    bad = [e['path'] for e in entries if not os.path.isabs(e['path'])]
    if bad:
        module.fail_json(msg='paths must be absolute; got %s' % ', '.join(bad))
    result = dict(changed=False, changed_paths=[], foreign=[], missing_directories=[])  # type: Dict[str, Any]
    diffs = []  # type: List[Dict[str, str]]
    try:
        planned = [(e, _read(e['path'])) for e in entries]
    except ValueError as e:
        module.fail_json(msg=str(e), **result)
    refused = []
    for entry, before in planned:
        if _files.content_plan(entry, before)['foreign']:
            result['foreign'].append(entry['path'])
            if entry['state'] == 'present':
                refused.append(entry['path'])
    if refused:
        module.fail_json(msg='%s exist(s) without the marker of the files this task writes, so they are not its '
                             'own: nothing was written. Remove them, or stop asking for them.' % ', '.join(refused),
                         **result)
    missing = sorted(set(os.path.dirname(e['path']) for e, _b in planned
                         if e['state'] == 'present' and not os.path.isdir(os.path.dirname(e['path']))))
    if missing and not module.check_mode:
        module.fail_json(msg='the directories %s do not exist; the files in them cannot be written'
                             % ', '.join(missing), **result)
    result['missing_directories'] = missing
    for entry, before in planned:
        path = entry['path']
        decided = _files.content_plan(entry, before)
        if decided['foreign']:
            continue
        after = decided['after']
        done = _files.update_file(module, path, before, after, mode=entry['mode'])
        changed = done['changed']
        if changed:
            diffs.append(done['diff'])
        if after is not None and os.path.exists(path):
            args = module.load_file_common_arguments(dict(path=path, mode=entry['mode'], owner=entry['owner'],
                                                          group=entry['group']))
            attributes = {'before': {}, 'after': {}}  # type: Dict[str, Dict[str, Any]]
            if module.set_fs_attributes_if_different(args, False, attributes):
                changed = True
                diffs.append(dict(before_header=path + ' (attributes)', after_header=path + ' (attributes)',
                                  before=''.join('%s: %s\n' % kv for kv in sorted(attributes['before'].items())),
                                  after=''.join('%s: %s\n' % kv for kv in sorted(attributes['after'].items()))))
        if changed:
            result['changed'] = True
            result['changed_paths'].append(path)
    if module._diff:
        result['diff'] = diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
