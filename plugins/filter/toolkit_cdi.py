# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Who keeps the CDI spec of the NVIDIA Container Toolkit on a node, and what the role does about it.
Documented in nvidia_container_toolkit_cdi_plan.yml next to this file.

Toolkit 1.18 and later ship nvidia-cdi-refresh.service and .path, which the
package enables and starts (v1.20.0 deployments/systemd/, packaging/debian/rules
`dh $@ --with systemd`). The service runs `nvidia-ctk cdi generate` into
/var/run/cdi/nvidia.yaml at boot and whenever /lib/modules/<kernel>/modules.dep
or /usr/bin/nvidia-ctk changes, where its conditions hold: an nvidia-smi in
/usr/bin or /usr/sbin (a packaged driver's), and nvidia.ko or nvidia-current.ko
listed in modules.dep (a driver installed as kernel modules, as DKMS and the
distributions install it), or WSL's. A spec of the
role's in /etc/cdi beside it would define the same devices twice, and the CDI
cache takes /var/run/cdi's silently (container-device-interface pkg/cdi/cache.go:
the later spec directory wins a conflict). So one of them keeps the spec:

- vendor: the refresh units, where they can run (the condition holds). They
  follow driver changes between runs of the role, and at every boot; the role
  enables them (unmasking them where the role masked them when it kept the
  spec), gives the service the driver's PATH where the driver lives outside the
  standard one, starts it where there is no spec yet or its PATH has just
  changed, and removes a spec an earlier run of the role generated.
- role: /etc/cdi/nvidia.yaml from the role, regenerated when the driver changes,
  as before 1.18; on 1.18 and later the refresh units are disabled, so that a
  second spec cannot appear (for example after a DKMS driver is installed). A
  spec the units left in /var/run/cdi goes, whatever the version: a toolkit
  pinned back below 1.18 takes the units away, not their spec.
