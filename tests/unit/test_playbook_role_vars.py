# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The playbooks name some roles' private variables (the paths the opt-in state
record fingerprints): each must still be defined by its role, or a run with the
record fails at the end of provisioning (a refactor of the docker role once
dropped __docker_state_dir)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

TOP = Path(__file__).parents[2]


def role_names():
    return sorted(p.name for p in (TOP / 'roles').iterdir() if (p / 'tasks').is_dir())


def defined(role):
    names = set()
    for sub in ('vars', 'defaults'):
        for path in sorted((TOP / 'roles' / role / sub).glob('*.yml')):
            names |= set(yaml.safe_load(path.read_text()) or {})
    return names


def references():
    """(playbook, variable, role) of every __<role>_* name in playbooks/."""
    roles = role_names()
    found = []
    for path in sorted((TOP / 'playbooks').rglob('*.yml')):
        for name in sorted(set(re.findall(r'\b__[a-z0-9_]+\b', path.read_text()))):
            role = next((r for r in sorted(roles, key=len, reverse=True) if name.startswith('__%s_' % r)), None)
            if role:
                found.append((path.relative_to(TOP).as_posix(), name, role))
    return found


def test_the_playbooks_name_private_role_variables():
    assert ('playbooks/vars/state.yml', '__docker_state_dir', 'docker') in references()


@pytest.mark.parametrize('playbook, name, role', references())
def test_each_private_role_variable_a_playbook_names_is_defined(playbook, name, role):
    assert name in defined(role), '%s names %s, which roles/%s no longer defines' % (playbook, name, role)
