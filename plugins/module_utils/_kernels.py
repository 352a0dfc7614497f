# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""The kernels of a root tree, their headers packages, and what DKMS says of them.

Every path is read under a root, so that the same code reads the running host
('/'), a fake tree in the tests, or an image mounted for baking. Nothing here
runs a command: the module runs `dkms status` and hands its output to
parse_dkms_status().
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ['resolve', 'installed_kernels', 'kernel_image', 'has_headers', 'version_key', 'headers_package',
           'parse_dkms_status', 'select_targets', 'matching', 'newest', 'headers_metapackages', 'kernel_packages',
           'headers_to_install']

# A symlink chain longer than this is a loop.
_MAX_LINKS = 40


def resolve(root: str, path: str) -> str:
    """The host path of an absolute path of the tree under root, with symbolic links
    followed inside the tree: an absolute link target (/lib/modules/<v>/build ->
    /usr/src/linux-headers-<v>) is read under root, never on the host."""
    root = os.path.abspath(root or '/')
    parts = [p for p in path.split('/') if p]
    current = root
    links = 0
    while parts:
        part = parts.pop(0)
        if part == '.':
            continue
        if part == '..':
            if current != root:
                current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            links += 1
            if links > _MAX_LINKS:
                return candidate
            target = os.readlink(candidate)
            if target.startswith('/'):
                current = root
            parts = [p for p in target.split('/') if p] + parts
            continue
        current = candidate
    return current


def kernel_image(root: str, version: str) -> Optional[str]:
    """The path (as the tree sees it) of the kernel image of version, or None.

    Debian and Ubuntu's linux-image-<v> packages ship /boot/vmlinuz-<v>. Fedora,
    RHEL 9 and Amazon Linux 2023's kernel-core ships /lib/modules/<v>/vmlinuz and
    copies it to /boot at install time (kernel-install, "kernel-core.spec":
    %files core lists /lib/modules/%{KVERREL}/vmlinuz). Either makes the kernel
    bootable; a /lib/modules/<v> directory without one is left over from a removed
    kernel (its DKMS modules, for one).
    """
    for path in ('/boot/vmlinuz-%s' % version, '/lib/modules/%s/vmlinuz' % version):
        if os.path.isfile(resolve(root, path)):
            return path
    return None


def has_headers(root: str, version: str) -> bool:
    """Whether DKMS can build for version: /lib/modules/<v>/build/include exists, the
    test of dkms's own kernel hooks and common.postinst (_check_kernel_dir)."""
    return os.path.isdir(resolve(root, '/lib/modules/%s/build/include' % version))


def installed_kernels(root: str) -> List[Dict]:
    """Every /lib/modules/<v> directory of the tree, oldest first, as
    {version, image, headers}. image is None where no kernel image exists."""
    base = resolve(root, '/lib/modules')
    try:
        names = os.listdir(base)
    except OSError:
        return []
    kernels = []
    for name in names:
        if not os.path.isdir(os.path.join(base, name)):
            continue
        kernels.append({'version': name, 'image': kernel_image(root, name), 'headers': has_headers(root, name)})
    return sorted(kernels, key=lambda k: version_key(k['version']))


_CHUNK = re.compile(r'(\d+|[a-zA-Z]+)')


def version_key(version: str) -> Tuple:
    """A sort key that orders kernel versions as people read them: 6.1.0-28 before
    6.1.0-101, 6.1 before 6.12. Numbers sort before words at the same place."""
    key = []
    for chunk in _CHUNK.findall(version):
        key.append((1, int(chunk), '') if chunk.isdigit() else (0, 0, chunk))
    return tuple(key)


def newest(versions: Iterable[str]) -> Optional[str]:
    ordered = sorted(versions, key=version_key)
    return ordered[-1] if ordered else None


_DEBIAN_LIKE = ('debian', 'ubuntu')
_RHEL_LIKE = ('redhat', 'rocky', 'almalinux', 'centos', 'oraclelinux', 'fedora')


def headers_package(distribution: str, version: str) -> Optional[str]:
    """The package with the headers of kernel version on distribution
    (ansible_facts.distribution), or None for a distribution the collection does not know.

    - Debian and Ubuntu: linux-headers-<version>.
    - RHEL and its rebuilds: kernel-devel-<version>.
    - Amazon Linux 2023: its 6.1 kernel is the package "kernel", each newer series a
      package of its own, "kernel6.12", "kernel6.18", with its headers in
      "kernel6.12-devel". The EKS AMI's install scripts pick the name the same way
      (awslabs/amazon-eks-ami, templates/al2023/provisioners/install-neuron-driver.sh:
      KERNEL_PACKAGE="kernel6.12" when `uname -r` is 6.12.*, else "kernel").
    """
    name = (distribution or '').replace(' ', '').lower()
    if name in _DEBIAN_LIKE:
        return 'linux-headers-%s' % version
    if name == 'amazon':
        series = re.match(r'^(\d+\.\d+)\.', version)
        if series is None or series.group(1) == '6.1':
            return 'kernel-devel-%s' % version
        return 'kernel%s-devel-%s' % (series.group(1), version)
    if name in _RHEL_LIKE:
        return 'kernel-devel-%s' % version
    return None


