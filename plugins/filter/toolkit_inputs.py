# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The input checks of accel.nodes.nvidia_container_toolkit that argument_specs cannot express, in one place,
so that the role checks them in one task. Documented in nvidia_container_toolkit_input_errors.yml."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError


def nvidia_container_toolkit_input_errors(settings: t.Any, typed_keys: t.Any = (), config_extra: t.Any = None,
                                          os_family: str = '', distribution: str = '',
                                          needs_repository: bool = True) -> list[str]:
    """What is wrong with the toolkit role's inputs on this host, one sentence group each; [] when nothing is.
    settings: ldconfig, runtime_debug and cli_debug as the role's variables give them."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError('nvidia_container_toolkit_input_errors: settings must be a dict')
    errors = []
    if needs_repository and os_family not in ('Debian', 'RedHat'):
        errors.append('accel.nodes.nvidia_container_toolkit installs from NVIDIA\'s apt and rpm repositories and '
                      'supports Debian, Ubuntu, EL and Amazon Linux; this host is %s (%s family). Install the '
                      'toolkit yourself and set nvidia_container_toolkit_install=false to only configure it.'
                      % (distribution, os_family))
    names = ('ldconfig', 'runtime_debug', 'cli_debug')
    ldconfig, runtime_debug, cli_debug = (str(settings.get(k) or '') for k in names)
    # An "@" prefix names ldconfig on the host (nvidia-container-toolkit v1.17.8 internal/config/cli.go,
    # ldconfigPath.isHostPath; its default is "@/sbin/ldconfig", internal/config/config.go); debug logs are files.
    if (ldconfig and not ldconfig.startswith('@/')) or (runtime_debug and not runtime_debug.startswith('/')) \
            or (cli_debug and not cli_debug.startswith('/')):
        errors.append('nvidia_container_toolkit_ldconfig must be empty or name ldconfig on the host in the "@" '
                      'form, for example "@/sbin/ldconfig" (got "%s"), and the debug logs must be empty or absolute '
                      'paths (got "%s" and "%s").' % (ldconfig, runtime_debug, cli_debug))
    fighting = [k for k in dict(config_extra or {}) if k in list(typed_keys or ())]
    if fighting:
        errors.append('nvidia_container_toolkit_config_extra sets %s, which have their own variables (see the '
                      'role\'s README). Set those variables instead.' % ', '.join(fighting))
    return errors


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'nvidia_container_toolkit_input_errors': nvidia_container_toolkit_input_errors}
