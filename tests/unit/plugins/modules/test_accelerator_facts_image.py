# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accelerator_facts with image=true: a bake in a chroot on a build host whose
/sys is full of devices of another kind (issue 16 item 3). The trees are the
captured hosts of tests/fixtures/facts/roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _ec2
from ansible_collections.accel.nodes.plugins.modules import accelerator_facts

TESTS = Path(__file__).parents[3]
SMI = TESTS / 'fixtures' / 'facts' / 'commands' / 'nvidia-smi'
NEURON_LS = TESTS / 'fixtures' / 'facts' / 'commands' / 'neuron-ls'
NVIDIA_SMI_DOUBLE = str(TESTS / 'doubles' / 'replay' / 'nvidia-smi')
NEURON_LS_DOUBLE = str(TESTS / 'doubles' / 'replay' / 'neuron-ls')

HOST_SOURCES = ['pci', 'nvidia_procfs', 'nvidia_smi', 'neuron', 'neuron_ls', 'kernel_modules', 'device_nodes',
                'dmi', 'imds']


@pytest.fixture
def facts(fact_roots, run_module, monkeypatch, tmp_path):
    """facts(root, **args) with both doubles armed, so that a run of either tool would be logged."""
    log = tmp_path / 'calls.log'
    monkeypatch.setenv('ACCEL_DOUBLE_LOG', str(log))
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(SMI / 'p3.16xlarge-v11.xml'))
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_RC', '0')
    monkeypatch.setenv('ACCEL_NEURON_LS_OUTPUT', str(NEURON_LS / 'inf1.6xlarge.json'))
    monkeypatch.setenv('ACCEL_NEURON_LS_RC', '0')

    def refuse(*args, **kwargs):
        raise AssertionError('a bake must not ask the build host its instance type')
    monkeypatch.setattr(_ec2, 'imds_instance_type', refuse)

    def _facts(root, **args):
        args['root'] = str(fact_roots / root)
        result = run_module(accelerator_facts.main, args)
        assert not result.get('failed'), result
        assert result['changed'] is False
        acc = result['ansible_facts']['accelerators']
        acc['_tool_runs'] = log.read_text().splitlines() if log.exists() else []
        return acc
    return _facts


def test_the_build_hosts_v100s_are_no_part_of_a_g5_bake(facts):
    acc = facts('p3.16xlarge', instance_type='g5.xlarge', image=True,
                nvidia_smi_path=NVIDIA_SMI_DOUBLE, neuron_ls_path=NEURON_LS_DOUBLE)
    assert acc['nvidia']['gpus'] == []
    assert acc['vendors'] == []
    assert acc['ec2'] == {'instance_type': 'g5.xlarge', 'source': 'option',
                          'expected': {'vendor': 'nvidia', 'model': 'A10G', 'count': 1, 'memory_mib_each': 24576}}
    # No problem about the A10G the image cannot show, none about the V100s it does not have.
    assert acc['problems'] == []
    assert {s: acc['sources'][s] for s in HOST_SOURCES} == dict.fromkeys(HOST_SOURCES, 'image')
    assert acc['observed'] == {'kernel_modules': None, 'device_nodes': None}
    # Not even an explicit path runs a tool of the build host.
    assert acc['_tool_runs'] == []


def test_the_same_tree_without_image_shows_the_v100s(facts):
    """The control: the tree does hold 8 V100s, which the facts report without image."""
    acc = facts('p3.16xlarge', instance_type='g5.xlarge', gather=['pci'])
    assert len(acc['nvidia']['gpus']) == 8
    assert acc['vendors'] == ['nvidia']
    assert acc['sources']['pci'] == 'ok'


def test_an_inf2_bake_on_an_inf1_build_host_sees_no_inferentia(facts):
    acc = facts('inf1.6xlarge', instance_type='inf2.xlarge', image=True, neuron_ls_path=NEURON_LS_DOUBLE)
    assert acc['neuron']['devices'] == []
    assert acc['vendors'] == []
    assert acc['ec2']['instance_type'] == 'inf2.xlarge'
    assert acc['ec2']['expected']['vendor'] == 'neuron'
    assert acc['problems'] == []
    assert acc['_tool_runs'] == []


def test_an_image_without_instance_type_names_no_hardware_and_never_asks_dmi(facts):
    """inf1.6xlarge's tree has DMI naming inf1.6xlarge: that is the build host, not the image."""
    acc = facts('inf1.6xlarge', image=True, gather=['pci', 'ec2', 'imds', 'neuron'])
    assert acc['ec2'] == {'instance_type': None, 'source': None, 'expected': None}
    assert acc['neuron']['devices'] == []
    assert acc['sources']['dmi'] == 'image'


def test_the_nvswitch_fabric_comes_from_the_catalog_in_an_image(facts):
    acc = facts('p3.16xlarge', instance_type='p5.48xlarge', image=True)
    assert acc['nvidia']['nvswitch']['present'] is True
    assert acc['problems'] == []


def test_the_images_container_runtimes_are_still_read(facts):
    acc = facts('p3.16xlarge', instance_type='g5.xlarge', image=True)
    assert acc['sources']['container_runtimes'] == 'ok'
