#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: repo_key
short_description: Install a package repository signing key after checking its fingerprint
version_added: 0.1.0
description:
  - Fetches an OpenPGP public key from O(url) or reads it from O(src) on the target,
    checks that the fingerprint of every primary key in it is in O(fingerprint),
    and writes it to O(dest) for use as an apt C(signed-by) keyring or a dnf C(gpgkey).
  - If a fingerprint does not match, the module fails and writes nothing.
  - The key is read in pure Python, so the target needs no C(gpg) binary. In check mode the
    key is still fetched and checked, so that check mode reports a wrong key.
  - The file is written only when its content differs from O(dest). The write is atomic.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - The key is downloaded and checked in check mode too; nothing is written.
  diff_mode:
    support: full
    details:
      - The diff shows fingerprints, format, SHA-256 and mode of the keyring, not its bytes.
options:
  url:
    description:
      - URL of the key, C(http://), C(https://) or C(file://).
      - The key may be ASCII-armored or binary.
      - Certificates are always validated. Plain C(http://) is safe to use for mirrors because
        the fingerprint check does not depend on the transport.
      - Mutually exclusive with O(src). One of them is required when O(state=present).
    type: str
  src:
    description:
      - Path of the key on the target, ASCII-armored or binary.
      - Mutually exclusive with O(url).
    type: path
  fingerprint:
    description:
      - The accepted primary key fingerprints. Each is 40 hex digits (v4 key) or 64 (v5 or v6 key).
        Spaces are ignored and case does not matter.
      - Every primary key in the key file must be in this list. A file with an extra key fails.
      - The list may have more entries than the file has keys, for example the old and the new key
        while a vendor rotates its key.
      - Required when O(state=present).
    type: list
    elements: str
  dest:
    description:
      - Path of the keyring file to write or remove, for example C(/etc/apt/keyrings/cuda.gpg).
      - Missing parent directories are created with mode C(0755).
    type: path
    required: true
  format:
    description:
      - How to write O(dest), whatever the format of the source.
      - V(binary) is what apt expects for a C(signed-by) file named C(*.gpg).
      - V(armored) is for a C(signed-by) file named C(*.asc), and for the C(gpgkey) of a dnf or yum repository.
    type: str
    choices: [binary, armored]
    default: binary
  mode:
    description:
      - Permissions of O(dest), as for M(ansible.builtin.file).
      - apt reads keyrings as the unprivileged C(_apt) user, so they must be world-readable.
    type: raw
    default: '0644'
  state:
    description:
      - V(present) installs the key. V(absent) removes O(dest).
    type: str
    choices: [present, absent]
    default: present
  timeout:
    description:
      - Timeout in seconds for the download.
    type: int
    default: 10
notes:
  - Only primary key fingerprints are checked. apt (through gpgv) and rpm accept a subkey only if
    its binding signature by the primary key is valid.
seealso:
  - name: apt sources.list(5), the signed-by option
    description: How apt uses a keyring per repository.
    link: https://manpages.debian.org/stable/apt/sources.list.5.en.html
"""

EXAMPLES = r"""
- name: Install the NVIDIA CUDA repository key
  accel.nodes.repo_key:
    url: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub
    fingerprint:
      - EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC
    dest: /etc/apt/keyrings/cuda.gpg

- name: Install the Docker CE repository key for dnf
  accel.nodes.repo_key:
    url: https://download.docker.com/linux/rhel/gpg
    fingerprint: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
    dest: /etc/pki/rpm-gpg/docker-ce.asc
    format: armored

- name: Install a key that was copied to the node beforehand
  accel.nodes.repo_key:
    src: /tmp/libnvidia-container.asc
    fingerprint: [C95B321B61E88C1809C4F759DDCAE044F796ECB0]
    dest: /etc/apt/keyrings/libnvidia-container.gpg

- name: Remove a key that is no longer used
  accel.nodes.repo_key:
    dest: /etc/apt/keyrings/cuda-old.gpg
    state: absent
"""

RETURN = r"""
dest:
  description: Path of the keyring file.
  returned: always
  type: str
  sample: /etc/apt/keyrings/cuda.gpg
fingerprints:
  description:
    - Fingerprints of the primary keys in the key file, upper-case hex without spaces, in file order.
    - On a fingerprint mismatch the module fails and returns these too, with RV(expected).
  returned: when O(state=present)
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
expected:
  description: The accepted fingerprints, normalized. Returned only when the check fails.
  returned: failure
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
diff:
  description:
    - What changed in O(dest), described by its fingerprints, format, SHA-256 and mode, not its bytes.
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: O(dest) before the task; its C(state) is V(absent) if it did not exist.
      type: dict
    after:
      description: O(dest) after the task, or as it would be after the task in check mode.
      type: dict
  sample:
    before:
      state: absent
    after:
      state: present
      format: binary
      fingerprints: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
      sha256: a09e26b72228e330d55bf134b8eaca57365ef44bf70b8e27c5f55ea87a8b05e2
      mode: '0644'
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._repo_key import ensure_absent, ensure_present


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str'),
            src=dict(type='path'),
            fingerprint=dict(type='list', elements='str'),
            dest=dict(type='path', required=True),
            format=dict(type='str', choices=['binary', 'armored'], default='binary'),
            mode=dict(type='raw', default='0644'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            timeout=dict(type='int', default=10),
        ),
        mutually_exclusive=[('url', 'src')],
        required_if=[
            ('state', 'present', ('url', 'src'), True),
            ('state', 'present', ('fingerprint',)),
        ],
        supports_check_mode=True,
    )
    dest = module.params['dest']
    result = dict(changed=False, dest=dest)
    diff = {}
    if module.params['state'] == 'present':
        params = module.params
        result['changed'] = ensure_present(module, dest, result, diff, url=params['url'], src=params['src'],
                                           fingerprint=params['fingerprint'], fmt=params['format'],
                                           mode=params['mode'], timeout=params['timeout'])
    else:
        result['changed'] = ensure_absent(module, dest, diff)
    if module._diff:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
