# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The decisions of the Neuron roles, as filters: neuron_driver_plan, neuron_driver_packages,
neuron_hook_package, neuron_runtime_chain, oci_add_hooks_check and neuron_containerd_owner. Each is
documented in the <name>.yml next to this file; the logic is in module_utils/_neuron_plan.py and, for
who owns containerd's config, module_utils/_containerd_owner.py."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners
from ansible_collections.accel.nodes.plugins.module_utils import _neuron_plan


def _mapping(value: t.Any, what: str) -> t.Mapping:
    if value is None:
        return {}
    if not isinstance(value, t.Mapping):
        raise AnsibleFilterError('%s must be a dictionary, not %s' % (what, type(value).__name__))
    return value


def neuron_driver_plan(accelerators: t.Any, settings: t.Any) -> dict:
    try:
        return _neuron_plan.driver_plan(_mapping(accelerators, 'the accelerator facts'), _mapping(settings, 'settings'))
    except KeyError as e:
        raise AnsibleFilterError('neuron_driver_plan: settings lack %s' % e) from e


def neuron_driver_packages(installed: t.Any, plan: t.Any, settings: t.Any) -> dict:
    return _neuron_plan.driver_packages(None if installed is None else _mapping(installed, 'installed'),
                                        _mapping(plan, 'plan'), _mapping(settings, 'settings'))


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
            'neuron_driver_plan': neuron_driver_plan,
            'neuron_driver_packages': neuron_driver_packages,
            'neuron_hook_package': neuron_hook_package,
            'neuron_runtime_chain': neuron_runtime_chain,
            'oci_add_hooks_check': oci_add_hooks_check,
            'neuron_containerd_owner': neuron_containerd_owner,
        }
