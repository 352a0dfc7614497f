# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The decisions of the Neuron roles, as filters: neuron_driver_probe_request, neuron_driver_plan,
neuron_driver_packages, neuron_hook_package, neuron_runtime_chain, oci_add_hooks_check and
neuron_containerd_owner. Each is documented in the <name>.yml next to this file; the logic is in
module_utils/_neuron_plan.py and, for who owns containerd's config, module_utils/_containerd_owner.py.

accel.nodes.neuron_driver (issue 29) asks the node once (neuron_driver_probe_request gives node_probe its
packages and paths), then sets neuron_driver_plan from one call of neuron_driver_plan with the probe and the
per-OS data, prints its summary, and every later task reads a key of it: the pin and the package specs, what
the role refuses, the files to write, the repository, the bake switch, what state absent removes. What only
dkms_kernels can tell (the kernels and their headers) comes in later, through neuron_driver_packages."""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.paths import paths_to_write
from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners
from ansible_collections.accel.nodes.plugins.module_utils import _neuron_plan


def _mapping(value: t.Any, what: str) -> t.Mapping:
    if value is None:
        return {}
    if not isinstance(value, t.Mapping):
        raise AnsibleFilterError('%s must be a dictionary, not %s' % (what, type(value).__name__))
    return value


def neuron_driver_probe_request(settings: t.Any) -> dict:
    """node_probe's packages and paths for neuron_driver: the same for every setting and either state, since the
    probe runs before the OS family is known and state absent reads the same packages and files."""
    _mapping(settings, 'settings')
    return {'packages': list(_neuron_plan.PROBE_PACKAGES), 'paths': list(_neuron_plan.PROBE_PATHS)}


def _files(settings: t.Mapping, node: t.Mapping, present: bool) -> list:
    """paths_content's files: the update-pciids shim and the package scripts' PATH (neuron_driver_update_pciids
    false), and the login shells' PATH (neuron_driver_add_to_path)."""
    offline = present and not boolean(settings['update_pciids'], strict=False)
    files = [{'path': _neuron_plan.UPDATE_PCIIDS_SHIM, 'state': 'present' if offline else 'absent',
              'content': _neuron_plan.UPDATE_PCIIDS_CONTENT, 'marker': _neuron_plan.UPDATE_PCIIDS_MARKER,
              'owner': 'root', 'group': 'root', 'mode': '0755'}]
    script = _neuron_plan.SCRIPT_PATH.get(str(node.get('os_family')))
    if script:
        files.append({'path': script[0], 'state': 'present' if offline else 'absent', 'content': script[1],
                      'owner': 'root', 'group': 'root', 'mode': '0644'})
    added = present and boolean(settings['add_to_path'], strict=False)
    files.append({'path': _neuron_plan.PROFILE_FILE, 'state': 'present' if added else 'absent',
                  'content': str(node.get('profile_content') or ''), 'owner': 'root', 'group': 'root', 'mode': '0644'})
    return files


def _summary(plan: dict, present: bool) -> str:
    if not present:
        return 'remove the Neuron driver, tools and libraries%s, the files the driver leaves and the repository' % (
            ' (installed: %s)' % ', '.join(plan['installed']) if plan['installed'] else '')
    steps = ['%s%s: aws-neuronx-dkms %s' % (plan['target_instance_type'] or 'no instance type',
                                            ' (Inf1)' if plan['is_inf1'] else '', plan['dkms_pin']),
             'packages %s' % ', '.join(plan['package_specs'])]
    writes = ['%s %s' % ('write' if f['state'] == 'present' else 'remove', f['path']) for f in plan['files']]
    steps.append('; '.join(writes) if writes else 'files in place')
    steps.append('bake: no module load, no device check' if plan['bake'] else 'load the module, check the devices')
    if plan['problems']:
        steps.append('stop: %s' % ' '.join(plan['problems']))
    return '; '.join(steps)


