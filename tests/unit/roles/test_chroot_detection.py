# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Every role's bake or live switch, rendered from the role's own files with
Ansible's Templar: one chroot test for all of them (issue 16 item 4: the
Neuron roles knew only community.general.chroot, not -c chroot)."""

from __future__ import annotations

import os
import sys

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template  # noqa: E402  pylint: disable=wrong-import-position


def _vars_var(role, key):
    return None, load(role, 'vars', 'main.yml')[key]


# (role, manage_service variable, where the expression lives, whether it says "bake" (true in a chroot) or "live")
SWITCHES = [
    ('docker', 'docker_manage_service', lambda: _vars_var('docker', '__docker_live'), 'live'),
    ('nvidia_container_toolkit', 'nvidia_container_toolkit_manage_service',
     lambda: _vars_var('nvidia_container_toolkit', '__nvidia_container_toolkit_live'), 'live'),
    ('nvidia_driver', 'nvidia_driver_manage_service',
     lambda: _vars_var('nvidia_driver', '__nvidia_driver_bake'), 'bake'),
    ('neuron_driver', 'neuron_driver_manage_service',
     lambda: _vars_var('neuron_driver', '__neuron_driver_bake'),
     'bake'),
    ('neuron_container_runtime', 'neuron_container_runtime_manage_service',
     lambda: _vars_var('neuron_container_runtime', '__neuron_container_runtime_bake'),
     'bake'),
]

CASES = [
    # connection, accel_nodes_chroot (absent when None), is it a chroot
    ('ssh', None, False),
    ('community.docker.docker', None, False),
    ('chroot', None, True),
    ('community.general.chroot', None, True),
    ('local', True, True),
    ('chroot', False, False),
    ('community.general.chroot', 'false', False),
]


def _render(expression, variables):
    # The driver and Neuron roles name their chroot test once, in vars/main.yml, and use it by name.
    variables = dict(variables)
    for role in ('nvidia_driver', 'neuron_driver', 'neuron_container_runtime'):
        name = '__%s_chroot' % role
        variables[name] = trust_as_template(load(role, 'vars', 'main.yml')[name])
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


@pytest.mark.parametrize('role,manage_service,where,kind', SWITCHES, ids=[s[0] for s in SWITCHES])
@pytest.mark.parametrize('connection,switch,chroot', CASES)
def test_every_role_takes_a_chroot_for_a_bake(role, manage_service, where, kind, connection, switch, chroot):
    expression = where()[1]
    variables = {manage_service: True, 'ansible_connection': connection}
    if switch is not None:
        variables['accel_nodes_chroot'] = switch
    bake = _render(expression, variables)
    if isinstance(bake, str):
        bake = bake.strip() == 'True'
    assert bake == (chroot if kind == 'bake' else not chroot)


@pytest.mark.parametrize('role,manage_service,where,kind', SWITCHES, ids=[s[0] for s in SWITCHES])
def test_manage_service_false_bakes_whatever_the_connection(role, manage_service, where, kind):
    expression = where()[1]
    bake = _render(expression, {manage_service: False, 'ansible_connection': 'ssh', 'accel_nodes_chroot': False})
    if isinstance(bake, str):
        bake = bake.strip() == 'True'
    assert bake == (kind == 'bake')
