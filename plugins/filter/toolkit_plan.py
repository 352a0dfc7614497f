# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Every decision of accel.nodes.nvidia_container_toolkit, as one plan (issue 29).
Documented in nvidia_container_toolkit_plan.yml and nvidia_container_toolkit_probe_request.yml next to this file.

tasks/main.yml asks the node once (nvidia_container_toolkit_probe_request gives node_probe its arguments),
sets nvidia_container_toolkit_plan from this filter, prints it, and every later task reads a key of it. The
parts are judged by the filters that already did it one variable at a time: where the runtime goes
(toolkit_runtime.py), who keeps the CDI spec (toolkit_cdi.py), the inputs (toolkit_inputs.py), the packages
(packages.py), and whether a module would change its file (config_files.py, paths.py, which run the
modules' own code on the text the probe read). What only a later task can know (check mode's
install_pending) stays in the tasks.
"""
from __future__ import annotations

import os
import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.config_files import containerd_runtime_in_place, \
    dev_char_dry_run, dev_char_symlinks_in_place, docker_runtime_in_place, toml_settings_in_place
from ansible_collections.accel.nodes.plugins.filter.docker_cgroup import docker_cgroup_driver
from ansible_collections.accel.nodes.plugins.filter.packages import packages_to_change
from ansible_collections.accel.nodes.plugins.filter.paths import paths_to_write
from ansible_collections.accel.nodes.plugins.filter.toolkit_cdi import ENV_FILE, REFRESH_UNITS, VENDOR_SPEC, \
    nvidia_container_toolkit_cdi_plan
from ansible_collections.accel.nodes.plugins.filter.toolkit_inputs import nvidia_container_toolkit_input_errors
from ansible_collections.accel.nodes.plugins.filter.toolkit_runtime import nvidia_container_toolkit_runtime_plan
from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners
from ansible_collections.accel.nodes.plugins.module_utils._apt_sources import sources_path, sources_text
from ansible_collections.accel.nodes.plugins.module_utils._openpgp import OpenPGPError, normalize_fingerprint

# The packages that make up the toolkit (v1.20.0 packaging/debian/control); the version applies to all.
PACKAGES = ['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
            'libnvidia-container1']
# nvidia-docker v2 era packages that conflict with the toolkit (its install guide removes them).
LEGACY_PACKAGES = ['nvidia-docker2', 'nvidia-container-runtime']
# The runtime name registered with the engines (nvidia-ctk runtime configure's default).
RUNTIME_NAME = 'nvidia'
# Where the role records the driver version the CDI spec was generated for.
STATE_DIR = '/var/lib/accel-nodes/nvidia-container-toolkit'
CDI_RECORD = STATE_DIR + '/cdi-driver-version'
# The udev rule that recreates the /dev/char symlinks whenever the driver loads.
DEV_CHAR_RULE = '/etc/udev/rules.d/71-nvidia-dev-char.rules'
# nvidia-ctk's own default search path (internal/lookup/path.go, v1.17.8).
DEFAULT_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']
# The config.toml keys that the typed variables manage (nvidia_container_toolkit_config_extra may not set them).
TYPED_KEYS = ['nvidia-container-runtime.mode', 'nvidia-container-runtime.debug', 'nvidia-container-cli.debug',
              'nvidia-container-cli.no-cgroups', 'nvidia-container-cli.ldconfig', 'nvidia-container-cli.load-kmods',
              'accept-nvidia-visible-devices-as-volume-mounts',
              'accept-nvidia-visible-devices-envvar-when-unprivileged']
# In CDI mode, whether the refresh service would run here, by its own conditions (v1.20.0
# deployments/systemd/nvidia-cdi-refresh.service: ConditionPathExists= on an nvidia-smi of a packaged driver,
# then ExecCondition= on modules.dep, %v being the running kernel).
REFRESH_CONDITION = ('{ [ -e /usr/bin/nvidia-smi ] || [ -e /usr/sbin/nvidia-smi ] || [ -e /usr/lib/wsl/lib/nvidia-smi ]; }'
                     ' && { grep -qE "/(nvidia|nvidia-current)[.]ko" /lib/modules/$(uname -r)/modules.dep'
                     ' || [ -e /dev/dxg ]; }')
CONTAINERD_VERSION = ['containerd', '--version']


def _settings(settings: t.Any, name: str) -> dict[str, t.Any]:
    if not isinstance(settings, dict):
        raise AnsibleFilterError('%s: needs the role\'s settings as a dict' % name)
    return settings


def _dict(value: t.Any) -> dict[str, t.Any]:
    return value if isinstance(value, dict) else {}


def _ctk(settings: dict[str, t.Any]) -> str:
    """nvidia-ctk ships next to the runtime."""
    return os.path.join(os.path.dirname(str(settings['runtime_path'])), 'nvidia-ctk')


def _drop_in_paths(settings: dict[str, t.Any]) -> list[str]:
    """The role's containerd drop-in and NVIDIA's conf.d/99-nvidia.toml beside it, which the module replaces."""
    drop_in = str(settings['containerd_config_path'])
    return [drop_in, os.path.join(os.path.dirname(drop_in), '99-%s.toml' % RUNTIME_NAME)]


def _dev_char_asked(settings: dict[str, t.Any], live: bool) -> bool:
    return settings['dev_char_symlinks'] != 'never' and live


def _uris(settings: dict[str, t.Any], repository: t.Any) -> str:
    """The repository's URL: the tree, the channel and the per-OS path (apt's $(ARCH) or dnf's $basearch)."""
    return '%s/%s/%s' % (str(settings['repo_url']).rstrip('/'), settings['repo_channel'],
                         _dict(repository).get('path', ''))


