# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Every decision of accel.nodes.neuron_container_runtime, as one plan (issue 29).
Documented in neuron_container_runtime_plan.yml and neuron_container_runtime_probe_request.yml next to this file.

tasks/main.yml asks the node once (neuron_container_runtime_probe_request gives node_probe its arguments),
sets neuron_container_runtime_plan from this filter, prints its summary, and every later task reads a key of
it. The parts are judged by the filters that already did it: the hook package (neuron_hook_package), the
oci-add-hooks and runc chain (neuron_runtime_chain), who owns containerd's config (neuron_containerd_owner),
all in neuron.py, and whether daemon.json holds the runtime already (config_files.py). What only a later task
can know (whether the package manager knows the hook package, the chain after the package changed) is set by
the tasks right after the task that learns it.
"""
from __future__ import annotations

import json
import re
import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.config_files import docker_runtime_in_place
from ansible_collections.accel.nodes.plugins.filter.neuron import neuron_containerd_owner, neuron_hook_package, \
    neuron_runtime_chain
from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners
from ansible_collections.accel.nodes.plugins.module_utils import _neuron_plan

# Where oci-add-hooks and runc are looked for when no path is given, in order: where the role
# accel.nodes.oci_add_hooks (binary and source methods), Amazon Linux's package and the engines' packages put them.
OCI_ADD_HOOKS_CANDIDATES = ['/usr/local/bin/oci-add-hooks', '/usr/bin/oci-add-hooks', '/usr/local/sbin/oci-add-hooks',
                            '/usr/sbin/oci-add-hooks']
RUNC_CANDIDATES = ['/usr/bin/runc', '/usr/sbin/runc', '/usr/local/bin/runc', '/usr/local/sbin/runc']

# PCI device IDs of Inferentia (Inf1) behind Amazon's vendor ID 0x1d0f: the driver role's, one list for both roles.
INF1_PCI_DEVICE_IDS = _neuron_plan.INF1_PCI_DEVICE_IDS

# The OCI hook packages of AWS's OCI hook tutorial ("Tutorial Docker Neuron OCI Hook Setup",
# awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/tutorial-oci-hook.html): Inf1, and the
# rest. Both ship /opt/aws/neuron/bin/oci_neuron_hook, so one is removed before the other goes in.
INF1_HOOK_PACKAGE = 'aws-neuron-runtime-base'
NEURONX_HOOK_PACKAGE = 'aws-neuronx-oci-hook'
HOOK_PACKAGES = [INF1_HOOK_PACKAGE, NEURONX_HOOK_PACKAGE]

# community.general.dnf_versionlock drives the dnf versionlock plugin, which is not installed by default:
# dnf-plugins-core's python3-dnf-plugin-versionlock (vars/RedHat.yml installs it). Without it dnf reads no locks.
VERSIONLOCK_PACKAGE = 'python3-dnf-plugin-versionlock'

# Same name as the driver's rule in /lib/udev/rules.d, so this one replaces it.
UDEV_RULE = '/etc/udev/rules.d/neuron-udev.rules'

# The daemon.json accel.nodes.container_runtime edits by default, which the probe reads: a registration that is
# already there costs no module run (plugins/filter/config_files.py).
DOCKER_CONFIG = '/etc/docker/daemon.json'


def _settings(settings: t.Any, name: str) -> dict[str, t.Any]:
    if not isinstance(settings, dict):
        raise AnsibleFilterError('%s: needs the role\'s settings as a dict' % name)
    return settings


def _oci_hook(settings: dict[str, t.Any]) -> bool:
    return settings['state'] == 'present' and settings['mode'] == 'oci_hook'


def _containerd(settings: dict[str, t.Any]) -> bool:
    return _oci_hook(settings) and 'containerd' in list(settings['engines'] or [])


def _executables(settings: dict[str, t.Any]) -> dict[str, list[str]]:
    """Where node_probe looks for oci-add-hooks, runc and the hook binary: the path given, else the candidates."""
    return {
        'oci_add_hooks': [p for p in [settings['oci_add_hooks_path']] if p] or list(OCI_ADD_HOOKS_CANDIDATES),
        'runc': [p for p in [settings['runc_path']] if p] or list(RUNC_CANDIDATES),
        'hook': [str(settings['hook_path'])],
    }


def neuron_container_runtime_probe_request(settings: t.Any) -> dict[str, t.Any]:
    """node_probe's packages, executables, versions and paths: what neuron_container_runtime_plan reads. The hook
    packages (and dnf's versionlock plugin) always; in mode oci_hook the chain's executables, the hook config,
    the wrapper and daemon.json; with containerd, what tells who owns its config."""
    settings = _settings(settings, 'neuron_container_runtime_probe_request')
    oci_hook = _oci_hook(settings)
    paths = [str(settings['hook_config_path']), str(settings['wrapper_path']), DOCKER_CONFIG] if oci_hook else []
    if _containerd(settings):
        paths += owners.probe_paths()
    return {
        'packages': ['^%s$' % name for name in HOOK_PACKAGES]
        + ['^%s$' % re.escape(str(settings['oci_hook_package'] or '')), '^%s$' % VERSIONLOCK_PACKAGE],
        'executables': _executables(settings) if oci_hook else {},
        'versions': ['oci_add_hooks'] if oci_hook else [],
        'paths': paths,
    }


def _hook_config(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    """The hook config for oci-add-hooks: one prestart hook, as to_nice_json writes it."""
    content = json.dumps({'hooks': {'prestart': [{'path': str(settings['hook_path'])}]}}, indent=2, sort_keys=True,
                         separators=(',', ': '), ensure_ascii=False)
    return {'path': str(settings['hook_config_path']), 'content': content + '\n', 'owner': 'root', 'group': 'root',
            'mode': '0644'}


def neuron_container_runtime_plan(settings: t.Any, probe: t.Any, node: t.Any) -> dict[str, t.Any]:
    """The role's plan. settings: the role's variables without their neuron_container_runtime_ prefix; probe:
    node_probe's result for neuron_container_runtime_probe_request; node: os_family, version_separator and
    version_glob (the OS vars'), accelerators (ansible_facts.accelerators, read in mode oci_hook), chroot, bake."""
    settings = _settings(settings, 'neuron_container_runtime_plan')
    if not isinstance(probe, dict) or not isinstance(node, dict):
        raise AnsibleFilterError('neuron_container_runtime_plan: needs node_probe\'s result and the node as dicts')
    packages = probe.get('packages') or {}
    paths = probe.get('paths') or {}
    engines = list(settings['engines'] or [])
    present = settings['state'] == 'present'
    oci_hook = _oci_hook(settings)
    containerd = _containerd(settings)
    hold = boolean(settings['hold'], strict=False)
    default = boolean(settings['default'], strict=False)
    name, wrapper = str(settings['name']), str(settings['wrapper_path'])

    hook: dict[str, t.Any] = {}
    chain_settings: dict[str, t.Any] = {}
    chain: dict[str, t.Any] = {}
    if oci_hook:
        hook = neuron_hook_package(node.get('accelerators'), packages, {
            'instance_type': settings['instance_type'], 'inf1_pci_device_ids': INF1_PCI_DEVICE_IDS,
            'inf1_hook_package': INF1_HOOK_PACKAGE, 'neuronx_hook_package': NEURONX_HOOK_PACKAGE, 'hold': hold,
            'oci_hook_package': settings['oci_hook_package'], 'oci_hook_version': settings['oci_hook_version'],
            'inf1_oci_hook_version': settings['inf1_oci_hook_version'],
            'version_separator': node.get('version_separator'), 'version_glob': node.get('version_glob')})
        executables = _executables(settings)
        # What neuron_runtime_chain names in its problems.
        chain_settings = {'oci_add_hooks_candidates': executables['oci_add_hooks'], 'runc_candidates': executables['runc'],
                          'hook_path': str(settings['hook_path']), 'hook_package': hook['package']}
        chain = neuron_runtime_chain(probe, chain_settings)
    owner = neuron_containerd_owner(probe, settings['containerd_owner'], name, wrapper) if containerd \
        else {'owner': None, 'error': ''}
    installed_hooks = [p for p in dict.fromkeys(HOOK_PACKAGES + [str(settings['oci_hook_package'] or '')])
                       if p in packages]
    plan = {
        'state': settings['state'],
        'mode': settings['mode'] if present else None,
        'oci_hook': oci_hook,
        'device': present and settings['mode'] == 'device',
        'chroot': boolean(node.get('chroot', False), strict=False),
        'bake': boolean(node.get('bake', False), strict=False),
        'udev_rule': UDEV_RULE,
        'containerd': containerd,
        'owner': owner,
        'hook': hook,
        # package-Debian.yml has nothing to do where the hook package is kept (its header says so).
        'package_tasks': oci_hook and not (node.get('os_family') == 'Debian' and hook['kept']),
        'versionlock_installed': VERSIONLOCK_PACKAGE in packages,
        'installed_hooks': installed_hooks,
        'executables': _executables(settings) if oci_hook else {},
        'chain_settings': chain_settings,
        'chain': chain,
        'hook_config': _hook_config(settings),
        'wrapper': {'path': wrapper, 'owner': 'root', 'group': 'root', 'mode': '0755'},
        # A daemon.json the probe did not read is left to the module, which reads it.
        'register_docker': oci_hook and 'docker' in engines and not (
            DOCKER_CONFIG in paths and docker_runtime_in_place(paths[DOCKER_CONFIG], name, wrapper, default=default)),
    }
    plan['summary'] = _summary(plan, settings, engines)
    return plan


def _summary(plan: dict[str, t.Any], settings: dict[str, t.Any], engines: list[str]) -> str:
    """The plan in one line, for the log."""
    where = ' (bake: nothing restarted)' if plan['bake'] else ''
    if plan['state'] != 'present':
        return 'absent: unregister %s from %s; remove %s, %s, the wrapper and the hook config%s' % (
            settings['name'], ' and '.join(engines) or 'no engine', plan['udev_rule'],
            ', '.join(plan['installed_hooks']) or 'no hook package installed', where)
    if plan['device']:
        return 'device: /dev/neuron* %s %s by %s%s; no %s runtime left registered' % (
            settings['device_mode'], settings['device_group'], plan['udev_rule'],
            '' if plan['bake'] else ', devices checked', settings['name'])
    hook = plan['hook']
    if hook['kept']:
        package = '%s kept at %s' % (hook['package'], hook['version'])
    else:
        package = 'install %s' % hook['spec'] + (' replacing %s' % ', '.join(hook['others']) if hook['others'] else '')
    chain = plan['chain']
    parts = [
        'oci_hook: %s' % package,
        'oci-add-hooks %s, runc %s' % (chain['oci_add_hooks'] or 'missing', chain['runc'] or 'missing'),
        'docker %s' % (('registered' if plan['register_docker'] else 'kept') if 'docker' in engines else 'not used'),
        'containerd %s' % (('refused: owned by %s' % plan['owner']['owner'] if plan['owner']['error']
                            else 'left to the module') if plan['containerd'] else 'not used'),
    ]
    return '; '.join(parts) + where


class FilterModule(object):
    """accel.nodes filters: the Neuron container runtime role's probe request and plan."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'neuron_container_runtime_plan': neuron_container_runtime_plan,
                'neuron_container_runtime_probe_request': neuron_container_runtime_probe_request}
