# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Findings of issue 28 about the host under the NVIDIA driver: DKMS and kernel headers, nouveau, Secure Boot,
GPUs on the PCI bus that nvidia-smi does not show, and Fabric Manager on NVSwitch systems.

An area of accel.nodes.diagnose, as module_utils/_diagnose_runtime.py and _diagnose_neuron.py are: PROBE is what it
reads in the diagnose's one accel.nodes.node_probe run (merged with the other areas' by the filter
accel.nodes.diagnose_probe), findings() turns that run's result into findings (_diagnose.finding).

Each finding needs its layer: the DKMS ones a DKMS-built NVIDIA module, nouveau and the missing GPUs NVIDIA GPUs
in the accelerator facts, Fabric Manager an NVSwitch fabric (the facts' nvidia.nvswitch.present). What cannot be
read (a command not found, a file not readable) gives no finding.

Options (accel_nodes_diagnose_options): none."""

from __future__ import annotations

import re
import typing as t
from xml.etree import ElementTree

from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _kernels, _nvidia, _pci

BROKEN = _diagnose.BROKEN
WILL_BREAK = _diagnose.WILL_BREAK

# DKMS module names of the NVIDIA driver: Debian's nvidia-current and nvidia-current-open, the nvidia of Ubuntu
# and of NVIDIA's RPMs (accel.nodes.dkms_kernels' module option, nvidia*).
DKMS_MODULE = 'nvidia*'
# The kernel tree a DKMS build needs, and the images that make a kernel bootable (_kernels.has_headers and
# _kernels.kernel_image); find prints them without a shell, links followed (/lib/modules/<v>/build is one).
KERNEL_FILES = ['find', '-L', '/lib/modules', '/boot', '-mindepth', '1', '-maxdepth', '3',
                '(', '-path', '/boot/vmlinuz-*', '-o', '-path', '/lib/modules/*/vmlinuz',
                '-o', '-path', '/lib/modules/*/build/include', ')', '-print']
# The nouveau module of each kernel under /lib/modules: in-tree modules install to
# /lib/modules/<release>/kernel/<their source path> (the kernel's Documentation/kbuild/modules.rst, "Module
# Installation"), nouveau's source being drivers/gpu/drm/nouveau/nouveau.ko, compressed where the kernel's
# CONFIG_MODULE_COMPRESS says (.ko.xz, .ko.zst, .ko.gz). A kernel built without it (Debian's cloud flavour, a host
# whose driver lives outside the node) cannot load it, and nothing needs blacklisting.
NOUVEAU_MODULES = ['find', '/lib/modules', '-mindepth', '7', '-maxdepth', '7', '-path',
                   '/lib/modules/*/kernel/drivers/gpu/drm/nouveau/nouveau.ko*', '-print']
# kmod reads modprobe.d in these directories, *.conf only (modprobe.d(5)); NVIDIA's installer writes its nouveau
# blacklist to the first and /usr/lib/modprobe.d (nvidia-installer kernel.c: modprobe_directories[]).
MODPROBE_DIRS = ['/etc/modprobe.d', '/run/modprobe.d', '/usr/local/lib/modprobe.d', '/usr/lib/modprobe.d',
                 '/lib/modprobe.d']
# An install command that loads nothing in the module's place keeps it off as well (modprobe.d(5): install runs the
# command instead of inserting the module).
NO_OP_INSTALL = (('/bin/false',), ('/bin/true',), ('/usr/bin/false',), ('/usr/bin/true',))
# /etc/os-release's ID (os-release(5)) as ansible_facts.distribution names it, lower case, for
# _kernels.headers_package: Red Hat's rhel, Oracle's ol, Amazon Linux's amzn.
OS_RELEASE = '/etc/os-release'
OS_RELEASE_IDS = {'rhel': 'redhat', 'ol': 'oraclelinux', 'amzn': 'amazon'}
SYS_NOUVEAU = '/sys/module/nouveau'
SYS_NVIDIA = '/sys/module/nvidia'
PROC_CMDLINE = '/proc/cmdline'
# EFI global variables (UEFI spec, EFI_GLOBAL_VARIABLE GUID 8be4df61-93ca-11d2-aa0d-00e098032b8c), as efivarfs
# shows them: 4 bytes of attributes, then the value (kernel Documentation/filesystems/efivarfs.rst).
EFI_GLOBAL = '8be4df61-93ca-11d2-aa0d-00e098032b8c'
SECURE_BOOT_VAR = '/sys/firmware/efi/efivars/SecureBoot-%s' % EFI_GLOBAL
SETUP_MODE_VAR = '/sys/firmware/efi/efivars/SetupMode-%s' % EFI_GLOBAL
FABRIC_UNIT = 'nvidia-fabricmanager'
# Fabric Manager's packages: nvidia-fabricmanager (deb from R580, rpm), nvidia-fabricmanager-<branch> (deb before
# R580), nvidia-fabric-manager (rpm before R580): NVIDIA/apt-packaging-fabric-manager debian/templates/control.in,
# roles/nvidia_driver/vars/{Debian,RedHat}.yml.
FABRIC_PACKAGES = re.compile(r'^nvidia-fabric-?manager(-\d+)?$')

PROBE: dict = {
    'paths': [OS_RELEASE, SYS_NOUVEAU, SYS_NVIDIA, PROC_CMDLINE, SECURE_BOOT_VAR, SETUP_MODE_VAR],
    'directories': ['/lib/modules'],
    'packages': [FABRIC_PACKAGES.pattern],
    'commands': {
        'host_kernel_release': ['uname', '-r'],
        'host_kernel_files': KERNEL_FILES,
        'host_dkms_status': ['dkms', 'status'],
        # The lines that keep nouveau off: kmod's blacklist (or an install command that loads nothing).
        'host_nouveau_modules': NOUVEAU_MODULES,
        'host_nouveau_config': ['grep', '-rsHE', '--include=*.conf',
                                r'^[[:space:]]*(blacklist|install)[[:space:]]+nouveau([[:space:]]|$)'] + MODPROBE_DIRS,
        # The signer of the nvidia module of the running kernel; kmod prints none for an unsigned file.
        'host_nvidia_signer': ['modinfo', '-F', 'signer', 'nvidia'],
        'host_fabricmanager_unit': ['systemctl', 'show', FABRIC_UNIT,
                                    '--property=LoadState,ActiveState,SubState,Result'],
    },
}

SOURCES = {
    'dkms': ('dkms (dkms-project/dkms) dkms.in do_status(): "<module>/<version>, <kernel>, <arch>: installed" for '
             'each kernel it installed the module for; a bootable kernel has /boot/vmlinuz-<v> (Debian, Ubuntu '
             'linux-image packages) or /lib/modules/<v>/vmlinuz (kernel-core.spec of RHEL 9, Fedora, Amazon Linux '
             '2023); the kernel boots without the nvidia module where DKMS did not install it'),
    'headers': ('dkms dkms_common.postinst and kernel hooks (_check_kernel_dir): DKMS builds for a kernel only '
                'where /lib/modules/<v>/build/include exists, the tree of its headers package'),
    'nouveau': ('/sys/module/<name> exists while a loadable module is loaded (kernel module core; the ABI text '
                'was not read here); '
                'NVIDIA/nvidia-installer kernel.c (the installer blacklists nouveau in '
                '/etc/modprobe.d/nvidia-installer-disable-nouveau.conf: "blacklist nouveau", "options nouveau '
                'modeset=0"); modprobe.d(5) (kmod; Oracle Linux "Modprobe Configuration Reference"): "blacklist" ignores '
                'the module\'s internal aliases and keeps hotplug from loading it "so that a different driver binds" '
                'the device; the kernel parameter modprobe.blacklist= does the same'),
    'secure_boot': ('kernel Documentation/filesystems/efivarfs.rst (4 bytes of attributes, then the value); '
                    'lcp/mokutil src/mokutil.c (Secure Boot is on when SecureBoot is 1 and SetupMode 0); '
                    'kmod libkmod-module.c kmod_module_get_info (modinfo gives "signer" only for a signed module '
                    'file); Linux commit 49fcf732 "lockdown: Enforce module signatures if the kernel is locked '
                    'down" and Debian\'s "efi: Lock down the kernel if booted in secure boot mode"; Red Hat, '
                    '"Restrictions Imposed by UEFI Secure Boot" (access.redhat.com/node/1351013): "Kernel modules '
                    'that are not authenticated will not load"'),
    'missing': ('NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors): Xid 79 "GPU has fallen off the bus", '
                'RESTART_BM; nvidia-smi lists the GPUs NVML initialised; PCI: vendor 0x10de, class 0x0300/0x0302 '
                '(accel.nodes.accelerator_facts); the instance type\'s GPU count: the EC2 catalog of '
                'accel.nodes.accelerator_facts (ec2.expected)'),
    'fabric_down': ('NVIDIA Fabric Manager User Guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide): '
                    'on NVSwitch systems CUDA fails with "system not yet initialized" until Fabric Manager has '
                    'trained the fabric; NVIDIA/apt-packaging-fabric-manager: the unit nvidia-fabricmanager.service'),
    'fabric_version': ('NVIDIA Fabric Manager User Guide: "the FM service checks the currently loaded kernel driver '
                       'stack version for compatibility, and if the loaded driver stack version is not compatible, '
                       'aborts the process" (quoted through a third-party page, docs/plans/issue-28-sources.md '
                       'section 7)'),
    'fabric_state': ('NVML nvmlGpuFabricInfo_v3_t (nvml.h NVML_GPU_FABRIC_STATE_NOT_SUPPORTED/NOT_STARTED/'
                     'IN_PROGRESS/COMPLETED; "status ... Must be checked only if Probe state returns complete"); the '
                     'words nvidia-smi prints for them (Completed, Success) have no vendor source here'),
}


def _command(probe: t.Mapping, name: str) -> t.Optional[dict]:
    """A command's result, or None where it did not run (not in the probe, or not found: 127)."""
    result = (probe.get('commands') or {}).get(name)
    if not result or result.get('rc') == 127:
        return None
    return result


def _path(probe: t.Mapping, path: str) -> dict:
    return (probe.get('paths') or {}).get(path) or {}


def os_release_id(text: t.Optional[str]) -> t.Optional[str]:
    """The ID of an /etc/os-release text (os-release(5)), unquoted."""
    for line in (text or '').splitlines():
        if line.startswith('ID='):
            return line[3:].strip().strip('"\'') or None
    return None


# -- kernels and DKMS -------------------------------------------------------------------------------------------

def kernels(release: t.Optional[str], installed: t.Optional[t.Iterable[str]], files: str) -> list[dict]:
    """The installed kernels that could boot, oldest first, as {version, image, headers, running}.

    release: `uname -r`; installed: the entries of /lib/modules; files: what KERNEL_FILES printed. A kernel is
    installed where /lib/modules/<v> exists and could boot where its image does (_kernels.kernel_image); the
    running kernel counts where it is installed, whatever its image."""
    images: dict[str, str] = {}
    headers = set()
    for line in (files or '').splitlines():
        parts = line.strip().split('/')
        if len(parts) == 3 and parts[1] == 'boot' and parts[2].startswith('vmlinuz-'):
            images.setdefault(parts[2][len('vmlinuz-'):], line.strip())
        elif len(parts) == 5 and parts[1:3] == ['lib', 'modules'] and parts[4] == 'vmlinuz':
            images.setdefault(parts[3], line.strip())
        elif len(parts) == 6 and parts[1:3] == ['lib', 'modules'] and parts[4:] == ['build', 'include']:
            headers.add(parts[3])
    found = []
    for version in sorted(set(installed or []), key=_kernels.version_key):
        if version in images or version == release:
            found.append({'version': version, 'image': images.get(version), 'headers': version in headers,
                          'running': version == release})
    return found


def headers_package(distribution: t.Optional[str], version: str) -> str:
    """The headers package of a kernel (_kernels.headers_package), from the ID of /etc/os-release."""
    known = _kernels.headers_package(OS_RELEASE_IDS.get(distribution or '', distribution or ''), version)
    return known or 'linux-headers-%s (kernel-devel-%s on RHEL)' % (version, version)


def dkms_findings(release: t.Optional[str], installed: t.Optional[t.Iterable[str]], files: str,
                  dkms_status: str, distribution: t.Optional[str] = None, nvidia_loaded: bool = False) -> list[dict]:
    """kernel.dkms.missing and kernel.headers.missing, where DKMS builds the NVIDIA module (it lists one).

    distribution: the ID of /etc/os-release, which names the headers packages; nvidia_loaded: whether the nvidia
    module is loaded, so that the running kernel without DKMS's module breaks only at the next load."""
    entries = _kernels.matching(_kernels.parse_dkms_status(dkms_status), DKMS_MODULE, '*')
    if not entries:
        return []
    versions = sorted(set(e['version'] for e in entries), key=_kernels.version_key)
    module = '%s/%s' % (entries[0]['name'], versions[-1])
    done = set(e['kernel'] for e in entries if e['kernel'] and e['status'] == 'installed')
    found = []
    for kernel in kernels(release, installed, files):
        version = kernel['version']
        where = 'the running kernel' if kernel['running'] else 'kernel %s, which could boot next' % version
        evidence = ['%s: %s' % ('uname -r' if kernel['running'] else 'kernel image', kernel['image'] or version)]
        if version not in done:
            states = ['dkms status: %s/%s, %s: %s' % (e['name'], e['version'], version, e['status'])
                      for e in entries if e['kernel'] == version]
            headers = ('' if kernel['headers'] else
                       ' Its headers are missing too (/lib/modules/%s/build/include): install %s first.'
                       % (version, headers_package(distribution, version)))
            found.append(_diagnose.finding(
                'kernel.dkms.missing', BROKEN if kernel['running'] and not nvidia_loaded else WILL_BREAK,
                'DKMS has not installed the NVIDIA module (%s) for %s: booted, it has no GPU driver.'
                % (module, where),
                evidence + (states or ['dkms status: no %s line for kernel %s' % (DKMS_MODULE, version)]),
                'Run accel.nodes.nvidia_driver (nvidia_driver_kernels: all, the default, builds it for every '
                'kernel that could boot), or dkms autoinstall -k %s.%s' % (version, headers),
                SOURCES['dkms']))
        elif not kernel['headers']:
            found.append(_diagnose.finding(
                'kernel.headers.missing', WILL_BREAK,
                'The headers of %s are missing: the next NVIDIA driver install or upgrade cannot build its DKMS '
                'module for it.' % where,
                evidence + ['missing: /lib/modules/%s/build/include' % version],
                'Install %s: accel.nodes.nvidia_driver installs the headers of every kernel it builds for.'
                % headers_package(distribution, version),
                SOURCES['headers']))
    return found


# -- nouveau ------------------------------------------------------------------------------------------------------

def nouveau_blacklisted(config_lines: str, cmdline: t.Optional[str]) -> list[str]:
    """The lines that keep nouveau from loading: grep's file:line of modprobe.d, or the kernel command line's
    modprobe.blacklist= naming it."""
    kept = []
    for line in (config_lines or '').splitlines():
        path, dummy, text = line.partition(':')
        words = text.split()
        no_op = words[:1] == ['install'] and tuple(words[2:]) in NO_OP_INSTALL
        if words[1:2] == ['nouveau'] and (words[0] == 'blacklist' or no_op):
            kept.append('%s: %s' % (path, text.strip()))
    for word in (cmdline or '').split():
        key, dummy, value = word.partition('=')
        if key in ('modprobe.blacklist', 'module_blacklist') and 'nouveau' in value.split(','):
            kept.append('/proc/cmdline: %s' % word)
    return kept


def nouveau_findings(has_gpus: bool, loaded: bool, nvidia_driver: bool, config: t.Optional[dict],
                     cmdline: t.Optional[str], modules: t.Optional[dict] = None) -> list[dict]:
    """kernel.nouveau.loaded and kernel.nouveau.not_blacklisted on a node with NVIDIA GPUs.

    loaded: nouveau is loaded (/sys/module/nouveau, /proc/modules); nvidia_driver: the NVIDIA driver is installed or
    loaded; config: the result of the host_nouveau_config grep (None where it did not run); modules: the result of
    host_nouveau_modules (NOUVEAU_MODULES): without a nouveau module under /lib/modules nothing needs blacklisting
    (the real H200 node of tests/fixtures/hardware/h200-2026-11-28-issue28/ was flagged before this)."""
    if not has_gpus:
        return []
    found = []
    fix = ('write "blacklist nouveau" and "options nouveau modeset=0" to /etc/modprobe.d/blacklist-nouveau.conf and '
           'rebuild the initramfs (update-initramfs -u, or dracut -f on RHEL); accel.nodes.nvidia_driver does both '
           'when it installs the driver (nvidia_driver_blacklist_nouveau)')
    if loaded:
        found.append(_diagnose.finding(
            'kernel.nouveau.loaded', BROKEN,
            'The nouveau module is loaded on a node with NVIDIA GPUs: the NVIDIA driver cannot take a GPU nouveau '
            'holds.',
            ['%s exists' % SYS_NOUVEAU],
            'Blacklist it, then reboot (nouveau drives the console and rarely unloads): %s.' % fix,
            SOURCES['nouveau']))
    files = [line for line in ((modules or {}).get('stdout') or '').splitlines() if line.strip()]
    if nvidia_driver and files and config is not None and config.get('rc') in (0, 1, 2):
        if not nouveau_blacklisted(config.get('stdout') or '', cmdline):
            found.append(_diagnose.finding(
                'kernel.nouveau.not_blacklisted', WILL_BREAK,
                'Nothing blacklists nouveau on a node with NVIDIA GPUs and the NVIDIA driver: at the next boot '
                'nouveau may take the GPUs before the NVIDIA driver does.',
                files[:4] + ['no "blacklist nouveau" in %s/*.conf' % ', '.join(MODPROBE_DIRS),
                             'no modprobe.blacklist=nouveau in %s' % PROC_CMDLINE],
                fix[0].upper() + fix[1:] + '.',
                SOURCES['nouveau']))
    return found


# -- Secure Boot ----------------------------------------------------------------------------------------------------

def efi_value(text: t.Optional[str]) -> t.Optional[int]:
    """The one-byte value of an efivarfs file read as text (4 bytes of attributes, then the value), or None."""
    if text is None or len(text) != 5:
        return None
    return ord(text[4])


def secure_boot_findings(secure_boot: t.Optional[str], setup_mode: t.Optional[str], signer: t.Optional[dict],
                         nvidia_loaded: bool) -> list[dict]:
    """kernel.secure_boot.unsigned: Secure Boot is on and the nvidia module file of the running kernel is not
    signed, so the kernel refuses it. Silent where either is unknown, and where the module is loaded (the kernel
    took it)."""
    if nvidia_loaded or efi_value(secure_boot) != 1 or efi_value(setup_mode) not in (0, None):
        return []
    if signer is None or signer.get('rc') != 0 or (signer.get('stdout') or '').strip():
        return []
    return [_diagnose.finding(
        'kernel.secure_boot.unsigned', BROKEN,
        'Secure Boot is on and the nvidia module is not signed: the kernel refuses to load it.',
        ['%s: 1' % SECURE_BOOT_VAR, 'modinfo -F signer nvidia: nothing (no signature)'],
        'Sign the module with a key enrolled in the MOK list (mokutil --import; DKMS signs what it builds with '
        '/var/lib/dkms/mok.key where that key is enrolled), or install the distribution\'s signed NVIDIA modules; '
        'or turn Secure Boot off in the firmware.',
        SOURCES['secure_boot'])]


# -- GPUs missing -----------------------------------------------------------------------------------------------------

def missing_gpus(facts: t.Mapping, smi: t.Optional[dict]) -> list[dict]:
    """gpu.missing: NVIDIA GPUs on the PCI bus that `nvidia-smi -q -x` does not show, or fewer GPUs on the bus than
    the EC2 catalog has for the instance type. Silent where nvidia-smi gave no GPU list (not installed, driver not
    loaded) or the PCI bus was not read."""
    if (facts.get('sources') or {}).get('pci') != 'ok':
        return []
    on_bus = [g['pci_bus_id'] for g in (facts.get('nvidia') or {}).get('gpus') or [] if g.get('pci_bus_id')]
    evidence = []
    unseen: list[str] = []
    if smi is not None:
        parsed = _nvidia.parse_smi(smi.get('rc'), smi.get('stdout') or '', smi.get('stderr') or '')
        if parsed['gpus'] is not None:
            unseen = [b for b in on_bus if b not in parsed['gpus']]
            lost = dict((g['pci_bus_id'], g['reason']) for g in parsed['lost'] if g['pci_bus_id'])
            evidence += ['PCI bus: NVIDIA GPU %s; nvidia-smi -q -x: %s' % (
                b, ('lost: %s' % lost[b]) if b in lost else 'not listed') for b in unseen]
    expected = (facts.get('ec2') or {}).get('expected') or {}
    short = expected.get('vendor') == 'nvidia' and len(on_bus) < int(expected.get('count') or 0)
    if short:
        evidence.append('%s has %d %s GPU(s) (EC2 catalog); the PCI bus shows %d' % (
            (facts.get('ec2') or {}).get('instance_type'), expected['count'], expected.get('model'), len(on_bus)))
    if not unseen and not short:
        return []
    what = ('%d of the %d NVIDIA GPU(s) on the PCI bus are missing from nvidia-smi (%s)'
            % (len(unseen), len(on_bus), ', '.join(unseen))) if unseen else \
        'the PCI bus shows %d of the %d NVIDIA GPU(s) of a %s' % (
            len(on_bus), expected['count'], (facts.get('ec2') or {}).get('instance_type'))
    return [_diagnose.finding(
        'gpu.missing', BROKEN, '%s%s: no program can use them.' % (what[0].upper(), what[1:]),
        evidence,
        'Look for NVRM lines naming the GPU in the kernel log (journalctl -k: Xid 79 "fallen off the bus", '
        'RmInitAdapter failed); drain the node and reboot it (stop and start an EC2 instance, which moves it to '
        'other hardware); if the GPU stays missing, the GPU or its host needs service.',
        SOURCES['missing'])]


# -- Fabric Manager ---------------------------------------------------------------------------------------------------

def unit_properties(text: str) -> dict[str, str]:
    """`systemctl show --property=...`'s Key=Value lines."""
    return dict(line.split('=', 1) for line in (text or '').splitlines() if '=' in line)


def upstream_version(version: str) -> str:
    """A package version without its epoch and its Debian revision or RPM release: 580.95.05 of 1:580.95.05-1."""
    return version.split(':')[-1].split('-')[0]


def fabric_states(smi_xml: str) -> list[tuple[str, str, t.Optional[str]]]:
    """(bus id, fabric state, fabric status) of each GPU of `nvidia-smi -q -x` that has a fabric state."""
    xml = _nvidia._xml_part(smi_xml or '')  # pylint: disable=protected-access
    if xml is None:
        return []
    try:
        log = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return []
    found = []
    for gpu in log.findall('gpu'):
        state = _nvidia._text(gpu, 'fabric/state')  # pylint: disable=protected-access
        if state:
            found.append((_pci.normalise_bus_id(gpu.get('id') or '') or gpu.get('id') or '?', state,
                          _nvidia._text(gpu, 'fabric/status')))  # pylint: disable=protected-access
    return found


def fabric_findings(present: bool, unit: t.Optional[dict], packages: t.Mapping[str, str],
                    loaded: t.Optional[str], smi_xml: str) -> list[dict]:
    """fabric.manager.down, fabric.manager.version and fabric.state on an NVSwitch system (present).

    unit: the host_fabricmanager_unit result; packages: {name: version} of Fabric Manager's packages; loaded: the
    loaded driver's version."""
    if not present:
        return []
    found = []
    props = unit_properties((unit or {}).get('stdout') or '') if unit and unit.get('rc') == 0 else {}
    if props and props.get('ActiveState') != 'active':
        state = ', '.join('%s=%s' % (k, props[k]) for k in ('LoadState', 'ActiveState', 'SubState', 'Result')
                          if k in props)
        found.append(_diagnose.finding(
            'fabric.manager.down', BROKEN,
            'NVIDIA Fabric Manager is not running on an NVSwitch system: CUDA fails with "system not yet '
            'initialized" until it has trained the fabric.',
            ['systemctl show %s: %s' % (FABRIC_UNIT, state)],
            'Run accel.nodes.nvidia_driver, which installs Fabric Manager at the driver\'s version and starts it; '
            'or systemctl enable --now %s, and read journalctl -u %s where it will not start.'
            % (FABRIC_UNIT, FABRIC_UNIT),
            SOURCES['fabric_down']))
    other = dict((n, v) for n, v in packages.items() if loaded and upstream_version(v) != loaded)
    if other:
        found.append(_diagnose.finding(
            'fabric.manager.version', BROKEN,
            'Fabric Manager is %s, but the loaded NVIDIA driver is %s: Fabric Manager refuses to start on another '
            'driver version.' % (', '.join(sorted(set(upstream_version(v) for v in other.values()))), loaded),
            ['package %s %s' % (n, v) for n, v in sorted(other.items())] + ['loaded NVIDIA driver: %s' % loaded],
            'Install Fabric Manager at the driver\'s version: run accel.nodes.nvidia_driver, which pins it to the '
            'driver and holds both; then restart %s.' % FABRIC_UNIT,
            SOURCES['fabric_version']))
    unready = [(b, s, st) for b, s, st in fabric_states(smi_xml)
               if s != 'N/A' and (s.lower() != 'completed' or (st or 'Success').lower() != 'success')]
    if unready:
        found.append(_diagnose.finding(
            'fabric.state', BROKEN,
            '%d GPU(s) have not joined the NVSwitch fabric: CUDA fails on them, or runs without NVLink.'
            % len(unready),
            ['nvidia-smi -q -x, GPU %s: fabric state %s, status %s' % (b, s, st or '(none)') for b, s, st in unready],
            'Check that %s runs at the driver\'s version (fabric.manager.*) and read journalctl -u %s; then '
            'restart it, and reset the GPUs (nvidia-smi -r) or reboot where they stay out.' % (FABRIC_UNIT, FABRIC_UNIT),
            SOURCES['fabric_state']))
    return found


# -- everything -------------------------------------------------------------------------------------------------------

def findings(probe: t.Mapping, options: t.Mapping) -> list[dict]:
    """The findings of this area in a node_probe result; options: the playbook's accel_nodes_diagnose_options."""
    facts = _diagnose.accelerators(probe)
    nvidia = facts.get('nvidia') or {}
    modules = (facts.get('observed') or {}).get('kernel_modules') or []
    release = (_command(probe, 'host_kernel_release') or {}).get('stdout') or None
    dkms = _command(probe, 'host_dkms_status')
    found = []
    entries = _kernels.matching(_kernels.parse_dkms_status((dkms or {}).get('stdout') or ''), DKMS_MODULE, '*')
    smi = _command(probe, 'nvidia_smi_xml')
    smi_xml = (smi or {}).get('stdout') or ''
    sys_version = _path(probe, _diagnose.SYS_VERSION).get('text')
    proc_version = _path(probe, _diagnose.PROC_VERSION).get('text')
    loaded = _diagnose.loaded_version(sys_version, proc_version, smi_xml if (smi or {}).get('rc') == 0 else None)
    nvidia_loaded = bool(_path(probe, SYS_NVIDIA).get('exists') or 'nvidia' in modules or nvidia.get('driver_version'))
    has_gpus = 'nvidia' in (facts.get('vendors') or [])
    if dkms is not None and dkms.get('rc') == 0:
        installed = ((probe.get('directories') or {}).get('/lib/modules') or {}).keys()
        files = (_command(probe, 'host_kernel_files') or {}).get('stdout') or ''
        found += dkms_findings(release, installed, files, dkms.get('stdout') or '',
                               os_release_id(_path(probe, OS_RELEASE).get('text')), nvidia_loaded)
    found += nouveau_findings(
        has_gpus, bool(_path(probe, SYS_NOUVEAU).get('exists') or 'nouveau' in modules),
        bool(entries or nvidia_loaded or loaded), _command(probe, 'host_nouveau_config'),
        _path(probe, PROC_CMDLINE).get('text'), _command(probe, 'host_nouveau_modules'))
    found += secure_boot_findings(_path(probe, SECURE_BOOT_VAR).get('text'), _path(probe, SETUP_MODE_VAR).get('text'),
                                  _command(probe, 'host_nvidia_signer'), nvidia_loaded)
    if has_gpus:
        found += missing_gpus(facts, smi)
    packages = dict((n, (p or {}).get('version')) for n, p in (probe.get('packages') or {}).items()
                    if FABRIC_PACKAGES.match(n) and (p or {}).get('version')
                    and (p or {}).get('status', 'installed') == 'installed')
    found += fabric_findings(bool((nvidia.get('nvswitch') or {}).get('present')),
                             _command(probe, 'host_fabricmanager_unit'), packages, loaded, smi_xml)
    return found