def _apt_repository(settings: dict[str, t.Any], repository: t.Any) -> dict[str, t.Any]:
    """The files accel.nodes.package_repository keeps on apt, where the role installs the packages: the .sources
    file, the keyring and the legacy files it removes; empty elsewhere."""
    repo = _dict(repository)
    if repo.get('family') != 'Debian' or settings['state'] != 'present' or not boolean(settings['install'], strict=False):
        return {}
    name, keyring = str(repo['name']), str(repo['keyring'])
    return {'sources': sources_path(name), 'text': sources_text(name, keyring, ['deb'], [_uris(settings, repo)], ['/']),
            'keyring': keyring, 'armored': repo.get('keyring_format') == 'armored',
            'legacy': [str(f) for f in repo.get('legacy_files') or []]
            if boolean(settings['remove_legacy'], strict=False) else []}


def _repository_kept(settings: dict[str, t.Any], apt: dict[str, t.Any], probe: dict[str, t.Any]) -> bool:
    """Whether accel.nodes.package_repository would change nothing: the .sources file as it writes it, a keyring
    holding exactly the accepted fingerprints in the format asked for, both with mode 0644, and no legacy file.
    A changed fingerprint list runs the module, which downloads the key again."""
    paths, keyrings = probe.get('paths') or {}, probe.get('keyrings') or {}
    keyring, key = paths.get(apt['keyring']) or {}, keyrings.get(apt['keyring']) or {}
    try:
        accepted = {normalize_fingerprint(str(f)) for f in settings['repo_key_fingerprint'] or []}
    except OpenPGPError:
        return False  # the module says what is wrong with it
    # The .sources file is text, judged as paths_content judges its files; the keyring is binary or armored.
    sources = [{'path': apt['sources'], 'content': apt['text'], 'mode': '0644'}]
    return (not paths_to_write(sources, paths)
            and keyring.get('type') == 'file' and keyring.get('mode') == '0644' and not key.get('error')
            and bool(accepted) and set(key.get('fingerprints') or []) == accepted
            and bool(key.get('armored')) == apt['armored']
            and not any((paths.get(f) or {}).get('exists') for f in apt['legacy']))


def nvidia_container_toolkit_probe_request(settings: t.Any, live: t.Any, repository: t.Any = None) -> dict[str, t.Any]:
    """node_probe's packages, paths, keyrings, commands and directories: what nvidia_container_toolkit_plan
    reads. repository: the per-OS layout of NVIDIA's repository (vars/<os_family>.yml), whose files are read on apt."""
    settings = _settings(settings, 'nvidia_container_toolkit_probe_request')
    live = boolean(live, strict=False)
    apt = _apt_repository(settings, repository)
    containerd = 'containerd' in list(settings['engines'])
    paths = [str(settings['runtime_path']), str(settings['cdi_spec_path']), STATE_DIR, CDI_RECORD,
             str(settings['config_path']), str(settings['docker_config_path']), DEV_CHAR_RULE, VENDOR_SPEC, ENV_FILE,
             str(settings['runtimeclass_path']), os.path.dirname(str(settings['runtimeclass_path']))]
    paths += [str(d) for d in settings['driver_bin_dirs'] or []]
    if apt:
        paths += [apt['sources'], apt['keyring']] + apt['legacy']
    commands: dict[str, t.Any] = {}
    if _dev_char_asked(settings, live):
        commands['dev_char'] = dev_char_dry_run(_ctk(settings), '/dev/char', settings['dev_char_create_all'])
    if containerd:
        paths += owners.probe_paths() + _drop_in_paths(settings)
        commands.update(containerd_version=CONTAINERD_VERSION, kubernetes_services=owners.probe_services())
    if settings['cdi']:
        commands.update(refresh_condition=['/bin/sh', '-c', REFRESH_CONDITION],
                        refresh_units=['systemctl', 'is-enabled'] + REFRESH_UNITS)
    return {
        'packages': ['^(%s)$' % '|'.join(PACKAGES + LEGACY_PACKAGES)],
        'paths': paths,
        'keyrings': [apt['keyring']] if apt else [],
        'commands': commands,
        'directories': ['/dev/char'] if _dev_char_asked(settings, live) else [],
    }


