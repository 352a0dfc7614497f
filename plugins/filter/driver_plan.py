# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What accel.nodes.nvidia_driver does on a node, as one plan (issue 29).
Documented in nvidia_driver_plan.yml and nvidia_driver_probe_request.yml next to this file.

tasks/main.yml asks the node once (nvidia_driver_probe_request gives node_probe its arguments), sets
nvidia_driver_decision (which driver the host needs: plugins/filter/nvidia_driver.py), then
nvidia_driver_plan from this filter, prints it, and every later task of the role reads a key of it: what the
inputs refuse, what nvidia-smi answered of a loaded driver, whether the role removes, installs or only keeps
the driver, and whether the holds of a satisfying driver are already in place (dpkg_selection_plan, from the
dpkg selections the probe read). What only a later task can know (the kernels DKMS builds for, the package
manager's answer) is set right after that task, in tasks/install.yml; Fabric Manager's version and packages
(nvidia_driver_fabric_manager_plan) in tasks/fabric-manager.yml, once the driver's version is known.
"""
from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.nvidia_driver import nvidia_driver_input_errors
from ansible_collections.accel.nodes.plugins.filter.packages import dpkg_selection_plan, packages_to_change

# What the probe reads of the installed packages: every name that vars/Debian.yml's or vars/RedHat.yml's
# __nvidia_driver_owned_packages can match (they pick the driver's own among them;
# tests/unit/roles/test_nvidia_driver_vars.py checks that this covers them), and the dnf versionlock plugin.
PROBE_PACKAGES = [
    '^(cuda-drivers|nvidia-|kmod-nvidia|libnvidia-|libcuda1|libnvcuvid|libnvoptix|libxnvctrl'
    '|xserver-xorg-video-nvidia|xorg-x11-nvidia|firmware-nvidia-|dkms-nvidia|nvlsm$)',
    '^python3-dnf-plugin-versionlock$',
    # The NVLink Subnet Manager's other packages (vars/<os_family>.yml's __nvidia_driver_nvlsm_packages): without
    # them in the probe, a fourth-generation NVSwitch node would ask apt or dnf on every run.
    '^(libibumad3?|infiniband-diags)$',
]
# nvidia-smi may live outside the usual PATH: in the driver root that the container toolkit and the GPU
# operator use (/usr/local/nvidia/bin), or under /opt/nvidia/bin.
SMI_ENVIRONMENT = {
    'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/nvidia/bin:/opt/nvidia/bin',
    'LANG': 'C',
    'LC_ALL': 'C',
}
SMI_LIST = ['nvidia-smi', '-L']
# NVIDIA publishes arm64 server packages under "sbsa" in the CUDA repositories (compute/cuda/repos/<dist>/sbsa/).
CUDA_ARCH = {'aarch64': 'sbsa'}
# The driver's DKMS module: Debian calls it nvidia-current (nvidia-current-open), Ubuntu and the RPMs nvidia
# (nvidia-open); accel.nodes.dkms_kernels reads both `dkms status` formats.
DKMS_MODULE = 'nvidia*'
SMI_GPU = re.compile(r'^GPU [0-9]+:')


def _settings(settings: t.Any, name: str) -> dict[str, t.Any]:
    if not isinstance(settings, dict) or 'state' not in settings:
        raise AnsibleFilterError("%s: needs the role's settings as a dict" % name)
    return settings


def _dict(value: t.Any) -> dict[str, t.Any]:
    return value if isinstance(value, dict) else {}


def _asks_smi(settings: dict[str, t.Any], facts: t.Any, chroot: bool) -> bool:
    """nvidia-smi -L is asked unless the facts hold what nvidia-smi -q -x listed, and never in a chroot."""
    return (settings['state'] == 'present' and not chroot
            and _dict(_dict(facts).get('sources')).get('nvidia_smi') != 'ok')


def nvidia_driver_probe_request(settings: t.Any, facts: t.Any = None, chroot: t.Any = False) -> dict[str, t.Any]:
    """node_probe's packages, commands and environment for the role: the driver's packages with their dpkg
    selections where the driver is wanted, and nvidia-smi -L where the accelerator facts lack its answer."""
    settings = _settings(settings, 'nvidia_driver_probe_request')
    return {
        'packages': list(PROBE_PACKAGES) if settings['state'] == 'present' else [],
        'commands': {'nvidia_smi': list(SMI_LIST)} if _asks_smi(settings, facts, boolean(chroot)) else {},
        'environment': dict(SMI_ENVIRONMENT),
    }


def _smi_check(decision: dict[str, t.Any], probe: dict[str, t.Any]) -> dict[str, t.Any]:
    """Whether nvidia-smi lists every GPU on the PCI bus: its -L answer where the probe asked, else the facts'.
    A GPU the instance type promises but PCI does not show is a hardware fault that accelerator_validation
    reports; it does not stop the play here."""
    answer = _dict(_dict(probe.get('commands')).get('nvidia_smi'))
    ran = answer.get('rc') is not None
    if ran:
        seen = sum(1 for line in str(answer.get('stdout') or '').splitlines() if SMI_GPU.match(line))
    else:
        seen = int(decision.get('smi_gpus') or 0)
    pci = int(decision.get('pci_gpus') or 0)
    ok = (answer.get('rc') == 0 or not ran) and seen >= pci
    loaded = decision.get('loaded_version')
    if ok:
        message = 'Driver %s is loaded and nvidia-smi sees %d GPU(s)%s; nothing to change.' % (
            loaded, seen, '' if ran else ' (in the accelerator facts)')
    else:
        message = ('Driver %s is loaded, but nvidia-smi %s lists %d GPU(s) of the %d on the PCI bus: %s. The role '
                   'changed nothing. Check `dmesg | grep -i -e nvrm -e xid` for a GPU that fell off the bus.') % (
            loaded, '(exit code %s)' % answer.get('rc') if ran else '(in the accelerator facts)', seen, pci,
            ('%s %s' % (answer.get('stdout') or '', answer.get('stderr') or '')).strip())
    return {'ran': ran, 'seen': seen, 'ok': ok, 'message': message}


def _repository(settings: dict[str, t.Any], node: dict[str, t.Any]) -> dict[str, str]:
    """The CUDA repository of this distribution and CPU under repo_url, and its key: the one named in
    repo_key_url, else the per-OS key file in the repository."""
    arch = str(node.get('architecture') or '')
    arch = CUDA_ARCH.get(arch, arch)
    dist = str(node.get('cuda_dist') or '')
    url = '%s/%s/%s/' % (str(settings.get('repo_url') or '').rstrip('/'), dist, arch)
    return {'dist': dist, 'arch': arch, 'url': url,
            'key_url': str(settings.get('repo_key_url') or '') or url + str(node.get('repo_key_file') or '')}


def nvidia_driver_plan(settings: t.Any, decision: t.Any, probe: t.Any, node: t.Any) -> dict[str, t.Any]:
    """The role's plan on this node. settings: the role's variables without their prefix; decision:
    nvidia_driver_decision's answer (None with state absent); probe: the role's node_probe result; node: the
    per-OS data (package_manager, owned_packages, foreign_packages, distro_packages, distro_branches, cuda_dist,
    repo_key_file, dkms_hint, distro_hint) and the distribution, its version and the CPU architecture."""
    settings = _settings(settings, 'nvidia_driver_plan')
    probe, node = _dict(probe), _dict(node)
    present = settings['state'] == 'present'
    d = _dict(decision) if present else {}
    if present and 'satisfied' not in d:
        raise AnsibleFilterError('nvidia_driver_plan: needs nvidia_driver_decision\'s answer with state present')
    wanted = bool(d.get('present'))
    satisfied = wanted and bool(d.get('satisfied'))
    hold, hold_kernel = boolean(settings['hold']), boolean(settings['hold_kernel'])
    owned, foreign = node.get('owned_packages'), node.get('foreign_packages')
    if not owned or not foreign:
        raise AnsibleFilterError('nvidia_driver_plan: needs the per-OS owned_packages and foreign_packages patterns')

    errors = nvidia_driver_input_errors(
        d, branch=settings['branch'], version=settings['version'],
        ignore_hardware_limits=settings['ignore_hardware_limits'], distro_packages=node.get('distro_packages'),
        distro_branches=node.get('distro_branches') or [], distribution=node.get('distribution', ''),
        distribution_version=node.get('distribution_version', ''),
        allow_unsupported_branch=settings['allow_unsupported_branch']) if present else []

    # A satisfying driver stays only as long as nothing upgrades it underneath: its holds are kept. On apt
    # without kernel holds (which need dkms_kernels to list the kernel packages first), the probe's dpkg
    # selections show whether dpkg_holds would change any; where it would not, nothing runs.
    selections = dpkg_selection_plan(_dict(probe.get('packages')), patterns=[owned], exclude=[foreign],
                                     selection='hold' if hold else 'install')
    kept = (satisfied and node.get('package_manager') == 'apt' and not hold_kernel
            and not selections['change'] and not selections['unknown'])
    smi = {'check': False, 'ran': False, 'seen': 0, 'ok': True, 'message': ''}
    if satisfied:
        smi = dict(_smi_check(d, probe), check=True)
    plan = {
        'absent': not present,
        'input_errors': errors,
        'smi': smi,
        'install': wanted and not satisfied,
        'holds': {
            'run': satisfied and not kept,
            'kept': kept,
            # The installed packages the owned patterns match and the foreign ones do not, as dpkg_holds
            # would name them.
            'owned': selections['names'],
        },
        # The per-OS patterns that pick the driver's own among the installed packages
        # (nvidia_driver_owned_packages, for the tasks that name them from another list).
        'owned_patterns': {'owned': str(owned), 'foreign': str(foreign)},
        'fabric_manager': wanted and bool(d.get('fabric_manager')),
        'smi_environment': dict(SMI_ENVIRONMENT),
        'repo': _repository(settings, node),
        # The DKMS module the install builds and checks: any version of the branch, or exactly the one asked for.
        'dkms': {'module': DKMS_MODULE,
                 'version': str(settings.get('version') or '') or '%s.*' % d.get('branch') if present else ''},
    }
    # What nvidia_driver_missing_packages says where the package manager cannot install a package, besides the
    # packages and the kernels, which only the install's tasks know (tasks/packages-*.yml).
    plan['missing'] = {'source': d.get('source', ''), 'repo_url': plan['repo']['url'],
                       'version': settings.get('version') or '', 'branch': d.get('branch', ''),
                       'cuda_dist': str(node.get('cuda_dist') or ''), 'dkms_hint': str(node.get('dkms_hint') or ''),
                       'distro_hint': node.get('distro_hint')}
    plan['summary'] = _summary(plan, d, present)
    return plan


def _summary(plan: dict[str, t.Any], d: dict[str, t.Any], present: bool) -> str:
    if not present:
        return 'remove the driver and its packages'
    if plan['input_errors']:
        return '%s; stop: %s' % (d.get('summary'), ' '.join(plan['input_errors']))
    steps = [d.get('summary') or '']
    if plan['install']:
        steps.append('install, hold and load it')
    elif d.get('present'):
        steps.append('nvidia-smi %s' % ('sees every GPU' if plan['smi']['ok'] else 'does not see every GPU: stop'))
        steps.append('holds already in place' if plan['holds']['kept'] else 'set the holds')
    if plan['fabric_manager']:
        steps.append('Fabric Manager at the driver\'s version')
    return '; '.join(s for s in steps if s)


def nvidia_driver_fabric_manager_plan(decision: t.Any, version: t.Any, kernels_report: t.Any, probe: t.Any,
                                      node: t.Any) -> dict[str, t.Any]:
    """Fabric Manager at exactly the driver's version (it aborts on any other: Fabric Manager User Guide,
    installation notes): the version asked for (nvidia_driver_version), else the loaded driver's when it
    satisfies, else the newest version of the module DKMS installed for the kernels the node boots into
    (accel.nodes.dkms_kernels' module_versions); '' where none is known yet (check mode before an install).
    node: the per-OS names ({legacy, current}), version_format, nvlsm_packages and owned_packages, and hold (the
    role's nvidia_driver_hold)."""
    d, node = _dict(decision), _dict(node)
    if 'branch' not in d or not isinstance(node.get('names'), dict) or not node.get('version_format'):
        raise AnsibleFilterError('nvidia_driver_fabric_manager_plan: needs the decision and the per-OS names '
                                 'and version_format')
    built = list(_dict(kernels_report).get('module_versions') or [])
    version = str(version or '') or str((d.get('loaded_version') if d.get('satisfied') else None)
                                        or (built[-1] if built else ''))
    # Before R580 NVIDIA's Debian packages carry the branch in their name; from R580 they do not.
    branch = str(d['branch'])
    package = node['names']['current' if branch.isdigit() and int(branch) >= 580 else 'legacy']
    nvlsm = list(node.get('nvlsm_packages') or []) if d.get('nvlsm') else []
    seen = _dict(_dict(probe).get('packages'))
    owned = str(node.get('owned_packages') or '^$')
    hold = [p for p in [package] + nvlsm if re.match(owned, p)]
    # dpkg's selections of them as the probe read them (on rpm there are none: the version locks are not read).
    selections = dpkg_selection_plan(seen, names=hold, selection='hold' if boolean(node.get('hold', True)) else 'install')
    return {
        'version': version,
        'package': package,
        'packages': [package] + nvlsm,
        'install': [node['version_format'] % (package, version)] + nvlsm,
        # Of them, those the probe shows missing, or (Fabric Manager itself) not at the driver's version:
        # dpkg's and the probe's rpm versions read <driver version>-<release>. Where none is, apt or dnf
        # would change nothing, and does not run.
        'to_install': (packages_to_change(seen, [package], version=version, upstream=True)
                       + packages_to_change(seen, nvlsm)),
        'hold': hold,
        # Whether dpkg_holds would change a selection, or must judge a package the probe did not see.
        'hold_change': bool(selections['change'] or selections['unknown']),
    }


def nvidia_driver_owned_packages(installed: t.Any, plan: t.Any) -> list[str]:
    """The installed packages that belong to the driver, sorted: those the plan's owned pattern matches and its
    foreign pattern does not. installed: package names, or a dict keyed by them (ansible_facts.packages)."""
    patterns = _dict(_dict(plan).get('owned_patterns'))
    if not patterns.get('owned') or not patterns.get('foreign'):
        raise AnsibleFilterError('nvidia_driver_owned_packages: needs nvidia_driver_plan\'s answer, with owned_patterns')
    if installed is None:
        installed = []
    if isinstance(installed, (str, bytes)):
        raise AnsibleFilterError('nvidia_driver_owned_packages: needs a list of package names, not a string')
    owned, foreign = re.compile(patterns['owned']), re.compile(patterns['foreign'])
    return sorted(str(n) for n in installed if owned.match(str(n)) and not foreign.match(str(n)))


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'nvidia_driver_plan': nvidia_driver_plan, 'nvidia_driver_probe_request': nvidia_driver_probe_request,
                'nvidia_driver_fabric_manager_plan': nvidia_driver_fabric_manager_plan,
                'nvidia_driver_owned_packages': nvidia_driver_owned_packages}
