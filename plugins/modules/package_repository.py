#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: package_repository
short_description: Add a signed apt repository in one step, and remove the files that conflict with it
version_added: 0.2.0
description:
  - Installs the repository's signing key after checking its fingerprint, as M(accel.nodes.repo_key) does,
    writes the repository as a deb822 C(.sources) file whose C(Signed-By) names that keyring, and removes
    the files given in O(remove), for example the C(.list) files of an older install method that would
    give apt the same repository twice, with a different key.
  - One module run does what takes M(ansible.builtin.apt) (to install C(python3-debian)),
    M(accel.nodes.repo_key), M(ansible.builtin.deb822_repository) and M(accel.nodes.paths_absent)
    four runs. On a node that already has the repository, the run changes nothing.
  - The C(.sources) file is the one M(ansible.builtin.deb822_repository) writes for the same O(name) and
    fields, byte for byte, at the same path; a node set up by that module is not changed when it moves to
    this one. The file is written in Python, so the node needs no C(python3-debian).
  - apt only. For dnf repositories use M(accel.nodes.repo_key) and M(ansible.builtin.yum_repository).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - The key is downloaded and checked in check mode too; nothing is written or removed.
  diff_mode:
    support: full
    details:
      - The keyring is described by its fingerprints, format, SHA-256 and mode, not its bytes.
options:
  name:
    description:
      - Name of the repository. It is written as C(X-Repolib-Name), and names the file
        C(/etc/apt/sources.list.d/<name>.sources), lower-cased, with spaces and underscores made dashes and
        other characters outside C([a-z0-9-]) dropped, as M(ansible.builtin.deb822_repository) names it.
    type: str
    required: true
  types:
    description: The C(Types) field.
    type: list
    elements: str
    choices: [deb, deb-src]
    default: [deb]
  uris:
    description: The C(URIs) field. Required when O(state=present).
    type: list
    elements: str
  suites:
    description:
      - The C(Suites) field. Required when O(state=present).
      - A suite ending in C(/) is a flat repository, which has no O(components).
    type: list
    elements: str
  components:
    description: The C(Components) field.
    type: list
    elements: str
  architectures:
    description: The C(Architectures) field.
    type: list
    elements: str
  key_url:
    description:
      - URL of the signing key, C(https://), C(http://) or C(file://), ASCII-armored or binary.
      - Mutually exclusive with O(key_src). One of them is required when O(state=present).
    type: str
  key_src:
    description: Path of the signing key on the node.
    type: path
  key_fingerprint:
    description:
      - The accepted primary key fingerprints, as for the C(fingerprint) option of M(accel.nodes.repo_key).
      - Every primary key in the key file must be in this list. Required when O(state=present).
    type: list
    elements: str
  keyring:
    description:
      - Path of the keyring file, for example C(/etc/apt/keyrings/cuda.gpg). The C(.sources) file's
        C(Signed-By) names it.
    type: path
    required: true
  keyring_format:
    description:
      - V(binary) for a keyring named C(*.gpg), V(armored) for one named C(*.asc) (apt reads both).
    type: str
    choices: [binary, armored]
    default: binary
  remove:
    description:
      - Absolute paths of files that must not exist next to this repository, for example legacy
        C(.list) files or keyrings. They are removed with O(state=present) and O(state=absent) alike.
    type: list
    elements: path
    default: []
  state:
    description:
      - V(present) installs the key and the repository and removes O(remove).
      - V(absent) removes the C(.sources) file, the keyring and O(remove).
    type: str
    choices: [present, absent]
    default: present
  timeout:
    description: Timeout in seconds for downloading the key.
    type: int
    default: 10
notes:
  - A change of the key or the repository does not refresh apt's package lists. Refresh them in the task
    that installs from the repository, when this one reports a change (C(update_cache)).
seealso:
  - module: accel.nodes.repo_key
  - name: apt sources.list(5), the deb822 format and the signed-by option
    description: How apt reads C(.sources) files.
    link: https://manpages.debian.org/stable/apt/sources.list.5.en.html
"""

EXAMPLES = r"""
- name: Add the NVIDIA Container Toolkit repository, and remove the nvidia-docker one
  accel.nodes.package_repository:
    name: nvidia-container-toolkit
    uris: [https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)]
    suites: [/]
    key_url: https://nvidia.github.io/libnvidia-container/gpgkey
    key_fingerprint: [C95B321B61E88C1809C4F759DDCAE044F796ECB0]
    keyring: /etc/apt/keyrings/nvidia-container-toolkit.gpg
    remove:
      - /etc/apt/sources.list.d/nvidia-docker.list

- name: Remove the repository and its key
  accel.nodes.package_repository:
    name: nvidia-container-toolkit
    keyring: /etc/apt/keyrings/nvidia-container-toolkit.gpg
    state: absent
"""

RETURN = r"""
dest:
  description: Path of the C(.sources) file.
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/nvidia-container-toolkit.sources
keyring:
  description: Path of the keyring.
  returned: always
  type: str
  sample: /etc/apt/keyrings/nvidia-container-toolkit.gpg
