# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The decisions of the Neuron roles (neuron_driver, neuron_container_runtime,
oci_add_hooks), as plain functions of the facts, the role settings and what
accel.nodes.node_probe read. The filters of plugins/filter/neuron.py call them.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

The neuron_driver role's constants (the Inf1 PCI device IDs, the last driver
line for Inf1, its packages and the files it writes) live here beside their
sources; the container runtime roles' hook package names stay in their
vars/main.yml and come in as arguments.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional

from ansible.module_utils.parsing.convert_bool import boolean

Packages = Mapping[str, Mapping[str, Any]]


def _bool(value: Any) -> bool:
    return boolean(value if value is not None else False, strict=False)


def _str(value: Any) -> str:
    return '' if value is None else str(value)


def instance_type(accelerators: Optional[Mapping], override: Any = '') -> str:
    """The instance type the node will run as: the role's override, else what the facts report."""
    if _str(override):
        return _str(override)
    ec2 = (accelerators or {}).get('ec2') or {}
    return _str(ec2.get('instance_type'))


def is_inf1(accelerators: Optional[Mapping], type_: str, inf1_pci_device_ids: Iterable[str]) -> bool:
    """Inf1 by an Inferentia PCI device ID on the bus, or by an inf1.* instance type."""
    ids = set(_str(i).lower() for i in inf1_pci_device_ids)
    devices = ((accelerators or {}).get('neuron') or {}).get('devices') or []
    on_bus = any(_str(d.get('pci_device_id')).lower() in ids for d in devices if isinstance(d, Mapping))
    return on_bus or type_.startswith('inf1.')


def version_spec(name: str, version: str, separator: str, glob: str) -> str:
    """A package at its pin as apt (name=version*) or dnf (name-version) takes it. A pin that
    ends in * already matches what follows; apt matches the whole Debian version, and the
    Neuron repository may carry a build hash after it (2.31.24.0-0b044f4ce)."""
    version = _str(version)
    return '%s%s%s%s' % (name, separator, version, '' if version.endswith('*') else glob)


def pin_matches(installed: str, pin: str, glob: str) -> bool:
    """Whether an installed version satisfies a pin as the package manager reads the spec. On rpm the installed
    version is VERSION-RELEASE (node_probe), and dnf reads name-VERSION as any release of it."""
    pattern = pin if pin.endswith('*') else pin + glob
    return fnmatch.fnmatchcase(installed, pattern) or fnmatch.fnmatchcase(installed.rsplit('-', 1)[0], pattern)


# PCI device IDs of Inferentia (Inf1) behind Amazon's vendor ID 0x1d0f.
INF1_PCI_DEVICE_IDS = ['0x7064', '0x7065', '0x7066', '0x7067']
# The last driver line that supports Inf1.
INF1_DRIVER_LINE = '2.24'
# The DKMS module name the driver package registers.
DKMS_MODULE = 'aws-neuronx'
# Every package of the current generation neuron_driver may have installed.
ALL_PACKAGES = ['aws-neuronx-dkms', 'aws-neuronx-tools', 'aws-neuronx-runtime-lib', 'aws-neuronx-collectives']
# Files the driver's DKMS scripts write and no package owns.
LEFTOVERS = ['/lib/udev/rules.d/neuron-udev.rules', '/usr/lib/udev/rules.d/neuron-udev.rules',
             '/etc/modules-load.d/neuron.conf']
# The loaded module, and its MODULE_VERSION (aws-neuron-driver, neuron_module.c): its package's version.
MODULE_DIR = '/sys/module/neuron'
MODULE_VERSION = '/sys/module/neuron/version'
# The login shells' PATH (templates/aws-neuron.sh.j2 puts /opt/aws/neuron/bin on it).
PROFILE_FILE = '/etc/profile.d/aws-neuron.sh'