def _config_settings(settings: dict[str, t.Any], runtime: dict[str, t.Any]) -> tuple[dict[str, t.Any], list[str]]:
    """The config.toml keys set to a value: the typed variables, ldconfig and the debug logs only when given (an
    empty debug log is removed instead), the profile's keys, then the extra keys; and the keys to remove."""
    values: dict[str, t.Any] = {
        'nvidia-container-runtime.mode': settings['mode'],
        'nvidia-container-cli.no-cgroups': settings['no_cgroups'],
        'nvidia-container-cli.load-kmods': settings['load_kmods'],
    }
    values.update(runtime['toolkit'])
    for key, name in (('nvidia-container-cli.ldconfig', 'ldconfig'), ('nvidia-container-runtime.debug', 'runtime_debug'),
                      ('nvidia-container-cli.debug', 'cli_debug')):
        if settings[name]:
            values[key] = settings[name]
    values.update(dict(settings['config_extra'] or {}))
    remove = [key for key, name in (('nvidia-container-runtime.debug', 'runtime_debug'),
                                    ('nvidia-container-cli.debug', 'cli_debug')) if not settings[name]]
    return values, remove


def _state_dir_kept(paths: dict[str, t.Any]) -> bool:
    seen = paths.get(STATE_DIR) or {}
    return {k: seen.get(k) for k in ('type', 'mode', 'uid', 'gid')} == \
        {'type': 'directory', 'mode': '0755', 'uid': 0, 'gid': 0}


