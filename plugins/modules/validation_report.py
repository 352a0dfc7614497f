#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: validation_report
short_description: Write an accelerator validation report and a node-feature-discovery feature file
version_added: 0.1.0
description:
  - Writes, in one module run, the JSON report of the C(accel.nodes.accelerator_validation) role (O(path))
    and, when O(nfd_path) is given, a node-feature-discovery (NFD) local feature file.
  - B(The report records a run; it is not configuration.) It is rewritten on every run, since its timestamp
    changes, and writing it is never reported as a change, so that a validation run stays idempotent.
    It gets no diff.
  - B(The feature file is configuration.) NFD turns its lines into node labels that Kubernetes schedules on.
    It is written only when its content differs, and the task reports V(changed) when the file was created,
    or its content or mode changed.
  - Give O(path), O(nfd_path) or both.
  - Missing parent directories are created with mode C(0755). Both files get mode C(0644); an existing
    file keeps its owner. Writes are atomic (temporary file, then rename).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Writes nothing; V(changed) says whether the feature file would change.
  diff_mode:
    support: full
    details:
      - The diff of the feature file. The report gets none.
options:
  path:
    description:
      - The report file, for example C(/var/lib/accel-nodes/validation.json).
      - Required together with O(report). Leave both out to write the feature file only.
    type: path
  report:
    description:
      - The report. It is written as JSON with sorted keys, an indent of 2 and non-ASCII characters escaped,
        followed by a newline; byte for byte what the C(ansible.builtin.to_nice_json) filter gives with C(indent=2).
      - Required together with O(path).
    type: dict
  nfd_path:
    description:
      - The NFD local feature file, for example
        C(/etc/kubernetes/node-feature-discovery/features.d/accel-nodes).
      - Required together with O(nfd_features).
    type: path
  nfd_features:
    description:
      - The features, each written as a C(name=value) line, in the order given, after a comment line saying
        which role wrote the file.
      - Values are strings; numbers are written as they are, and booleans as C(true) or C(false).
        A name must not contain C(=), and neither names nor values may contain a line break.
      - Required together with O(nfd_path).
    type: dict
seealso:
  - name: node-feature-discovery local feature files
    description: The format of the feature file and where NFD reads it.
    link: https://kubernetes-sigs.github.io/node-feature-discovery/stable/usage/customization-guide.html#feature-files
"""

EXAMPLES = r"""
- name: Write the report and the feature file
  accel.nodes.validation_report:
    path: /var/lib/accel-nodes/validation.json
    report: "{{ accelerator_validation }}"
    nfd_path: /etc/kubernetes/node-feature-discovery/features.d/accel-nodes
    nfd_features:
      accel-nodes.io/validated: "true"
      accel-nodes.io/vendors: nvidia
      accel-nodes.io/gpu-count: 8
      accel-nodes.io/neuron-device-count: 0

- name: Write the report only
  accel.nodes.validation_report:
    path: /var/lib/accel-nodes/validation.json
    report: "{{ accelerator_validation }}"
"""

RETURN = r"""
path:
  description: The report written (or that would be, in check mode); null when O(path) was not given.
  returned: always
  type: str
  sample: /var/lib/accel-nodes/validation.json
nfd_path:
  description: The feature file; null when O(nfd_path) was not given.
  returned: always
  type: str
  sample: /etc/kubernetes/node-feature-discovery/features.d/accel-nodes
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files

NFD_HEADER = '# Written by accel.nodes.accelerator_validation; read by node-feature-discovery.\n'


def report_text(report):
    return json.dumps(report, indent=2, sort_keys=True, separators=(',', ': ')) + '\n'


def nfd_text(module, features):
    lines = [NFD_HEADER]
    for name, value in features.items():
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        elif not isinstance(value, (str, int, float)):
            module.fail_json(msg='nfd_features: %s must be a string, number or boolean, not %s.'
                                 % (name, type(value).__name__))
        value = str(value)
        if '=' in name or set('\r\n') & set(name + value):
            module.fail_json(msg='nfd_features: %r=%r cannot be a feature line: the name must not contain "=", '
                                 'and neither may contain a line break.' % (name, value))
        lines.append('%s=%s\n' % (name, value))
    return ''.join(lines)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            report=dict(type='dict'),
            nfd_path=dict(type='path'),
            nfd_features=dict(type='dict'),
        ),
        required_together=[('path', 'report'), ('nfd_path', 'nfd_features')],
        required_one_of=[('path', 'nfd_path')],
        supports_check_mode=True,
    )
    p = module.params
    path, nfd_path = p['path'], p['nfd_path']
    result = dict(changed=False, path=path, nfd_path=nfd_path)
    nfd_after = nfd_text(module, p['nfd_features']) if nfd_path else None
    if path and not module.check_mode:
        try:
            _files.write_atomic(module, path, report_text(p['report']))
        except OSError as exc:
            module.fail_json(msg='Cannot write the report %s: %s' % (path, exc), **result)
        # A changed mode of the report is no more a change to the node than its new content.
        module.set_mode_if_different(os.path.realpath(path), _files.NEW_FILE_MODE, False)
    if nfd_path:
        try:
            update = _files.update_file(module, nfd_path, _files.read_text(nfd_path), nfd_after)
        except (ValueError, OSError) as exc:
            module.fail_json(msg='Cannot write the feature file %s: %s' % (nfd_path, exc), **result)
        # On a symlink, set_mode_if_different would compare the link's own mode.
        result['changed'] = module.set_mode_if_different(os.path.realpath(nfd_path), _files.NEW_FILE_MODE, update['changed'])
        if module._diff:
            result['diff'] = update['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