# The aws-neuronx-dkms PRE_INSTALL script runs `update-pciids || true` (aws-neuron/aws-neuron-driver, file
# preinstall), on every DKMS build, kernel updates included. update-pciids downloads pci.ids from the internet
# and waits on a node that cannot reach it. With neuron_driver_update_pciids false, this no-op comes first on
# PATH (/usr/local/sbin precedes /usr/sbin in the default PATH of shells and systemd units, and in the PATH the
# role configures for apt's and rpm's package scripts, SCRIPT_PATH) and the node keeps the pci.ids of its
# pciutils/hwdata package. Only a shim with the marker is replaced or removed.
UPDATE_PCIIDS_SHIM = '/usr/local/sbin/update-pciids'
UPDATE_PCIIDS_MARKER = 'accel.nodes.neuron_driver: update-pciids is off'
UPDATE_PCIIDS_CONTENT = ('#!/bin/sh\n'
                         '# %s (neuron_driver_update_pciids: false).\n'
                         '# This node cannot reach the internet; pci.ids stays the one its package ships.\n'
                         'exit 0\n' % UPDATE_PCIIDS_MARKER)
# The PATH package scripts run with, per OS family. apt runs dpkg, and so the maintainer scripts, with PATH set
# to DPkg::Path, "/usr/sbin:/usr/bin:/sbin:/bin" unless configured (apt.conf(5)); rpm runs scriptlets with PATH
# set to the macro %_install_script_path, "/sbin:/bin:/usr/sbin:/usr/bin" by default (rpm's macros file).
# Without /usr/local/sbin the no-op update-pciids would not be found first.
SCRIPT_PATH = {
    'Debian': ('/etc/apt/apt.conf.d/90accel-nodes-neuron-driver',
               '// %s: maintainer scripts find its no-op update-pciids first.\n'
               'DPkg::Path "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin";\n' % UPDATE_PCIIDS_MARKER),
    'RedHat': ('/etc/rpm/macros.accel-nodes-neuron-driver',
               '# %s: scriptlets find its no-op update-pciids first.\n'
               '%%_install_script_path /usr/local/sbin:/sbin:/bin:/usr/sbin:/usr/bin\n' % UPDATE_PCIIDS_MARKER),
}
# What node_probe reads, before the OS family is known: the Neuron packages (of both generations), the kernel
# packages of both families and dnf's versionlock plugin; the shim, the loaded module, and every file the role
# writes, the package scripts' PATH of either OS family among them.
PROBE_PACKAGES = ['^aws-neuron', '^linux-(image|headers|modules|modules-extra)-', '^kernel',
                  '^python3-dnf-plugin-versionlock$']
PROBE_PATHS = [UPDATE_PCIIDS_SHIM, MODULE_DIR, MODULE_VERSION, PROFILE_FILE] + [f for f, _c in SCRIPT_PATH.values()]


# The package that builds the neuron kernel module, and the one it replaced (AWS's Neuron setup guide:
# "Update Neuron Driver", and "aws-neuron-dkms" in the legacy package list of neuron_driver_legacy_packages).
DKMS_PACKAGE = 'aws-neuronx-dkms'
LEGACY_DKMS_PACKAGE = 'aws-neuron-dkms'