def nvidia_container_toolkit_plan(settings: t.Any, probe: t.Any, node: t.Any) -> dict[str, t.Any]:
    """The role's plan. settings: the role's variables without their nvidia_container_toolkit_ prefix; probe:
    node_probe's result for nvidia_container_toolkit_probe_request; node: os_family, distribution,
    version_separator (the OS vars'), live, driver_version (the accelerator facts' userspace version, else the
    kernel module's), docker_cgroup (what Docker said: engine_state or docker info), daemon_json (its text
    where Docker did not answer), cgroup_v2."""
    settings = _settings(settings, 'nvidia_container_toolkit_plan')
    if not isinstance(probe, dict) or not isinstance(node, dict):
        raise AnsibleFilterError('nvidia_container_toolkit_plan: needs node_probe\'s result and the node as dicts')
    paths = probe.get('paths') or {}
    seen = probe.get('packages') or {}
    live = boolean(node.get('live', False), strict=False)
    present = settings['state'] == 'present'
    install = boolean(settings['install'], strict=False)
    engines = list(settings['engines'] or [])
    cdi = boolean(settings['cdi'], strict=False)
    mode = str(settings['mode'])
    default_runtime = (mode == 'cdi') if settings['default_runtime'] is None \
        else boolean(settings['default_runtime'], strict=False)
    driver_version = str(node.get('driver_version') or '')

    runtime = nvidia_container_toolkit_runtime_plan({
        'profile': settings['profile'], 'engines': engines, 'owner': settings['containerd_owner'],
        'drop_in': settings['containerd_config_path'], 'containerd_options': settings['containerd_options'],
        'cdi': cdi, 'runtime_name': RUNTIME_NAME, 'runtime_path': settings['runtime_path'],
        'volume_mounts': settings['accept_visible_devices_as_volume_mounts'],
        'envvar_unprivileged': settings['accept_visible_devices_envvar_when_unprivileged'],
        'runtimeclass_path': settings['runtimeclass_path']}, probe)
    errors = nvidia_container_toolkit_input_errors(
        {'ldconfig': settings['ldconfig'], 'runtime_debug': settings['runtime_debug'], 'cli_debug': settings['cli_debug']},
        TYPED_KEYS, settings['config_extra'], str(node.get('os_family') or ''), str(node.get('distribution') or ''),
        needs_repository=install or not present)
    if present:
        errors += runtime['errors']

    # What dpkg's status (or rpm) says: apt and the holds run only where they would change something.
    version = settings['version']
    pinned_installed = not packages_to_change(seen, PACKAGES, version=version)
    installing = install and not pinned_installed
    hold = boolean(settings['hold'], strict=False)
    packages = {
        'names': PACKAGES,
        'pinned': ['%s%s%s' % (name, node.get('version_separator') or '=', version) for name in PACKAGES],
        'legacy': LEGACY_PACKAGES,
        'legacy_installed': packages_to_change(seen, LEGACY_PACKAGES, want='absent'),
        'install': installing,
        'hold': bool(packages_to_change(seen, PACKAGES, selection='hold' if hold else 'install')),
    }
    # NVIDIA's repository: on apt, the probe shows whether package_repository would change anything; where it
    # would not, and no package changes, tasks/setup-<os_family>.yml is not included at all.
    apt = _apt_repository(settings, node.get('repository'))
    repo_kept = bool(apt) and _repository_kept(settings, apt, probe)
    repository = {'uris': _uris(settings, node.get('repository')), 'kept': repo_kept,
                  'run': present and install and not repo_kept}
    packages['setup'] = present and install and (repository['run'] or installing or packages['hold'] or bool(
        boolean(settings['remove_legacy'], strict=False) and packages['legacy_installed']))

    # config.toml and the engines' files: is each as its module would leave it? config.toml is judged only where
    # no package install can rewrite it after the probe.
    values, remove = _config_settings(settings, runtime)
    config_path = str(settings['config_path'])
    config_in_place = config_path in paths and toml_settings_in_place(paths[config_path], values, remove)
    config = {'settings': values, 'remove': remove, 'write': installing or not config_in_place}
    docker_path = str(settings['docker_config_path'])
    containerd = runtime['containerd']
    engines_plan = {
        # A file the probe did not read is left to the module, which reads it.
        'docker': 'docker' in engines and (docker_path not in paths or not docker_runtime_in_place(
            paths[docker_path], RUNTIME_NAME, settings['runtime_path'], default=default_runtime,
            cdi=True if cdi else None)),
        'containerd': 'containerd' in engines and not containerd_runtime_in_place(
            paths, RUNTIME_NAME, settings['runtime_path'], options=containerd['options'], default=default_runtime,
            cdi=containerd['cdi'], drop_in=containerd['drop_in'], main_path=containerd['config']),
    }

    # The /dev/char symlinks: always, or auto where an engine uses the systemd cgroup driver.
    systemd_docker = present and 'docker' in engines and docker_cgroup_driver(
        node.get('docker_cgroup') or '', node.get('daemon_json') or '', node.get('cgroup_v2') or False) == 'systemd'
    systemd_containerd = present and 'containerd' in engines and \
        boolean(containerd['options'].get('SystemdCgroup', False), strict=False)
    wanted = settings['dev_char_symlinks'] == 'always' or \
        (settings['dev_char_symlinks'] == 'auto' and (systemd_docker or systemd_containerd))
    links = live and bool(driver_version)
    dev_char = {'state': 'present' if wanted else 'absent', 'links': links, 'ctk': _ctk(settings), 'rule': DEV_CHAR_RULE,
                'systemd_cgroups': systemd_docker or systemd_containerd}
    dev_char['run'] = (wanted or bool((paths.get(DEV_CHAR_RULE) or {}).get('exists'))) and (
        installing or not dev_char_symlinks_in_place(probe, DEV_CHAR_RULE, dev_char['ctk'], dev_char['state'], links))

    # The CDI spec: who keeps it, and whether the role's spec is current for this driver and search path.
    cdi_plan = nvidia_container_toolkit_cdi_plan({
        'cdi': cdi, 'refresh': settings['cdi_refresh'],
        'version': version if install else (seen.get('nvidia-container-toolkit-base') or {}).get('version', ''),
        'installing': installing, 'live': live, 'os_family': node.get('os_family'),
        'spec_path': settings['cdi_spec_path'], 'record_path': CDI_RECORD,
        'driver_bin_dirs': settings['driver_bin_dirs'], 'default_path': DEFAULT_PATH}, probe)
    bin_dirs = [str(d) for d in settings['driver_bin_dirs'] or []]
    inputs = driver_version + ('\n' + ':'.join(bin_dirs) if bin_dirs else '')
    record = [{'path': CDI_RECORD, 'content': inputs + '\n', 'owner': 'root', 'group': 'root', 'mode': '0644'}]
    record_kept = not paths_to_write(record, paths)
    state_dir_kept = _state_dir_kept(paths)
    spec_seen = bool((paths.get(str(settings['cdi_spec_path'])) or {}).get('exists'))
    cdi_plan.update(
        state_dir=STATE_DIR, state_dir_kept=state_dir_kept, record=record, record_kept=record_kept,
        # nvidia-ctk writes the driver's files into the spec: it goes stale when the driver changes, and only then.
        stale=not spec_seen or str((paths.get(CDI_RECORD) or {}).get('text') or '').strip() != inputs,
        kept=live and bool(driver_version) and spec_seen and record_kept and state_dir_kept,
        path=':'.join(bin_dirs + DEFAULT_PATH), vendor_spec=VENDOR_SPEC, env_file=ENV_FILE, units_list=REFRESH_UNITS,
    )
    cdi_plan['run'] = cdi_plan['units'] in ('enabled', 'disabled') or bool(cdi_plan['remove']) \
        or cdi_plan['refresh_now'] or not cdi_plan['env_in_place'] or (cdi_plan['generate'] and not cdi_plan['kept'])

    manifest_dir = os.path.dirname(str(settings['runtimeclass_path']))
    plan = {
        'errors': errors,
        'notes': runtime['notes'],
        'live': live,
        'driver_version': driver_version,
        'runtime_name': RUNTIME_NAME,
        'default_runtime': default_runtime,
        'runtime': runtime,
        # The k3s or rke2 unit to restart after its drop-in changed: the one that runs, on a live host.
        'owner_restart': live and bool(runtime['containerd']['service']),
        'packages': packages,
        'repository': repository,
        'config': config,
        'engines': engines_plan,
        'dev_char': dev_char,
        'cdi': cdi_plan,
        'runtimeclass': {
            'dir': manifest_dir,
            'make_dir': settings['profile'] == 'kubernetes' and not (paths.get(manifest_dir) or {}).get('exists'),
            'write': bool(paths_to_write(runtime['runtimeclass'], paths)),
        },
        'state_paths': [str(settings['cdi_spec_path']), STATE_DIR, DEV_CHAR_RULE, str(settings['runtimeclass_path'])],
        # Where check mode may find the runtime missing: the probe saw it before any install.
        'runtime_seen': bool((paths.get(str(settings['runtime_path'])) or {}).get('exists')),
    }
    plan['summary'] = _summary(plan, settings, install, present)
    return plan


