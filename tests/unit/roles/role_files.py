# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Read a role's YAML files as Ansible would template them, for the role tests."""

from __future__ import annotations

import os
import typing as t

import yaml

try:  # ansible-core >= 2.19 templates only strings marked as trusted
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.18 trusts every string
    def trust_as_template(value):
        return value

ROLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'roles')


def trusted(data: t.Any) -> t.Any:
    """data with every string marked as a template the role's author wrote."""
    if isinstance(data, str):
        return trust_as_template(data)
    if isinstance(data, dict):
        return {k: trusted(v) for k, v in data.items()}
    if isinstance(data, list):
        return [trusted(v) for v in data]
    return data


def load(role: str, *parts: str, missing_ok: bool = False) -> t.Any:
    """roles/<role>/<parts...>, parsed and trusted; {} for a missing file when missing_ok."""
    path = os.path.join(ROLES, role, *parts)
    if missing_ok and not os.path.exists(path):
        return {}
    with open(path) as f:
        return trusted(yaml.safe_load(f) or {})