# Debian and Ubuntu install a new kernel ABI as a new package, pulled in by the
# flavour's metapackage (linux-image-cloud-amd64, linux-image-aws). The headers
# of the new kernel arrive with it only when the matching headers metapackage
# (linux-headers-cloud-amd64, linux-headers-aws) is installed too.
_IMAGE_METAPACKAGE = re.compile(r'^linux-image-(?![0-9])(?!unsigned-)([a-z0-9][a-z0-9.+-]*)$')


def headers_metapackages(distribution: str, packages: Iterable[str]) -> List[str]:
    """The headers metapackages that match the kernel image metapackages among the
    installed packages, on Debian and Ubuntu; [] elsewhere (dnf installs the
    kernel-devel of a new kernel with it, as kernel-devel is an installonly package)."""
    if (distribution or '').lower() not in _DEBIAN_LIKE:
        return []
    found = set()
    for name in packages:
        m = _IMAGE_METAPACKAGE.match(name)
        if m and not m.group(1).endswith('-dbg'):
            found.add('linux-headers-%s' % m.group(1))
    return sorted(found)


# The packages of the kernels, which a kernel hold covers so that no new kernel,
# one the driver module was not built for, arrives with an upgrade.
# - Debian and Ubuntu: the image, headers and modules of each kernel, and the
#   flavour metapackages (linux-image-cloud-amd64, linux-aws's linux-image-aws)
#   that pull a new kernel ABI in. linux-base, linux-libc-dev and the firmware
#   are no kernel.
# - RHEL and Amazon Linux 2023: kernel, kernel-core, kernel-modules*, kernel-devel,
#   kernel-headers, and AL2023's kernel6.12* series packages. The EKS AMI locks the
#   same set (awslabs/amazon-eks-ami,
#   templates/al2023/provisioners/install-neuron-driver.sh: dnf versionlock 'kernel*').
_KERNEL_PACKAGES_DEB = re.compile(r'^linux-(image|headers|modules|modules-extra)-.+$')
_KERNEL_PACKAGES_RPM = re.compile(
    r'^kernel([0-9]+\.[0-9]+)?(-core|-modules|-modules-core|-modules-extra|-devel|-headers)?$')


def kernel_packages(distribution: str, packages: Iterable[str]) -> List[str]:
    """The kernel packages among the installed packages, sorted, that a kernel hold
    covers on distribution; [] for a distribution the collection does not know."""
    name = (distribution or '').replace(' ', '').lower()
    if name in _DEBIAN_LIKE:
        pattern = _KERNEL_PACKAGES_DEB
    elif name == 'amazon' or name in _RHEL_LIKE:
        pattern = _KERNEL_PACKAGES_RPM
    else:
        return []
    return sorted(set(p for p in packages if pattern.match(p)))


def headers_to_install(headers_packages: List[str], metapackages: List[str], mode: str) -> List[str]:
    """The headers a driver role installs: those of every target kernel and, when it
    builds for every kernel that could boot (mode 'all'), the headers metapackage of
    each kernel image metapackage, so that a kernel that arrives later brings its
    headers, and DKMS's kernel hook builds the module for it."""
    return list(headers_packages) + (list(metapackages) if mode == 'all' else [])


# dkms status, one line per module, version, kernel and architecture:
#   DKMS 3: "nvidia-current/580.95.05, 6.1.0-28-amd64, x86_64: installed"
#   DKMS 2: "nvidia, 580.95.05, 5.15.0-1-aws, x86_64: installed"
# A module only added has no kernel: "nvidia-current/580.95.05: added" (DKMS 3),
# "nvidia, 580.95.05: added" (DKMS 2). The state may be followed by a note in
# parentheses: "installed (WARNING! Diff between built and installed module!)",
# "installed (original_module exists)".
_STATUS_LINE = re.compile(
    r'^(?P<name>[^\s,/:]+)(?:/|, )(?P<version>[^\s,:]+)'
    r'(?:, (?P<kernel>[^\s,:]+)(?:, (?P<arch>[^\s,:]+))?)?'
    r': (?P<status>[a-z-]+)(?:\s*\((?P<note>.*)\))?\s*$')


def parse_dkms_status(text: str) -> List[Dict]:
    """Each line of `dkms status` as {name, version, kernel, arch, status, note};
    kernel and arch are None for a module that is only added. Lines of another
    shape (warnings, errors) are skipped."""
    entries = []
    for line in (text or '').splitlines():
        m = _STATUS_LINE.match(line.strip())
        if m:
            entries.append(m.groupdict())
    return entries


def matching(entries: Iterable[Dict], name: str, version: str) -> List[Dict]:
    """The entries whose module name and version match the globs (fnmatch)."""
    return [e for e in entries
            if fnmatch.fnmatchcase(e['name'], name or '*') and fnmatch.fnmatchcase(e['version'], version or '*')]


def select_targets(kernels: List[Dict], running: str, kernel_version: str, image: bool,
                   mode: str) -> Tuple[Optional[str], List[str]]:
    """(the target kernel, the kernels the module must be built for).

    The target kernel is kernel_version; without it, the running kernel, except in
    an image, whose running kernel is the build host's: there the newest kernel
    with an image in the tree, the one its boot loader starts by default. mode
    'all' adds every kernel with an image (one that could boot), 'target' adds
    nothing. The target is None when an image has no kernel and none was named.
    """
    bootable = [k['version'] for k in kernels if k['image']]
    target = kernel_version or (newest(bootable) if image else running) or None
    chosen = set([target] if target else [])
    if mode == 'all':
        chosen.update(bootable)
    return target, sorted(chosen, key=version_key)