def _summary(plan: dict[str, t.Any], settings: dict[str, t.Any], install: bool, present: bool) -> str:
    """The plan in one line, for the log: what runs and what the probe found already in place."""
    if plan['errors']:
        return 'refused: %d input error(s), nothing changes' % len(plan['errors'])
    if not present:
        return 'remove the toolkit, its registrations and its files'

    def act(run: bool, what: str) -> str:
        return what if run else 'kept'
    packages = plan['packages']
    parts = [
        'packages %s' % (('install %s' % settings['version'] if packages['install'] else 'kept at %s' % settings['version'])
                         if install else 'not managed'),
        'repository %s' % (act(plan['repository']['run'], 'applied') if install else 'not managed'),
        'holds %s' % (act(packages['hold'], 'set') if install else 'not managed'),
        'config.toml %s' % act(plan['config']['write'], 'written'),
        'docker %s' % (act(plan['engines']['docker'], 'registered') if 'docker' in settings['engines'] else 'not used'),
        'containerd %s' % (act(plan['engines']['containerd'], 'registered in ' + plan['runtime']['containerd']['drop_in'])
                           if 'containerd' in settings['engines'] else 'not used'),
        '/dev/char %s %s' % (plan['dev_char']['state'], act(plan['dev_char']['run'], 'applied')),
        'CDI %s' % (('%s, %s' % (plan['cdi']['owner'], act(plan['cdi']['run'], 'applied'))) if settings['cdi'] else 'off'),
    ]
    return '; '.join(parts)


class FilterModule(object):
    """accel.nodes filters: the NVIDIA Container Toolkit role's probe request and plan."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'nvidia_container_toolkit_plan': nvidia_container_toolkit_plan,
                'nvidia_container_toolkit_probe_request': nvidia_container_toolkit_probe_request}