def neuron_driver_plan(accelerators: t.Any, settings: t.Any, probe: t.Any = None, node: t.Any = None) -> dict:
    """The driver's pin and packages (accelerators and settings alone), and with the role's probe and per-OS
    data (node) what the role does on the node."""
    settings, node = _mapping(settings, 'settings'), _mapping(node, 'node')
    driver = dict(settings)
    for key in ('version_separator', 'version_glob'):
        if key in node:
            driver.setdefault(key, node[key])
    try:
        plan = _neuron_plan.driver_plan(_mapping(accelerators, 'the accelerator facts'), driver)
    except KeyError as e:
        raise AnsibleFilterError('neuron_driver_plan: settings lack %s' % e) from e
    if probe is None:
        return plan
    probe = _mapping(probe, 'probe')
    try:
        present = settings['state'] == 'present'
        paths = _mapping(probe.get('paths'), 'the probe\'s paths')
        shim = _mapping(paths.get(_neuron_plan.UPDATE_PCIIDS_SHIM), 'the shim')
        problems = [plan['problem']] if present and plan['problem'] else []
        if (present and not boolean(settings['update_pciids'], strict=False) and shim.get('exists')
                and _neuron_plan.UPDATE_PCIIDS_MARKER not in str(shim.get('text') or '')):
            problems.append('%s exists and is not the role\'s: the role leaves it alone. Remove it, or set '
                            'neuron_driver_update_pciids back to true.' % _neuron_plan.UPDATE_PCIIDS_SHIM)
        url = re.sub('/+$', '', str(settings['repo_url'] or node['repo_url']))
        version = _mapping(paths.get(_neuron_plan.MODULE_VERSION), 'the module version')
        installed = _mapping(probe.get('packages'), 'the probe\'s packages')
        plan.update({
            'problems': problems,
            'bake': boolean(node['bake'], strict=False),
            'loaded': bool(_mapping(paths.get(_neuron_plan.MODULE_DIR), 'the module').get('exists')),
            'files': paths_to_write(_files(settings, node, present), dict(paths)),
            'repository': {
                'url': url,
                'key_url': str(settings['repo_key_url'] or url + '/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB'),
                'suite': str(settings['repo_suite'] or node['distribution_release']),
            },
            'dkms_module': _neuron_plan.DKMS_MODULE,
            # What the role's probe reads again after an install.
            'probe_packages': list(_neuron_plan.PROBE_PACKAGES),
            'inf1_driver_line': _neuron_plan.INF1_DRIVER_LINE,
            'all_packages': list(_neuron_plan.ALL_PACKAGES),
            'installed': [p for p in _neuron_plan.ALL_PACKAGES if p in installed],
            'remove': list(_neuron_plan.ALL_PACKAGES) + list(settings['legacy_packages'] or []),
            'leftovers': list(_neuron_plan.LEFTOVERS),
            # What neuron_driver_packages takes beside the packages and the kernels dkms_kernels lists.
            'package_settings': {
                'legacy_packages': list(settings['legacy_packages'] or []),
                'loaded_version': str(version.get('text') or '').strip(),
                'version_glob': node['version_glob'],
                'kernel_packages': node['kernel_packages'],
                'hold_packages': settings['hold_packages'],
                'hold_kernel': settings['hold_kernel'],
                'kernels': settings['kernels'],
                'kernel_headers_package': settings['kernel_headers_package'],
            },
        })
    except KeyError as e:
        raise AnsibleFilterError('neuron_driver_plan: settings or node lack %s' % e) from e
    plan['summary'] = _summary(plan, present)
    return plan


def _headers(settings: t.Mapping, report: t.Mapping) -> list:
    """The headers of every kernel the module is built for, as accel.nodes.dkms_kernels names them
    (kernel_headers_package replaces the target kernel's), and with kernels all the headers metapackage of each
    kernel image metapackage, so that a kernel that arrives later brings its headers and DKMS's kernel hook builds
    the module for it. "none": no headers package at all."""
    if settings.get('kernel_headers_package') == 'none':
        return []
    return (list(report.get('headers_packages') or [])
            + (list(report.get('headers_metapackages') or []) if settings.get('kernels') == 'all' else []))


