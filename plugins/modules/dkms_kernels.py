#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: dkms_kernels
short_description: List the kernels a driver must be built for, and make DKMS build it for each
version_added: 0.2.0
description:
  - Lists the kernels installed under O(root), decides which of them a DKMS driver must be built for, and names
    the headers package of each.
  - A kernel is installed when C(/lib/modules/<version>) exists, and could boot when its image exists too, either
    C(/boot/vmlinuz-<version>), as Debian's and Ubuntu's C(linux-image) packages ship it, or
    C(/lib/modules/<version>/vmlinuz), as the C(kernel-core) package of RHEL 9, Fedora and Amazon Linux 2023
    ships it. A C(/lib/modules) directory without an image is what a removed kernel leaves behind.
  - Its headers are present when C(/lib/modules/<version>/build/include) exists, the test of DKMS's own kernel
    hooks. Links are followed inside O(root).
  - Without O(module) the module only reads. With O(module), every target kernel must have that DKMS module
    installed. C(dkms status) runs once; a kernel without the module gets
    C(dkms install -m <name> -v <version> -k <kernel>), and C(dkms status) runs once more after builds. A target
    kernel still without the module fails the task, with what DKMS said for each.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Builds nothing. The kernels that would be built are reported in RV(built), and the task is changed.
      - Never fails over a missing module, so that a check run on a fresh host, where the driver and the headers
        are not installed yet, goes through.
  diff_mode:
    support: none
