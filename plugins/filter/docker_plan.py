# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Every decision of accel.nodes.docker that does not wait on the node, as one plan (issue 29).
Documented in docker_plan.yml next to this file.

tasks/main.yml loads the distribution's package names (vars/<distribution>.yml), sets docker_plan from this
filter and prints it; later tasks and the setup-<os_family>.yml files read keys of it. What the node has
(missing packages, the configuration each engine runs with) is engine_state's to read, after the plan.
"""
from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.docker_inputs import docker_input_errors

# The engines' systemd units (the docker.io/docker-ce and containerd/containerd.io packages ship them).
UNITS = {'docker': 'docker.service', 'containerd': 'containerd.service'}
# containerd's files beside which an interrupted write leaves its temporary file: engine_state's
# containerd_dir default and accel.nodes.container_runtime's drop-in.
CONTAINERD_CONFIG_PATHS = ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-accel-nodes.toml']
MISSING_HINT = 'docker_install_source is none: install it first, or set docker_install_source to distro or docker_ce.'


def docker_plan(settings: t.Any) -> dict[str, t.Any]:
    """The docker role's plan from its settings (the role's variables without their prefix, the distribution's
    package table as `offered`, Docker's repository path for it as `ce_distro`, the key fingerprints Docker
    publishes for it as `ce_key_fingerprints`, the host's `os_family` and `distribution`, and `live`)."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError('docker_plan: settings must be a dict')
    s = dict(settings)
    engines = list(s.get('engines') or [])
    source = s.get('install_source') or 'distro'
    offered = dict(s.get('offered') or {})
    options = dict(s.get('daemon_options') or {})
    live = boolean(s.get('live', True), strict=False)
    errors = docker_input_errors(engines, source, offered, s.get('os_family') or '', s.get('distribution') or '',
                                 options)
    packages: list[str] = []
    if source != 'none' and not errors:
        for name in [p for e in engines for p in (offered.get(source) or {}).get(e) or []] \
                + list(s.get('extra_packages') or []) + list(s.get('python_packages') or []):
            if name not in packages:
                packages.append(name)
    repo = None
    if source == 'docker_ce' and not errors:
        url = '%s/%s' % (str(s.get('repo_url') or '').rstrip('/'), s.get('ce_distro') or '')
        fingerprints = s.get('repo_key_fingerprint') or s.get('ce_key_fingerprints') or []
        repo = {'url': url, 'distro': s.get('ce_distro') or '', 'key_url': s.get('repo_key_url') or url + '/gpg',
                'key_fingerprints': [fingerprints] if isinstance(fingerprints, str) else list(fingerprints),
                'channel': s.get('repo_channel') or 'stable'}
    config_path = s.get('daemon_config_path') or '/etc/docker/daemon.json'
    summary = 'docker: %s from %s%s; %s%s' % (
        ' and '.join(engines) or 'no engine', source,
        ' (%s)' % repo['url'] if repo else '',
        'enabled and started' if live else 'enabled, not started (bake mode or a chroot)',
        '; %d daemon.json option(s) merged into %s' % (len(options), config_path) if options else '')
    return {
        'errors': errors,
        'live': live,
        'packages': packages,
        'missing_hint': MISSING_HINT if source == 'none' else '',
        'repo': repo,
        'units': [UNITS[e] for e in engines if e in UNITS],
        'config_paths': [config_path] + CONTAINERD_CONFIG_PATHS,
        'merge_options': bool(options) and 'docker' in engines,
        'summary': ('docker: the inputs are wrong' if errors else summary),
    }


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'docker_plan': docker_plan}
