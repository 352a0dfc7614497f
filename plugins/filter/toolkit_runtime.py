# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Where and how accel.nodes.nvidia_container_toolkit registers the nvidia runtime, by profile and by who owns
containerd's config. Documented in nvidia_container_toolkit_runtime_plan.yml next to this file.

The kubernetes profile is what NVIDIA's device plugin and GPU Operator expect of a node:
- the CRI handler `nvidia` (the runtime name the role always uses), with SystemdCgroup matching kubelet's
  cgroup driver (kubelet's config.yaml, else the main config's runc entry, else true: kubeadm's default);
- CDI on in the CRI plugin (enable_cdi), where containerd has it (1.7 and later: containerd/containerd#6654);
- the toolkit settings the device plugin's volume-mounts strategy relies on, so that an unprivileged pod cannot
  ask for GPUs through NVIDIA_VISIBLE_DEVICES: accept-nvidia-visible-devices-envvar-when-unprivileged = false,
  accept-nvidia-visible-devices-as-volume-mounts = true (nvidia-container-toolkit v1.20.0 api/config/v1/
  config.go:64-65; their defaults, true and false, toml.go:255-256);
- a RuntimeClass manifest with handler nvidia (k8s-device-plugin v0.20.0 README.md:107-113), for the user to apply.
Where the config lives and which service restarts containerd: module_utils/_containerd_owner.py.
"""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners

PROFILES = ('default', 'kubernetes')
VOLUME_MOUNTS = 'accept-nvidia-visible-devices-as-volume-mounts'
ENVVAR_UNPRIVILEGED = 'accept-nvidia-visible-devices-envvar-when-unprivileged'
# The toolkit's own defaults (v1.20.0 api/config/v1/toml.go:255-256), and the device plugin's hardened pair.
TOOLKIT_SETTINGS = {
    'default': {VOLUME_MOUNTS: False, ENVVAR_UNPRIVILEGED: True},
    'kubernetes': {VOLUME_MOUNTS: True, ENVVAR_UNPRIVILEGED: False},
}
RUNTIMECLASS_MARKER = '# Written by accel.nodes.nvidia_container_toolkit'
# The first containerd whose CRI plugin reads CDI (containerd/containerd#6654, v1.7.0).
FIRST_WITH_CRI_CDI = (1, 7)
RESTART_TOPICS = {'containerd': 'accel_nodes_restart_containerd'}
RANCHER_RESTART_TOPIC = 'nvidia_container_toolkit_restart_containerd_owner'


def runtimeclass(name: str) -> str:
    """The RuntimeClass for handler name, in the shape of k8s-device-plugin v0.20.0 README.md:107-113."""
    return ('%s (profile kubernetes). Apply it once per cluster:\n# kubectl apply -f <this file>\n'
            'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: %s\nhandler: %s\n'
            % (RUNTIMECLASS_MARKER, name, name))


def containerd_release(version_stdout: t.Any) -> tuple[int, int] | None:
    """(major, minor) from `containerd --version` (containerd github.com/containerd/containerd v1.6.20 ...)."""
    match = re.search(r'\sv?(\d+)\.(\d+)\.\d+', ' ' + str(version_stdout or ''))
    return (int(match.group(1)), int(match.group(2))) if match else None


def nvidia_container_toolkit_runtime_plan(settings: t.Any, probe: t.Any) -> dict[str, t.Any]:
    """The role's runtime plan. settings: profile, engines, owner (auto or one of module_utils/_containerd_owner's
    OWNERS), drop_in, containerd_options, cdi (nvidia_container_toolkit_cdi), runtime_name, runtime_path,
    volume_mounts and envvar_unprivileged (None: the profile's), runtimeclass_path; probe: node_probe's result,
    with _containerd_owner.probe_paths(), runtimeclass_path and the commands containerd_version and
    kubernetes_services."""
    if not isinstance(settings, dict) or not isinstance(probe, dict):
        raise AnsibleFilterError('nvidia_container_toolkit_runtime_plan: needs the settings and node_probe\'s result '
                                 'as dicts')
    profile = str(settings.get('profile') or 'default')
    if profile not in PROFILES:
        raise AnsibleFilterError('nvidia_container_toolkit_runtime_plan: profile is %s, not %r'
                                 % (' or '.join(PROFILES), profile))
    kubernetes = profile == 'kubernetes'
    paths = probe.get('paths') or {}
    commands = probe.get('commands') or {}
    name = str(settings.get('runtime_name') or 'nvidia')
    runtime_path = str(settings.get('runtime_path') or '/usr/bin/nvidia-container-runtime')
    engines = list(settings.get('engines') or [])
    options = dict(settings.get('containerd_options') or {})
    errors: list[str] = []
    notes: list[str] = []

    toolkit = dict(TOOLKIT_SETTINGS[profile])
    for key, variable in ((VOLUME_MOUNTS, 'volume_mounts'), (ENVVAR_UNPRIVILEGED, 'envvar_unprivileged')):
        if settings.get(variable) is not None:
            toolkit[key] = bool(settings[variable])

    forced = str(settings.get('owner') or 'auto')
    if forced != 'auto' and forced not in owners.OWNERS:
        raise AnsibleFilterError('nvidia_container_toolkit_runtime_plan: owner is auto or %s, not %r'
                                 % (', '.join(owners.OWNERS), forced))
    owner = owners.owner(paths) if forced == 'auto' else forced
    services = str((commands.get('kubernetes_services') or {}).get('stdout') or '')
    where = owners.target(paths, owner, str(settings.get('drop_in') or owners.rc.CONTAINERD_DROP_IN), services)
    main = owners.parse_config((paths.get(where['config']) or {}).get('text'))

    cdi: bool | None = True if settings.get('cdi') else None
    if kubernetes:
        if 'SystemdCgroup' not in options:
            kubelet = owners.kubelet_systemd_cgroup((paths.get(owners.KUBELET_CONFIG) or {}).get('text'))
            runc = owners.runc_systemd_cgroup(main)
            options['SystemdCgroup'] = next((v for v in (kubelet, runc) if v is not None), True)
        release = containerd_release((commands.get('containerd_version') or {}).get('stdout'))
        if owner == 'containerd' and release is not None and release < FIRST_WITH_CRI_CDI:
            notes.append('containerd %d.%d has no CDI in its CRI plugin (it came in 1.7), so enable_cdi is not '
                         'written; the device plugin\'s cdi-cri and cdi-annotations strategies need containerd 1.7 '
                         'or later.' % release)
            cdi = None
        else:
            cdi = True
    if owner == 'eks':
        where = owners.target(paths, owner, where['drop_in'], services,
                              {'name': name, 'path': runtime_path, 'options': options, 'cdi': cdi})
    if 'containerd' in engines and where['error']:
        errors.append(where['error'])
    if 'containerd' in engines and owner in owners.RANCHER_DIRS and not where['error'] and where['service'] is None:
        notes.append('%s is not running, so nothing is restarted: it reads %s when it starts.'
                     % (' or '.join(owners.RANCHER_SERVICES[owner]), where['drop_in']))
    if 'containerd' in engines and owner in owners.RANCHER_DIRS and where['version'] == 2 and not where['error']:
        notes.append('%s is a config version 2 file, so the drop-in repeats its CRI plugin section (containerd 1.x '
                     'replaces whole sections on import); run the role again after upgrading %s, so that the copy '
                     'follows what %s renders.' % (where['config'], owner, owner))
    if kubernetes and 'containerd' not in engines:
        notes.append('nvidia_container_toolkit_engines does not name containerd, so the CRI handler is left to %s.'
                     % ('nodeadm' if owner == 'eks' else 'whoever configures containerd'))

    manifest_path = str(settings.get('runtimeclass_path') or '/etc/accel-nodes/runtimeclass-nvidia.yaml')
    manifest = {'path': manifest_path, 'owner': 'root', 'group': 'root', 'mode': '0644',
                'marker': RUNTIMECLASS_MARKER}
    if kubernetes:
        manifest.update(state='present', content=runtimeclass(name))
    else:
        manifest.update(state='absent')
    return {
        'profile': profile,
        'owner': owner,
        'containerd': {
            'config': where['config'], 'drop_in': where['drop_in'], 'version': where['version'],
            'service': where['service'], 'options': options, 'cdi': cdi,
            'restart_topic': RESTART_TOPICS.get(owner, RANCHER_RESTART_TOPIC),
        },
        'toolkit': toolkit,
        'runtimeclass': [manifest],
        'errors': errors,
        'notes': notes,
    }


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'nvidia_container_toolkit_runtime_plan': nvidia_container_toolkit_runtime_plan}
