#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: dpkg_holds
short_description: Hold or release a set of Debian packages in one run
version_added: 0.2.0
description:
  - Sets the dpkg selection of several packages at once, as C(ansible.builtin.dpkg_selections) does for one
    package. It reads every selection with C(dpkg --get-selections), and writes only those that differ with one
    C(dpkg --set-selections).
  - The task is changed exactly when a selection differed.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the selections and reports those that would change.
  diff_mode:
    support: full
options:
  names:
    description:
      - The packages. An architecture-qualified selection (C(libfoo1:amd64)) counts for the bare name.
      - At least one of O(names) and O(patterns) is required.
    type: list
    elements: str
    default: []
  patterns:
    description:
      - Also the installed packages whose names one of these Python regular expressions matches, from the start of
        the name (as Jinja's C(match) test), and none of O(exclude) does. Installed means with files on disk in dpkg's
        status file (C(/var/lib/dpkg/status)); no package list has to be gathered first.
      - A pattern that matches no installed package is no error.
    type: list
    elements: str
    default: []
    version_added: 0.3.0
  exclude:
    description:
      - Regular expressions of installed packages that O(patterns) leaves out.
    type: list
    elements: str
    default: []
    version_added: 0.3.0
  selection:
    description:
      - V(hold) keeps apt from upgrading or removing the packages; V(install) releases a hold.
      - With V(hold), a package that dpkg does not know fails the task (hold what is installed). With
        V(install) only held packages change; a package dpkg does not know, or one selected for removal
        (C(deinstall), C(purge)), has no hold to release and is left as it is.
    type: str
    choices: [hold, install]
    default: hold
notes:
  - Runs C(dpkg), so the Debian family only.
seealso:
  - module: ansible.builtin.dpkg_selections
"""

EXAMPLES = r"""
- name: Hold the toolkit packages
  accel.nodes.dpkg_holds:
    names: [nvidia-container-toolkit, nvidia-container-toolkit-base]
    selection: hold

- name: Hold every installed driver package, whatever its branch, but not the toolkit's
  accel.nodes.dpkg_holds:
    patterns: ['^nvidia-.*$', '^libnvidia-.*$']
    exclude: ['^nvidia-container-.*$', '^libnvidia-container.*$']
    selection: hold
"""

RETURN = r"""
changed_names:
  description: The packages whose selection is set (in check mode, would be set), in the order given.
  returned: always
  type: list
  elements: str
  sample: [nvidia-container-toolkit]
names:
  description: The packages the task covers, O(names) and then the installed packages O(patterns) matched, sorted.
  returned: always
  type: list
  elements: str
  sample: [nvidia-container-toolkit, nvidia-container-toolkit-base]
  version_added: 0.3.0
unknown:
  description: The packages dpkg does not know.
  returned: always
  type: list
  elements: str
  sample: []
"""

import re
from typing import Dict

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg

_ENV = {'LANG': 'C', 'LC_ALL': 'C'}


def parse_selections(output: str) -> Dict[str, str]:
    """{package: selection} from `dpkg --get-selections` ("libfoo1:amd64\\t\\thold"), architecture dropped."""
    selections = {}  # type: Dict[str, str]
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 2:
            selections[fields[0].split(':')[0]] = fields[1]
    return selections


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type='list', elements='str', default=[]),
            patterns=dict(type='list', elements='str', default=[]),
            exclude=dict(type='list', elements='str', default=[]),
            selection=dict(type='str', choices=['hold', 'install'], default='hold'),
        ),
        required_one_of=[('names', 'patterns')],
        supports_check_mode=True,
    )
    names, selection = list(module.params['names']), module.params['selection']
    if module.params['patterns']:
        try:
            matched = _dpkg.matching(_dpkg.installed(_dpkg.parse_status(_dpkg.read_status(_dpkg.STATUS_FILE))),
                                     module.params['patterns'], module.params['exclude'])
        except re.error as e:
            module.fail_json(msg='patterns and exclude must be Python regular expressions: %s' % e)
        names += [n for n in matched if n not in names]
    dpkg = module.get_bin_path('dpkg', required=True)
    rc, out, err = module.run_command([dpkg, '--get-selections'], environ_update=_ENV)
    if rc != 0:
        module.fail_json(msg='dpkg --get-selections failed (rc %d): %s' % (rc, err.strip()), rc=rc)
    current = parse_selections(out)
    change, unknown = _dpkg.selection_plan(names, selection, current)
    result = dict(changed=bool(change), changed_names=change, names=names, unknown=unknown)
    if unknown and selection == 'hold':
        module.fail_json(msg='dpkg does not know %s, so it cannot hold it: install it first' % ', '.join(unknown),
                         **result)
    if module._diff:
        result['diff'] = dict(before=''.join('%s %s\n' % (n, current[n]) for n in change),
                              after=''.join('%s %s\n' % (n, selection) for n in change),
                              before_header='dpkg selections', after_header='dpkg selections')
    if change and not module.check_mode:
        data = ''.join('%s %s\n' % (n, selection) for n in change)
        rc, out, err = module.run_command([dpkg, '--set-selections'], data=data, environ_update=_ENV)
        if rc != 0:
            module.fail_json(msg='dpkg --set-selections failed (rc %d): %s' % (rc, err.strip()), rc=rc, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