def neuron_driver_packages(installed: t.Any, plan: t.Any, settings: t.Any = None, kernels_report: t.Any = None) -> dict:
    plan = _mapping(plan, 'plan')
    settings = dict(_mapping(plan.get('package_settings') if settings is None else settings, 'settings'))
    report = None
    if kernels_report is not None:
        report = _mapping(kernels_report, 'the kernels report')
        settings['headers_packages'] = _headers(settings, report)
    actions = _neuron_plan.driver_packages(None if installed is None else _mapping(installed, 'installed'),
                                           plan, settings)
    if report is not None:
        targets = ', '.join(str(k) for k in report.get('targets') or [])
        actions['headers_failed'] = (
            'The headers of kernel %s cannot be installed (%s: %%s). DKMS needs them to build the Neuron module for '
            'every kernel the node could boot into, and without the module the node boots without a driver, so the '
            'driver was not installed. Remove a kernel you do not boot any more, or boot one whose headers the '
            'distribution still carries; set neuron_driver_kernels: target to build for the target kernel %s only, '
            'neuron_driver_kernel_version to the kernel being baked into the image, or name the target\'s headers '
            'package in neuron_driver_kernel_headers_package (none when the headers come from elsewhere).'
            % (targets.replace('%', '%%'), ', '.join(actions['headers']).replace('%', '%%'),
               str(report.get('target')).replace('%', '%%')))
    return actions


def neuron_hook_package(accelerators: t.Any, installed: t.Any, settings: t.Any) -> dict:
    try:
        return _neuron_plan.hook_package(_mapping(accelerators, 'the accelerator facts'),
                                         None if installed is None else _mapping(installed, 'installed'),
                                         _mapping(settings, 'settings'))
    except KeyError as e:
        raise AnsibleFilterError('neuron_hook_package: settings lack %s' % e) from e


def neuron_runtime_chain(probe: t.Any, settings: t.Any) -> dict:
    try:
        return _neuron_plan.runtime_chain(_mapping(probe, 'probe'), _mapping(settings, 'settings'))
    except KeyError as e:
        raise AnsibleFilterError('neuron_runtime_chain: settings lack %s' % e) from e


def oci_add_hooks_check(probe: t.Any, settings: t.Any) -> dict:
    try:
        return _neuron_plan.oci_add_hooks_check(_mapping(probe, 'probe'), _mapping(settings, 'settings'))
    except KeyError as e:
        raise AnsibleFilterError('oci_add_hooks_check: settings lack %s' % e) from e


def neuron_containerd_owner(probe: t.Any, owner: str = 'auto', name: str = 'oci-neuron',
                            path: str = '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh') -> dict:
    """{owner, error}: who writes containerd's config (auto: detected from node_probe's paths), and why the role
    must not register the runtime in /etc/containerd there ('' where it may)."""
    paths = _mapping(_mapping(probe, 'probe').get('paths'), 'the probe\'s paths')
    if owner != 'auto' and owner not in owners.OWNERS:
        raise AnsibleFilterError('neuron_containerd_owner: owner is auto or %s, not %r' % (', '.join(owners.OWNERS), owner))
    found = owners.owner(paths) if owner == 'auto' else owner
    return {'owner': found,
            'error': owners.refusal(paths, found, str(name), str(path), 'neuron_container_runtime_engines')}


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'neuron_driver_probe_request': neuron_driver_probe_request,
            'neuron_driver_plan': neuron_driver_plan,
            'neuron_driver_packages': neuron_driver_packages,
            'neuron_hook_package': neuron_hook_package,
            'neuron_runtime_chain': neuron_runtime_chain,
            'oci_add_hooks_check': oci_add_hooks_check,
            'neuron_containerd_owner': neuron_containerd_owner,
        }