repo:
  description: The text of the C(.sources) file.
  returned: when O(state=present)
  type: str
  sample: "X-Repolib-Name: nvidia-container-toolkit\nSigned-By: /etc/apt/keyrings/nvidia-container-toolkit.gpg\n"
fingerprints:
  description: Fingerprints of the primary keys in the key file, upper-case hex without spaces.
  returned: when O(state=present)
  type: list
  elements: str
  sample: [C95B321B61E88C1809C4F759DDCAE044F796ECB0]
removed:
  description: The paths that are removed (in check mode, would be removed), the keyring and the file first.
  returned: always
  type: list
  elements: str
  sample: [/etc/apt/sources.list.d/nvidia-docker.list]
key_changed:
  description: Whether the keyring is (or in check mode would be) written or removed.
  returned: always
  type: bool
source_changed:
  description: Whether the C(.sources) file is (or in check mode would be) written or removed.
  returned: always
  type: bool
"""

import os
from typing import Any, Dict, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._apt_sources import SOURCES_DIR, slug, sources_text
from ansible_collections.accel.nodes.plugins.module_utils._files import (
    existing_paths,
    file_diff,
    read_text,
    remove_path,
    write_atomic,
)
from ansible_collections.accel.nodes.plugins.module_utils._repo_key import ensure_absent, ensure_present


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', required=True),
            types=dict(type='list', elements='str', choices=['deb', 'deb-src'], default=['deb']),
            uris=dict(type='list', elements='str'),
            suites=dict(type='list', elements='str'),
            components=dict(type='list', elements='str'),
            architectures=dict(type='list', elements='str'),
            key_url=dict(type='str', no_log=False),
            key_src=dict(type='path'),
            key_fingerprint=dict(type='list', elements='str', no_log=False),
            keyring=dict(type='path', required=True, no_log=False),
            keyring_format=dict(type='str', choices=['binary', 'armored'], default='binary'),
            remove=dict(type='list', elements='path', default=[]),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            timeout=dict(type='int', default=10),
        ),
        mutually_exclusive=[('key_url', 'key_src')],
        required_if=[
            ('state', 'present', ('key_url', 'key_src'), True),
            ('state', 'present', ('key_fingerprint', 'uris', 'suites')),
        ],
        supports_check_mode=True,
    )
    params = module.params
    keyring = params['keyring']
    dest = os.path.join(SOURCES_DIR, '%s.sources' % slug(params['name']))
    relative = [p for p in params['remove'] + [keyring] if not os.path.isabs(p)]
    if relative:
        module.fail_json(msg='keyring and remove must be absolute paths; got %s' % ', '.join(relative))
    if keyring in params['remove'] or dest in params['remove']:
        module.fail_json(msg='remove names the keyring or the .sources file this module writes: %s'
                         % ', '.join(sorted({keyring, dest} & set(params['remove']))))

    result = dict(changed=False, dest=dest, keyring=keyring, removed=[])  # type: Dict[str, Any]
    key_diff = {}  # type: Dict[str, Any]
    before = read_text(dest)
    if params['state'] == 'present':
        result['key_changed'] = ensure_present(
            module, keyring, result, key_diff, url=params['key_url'], src=params['key_src'],
            fingerprint=params['key_fingerprint'], fmt=params['keyring_format'], mode='0644',
            timeout=params['timeout'])
        after = sources_text(params['name'], keyring, params['types'], params['uris'], params['suites'],
                             params['components'], params['architectures'])  # type: Optional[str]
        result['repo'] = after
    else:
        result['key_changed'] = ensure_absent(module, keyring, key_diff)
        after = None
        if result['key_changed']:
            result['removed'].append(keyring)
    result['source_changed'] = before != after
    if after is None and before is not None:
        result['removed'].append(dest)
    conflicts = existing_paths(params['remove'])
    result['removed'] += conflicts

    if not module.check_mode:
        if result['source_changed']:
            if after is None:
                os.unlink(dest)
            else:
                write_atomic(module, dest, after)
        if after is not None:
            # deb822_repository's mode, also for a file that exists with another.
            result['source_changed'] = module.set_mode_if_different(dest, '0644', result['source_changed'])
        for path in conflicts:
            try:
                remove_path(path)
            except OSError as exc:
                module.fail_json(msg='could not remove %s: %s' % (path, exc), **result)
    result['changed'] = bool(result['key_changed'] or result['source_changed'] or result['removed'])
    if module._diff:
        result['diff'] = [
            dict(before=key_diff.get('before'), after=key_diff.get('after'),
                 before_header='%s (keyring)' % keyring, after_header='%s (keyring)' % keyring),
            file_diff(dest, before, after),
            dict(before=''.join('%s\n' % p for p in conflicts), after='',
                 before_header='conflicting paths that exist', after_header='conflicting paths that exist'),
        ]
    module.exit_json(**result)


if __name__ == '__main__':
    main()
