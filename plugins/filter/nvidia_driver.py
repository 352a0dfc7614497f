# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Which NVIDIA driver a host needs, decided from its accelerator facts, and which
inputs contradict the hardware or the distribution. The role accel.nodes.nvidia_driver
sets nvidia_driver_decision from nvidia_driver_decision() and fails with the messages
of nvidia_driver_input_errors(); nothing else in the role decides.

The rules, and NVIDIA's word for them:

- Open or proprietary kernel modules: the open modules run on GPUs with a GSP,
  Turing (compute capability 7.5) and newer; Volta (7.0) and older need the
  proprietary ones; Grace Hopper and Blackwell (10.0 and newer) need the open
  ones; a host with both older and newer GPUs gets the proprietary ones. Source:
  NVIDIA Technical Blog, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel
  Modules" (2024-07-17,
  https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/),
  and the README of https://github.com/NVIDIA/open-gpu-kernel-modules ("Turing
  and later GPUs").
- R580 is the last branch that supports Volta: NVIDIA Data Center Drivers,
  "Supported Drivers and CUDA Toolkit Versions"
  (https://docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html).
- Fabric Manager on NVSwitch systems, and the NVLink Subnet Manager on
  fourth-generation NVSwitch systems: NVIDIA Fabric Manager User Guide ("Systems
  Using Fourth-Generation NVSwitches"); accel.nodes.accelerator_facts says which
  systems those are (nvidia.nvswitch).

Tested by tests/unit/plugins/filter/test_nvidia_driver.py, with facts that
accel.nodes.accelerator_facts gathers from the host trees of tests/fixtures/facts
and the real H200 capture there. Documented in nvidia_driver_decision.yml and
nvidia_driver_input_errors.yml next to this file.
"""

from __future__ import annotations

import re
import typing as t

from ansible.module_utils.parsing.convert_bool import boolean

# Compute capabilities: Volta 7.0, Turing 7.5, Blackwell 10.0 and newer.
VOLTA = 7.0
TURING = 7.5
BLACKWELL = 10.0
# The last branch that supports Volta.
VOLTA_LAST_BRANCH = 580
# The branches NVIDIA supports for data center GPUs ("Only Long Term Support and
# Production branches are listed"), and those its earlier table listed that
# have reached their end of life since: NVIDIA Data Center Drivers,
# "Supported Drivers and CUDA Toolkit Versions", release 620
# (docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html)
# and 615 (.../drivers/615/...).
SUPPORTED_BRANCHES = {
    '580': 'Long Term Support Branch, end of life June 2028',
    '595': 'Production Branch, end of life March 2027',
    '620': 'Long Term Support Branch, end of life September 2029',
}
ENDED_BRANCHES = {'535': 'June 2026'}
# Instance type catalog models (accel.nodes.accelerator_facts' ec2.expected.model)
# that stand for the GPUs when there is no GPU data, as when baking an image.
VOLTA_MODELS = ('V100',)
# Blackwell (compute capability 10.0 and up, _nvidia.COMPUTE_CAPABILITY): only
# the open kernel modules support it.
BLACKWELL_MODELS = ('B200', 'B300', 'GB200', 'RTX PRO 6000 Blackwell Server Edition',
                    'RTX PRO 4500 Blackwell Server Edition')


def _dict(value: t.Any) -> dict:
    return value if isinstance(value, dict) else {}


def _bool(value: t.Any) -> bool:
    return boolean(value, strict=False) if value is not None else False


def _capability(value: t.Any) -> t.Optional[float]:
    """A compute capability as a number; None where it is unknown."""
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _int(value: t.Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def nvidia_driver_decision(facts: t.Any, branch: t.Any = '580', version: t.Any = '', kernel_module: str = 'auto',
                           force: t.Any = False, bake: t.Any = False, fabric_manager: str = 'auto',
                           source: str = 'cuda_repo', kernels: str = 'all') -> dict:
    """The role's nvidia_driver_decision for a host with these accelerator facts
    (ansible_facts.accelerators, or None when there are none) and these role inputs."""
    acc = _dict(facts)
    nv = _dict(acc.get('nvidia'))
    gpus = [g for g in (nv.get('gpus') or []) if isinstance(g, dict)]
    ec2 = _dict(acc.get('ec2'))
    instance_type = ec2.get('instance_type')
    expected = _dict(ec2.get('expected'))
    expected_nvidia = expected.get('vendor') == 'nvidia'
    on_pci = 'nvidia' in (acc.get('vendors') or [])
    force = _bool(force)
    bake = _bool(bake)
    version = str(version or '')

    present = on_pci or expected_nvidia or force
    if on_pci:
        reason = '%d NVIDIA GPU(s) on the PCI bus' % len(gpus)
    elif expected_nvidia:
        reason = 'instance type %s has %s NVIDIA %s' % (instance_type, expected.get('count', '?'),
                                                        expected.get('model') or 'GPU')
    elif force:
        reason = 'nvidia_driver_force is true'
    else:
        reason = 'no NVIDIA GPU on the PCI bus' + (' and instance type %s has none' % instance_type
                                                   if instance_type else '')

    # Without GPU data (baking), the instance type's model stands in.
    caps = [c for c in (_capability(g.get('compute_capability')) for g in gpus) if c is not None]
    names = [str(g.get('name') or '') for g in gpus]
    model = expected.get('model') or '' if expected_nvidia else ''
    volta = VOLTA in caps or any('V100' in n for n in names) or model in VOLTA_MODELS
    older = volta or any(c < TURING for c in caps)
    blackwell = any(c >= BLACKWELL for c in caps) or model in BLACKWELL_MODELS
    module = kernel_module if kernel_module != 'auto' else ('proprietary' if older else 'open')

    branch = version.split('.', maxsplit=1)[0] if version else str(branch)
    loaded = nv.get('driver_version')
    loaded_module = nv.get('kernel_module_flavor')
    satisfied = (not bake and loaded is not None
                 and (loaded == version if version else str(loaded).split('.', maxsplit=1)[0] == branch)
                 and (kernel_module == 'auto' or loaded_module in (None, module)))

    nvswitch = _dict(nv.get('nvswitch'))
    wants_fabric_manager = fabric_manager == 'always' or (fabric_manager == 'auto'
                                                          and _bool(nvswitch.get('present')))
    problems = [str(p) for p in (acc.get('problems') or [])]
    # Where the facts hold nvidia-smi's answer (accel.nodes.accelerator_facts ran nvidia-smi -q -x, the only
    # source of memory.total), the GPUs it listed; None where they do not, and the role asks nvidia-smi -L.
    smi_ok = _dict(acc.get('sources')).get('nvidia_smi') == 'ok'
    decision = {
        'present': present,
        'reason': reason,
        'branch': branch,
        'version': version,
        'kernel_module': module,
        'volta': volta,
        'older_than_turing': older,
        'blackwell': blackwell,
        'loaded_version': loaded,
        'loaded_kernel_module': loaded_module,
        'satisfied': satisfied,
        'bake': bake,
        'expected_gpus': max(len(gpus), _int(expected.get('count')) if expected_nvidia else 0),
        'pci_gpus': len(gpus),
        'smi_gpus': sum(1 for g in gpus if g.get('memory_total_mib') is not None) if smi_ok else None,
        'instance_type': instance_type,
        'nouveau_bound': any(re.search('(?i)nouveau', p) for p in problems),
        'source': source,
        'fabric_manager': wants_fabric_manager,
        'nvswitch_generation': nvswitch.get('generation'),
        'nvlsm': wants_fabric_manager and _int(nvswitch.get('generation')) >= 4,
    }
    decision['summary'] = _summary(decision, kernels)
    return decision


def _summary(d: dict, kernels: str) -> str:
    """The decision in one line, for people."""
    if not d['present']:
        what = 'no NVIDIA driver is installed (nvidia_driver_force: true installs it anyway)'
    elif d['satisfied']:
        what = 'driver %s is loaded and satisfies %s, nothing to change' % (
            d['loaded_version'], d['version'] or 'branch ' + d['branch'])
    else:
        what = 'branch %s%s, %s kernel modules, %s, from %s%s' % (
            d['branch'], ' (%s)' % d['version'] if d['version'] else '', d['kernel_module'],
            'for the target kernel only' if kernels == 'target' else 'for every kernel that could boot',
            d['source'], ' (baking: nothing is started or rebooted)' if d['bake'] else '')
    return '%s: %s' % (d['reason'], what)


def nvidia_driver_input_errors(decision: t.Any, branch: t.Any = '580', version: t.Any = '',
                               ignore_hardware_limits: t.Any = False, distro_packages: t.Any = None,
                               distro_branches: t.Any = None, distribution: str = '',
                               distribution_version: str = '', allow_unsupported_branch: t.Any = False) -> t.List[str]:
    """What is wrong with the inputs for the hardware and the distribution, one message
    each, with the fix; [] when nothing is, or when the host needs no driver.

    branch and version are nvidia_driver_branch and nvidia_driver_version as given;
    distro_packages (a dict by kernel module flavour) and distro_branches are what the
    distribution's vars file says it ships."""
    d = _dict(decision)
    if not d.get('present'):
        return []
    ignore = _bool(ignore_hardware_limits)
    errors = []
    numeric = re.match('^[0-9]+$', str(d.get('branch'))) is not None
    if not numeric:
        errors.append('nvidia_driver_branch must be a driver branch such as "580", and nvidia_driver_version a version '
                      'such as "580.95.05"; got branch %s and version %s.' % (branch, version or ''))
    where = ' (instance type %s)' % d['instance_type'] if d.get('instance_type') else ''
    if d.get('volta') and numeric and int(d['branch']) > VOLTA_LAST_BRANCH and not ignore:
        errors.append(
            'The GPUs of this host%s are Volta (Tesla V100, EC2 P3): NVIDIA\'s R580 is the last driver branch that '
            'supports Volta, and R%s was asked for. A newer driver would leave the GPUs unusable. Set '
            'nvidia_driver_branch: "580" for Volta hosts (for example in their group_vars), or set '
            'nvidia_driver_ignore_hardware_limits: true to install R%s anyway.' % (where, d['branch'], d['branch']))
    if d.get('kernel_module') == 'open' and d.get('older_than_turing') and not ignore:
        errors.append(
            'nvidia_driver_kernel_module is open, but this host has a GPU older than Turing (%s), which the open kernel '
            'modules do not support. Use nvidia_driver_kernel_module: auto or proprietary, or set '
            'nvidia_driver_ignore_hardware_limits: true.' % (
                'Volta' if d.get('volta') else 'compute capability below 7.5'))
    if d.get('kernel_module') == 'proprietary' and d.get('blackwell') and not ignore:
        errors.append(
            'nvidia_driver_kernel_module is proprietary, but this host has a Blackwell GPU (compute capability 10.0 '
            'or newer), which only the open kernel modules support. Use nvidia_driver_kernel_module: auto or open, '
            'or set nvidia_driver_ignore_hardware_limits: true.')
    if d.get('source') == 'distro':
        packages = _dict(distro_packages)
        branches = [str(b) for b in (distro_branches or [])]
        if d.get('kernel_module') not in packages or (branches and str(d.get('branch')) not in branches):
            errors.append(
                'nvidia_driver_source is distro, but %s %s %s. Set nvidia_driver_source: cuda_repo%s.' % (
                    distribution, distribution_version,
                    ('ships only branch %s, not %s' % (', '.join(branches), d.get('branch'))) if packages
                    else 'has no NVIDIA driver packages of its own',
                    (' or nvidia_driver_branch: "%s"' % branches[0]) if branches else ''))
    branch_now = str(d.get('branch'))
    if numeric and branch_now not in SUPPORTED_BRANCHES and not _bool(allow_unsupported_branch):
        supported = ', '.join('R%s (%s)' % item for item in sorted(SUPPORTED_BRANCHES.items()))
        if branch_now in ENDED_BRANCHES:
            why = 'R%s reached its end of life in %s: NVIDIA no longer fixes it' % (branch_now, ENDED_BRANCHES[branch_now])
        else:
            why = 'R%s is not among the branches NVIDIA supports for data center GPUs' % branch_now
        only = [str(b) for b in (distro_branches or [])]
        errors.append(
            '%s. NVIDIA supports %s.%s Set nvidia_driver_branch to one of them%s, or '
            'nvidia_driver_allow_unsupported_branch: true to install R%s anyway.' % (
                why, supported,
                (' %s %s ships only branch %s in its own archive.' % (distribution, distribution_version, ', '.join(only))
                 if d.get('source') == 'distro' and branch_now in only else ''),
                ' with nvidia_driver_source: cuda_repo' if d.get('source') == 'distro' else '', branch_now))
    if d.get('fabric_manager') and d.get('source') != 'cuda_repo':
        errors.append(
            'This host needs NVIDIA Fabric Manager (an NVSwitch system, or nvidia_driver_fabric_manager is always): '
            'CUDA waits for it, and it must match the driver\'s version exactly. The role installs both from NVIDIA\'s '
            'CUDA repository only: set nvidia_driver_source: cuda_repo, or nvidia_driver_fabric_manager: never to '
            'install Fabric Manager yourself.')
    return errors


def nvidia_driver_missing_packages(missing: t.Any, headers: t.Any = None, kernels_report: t.Any = None,
                                   source: str = 'cuda_repo', repo_url: str = '', version: t.Any = '',
                                   branch: t.Any = '', cuda_dist: str = '', dkms_hint: str = '',
                                   distro_hint: t.Any = None) -> str:
    """Why the role stops before installing anything, with the fix; '' when every package
    can be installed. missing: the packages the package manager cannot install; headers: the
    headers packages the role would install; kernels_report: accel.nodes.dkms_kernels' answer.
    The headers come first, then dkms, then the driver's own packages."""
    missing = [str(m) for m in (missing or [])]
    if not missing:
        return ''
    report = _dict(kernels_report)
    lost_headers = [h for h in (headers or []) if h in missing]
    if lost_headers:
        kernels = [k.get('version') for k in (report.get('kernels') or [])
                   if isinstance(k, dict) and k.get('headers_package') in lost_headers]
        return (
            'The headers of kernel %s cannot be installed: no repository offers %s. DKMS needs them to build the '
            'NVIDIA module for every kernel the node could boot into (%s), and without the module the node would '
            'boot without a driver, so nothing was installed. Remove a kernel you do not boot any more, or boot one '
            'whose headers the distribution still carries (install the current kernel package and reboot); set '
            'nvidia_driver_kernels: target to build for the target kernel %s only, nvidia_driver_kernel_version to '
            'the kernel being baked into the image, or name the target\'s headers package in '
            'nvidia_driver_kernel_headers_package.' % (
                ', '.join(kernels), ', '.join(lost_headers), ', '.join(report.get('targets') or []),
                report.get('target')))
    if 'dkms' in missing:
        return ('dkms cannot be installed, and the driver needs it to build its kernel module: %s. '
                'Nothing was installed.' % dkms_hint)
    if source == 'cuda_repo':
        where = (" (NVIDIA's CUDA repository at %s). Check that NVIDIA publishes %s for %s there, or choose another "
                 'nvidia_driver_branch or nvidia_driver_version.' % (
                     repo_url, version or 'branch %s' % branch, cuda_dist))
    else:
        where = " (the distribution's archive): %s, or set nvidia_driver_source: cuda_repo." % (
            distro_hint or 'enable the archive component that carries them')
    return '%s cannot be installed from the configured repositories%s Nothing was installed.' % (
        ', '.join(missing), where)


def nvidia_driver_packages(decision: t.Any, package_manager: str = 'apt', headers: t.Any = None,
                           own_packages: t.Any = None, pin_package: str = '', cuda_repo_packages: t.Any = None,
                           cuda_repo_version_packages: t.Any = None, distro_packages: t.Any = None,
                           persistenced_packages: t.Any = None, persistence_mode: t.Any = True) -> dict:
    """What the role installs for the decision, in two steps: {'pin': the branch pin, installed
    first so that the driver packages resolve inside the branch (apt and the CUDA repository
    only), 'driver': the driver packages, 'required': everything that must be installable
    before anything is installed (the headers, dkms, the pin, the driver packages without
    module streams and versions)}.

    The per-OS data (vars/<os_family>.yml, vars/<Distribution>-<major>.yml) names the packages
    by kernel module flavour; own_packages (nvidia_driver_packages) replace the role's choice,
    pin included. An exact version: apt takes <name>=<version>-* for the distribution's packages
    (the CUDA repository's pinning package already names the version); dnf asks for the
    stream's packages at that version (cuda_repo_version_packages)."""
    d = _dict(decision)
    own = [str(p) for p in (own_packages or [])]
    source, module, version = d.get('source'), d.get('kernel_module'), str(d.get('version') or '')
    pins = [pin_package] if source == 'cuda_repo' and pin_package and not own else []
    if own:
        driver = own
    else:
        base = _dict(cuda_repo_packages if source == 'cuda_repo' else distro_packages).get(module) or []
        suffix = '=%s-*' % version if version and source == 'distro' and package_manager == 'apt' else ''
        versioned = (_dict(cuda_repo_version_packages).get(module) or []
                     if version and source == 'cuda_repo' and package_manager == 'dnf' else [])
        driver = ([str(p) + suffix for p in base] + [str(p) for p in versioned]
                  + ([str(p) for p in (persistenced_packages or [])] if _bool(persistence_mode) else []))
    required = ([str(h) for h in (headers or [])] + ['dkms'] + pins
                + [p.split('=', 1)[0] for p in driver if not p.startswith('@')])
    return {'pin': pins, 'driver': driver, 'required': required}


class FilterModule(object):

    def filters(self) -> t.Dict[str, t.Callable[..., t.Any]]:
        return {
            'nvidia_driver_decision': nvidia_driver_decision,
            'nvidia_driver_input_errors': nvidia_driver_input_errors,
            'nvidia_driver_missing_packages': nvidia_driver_missing_packages,
            'nvidia_driver_packages': nvidia_driver_packages,
        }
