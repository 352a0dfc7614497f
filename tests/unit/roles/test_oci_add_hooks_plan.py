# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The oci_add_hooks role's plan (plugins/filter/oci_add_hooks_plan.py), fed as tasks/main.yml feeds it: the
role's defaults templated through vars/main.yml's __oci_add_hooks_settings, and the host's facts; and what
oci_add_hooks_check then makes of a probe, with the plan's check settings."""

from __future__ import annotations

import os
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter.neuron import oci_add_hooks_check
from ansible_collections.accel.nodes.plugins.filter.oci_add_hooks_plan import oci_add_hooks_plan

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

DEBIAN = {'distribution': 'Debian', 'architecture': 'x86_64'}
AMAZON_ARM = {'distribution': 'Amazon', 'architecture': 'aarch64'}
DEFAULTS = load('oci_add_hooks', 'defaults', 'main.yml')


def plan(facts=None, **more):
    variables = dict(DEFAULTS)
    variables.update(load('oci_add_hooks', 'vars', 'main.yml'))
    variables.update(trusted({'oci_add_hooks_%s' % k: v for k, v in more.items()}))
    variables['ansible_facts'] = facts or DEBIAN
    return Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template('{{ __oci_add_hooks_settings | accel.nodes.oci_add_hooks_plan(ansible_facts) }}'))


def test_auto_builds_from_source_outside_amazon_linux():
    p = plan()
    assert p['method'] == 'source'
    assert p['installed_path'] == '/usr/local/bin/oci-add-hooks'
    assert p['goarch'] == 'amd64'
    assert p['check']['version'] == DEFAULTS['oci_add_hooks_version']
    assert p['summary'] == 'oci-add-hooks: present, built from source at /usr/local/bin/oci-add-hooks'


def test_auto_takes_amazon_linux_package():
    p = plan(AMAZON_ARM)
    assert p['method'] == 'package' and p['installed_path'] == '/usr/bin/oci-add-hooks'
    assert p['goarch'] == 'arm64'
    assert p['check']['package_name'] == 'oci-add-hooks'
    assert 'from the package oci-add-hooks' in p['summary']


def test_method_given_wins():
    p = plan(AMAZON_ARM, method='binary', binary_sha256='a' * 64)
    assert p['method'] == 'binary' and p['installed_path'] == '/usr/local/bin/oci-add-hooks'
    assert p['check']['sha256'] == 'a' * 64 and 'downloaded' in p['summary']


def test_unknown_cpu_has_no_goarch():
    assert plan({'distribution': 'Debian', 'architecture': 'riscv64'})['goarch'] == ''


def test_check_settings_judge_a_probe():
    """What the role does after its probe: a missing binary is not current and does not run."""
    p = plan()
    missing = {'paths': {p['installed_path']: {'exists': False}}, 'packages': {},
               'executables': {'oci_add_hooks': None}, 'versions': {}}
    found = oci_add_hooks_check(missing, p['check'])
    assert found['current'] is False and found['runs'] is False


def test_inputs_must_be_dicts():
    with pytest.raises(AnsibleFilterError):
        oci_add_hooks_plan([], {})


def test_pinned_build_that_answers_is_current():
    p = plan()
    built = {'paths': {p['installed_path']: {'exists': True}}, 'packages': {},
             'versions': {'oci_add_hooks': {'rc': 0, 'stdout': 'commit: %s\n' % DEFAULTS['oci_add_hooks_version']}}}
    found = oci_add_hooks_check(built, p['check'])
    assert found == {'current': True, 'runs': True, 'problem': None}
    stale = {'versions': {'oci_add_hooks': {'rc': 0, 'stdout': 'commit: ' + '0' * 40}}}
    assert oci_add_hooks_check(stale, p['check'])['current'] is False
