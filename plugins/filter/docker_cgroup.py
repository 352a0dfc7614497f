# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The cgroup driver Docker uses, from what it says or what it will read.
Documented in docker_cgroup_driver.yml next to this file."""

from __future__ import annotations

import json
import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

_OPTION = 'native.cgroupdriver='


def docker_cgroup_driver(docker_info: t.Any, daemon_json: t.Any = '', cgroup_v2: t.Any = False) -> str:
    """`docker info --format {{.CgroupDriver}}` when Docker answered; otherwise the first
    native.cgroupdriver= of daemon.json's exec-opts; otherwise Docker's own default
    (20.10 and later: systemd on the unified hierarchy, cgroupfs on v1)."""
    answered = str(docker_info or '').strip()
    if answered:
        return answered
    text = str(daemon_json or '').strip()
    if text:
        try:
            config = json.loads(text)
        except ValueError as e:
            raise AnsibleFilterError('daemon.json is not valid JSON (%s); fix it, Docker will not start with it' % e) from e
        opts = (config.get('exec-opts') or []) if isinstance(config, dict) else []
        for opt in opts:
            if str(opt).startswith(_OPTION):
                return str(opt).rsplit('=', maxsplit=1)[-1]
    return 'systemd' if boolean(cgroup_v2 or False, strict=False) else 'cgroupfs'


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'docker_cgroup_driver': docker_cgroup_driver}
