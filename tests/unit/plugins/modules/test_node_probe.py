# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _node_probe
from ansible_collections.accel.nodes.plugins.modules import node_probe

FIXTURES = Path(__file__).parents[3] / 'fixtures'
DOUBLE = Path(__file__).parents[3] / 'doubles' / 'bin' / 'oci-add-hooks'


@pytest.fixture
def tools(tmp_path):
    """An oci-add-hooks that answers its version, one that fails, and a runc."""
    good = tmp_path / 'oci-add-hooks'
    good.write_text('#!/bin/sh\necho "commit: 2fdc948c9b098299b47636a49639dcad8f88ae52"\n')
    bad = tmp_path / 'broken-oci-add-hooks'
    bad.write_text('#!/bin/sh\necho "no such runtime" >&2\nexit 3\n')
    runc = tmp_path / 'runc'
    runc.write_text('#!/bin/sh\n')
    for f in (good, bad, runc):
        f.chmod(0o755)
    return tmp_path


def test_finds_the_chain_and_asks_oci_add_hooks_its_version(run_module, tools):
    result = run_module(node_probe.main, dict(
        executables={'oci_add_hooks': [str(tools / 'missing'), str(tools / 'oci-add-hooks')],
                     'runc': [str(tools / 'runc')], 'hook': [str(tools / 'oci_neuron_hook')]},
        versions=['oci_add_hooks']))
    assert result['changed'] is False
    assert result['executables'] == {'oci_add_hooks': str(tools / 'oci-add-hooks'), 'runc': str(tools / 'runc'),
                                     'hook': ''}
    assert result['versions'] == {'oci_add_hooks': {
        'rc': 0, 'stdout': 'commit: 2fdc948c9b098299b47636a49639dcad8f88ae52', 'stderr': ''}}


def test_a_failing_version_and_a_missing_tool_are_reported_not_raised(run_module, tools):
    result = run_module(node_probe.main, dict(
        executables={'oci_add_hooks': [str(tools / 'broken-oci-add-hooks')], 'runc': []},
        versions=['oci_add_hooks', 'runc']))
    assert not result.get('failed')
    assert result['versions']['oci_add_hooks'] == {'rc': 3, 'stdout': '', 'stderr': 'no such runtime'}
    assert result['versions']['runc'] is None


def test_versions_must_name_an_executable(run_module):
    result = run_module(node_probe.main, dict(versions=['runc']))
    assert result['failed'] and 'runc' in result['msg']


def test_reads_packages_from_the_dpkg_status_file(run_module, monkeypatch):
    monkeypatch.setattr(_node_probe, 'DPKG_STATUS', str(FIXTURES / 'neuron' / 'dpkg-status-inf1-converged'))
    result = run_module(node_probe.main, dict(packages=['^aws-neuronx-']))
    assert result['package_manager'] == 'dpkg'
    assert sorted(result['packages']) == ['aws-neuronx-dkms', 'aws-neuronx-tools']
    assert result['packages']['aws-neuronx-tools']['selection'] == 'hold'


def test_without_dpkg_asks_rpm(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(_node_probe, 'DPKG_STATUS', str(tmp_path / 'none'))
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        return 0, 'aws-neuronx-dkms\t2.27.4.0\t1\nbash\t5.2\t1\n', ''
    monkeypatch.setattr(node_probe.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: '/usr/bin/' + name)
    monkeypatch.setattr(node_probe.AnsibleModule, 'run_command', run_command)
    result = run_module(node_probe.main, dict(packages=['^aws-neuron']))
    assert result['package_manager'] == 'rpm'
    assert calls[0][:2] == ['/usr/bin/rpm', '-qa']
    assert result['packages'] == {'aws-neuronx-dkms': {'version': '2.27.4.0', 'release': '1', 'selection': None,
                                                       'status': 'installed'}}


def test_facts_name_the_distribution_as_setup_does(run_module):
    result = run_module(node_probe.main, dict(facts=True))
    facts = result['ansible_facts']
    for key in ('os_family', 'distribution', 'distribution_major_version', 'distribution_release', 'kernel',
                'architecture', 'pkg_mgr'):
        assert key in facts
    assert 'ansible_facts' not in run_module(node_probe.main, dict())


def test_paths_are_described(run_module):
    result = run_module(node_probe.main, dict(paths=[str(DOUBLE)]))
    info = result['paths'][str(DOUBLE)]
    assert info['exists'] and info['type'] == 'file' and len(info['sha256']) == 64