options:
  root:
    description:
      - The tree whose kernels are read (C(<root>/lib/modules/*), C(<root>/boot)).
      - With O(module), only C(/), as DKMS runs on the managed host. A chroot connection runs the module inside the
        image, where the image is C(/).
    type: path
    default: /
  kernels:
    description:
      - V(all) targets every installed kernel that could boot, and the target kernel.
      - V(target) targets the target kernel only.
    type: str
    choices: [all, target]
    default: all
  kernel_version:
    description:
      - The target kernel, for example C(6.1.0-28-cloud-amd64).
      - Empty means the running kernel; with O(image), the newest kernel of the image that could boot.
    type: str
    default: ''
  image:
    description:
      - O(root) is an image being baked, for example through a chroot connection. The running kernel belongs to
        the build host and is never a target.
      - With no kernel in the image and no O(kernel_version), the task fails.
    type: bool
    default: false
  distribution:
    description:
      - The distribution (C(ansible_facts.distribution)), which names the headers packages,
        C(linux-headers-<version>) on Debian and Ubuntu; C(kernel-devel-<version>) on RHEL and its rebuilds and on
        Amazon Linux 2023's 6.1 kernel; C(kernel<series>-devel-<version>) on Amazon Linux 2023's newer kernels,
        for example C(kernel6.12-devel-6.12.40-63.114.amzn2023.x86_64).
      - Empty or unknown leaves RV(kernels[].headers_package) null.
    type: str
    default: ''
  headers_package:
    description:
      - The headers package of the target kernel, instead of the one O(distribution) names. The other kernels
        keep theirs.
    type: str
    default: ''
  kernel_packages:
    description:
      - Also list the installed kernel packages that a kernel hold covers, in RV(kernel_packages), read from the
        dpkg status file under O(root) on Debian and Ubuntu, from C(rpm -qa) on RHEL, its rebuilds and Amazon Linux.
    type: bool
    default: false
    version_added: 0.3.0
  module:
    description:
      - The DKMS module name, a shell glob. C(nvidia*) matches Debian's C(nvidia-current) and the C(nvidia) of
        Ubuntu and the RPMs. When given, every target kernel must have the module installed.
    type: str
  module_version:
    description:
      - The module version, a shell glob, for example C(580.*) or C(2.27.4.0). Where several registered versions
        match, the newest is built.
    type: str
    default: '*'
notes:
  - "C(dkms status) runs with C(LANG=C). Its DKMS 3 format (C(name/version, kernel, arch: state)) and its DKMS 2
    format (C(name, version, kernel, arch: state)) are both read; a note after the state, such as
    C((WARNING! Diff between built and installed module!)), is kept in RV(kernels[].module.note)."
  - A module that is only C(built) for a kernel counts as missing; C(dkms install) then installs it.
seealso:
  - name: DKMS
    description: Dynamic Kernel Module Support, its commands and its states.
    link: https://github.com/dkms-project/dkms
"""

EXAMPLES = r"""
- name: List the kernels the driver must be built for
  accel.nodes.dkms_kernels:
    distribution: "{{ ansible_facts.distribution }}"
  register: kernels

- name: Install the headers of each of them, and the headers metapackages that bring a new kernel's
  ansible.builtin.apt:
    name: "{{ kernels.headers_to_install }}"

- name: List the kernel packages too, to hold them
  accel.nodes.dkms_kernels:
    distribution: "{{ ansible_facts.distribution }}"
    kernel_packages: true
  register: kernels

- name: Hold them
  accel.nodes.dpkg_holds:
    names: "{{ kernels.kernel_packages }}"

- name: Build the NVIDIA module of branch 580 for every kernel that could boot
  accel.nodes.dkms_kernels:
    distribution: "{{ ansible_facts.distribution }}"
    module: nvidia*
    module_version: 580.*

- name: In an image baked through a chroot, only the image's kernels count
  accel.nodes.dkms_kernels:
    image: true
    distribution: Debian
    module: aws-neuronx
    module_version: 2.27.4.0
"""

RETURN = r"""
kernels:
  description:
    - Every installed kernel (a C(/lib/modules) directory), and the target kernel where it is not installed, oldest
      first.
  returned: always
  type: list
  elements: dict
  contains:
    version:
      description: The kernel version (C(uname -r)).
      type: str
    running:
      description: Whether it is the running kernel.
      type: bool
    image:
      description: The kernel image, as a path inside O(root), or null when none exists.
      type: str
    headers:
      description: Whether its headers are installed.
      type: bool
    headers_package:
      description: The package that holds its headers, or null for an unknown distribution.
      type: str
    target:
      description: Whether the module must be built for it.
      type: bool
    module:
      description:
        - With O(module), the module DKMS has for it, the installed one first; null when it has none.
      type: dict
      contains:
        name:
          description: The DKMS module name.
          type: str
        version:
          description: The module version.
          type: str
        status:
          description: What C(dkms status) says, V(installed) or V(built).
          type: str
        note:
          description: DKMS's note after the state, for example C(WARNING! Diff between built and installed module!).
          type: str
  sample:
    - {version: 6.1.0-27-cloud-amd64, running: false, image: null, headers: false,
       headers_package: linux-headers-6.1.0-27-cloud-amd64, target: false, module: null}
    - {version: 6.1.0-28-cloud-amd64, running: true, image: /boot/vmlinuz-6.1.0-28-cloud-amd64, headers: true,
       headers_package: linux-headers-6.1.0-28-cloud-amd64, target: true,
       module: {name: nvidia-current, version: 580.95.05, status: installed, note: null}}
target:
  description: The target kernel, or null in an image without a kernel (the task then fails).
  returned: always
  type: str
  sample: 6.1.0-28-cloud-amd64
targets:
  description: The kernels the module must be built for, oldest first.
  returned: always
  type: list
  elements: str
  sample: [6.1.0-28-cloud-amd64, 6.1.0-29-cloud-amd64]
headers_packages:
  description: The headers packages of the targets.
  returned: always
  type: list
  elements: str
  sample: [linux-headers-6.1.0-28-cloud-amd64, linux-headers-6.1.0-29-cloud-amd64]
headers_metapackages:
  description:
    - On Debian and Ubuntu, the headers metapackage of each installed kernel image metapackage
      (C(linux-image-cloud-amd64) gives C(linux-headers-cloud-amd64)), read from the dpkg status file under
      O(root). With it installed, a new kernel arrives with its headers, and DKMS's kernel hook builds the
      module for it. Empty elsewhere.
  returned: always
  type: list
  elements: str
  sample: [linux-headers-cloud-amd64]
headers_to_install:
  description:
    - The headers packages a driver role installs, RV(headers_packages), and with O(kernels=all)
      RV(headers_metapackages) too.
  returned: always
  type: list
  elements: str
  sample: [linux-headers-6.1.0-28-cloud-amd64, linux-headers-cloud-amd64]
  version_added: 0.3.0
kernel_packages:
  description:
    - With O(kernel_packages), the installed packages of the kernels, sorted, that a kernel hold covers, so that no
      kernel the module was not built for arrives with an upgrade. On Debian and Ubuntu C(linux-image-*),
      C(linux-headers-*), C(linux-modules-*) and C(linux-modules-extra-*), the flavour metapackages included; on
      RHEL and Amazon Linux C(kernel), C(kernel-core), C(kernel-modules*), C(kernel-devel), C(kernel-headers) and
      Amazon Linux's C(kernel6.12*) series packages. Empty without O(kernel_packages) or on another distribution.
  returned: always
  type: list
  elements: str
  sample: [linux-headers-6.1.0-28-cloud-amd64, linux-image-6.1.0-28-cloud-amd64, linux-image-cloud-amd64]
  version_added: 0.3.0
built:
  description: The kernels the module was built for by this task (in check mode, would be built for).
  returned: always
  type: list
  elements: str
  sample: [6.1.0-29-cloud-amd64]
missing:
  description: The targets without the module installed at the end (in check mode, before any build).
  returned: always
  type: list
  elements: str
  sample: []
summary:
  description: One line per kernel in RV(kernels), for people; its wording may change.
  returned: always
  type: list
  elements: str
  sample: ["6.1.0-27-cloud-amd64: no module, no kernel image (not a target)",
           "6.1.0-28-cloud-amd64 (running): nvidia-current 580.95.05 installed",
           "6.1.0-29-cloud-amd64: nvidia-current 580.95.05 installed (built now)"]
module_versions:
  description: The versions of the module installed for the targets, oldest first.
  returned: always
  type: list
  elements: str
  sample: [580.95.05]
"""

import os
from typing import Dict, List, Optional, Tuple

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg, _kernels

_ENV = {'LANG': 'C', 'LC_ALL': 'C'}
_RPM_DISTRIBUTIONS = ('amazon', 'redhat', 'rocky', 'almalinux', 'centos', 'oraclelinux', 'fedora')
_OUTPUT_TAIL = 600


def _builds_here(root: str) -> bool:
    """Whether dkms, which works on the host it runs on, builds into root."""
    return os.path.abspath(root) == '/'


def _installed_packages(module: AnsibleModule, root: str, distribution: str, rpm: bool) -> List[str]:
    """The names of the packages installed under root: from the dpkg status file, and
    on an RPM distribution, when rpm is true, from `rpm -qa`."""
    name = (distribution or '').replace(' ', '').lower()
    if name in _RPM_DISTRIBUTIONS:
        if not rpm:
            return []
        argv = [module.get_bin_path('rpm', required=True), '-qa', '--queryformat', '%{NAME}\\n']
        if not _builds_here(root):
            argv[1:1] = ['--root', root]
        rc, out, err = module.run_command(argv, environ_update=_ENV)
        if rc != 0:
            module.fail_json(msg='rpm -qa failed (rc %d): %s' % (rc, _tail(err or out)), rc=rc)
        return sorted(set(out.split()))
    return _dpkg.installed(_dpkg.parse_status(_dpkg.read_status(_kernels.resolve(root, _dpkg.STATUS_FILE))))


def _best(entries: List[Dict], kernel: str) -> Optional[Dict]:
    """What DKMS has for kernel: an installed module first, then the newest otherwise."""
    mine = [e for e in entries if e['kernel'] == kernel]
    if not mine:
        return None
    mine.sort(key=lambda e: (e['status'] == 'installed', _kernels.version_key(e['version'])))
    e = mine[-1]
    return {'name': e['name'], 'version': e['version'], 'status': e['status'], 'note': e['note']}


def _tail(text: str) -> str:
    text = ' '.join((text or '').split())
    return text if len(text) <= _OUTPUT_TAIL else '...' + text[-_OUTPUT_TAIL:]


class _Dkms(object):
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.path = module.get_bin_path('dkms')

    def status(self) -> List[Dict]:
        if not self.path:
            return []
        rc, out, err = self.module.run_command([self.path, 'status'], environ_update=_ENV)
        if rc != 0:
            self.module.fail_json(msg='dkms status failed (rc %d): %s' % (rc, _tail(err or out)), rc=rc,
                                  stdout=out, stderr=err)
        return _kernels.parse_dkms_status(out)

    def install(self, name: str, version: str, kernel: str) -> Tuple[int, str]:
        argv = [self.path, 'install', '-m', name, '-v', version, '-k', kernel]
        rc, out, err = self.module.run_command(argv, environ_update=_ENV)
        return rc, (out or '') + '\n' + (err or '')


def summary(kernels: List[Dict], built: List[str], check_mode: bool, with_module: bool) -> List[str]:
    """One line per kernel: what DKMS has for it, and why it is or is not a target."""
    lines = []
    for k in kernels:
        head = k['version'] + (' (running)' if k['running'] else '')
        if not with_module:
            what = 'headers %s' % ('installed' if k['headers'] else 'missing')
        elif k['module']:
            what = '%s %s %s' % (k['module']['name'], k['module']['version'], k['module']['status'])
        else:
            what = 'no module'
        if k['version'] in built:
            what += ' (would be built)' if check_mode else ' (built now)'
        if not k['target']:
            what += ', no kernel image (not a target)' if not k['image'] else ' (not a target)'
        lines.append('%s: %s' % (head, what))
    return lines


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type='path', default='/'),
            kernels=dict(type='str', choices=['all', 'target'], default='all'),
            kernel_version=dict(type='str', default=''),
            image=dict(type='bool', default=False),
            distribution=dict(type='str', default=''),
            headers_package=dict(type='str', default=''),
            kernel_packages=dict(type='bool', default=False),
            module=dict(type='str'),
            module_version=dict(type='str', default='*'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    root = p['root'] or '/'
    wanted = p['module']
    if wanted and not _builds_here(root):
        module.fail_json(msg='module=%s builds with the dkms of the managed host, so root must be /, not %s. '
                             'To bake an image, run the task through a chroot connection.' % (wanted, root))

    running = os.uname()[2]
    installed = _kernels.installed_kernels(root)
    target, targets = _kernels.select_targets(installed, running, p['kernel_version'], p['image'], p['kernels'])
    if target is None:
        module.fail_json(msg='No kernel is installed in the image under %s (no /boot/vmlinuz-<version> or '
                             '/lib/modules/<version>/vmlinuz), so there is no kernel to build the driver for; the '
                             'build host runs %s, which is not the image\'s. Install a kernel package in the image '
                             'first, or set the role\'s *_kernel_version (kernel_version) to the kernel the image '
                             'will boot.' % (root, running), kernels=installed, target=None, targets=[],
                         headers_packages=[], headers_metapackages=[], headers_to_install=[], kernel_packages=[],
                         built=[], missing=[], module_versions=[], summary=[])

    known = set(k['version'] for k in installed)
    kernels = installed + [{'version': v, 'image': None, 'headers': _kernels.has_headers(root, v)}
                           for v in targets if v not in known]
    kernels.sort(key=lambda k: _kernels.version_key(k['version']))
    for k in kernels:
        k['running'] = k['version'] == running and not p['image']
        k['target'] = k['version'] in targets
        k['headers_package'] = (p['headers_package'] if p['headers_package'] and k['version'] == target
                                else _kernels.headers_package(p['distribution'], k['version']))
        k['module'] = None
    by_version = dict((k['version'], k) for k in kernels)

    packages = _installed_packages(module, root, p['distribution'], p['kernel_packages'])
    headers = [by_version[v]['headers_package'] for v in targets if by_version[v]['headers_package']]
    metapackages = _kernels.headers_metapackages(p['distribution'], packages)
    result = dict(
        changed=False,
        target=target,
        targets=targets,
        headers_packages=headers,
        headers_metapackages=metapackages,
        headers_to_install=_kernels.headers_to_install(headers, metapackages, p['kernels']),
        kernel_packages=_kernels.kernel_packages(p['distribution'], packages) if p['kernel_packages'] else [],
        built=[],
        missing=[],
        module_versions=[],
    )
    if not wanted:
        module.exit_json(kernels=kernels, summary=summary(kernels, [], module.check_mode, False), **result)

    dkms = _Dkms(module)
    entries = _kernels.matching(dkms.status(), wanted, p['module_version'])

    def refresh() -> List[str]:
        for k in kernels:
            k['module'] = _best(entries, k['version'])
        return [v for v in targets if not (by_version[v]['module'] and by_version[v]['module']['status'] == 'installed')]

    missing = refresh()
    registered = sorted(set((e['name'], e['version']) for e in entries),
                        key=lambda nv: _kernels.version_key(nv[1]))
    said = {}  # type: Dict[str, str]
    for version in missing:
        k = by_version[version]
        if module.check_mode:
            result['built'].append(version)
            continue
        if not dkms.path:
            said[version] = 'dkms is not installed'
            continue
        if not registered:
            said[version] = 'no DKMS module matching %s %s is registered (its package runs dkms add)' % (
                wanted, p['module_version'])
            continue
        if not k['headers']:
            said[version] = 'not built: its headers are not installed'
            continue
        name, mversion = (k['module']['name'], k['module']['version']) if k['module'] else registered[-1]
        rc, output = dkms.install(name, mversion, version)
        result['built'].append(version)
        said[version] = 'dkms install -m %s -v %s -k %s (rc %d): %s' % (name, mversion, version, rc, _tail(output))
        result['changed'] = True

    if result['changed']:
        entries = _kernels.matching(dkms.status(), wanted, p['module_version'])
        missing = refresh()
    if module.check_mode:
        result['changed'] = bool(result['built'])
    result['missing'] = missing
    result['module_versions'] = sorted(
        set(by_version[v]['module']['version'] for v in targets if by_version[v]['module'] and v not in missing),
        key=_kernels.version_key)
    result['built'] = [v for v in result['built'] if module.check_mode or v not in missing]

    if missing and not module.check_mode:
        lines = []
        for version in missing:
            k = by_version[version]
            name, mversion = (k['module']['name'], k['module']['version']) if k['module'] else (
                registered[-1] if registered else (wanted, p['module_version']))
            lines.append('kernel %s: headers %s; %s; build log /var/lib/dkms/%s/%s/build/make.log' % (
                version,
                'installed' if k['headers'] else 'missing (install %s)' % (k['headers_package'] or 'them'),
                said.get(version, 'DKMS has it %s' % (k['module']['status'] if k['module'] else 'not at all')),
                name, mversion))
        module.fail_json(
            msg='DKMS has no %s %s module installed for %d of the %d kernel(s) the node could boot into, so it would '
                'start without a driver there. %s. Usual causes: missing headers, headers that do not match the '
                'kernel, a compiler other than the kernel\'s, or a kernel newer than the driver supports. To build '
                'for the target kernel only, set the role\'s *_kernels to target.' % (
                    wanted, p['module_version'], len(missing), len(targets), ' | '.join(lines)),
            kernels=kernels, summary=summary(kernels, result['built'], module.check_mode, True), **result)
    module.exit_json(kernels=kernels, summary=summary(kernels, result['built'], module.check_mode, True), **result)


if __name__ == '__main__':
    main()
