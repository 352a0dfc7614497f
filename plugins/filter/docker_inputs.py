# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The input checks of accel.nodes.docker that argument_specs cannot express, in one place, so that the role
checks them in one task. Documented in docker_input_errors.yml next to this file."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError


def docker_input_errors(engines: t.Any, install_source: str = 'distro', offered: t.Any = None,
                        os_family: str = '', distribution: str = '', daemon_options: t.Any = None) -> list[str]:
    """What is wrong with the docker role's inputs on this host, one sentence group each; [] when nothing is.
    offered: the role's __docker_packages (install source -> engine -> packages) for this distribution."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError('docker_input_errors: engines must be a list')
    engines, options = list(engines), dict(daemon_options or {})
    errors = []
    if not engines:
        errors.append('docker_engines is empty. Ask for docker, containerd or both.')
    if os_family not in ('Debian', 'RedHat'):
        errors.append('accel.nodes.docker supports Debian, Ubuntu, Amazon Linux and RHEL-like systems; this node '
                      'runs %s (%s family).' % (distribution, os_family))
    elif install_source != 'none':
        missing = [e for e in engines if e not in dict((offered or {}).get(install_source) or {})]
        if missing:
            errors.append('docker_install_source=%s offers no %s on %s. %s' % (
                install_source, ' or '.join(missing), distribution,
                'Docker publishes no repository for Amazon Linux: use docker_install_source=distro.'
                if distribution == 'Amazon' else
                'This distribution ships Podman, not Docker: use docker_install_source=docker_ce.'))
    reserved = [k for k in ('runtimes', 'default-runtime') if k in options]
    if reserved:
        errors.append('docker_daemon_options sets %s, which would replace the runtimes other roles registered. '
                      'Register a runtime with accel.nodes.container_runtime (name, path, default) instead.'
                      % ' and '.join(reserved))
    if options and 'docker' not in engines:
        errors.append('docker_daemon_options configures Docker, but docker_engines (%s) has no docker. Add docker '
                      'or drop the options.' % ', '.join(engines))
    return errors


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'docker_input_errors': docker_input_errors}
