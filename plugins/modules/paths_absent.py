#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: paths_absent
short_description: Remove a list of files, links and directories in one run
version_added: 0.2.0
description:
  - Makes sure that none of the given paths exists, as M(ansible.builtin.file) with C(state=absent) does for one
    path, but for a whole list in one module run instead of one run per loop item.
  - A directory is removed with everything in it. A symbolic link is removed itself, never what it points to.
  - The task is changed exactly when one of the paths existed.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reports the paths that would be removed and removes nothing.
  diff_mode:
    support: full
options:
  paths:
    description:
      - Absolute paths that must not exist. Paths that do not exist are left out of the result.
    type: list
    elements: path
    required: true
seealso:
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Remove legacy repository files
  accel.nodes.paths_absent:
    paths:
      - /etc/apt/sources.list.d/nvidia-docker.list
      - /etc/apt/sources.list.d/nvidia-container-runtime.list
"""

RETURN = r"""
removed:
  description: The paths that existed and are removed (in check mode, would be removed), in the order given.
  returned: always
  type: list
  elements: str
  sample: ["/etc/apt/sources.list.d/nvidia-docker.list"]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._files import existing_paths as existing
from ansible_collections.accel.nodes.plugins.module_utils._files import remove_path as remove


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(paths=dict(type='list', elements='path', required=True)),
        supports_check_mode=True,
    )
    paths = module.params['paths']
    relative = [p for p in paths if not os.path.isabs(p)]
    if relative:
        module.fail_json(msg='paths must be absolute; got %s' % ', '.join(relative))
    removed = existing(paths)
    result = dict(changed=bool(removed), removed=removed)
    if module._diff:
        result['diff'] = dict(before=''.join('%s\n' % p for p in removed), after='',
                              before_header='paths that exist', after_header='paths that exist')
    if not module.check_mode:
        for path in removed:
            try:
                remove(path)
            except OSError as e:
                module.fail_json(msg='could not remove %s: %s' % (path, e), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