def driver_plan(accelerators: Optional[Mapping], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The driver version and packages of neuron_driver, and why an Inf1 node refuses a driver."""
    type_ = instance_type(accelerators, settings.get('instance_type'))
    inf1 = is_inf1(accelerators, type_, settings.get('inf1_pci_device_ids') or INF1_PCI_DEVICE_IDS)
    pin = _str(settings['inf1_dkms_version'] if inf1 else settings['dkms_version'])
    line = _str(settings.get('inf1_driver_line') or INF1_DRIVER_LINE)
    problem = None
    if inf1 and not _bool(settings.get('inf1_allow_unsupported_driver')):
        match = re.match(r'^([0-9]+)\.([0-9]+)', pin)
        newer = match is None or (int(match.group(1)), int(match.group(2))) > tuple(int(x) for x in line.split('.'))
        if newer:
            problem = (
                "This node is Inf1 (%s), but neuron_driver_inf1_dkms_version is '%s'. Neuron driver lines after %s "
                "no longer support Inf1, so the driver would not bind to the devices. Pin "
                "neuron_driver_inf1_dkms_version to '%s.*' (the default), or set "
                "neuron_driver_inf1_allow_unsupported_driver=true if you know this driver works here."
                % (type_ or 'Inferentia PCI devices 1d0f:7064-7067', pin, line, line))
    packages = [{'name': DKMS_PACKAGE, 'version': pin},
                {'name': 'aws-neuronx-tools', 'version': _str(settings['tools_version'])}]
    if _bool(settings.get('install_runtime_lib')):
        packages.append({'name': 'aws-neuronx-runtime-lib', 'version': _str(settings['runtime_lib_version'])})
    if _bool(settings.get('install_collectives')):
        packages.append({'name': 'aws-neuronx-collectives', 'version': _str(settings['collectives_version'])})
    separator, glob = _str(settings.get('version_separator')), _str(settings.get('version_glob'))
    return {
        'target_instance_type': type_,
        'is_inf1': inf1,
        'dkms_pin': pin,
        'packages': packages,
        'package_specs': [version_spec(p['name'], p['version'], separator, glob) for p in packages],
        'problem': problem,
    }


def driver_packages(installed: Optional[Packages], plan: Mapping[str, Any], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """What the package tasks of neuron_driver have left to do, given the installed packages.

    installed is accel.nodes.node_probe's packages; None (an unknown package manager)
    makes every task run, as the package manager then decides alone.
    On dpkg a task is skipped only when the package manager would change nothing: every
    package there at a version its pin matches, every hold in place.
    """
    known = installed is not None
    present = dict(installed or {})
    have = dict((n, v) for n, v in present.items() if v.get('status', 'installed') == 'installed')
    glob = _str(settings.get('version_glob'))
    headers = list(settings.get('headers_packages') or [])
    # A legacy package removed without purge still has its configuration: the purge removes it.
    legacy = [p for p in settings.get('legacy_packages') or [] if not known or p in present]
    at_pin = known and all(p['name'] in have and pin_matches(_str(have[p['name']].get('version')), p['version'], glob)
                           for p in plan['packages'])
    kernel_re = re.compile(_str(settings.get('kernel_packages')) or '$^')
    kernel_packages = sorted(n for n in have if kernel_re.search(n))
    selections_known = known and all(v.get('selection') is not None for v in have.values())

    def unheld(names: List[str]) -> List[str]:
        return [n for n in names if not selections_known or have[n].get('selection') != 'hold']

    headers_missing = [h for h in headers if not known or h not in have]
    loaded = _str(settings.get('loaded_version')).strip()
    moving = [p['name'] for p in plan['packages']
              if p['name'] in have and not pin_matches(_str(have[p['name']].get('version')), p['version'], glob)]
    hold_packages = unheld([p['name'] for p in plan['packages'] if p['name'] in have]) \
        if _bool(settings.get('hold_packages')) else []
    hold_kernel = unheld(kernel_packages) if _bool(settings.get('hold_kernel')) else []
    return {
        # Nothing for any package task to do.
        'kept': not legacy and not headers_missing and at_pin and not hold_packages and not hold_kernel,
        'legacy': legacy,
        'headers': headers,
        'headers_missing': headers_missing,
        'install': not at_pin,
        'moving': moving,
        # The kernel module changes under what runs now: the installed driver package moves to another version, or
        # the legacy one goes (issue 27: the role then looks for work on the devices and reloads the module).
        # ...or the loaded module is not the pinned driver, as after a run whose reload could not be done: the
        # package is at its pin by now, and the module must still be swapped.
        'driver_moving': (DKMS_PACKAGE in moving or (LEGACY_DKMS_PACKAGE in legacy and LEGACY_DKMS_PACKAGE in have)
                          or (bool(loaded) and not pin_matches(loaded, _str(plan['dkms_pin']), glob))),
        'kernel_packages': kernel_packages,
        'hold_packages': hold_packages,
        'hold_kernel': hold_kernel,
    }


def hook_package(accelerators: Optional[Mapping], installed: Optional[Packages],
                 settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The OCI hook package of neuron_container_runtime (AWS's OCI hook tutorial: the Inf1
    package on Inf1, the neuronx one elsewhere), its pin, and what is left to do."""
    type_ = instance_type(accelerators, settings.get('instance_type'))
    inf1 = is_inf1(accelerators, type_, settings.get('inf1_pci_device_ids') or INF1_PCI_DEVICE_IDS)
    inf1_package, neuronx_package = _str(settings['inf1_hook_package']), _str(settings['neuronx_hook_package'])
    package = _str(settings.get('oci_hook_package')) or (inf1_package if inf1 else neuronx_package)
    version = _str(settings['inf1_oci_hook_version'] if package == inf1_package else settings['oci_hook_version'])
    glob = _str(settings.get('version_glob'))
    have = dict((n, v) for n, v in (installed or {}).items() if v.get('status', 'installed') == 'installed')
    known = installed is not None
    current = have.get(package)
    at_pin = bool(current) and pin_matches(_str(current.get('version')), version, glob)
    others = [p for p in dict.fromkeys([inf1_package, neuronx_package]) if p != package and (not known or p in have)]
    return {
        'is_inf1': inf1,
        'package': package,
        'version': version,
        'spec': version_spec(package, version, _str(settings.get('version_separator')), glob),
        'installed': bool(current),
        'at_pin': at_pin,
        'held': bool(current) and current.get('selection') == 'hold',
        'others': others,
        # Nothing for the package tasks to do: at the pin, held where holds are wanted, no other family's.
        'kept': at_pin and not others and (not settings.get('hold', True)
                                           or (bool(current) and current.get('selection') == 'hold')),
    }


def runtime_chain(probe: Mapping[str, Any], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """oci-add-hooks and runc as the oci-neuron wrapper will name them, and what the chain lacks
    (aws-neuron-sdk#911: a wrapper that cannot run them fails every container)."""
    found = probe.get('executables') or {}
    oci_add_hooks, runc = _str(found.get('oci_add_hooks')), _str(found.get('runc'))
    hook = _str(found.get('hook'))
    version = (probe.get('versions') or {}).get('oci_add_hooks') or {}
    problems = []
    if not oci_add_hooks:
        problems.append('oci-add-hooks is not an executable regular file at %s (install it with the role '
                        'accel.nodes.oci_add_hooks, or set neuron_container_runtime_oci_add_hooks_path)'
                        % ' or '.join(settings['oci_add_hooks_candidates']))
    elif version.get('rc') != 0 or not _str(version.get('stdout')).startswith('commit:'):
        problems.append('%s --version failed (rc %s: %s)'
                        % (oci_add_hooks, version.get('rc'), _str(version.get('stderr')).strip()))
    if not runc:
        problems.append('runc is not an executable regular file at %s (install the container engine, or set '
                        'neuron_container_runtime_runc_path)' % ' or '.join(settings['runc_candidates']))
    if not hook:
        problems.append('the Neuron OCI hook %s is missing or not executable (%s installs it)'
                        % (settings['hook_path'], settings['hook_package']))
    return {'oci_add_hooks': oci_add_hooks, 'runc': runc, 'problems': problems}


def oci_add_hooks_check(probe: Mapping[str, Any], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """Whether the installed oci-add-hooks is the one the role installs, and whether it answers
    --version as it must ("commit: <revision>"; the pinned revision for a source build)."""
    method = _str(settings['method'])
    path = _str(settings['installed_path'])
    info = (probe.get('paths') or {}).get(_str(settings.get('install_path'))) or {}
    answer = (probe.get('versions') or {}).get('oci_add_hooks') or {}
    stdout = _str(answer.get('stdout')).strip()
    runs = answer.get('rc') == 0 and stdout.startswith('commit:')
    pinned = 'commit: ' + _str(settings.get('version'))
    if method == 'binary':
        current = (info.get('exists') and _str(info.get('sha256')).lower() == _str(settings.get('sha256')).lower()
                   and info.get('mode') == '0755' and info.get('uid') == 0 and info.get('gid') == 0)
    elif method == 'source':
        current = runs and stdout == pinned
    else:
        package = ((probe.get('packages') or {}).get(_str(settings.get('package_name'))) or {})
        wanted = _str(settings.get('package_version'))
        current = bool(package) and (not wanted or _str(package.get('version')).startswith(wanted))
    problem = None
    if not runs or (method == 'source' and stdout != pinned):
        problem = ('`%s --version` returned rc %s and "%s", not "commit: ..."%s. Docker cannot start containers '
                   'through a broken oci-add-hooks (aws-neuron-sdk#911): check the %s install (URL and checksum, '
                   'package, or build).' % (path, answer.get('rc'), stdout or _str(answer.get('stderr')).strip(),
                                            (' ' + _str(settings.get('version'))) if method == 'source' else '',
                                            method))
    return {'current': bool(current), 'runs': runs, 'problem': problem}