"""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

REFRESH_UNITS = ['nvidia-cdi-refresh.path', 'nvidia-cdi-refresh.service']
VENDOR_SPEC = '/var/run/cdi/nvidia.yaml'
# The service's EnvironmentFile, which overrides its Environment= (deployments/systemd/nvidia-cdi-refresh.service).
ENV_FILE = '/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env'
# The first release with the refresh units (CHANGELOG.md: v1.18.0-rc.1, "Add nvidia-cdi-refresh service").
FIRST_WITH_REFRESH = (1, 18)


def toolkit_release(version: t.Any) -> tuple[int, ...] | None:
    """(major, minor, patch) of a toolkit package version such as 1.20.0-1, None where it is not one."""
    match = re.match(r'^(\d+)\.(\d+)\.(\d+)', str(version or ''))
    return tuple(int(n) for n in match.groups()) if match else None


def nvidia_container_toolkit_cdi_plan(settings: t.Any, probe: t.Any) -> dict[str, t.Any]:
    """The role's CDI plan. settings: cdi, refresh (auto, vendor or role), version (the toolkit's, as installed
    or to be installed), installing (the packages change in this run, and their scripts enable the units),
    live, os_family, spec_path, record_path, driver_bin_dirs, default_path; probe: node_probe's result, with the
    commands refresh_condition (the service's own ExecCondition, rc 0 where it holds) and refresh_units
    (systemctl is-enabled of both units) and the paths spec_path, record_path, driver_bin_dirs, the vendor's
    spec and ENV_FILE."""
    if not isinstance(settings, dict) or not isinstance(probe, dict):
        raise AnsibleFilterError('nvidia_container_toolkit_cdi_plan: needs the settings and node_probe\'s result as dicts')
    refresh = str(settings.get('refresh') or 'auto')
    if refresh not in ('auto', 'vendor', 'role'):
        raise AnsibleFilterError('nvidia_container_toolkit_cdi_plan: refresh is auto, vendor or role, not %r' % refresh)
    release = toolkit_release(settings.get('version'))
    has_units = release is not None and release[:2] >= FIRST_WITH_REFRESH
    commands = probe.get('commands') or {}
    paths = probe.get('paths') or {}
    condition = (commands.get('refresh_condition') or {}).get('rc') == 0
    enabled = [line.strip() for line in str((commands.get('refresh_units') or {}).get('stdout') or '').splitlines()]

    def exists(path: str) -> bool:
        return bool((paths.get(path) or {}).get('exists'))

    plan: dict[str, t.Any] = {
        'owner': 'none', 'reason': '', 'units': 'untouched', 'generate': False, 'spec': '',
        'remove': [], 'refresh_now': False, 'env_line': '', 'env_in_place': True, 'unit_states': {}, 'mask': False,
        'unmask': False,
    }
    if not settings.get('cdi'):
        plan['reason'] = ('CDI mode is off (nvidia_container_toolkit_cdi: false): the role generates no spec%s'
                          % ('; the toolkit\'s refresh units stay as the package left them' if has_units else ''))
        return plan
    if not has_units:
        owner, why = 'role', 'toolkit %s has no nvidia-cdi-refresh units' % settings.get('version')
    elif refresh != 'auto':
        owner, why = refresh, 'nvidia_container_toolkit_cdi_refresh is %s' % refresh
    elif condition:
        owner, why = 'vendor', ('toolkit %s\'s nvidia-cdi-refresh can run here (the driver is in modules.dep) and '
                                'follows driver changes at boot' % settings.get('version'))
    else:
        owner, why = 'role', ('nvidia-cdi-refresh would not run here: its conditions want the nvidia-smi of a '
                              'packaged driver (/usr/bin, /usr/sbin) and nvidia.ko or nvidia-current.ko in '
                              '/lib/modules/<kernel>/modules.dep (a driver installed elsewhere, or none yet)')
    plan.update(owner=owner, reason='%s keeps the CDI spec: %s' % ('NVIDIA\'s nvidia-cdi-refresh' if owner == 'vendor'
                                                                   else 'the role', why))
    record = str(settings.get('record_path') or '')
    if owner == 'vendor':
        plan['spec'] = VENDOR_SPEC
        plan['units'] = 'enabled' if enabled != ['enabled', 'enabled'] else 'kept'
        # The path unit watches for driver and toolkit changes; the service runs when it, or the role, starts it.
        plan['unit_states'] = {REFRESH_UNITS[0]: 'started', REFRESH_UNITS[1]: None}
        # The role masks them on dnf where it keeps the spec, and systemctl does not enable a masked unit.
        plan['unmask'] = 'masked' in enabled
        plan['remove'] = [p for p in (str(settings.get('spec_path') or ''), record) if p and exists(p)] \
            if record and exists(record) else []
        # nvidia-ctk finds the driver's executables through PATH only (internal/lookup/path.go): a driver
        # outside the standard PATH goes on the service's, in its EnvironmentFile (a line of its own).
        outside = [d for d in settings.get('driver_bin_dirs') or [] if exists(d)]
        if outside:
            plan['env_line'] = 'PATH=%s' % ':'.join(outside + list(settings.get('default_path') or []))
            env_text = str((paths.get(ENV_FILE) or {}).get('text') or '')
            plan['env_in_place'] = plan['env_line'] in env_text.splitlines()
        # The service writes the spec where there is none yet, and again where its PATH changes now: the path
        # unit does not watch the environment file, so a spec written without the driver's PATH would stay.
        plan['refresh_now'] = bool(settings.get('live')) and (not exists(VENDOR_SPEC) or not plan['env_in_place'])
    else:
        plan['spec'] = str(settings.get('spec_path') or '')
        plan['generate'] = True
        if has_units:
            installing = bool(settings.get('installing'))
            plan['units'] = 'disabled' if installing or 'enabled' in enabled else 'kept'
            plan['unit_states'] = dict((unit, 'stopped') for unit in REFRESH_UNITS)
            # dnf's %posttrans starts them whether they are enabled or not (v1.20.0 packaging/rpm/SPECS).
            plan['mask'] = settings.get('os_family') == 'RedHat'
        # The units' spec goes whatever the version: one pinned back below 1.18 after a later one ran has no
        # units, but their spec stays in /var/run/cdi until the next boot, and defines every device twice.
        vendors = exists(VENDOR_SPEC) or (has_units and bool(settings.get('installing')))
        plan['remove'] = [VENDOR_SPEC] if vendors and plan['spec'] != VENDOR_SPEC else []
    return plan


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'nvidia_container_toolkit_cdi_plan': nvidia_container_toolkit_cdi_plan}
