# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg, _node_probe
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
    assert result['packages'] == {'aws-neuronx-dkms': {'version': '2.27.4.0-1', 'release': '1', 'selection': None,
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


def test_commands_run_with_the_path_of_environment(run_module, tools):
    """nvidia-smi in the driver root: found through the PATH the role passes, with its arguments."""
    smi = tools / 'bin' / 'nvidia-smi'
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho "args: $*"\necho "lang: $LANG, gpu: $GPU"\n')
    smi.chmod(0o755)
    result = run_module(node_probe.main, dict(
        commands={'nvidia_smi': ['nvidia-smi', '-L']},
        environment={'PATH': '/nonexistent:%s' % smi.parent, 'GPU': 0}))
    assert result['changed'] is False
    assert result['commands'] == {'nvidia_smi': {'rc': 0, 'stdout': 'args: -L\nlang: C, gpu: 0', 'stderr': ''}}


def test_a_missing_or_failing_command_answers_as_a_shell_would(run_module, tools):
    result = run_module(node_probe.main, dict(
        commands={'docker_info': ['docker-not-here', 'info'], 'absolute': [str(tools / 'missing')],
                  'failing': [str(tools / 'broken-oci-add-hooks'), '--version']},
        environment={'PATH': str(tools)}))
    assert not result.get('failed')
    assert result['commands']['docker_info'] == {'rc': 127, 'stdout': '', 'stderr': 'docker-not-here: command not found'}
    assert result['commands']['absolute']['rc'] == 127
    assert result['commands']['failing'] == {'rc': 3, 'stdout': '', 'stderr': 'no such runtime'}


def test_a_directory_or_plain_file_on_the_path_is_not_the_program(tools):
    (tools / 'dir' / 'runc').mkdir(parents=True)
    (tools / 'plain').mkdir()
    (tools / 'plain' / 'runc').write_text('not executable')
    search = os.pathsep.join([str(tools / 'dir'), str(tools / 'plain'), str(tools)])
    assert _node_probe.find_program('runc', search) == str(tools / 'runc')
    assert _node_probe.find_program('runc', str(tools / 'plain')) == ''


@pytest.mark.parametrize('commands', [{'empty': []}, {'text': 'docker info'}, {'nested': [['docker']]}])
def test_commands_must_be_argv_lists(run_module, commands):
    result = run_module(node_probe.main, dict(commands=commands))
    assert result['failed'] and 'non-empty list of arguments' in result['msg']


def test_accelerators_gathers_what_accelerator_facts_gathers_with_the_same_options(run_module, fact_roots, monkeypatch):
    # The real H200's nvidia-smi capture, replayed by the double, under its fake sysfs tree.
    from ansible_collections.accel.nodes.plugins.modules import accelerator_facts
    tests = Path(__file__).parents[3]
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(tests / 'fixtures' / 'facts' / 'commands' / 'nvidia-smi' / 'h200-v13.xml'))
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_RC', '0')
    options = dict(root=str(fact_roots / 'h200'), nvidia_smi_path=str(tests / 'doubles' / 'replay' / 'nvidia-smi'),
                   instance_type='p5e.48xlarge')
    alone = run_module(accelerator_facts.main, dict(options))['ansible_facts']['accelerators']
    probed = run_module(node_probe.main, dict(accelerators=dict(options), commands={'true': ['true']}))
    assert probed['ansible_facts'] == {'accelerators': alone}
    assert probed['commands']['true']['rc'] == 0
    assert alone['nvidia']['gpus'][0]['name'] == 'NVIDIA H200'
    assert alone['problems']  # one GPU of a p5e's eight: the same problem both ways


def test_accelerators_options_are_checked_as_accelerator_facts_checks_them(run_module):
    result = run_module(node_probe.main, dict(accelerators=dict(gather=['pci', 'gpus'], colour='blue')))
    assert result['failed']
    assert result['msg'].startswith('accelerators: ')
    assert 'gpus' in result['msg'] and 'colour' in result['msg']


def test_without_accelerators_no_accelerator_facts(run_module):
    assert 'ansible_facts' not in run_module(node_probe.main, dict(paths=['/']))


def test_directories_list_entries_with_link_targets(run_module, tmp_path):
    char = tmp_path / 'char'
    char.mkdir()
    (char / '195:0').symlink_to('../nvidia0')
    (char / '195:255').symlink_to('../nvidiactl')
    (char / 'plain').write_text('')
    result = run_module(node_probe.main, dict(directories=[str(char), str(tmp_path / 'missing')]))
    assert result['directories'] == {str(char): {'195:0': '../nvidia0', '195:255': '../nvidiactl', 'plain': None},
                                     str(tmp_path / 'missing'): None}


def test_what_an_interrupted_run_left_is_named(run_module, monkeypatch, tmp_path):
    # dpkg's status and journal of a node whose docker.io unpack was killed (tests/fixtures/interrupted).
    killed = FIXTURES / 'interrupted' / 'docker-io-unpack'
    monkeypatch.setattr(_node_probe, 'DPKG_STATUS', str(killed / 'status'))
    monkeypatch.setattr(_dpkg, 'UPDATES_DIR', str(killed / 'updates'))
    (tmp_path / 'config.toml').write_text('')
    (tmp_path / '.config.toml.a1b2c3.tmp').write_text('')
    result = run_module(node_probe.main, {'packages': ['^docker'], 'paths': [str(tmp_path / 'config.toml')]})
    # The packages are the status file's alone; docker.io's record is still in the journal.
    assert 'docker.io' not in result['packages']
    assert 'docker.io: half-installed (reinstreq)' in result['interrupted']
    assert 'dpkg journal: %s' % (killed / 'updates') in result['interrupted']
    assert result['interrupted'][-1] == str(tmp_path / '.config.toml.a1b2c3.tmp')


def test_a_finished_node_has_nothing_interrupted(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(_node_probe, 'DPKG_STATUS', str(FIXTURES / 'neuron' / 'dpkg-status-inf1-converged'))
    monkeypatch.setattr(_dpkg, 'UPDATES_DIR', str(tmp_path))
    assert run_module(node_probe.main, {'packages': ['^aws-neuron']})['interrupted'] == []


def test_keyrings_give_the_primary_fingerprints_of_armored_and_binary_keys(run_module, tmp_path):
    """The fingerprints gpg printed for the throwaway keys and Docker's published one (tests/fixtures/openpgp)."""
    keys = FIXTURES / 'openpgp'
    (tmp_path / 'page.html').write_text('<!doctype html><html>Not Found</html>')
    asked = [str(keys / 'rsa2048.gpg'), str(keys / 'ed25519.asc'), str(keys / 'docker.asc'),
             str(tmp_path / 'page.html'), str(tmp_path / 'missing.gpg')]
    found = run_module(node_probe.main, dict(keyrings=asked))['keyrings']
    assert found[asked[0]] == {'fingerprints': ['CB46C553B095A24A90274F878EA7A5D5237FE158'], 'armored': False,
                               'error': None}
    assert found[asked[1]] == {'fingerprints': ['A5B440836C27DF444964208D607B667479FB903F'], 'armored': True,
                               'error': None}
    assert found[asked[2]]['fingerprints'] == ['9DC858229FC7DD38854AE2D88D81803C0EBFCD88']
    assert found[asked[3]]['fingerprints'] == [] and 'HTML' in found[asked[3]]['error']
    assert found[asked[4]] is None
