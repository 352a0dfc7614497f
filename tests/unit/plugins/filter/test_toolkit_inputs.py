# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""nvidia_container_toolkit_input_errors, fed by the toolkit role's own defaults and typed keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.toolkit_inputs import nvidia_container_toolkit_input_errors
from ansible_collections.accel.nodes.plugins.filter.toolkit_plan import TYPED_KEYS

ROLE = Path(__file__).parents[4] / 'roles' / 'nvidia_container_toolkit'
DEFAULTS = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
TYPED = TYPED_KEYS
SETTINGS = {'ldconfig': DEFAULTS['nvidia_container_toolkit_ldconfig'],
            'runtime_debug': DEFAULTS['nvidia_container_toolkit_runtime_debug'],
            'cli_debug': DEFAULTS['nvidia_container_toolkit_cli_debug']}


def test_the_defaults_on_debian_and_el_are_fine():
    for family in ('Debian', 'RedHat'):
        assert nvidia_container_toolkit_input_errors(SETTINGS, TYPED, DEFAULTS['nvidia_container_toolkit_config_extra'],
                                                     family, 'x') == []


def test_each_problem_is_named():
    [suse] = nvidia_container_toolkit_input_errors(SETTINGS, TYPED, {}, 'Suse', 'SLES')
    assert 'this host is SLES (Suse family)' in suse
    assert nvidia_container_toolkit_input_errors(SETTINGS, TYPED, {}, 'Suse', 'SLES', needs_repository=False) == []
    [form] = nvidia_container_toolkit_input_errors(dict(SETTINGS, ldconfig='/sbin/ldconfig'), TYPED, {}, 'Debian')
    assert '(got "/sbin/ldconfig")' in form
    [logs] = nvidia_container_toolkit_input_errors(dict(SETTINGS, cli_debug='cli.log'), TYPED, {}, 'Debian')
    assert 'and "cli.log")' in logs
    [extra] = nvidia_container_toolkit_input_errors(SETTINGS, TYPED, {'nvidia-container-runtime.mode': 'cdi',
                                                                      'nvidia-container-cli.user': 'root:video'},
                                                    'Debian')
    assert extra.startswith('nvidia_container_toolkit_config_extra sets nvidia-container-runtime.mode,')


def test_a_non_dict_is_refused():
    with pytest.raises(AnsibleFilterError):
        nvidia_container_toolkit_input_errors(['@/sbin/ldconfig'])
