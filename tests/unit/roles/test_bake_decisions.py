# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A bake on a build host with devices of another kind (issue 16 item 3): the
facts as playbooks/bake.yml gathers them (accel.nodes.accelerator_facts with
image=true) on a captured host tree, then the driver roles' own decisions
rendered from their task files with Ansible's Templar."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter import neuron
from ansible_collections.accel.nodes.plugins.module_utils import _ec2
from ansible_collections.accel.nodes.plugins.modules import accelerator_facts

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load  # noqa: E402  pylint: disable=wrong-import-position

TOP = Path(__file__).parents[3]
ROOTS = TOP / 'tests' / 'fixtures' / 'facts' / 'roots'


@pytest.fixture
def bake_facts(run_module, monkeypatch):
    """The facts of bake.yml's first task on a captured host tree."""
    def refuse(*args, **kwargs):
        raise AssertionError('a bake must not ask the build host its instance type')
    monkeypatch.setattr(_ec2, 'imds_instance_type', refuse)

    def _facts(build_host, instance_type, image=True):
        args = {'root': str(ROOTS / build_host), 'image': image}
        if instance_type:
            args['instance_type'] = instance_type
        if not image:
            args['gather'] = ['pci', 'kernel_modules']  # what bake.yml read before issue 16
        result = run_module(accelerator_facts.main, args)
        assert not result.get('failed'), result
        return result['ansible_facts']['accelerators']
    return _facts


def nvidia_decision(accelerators, instance_type):
    """What the nvidia_driver role decides in a bake: forced, without managing services, through a chroot."""
    variables = dict(load('nvidia_driver', 'defaults', 'main.yml'), **load('nvidia_driver', 'vars', 'main.yml'))
    variables.update({'nvidia_driver_force': True, 'nvidia_driver_manage_service': False,
                      'nvidia_driver_instance_type': instance_type, 'ansible_connection': 'chroot',
                      'ansible_facts': {'accelerators': accelerators}})
    task = next(t for t in load('nvidia_driver', 'tasks', 'main.yml') if t['name'] == 'Work out which driver this host needs')
    return Templar(loader=DataLoader(), variables=variables).template(
        task['ansible.builtin.set_fact']['nvidia_driver_decision'])


def neuron_pin(accelerators, instance_type):
    """The pin as the role decides it: vars/main.yml hands its settings to accel.nodes.neuron_driver_plan."""
    variables = {}
    variables.update(load('neuron_driver', 'defaults', 'main.yml'))
    variables.update(load('neuron_driver', 'vars', 'main.yml'))
    variables.update({'neuron_driver_instance_type': instance_type})
    settings = Templar(loader=DataLoader(), variables=variables).template(variables['__neuron_driver_settings'])
    return neuron.neuron_driver_plan(accelerators, settings)['dkms_pin']


def test_a_g5_bake_on_a_host_with_eight_v100s_gets_the_open_modules(bake_facts):
    decision = nvidia_decision(bake_facts('p3.16xlarge', 'g5.xlarge'), 'g5.xlarge')
    assert decision['kernel_module'] == 'open'
    assert decision['volta'] is False
    assert int(decision['pci_gpus']) == 0  # a string on ansible-core 2.18
    assert int(decision['expected_gpus']) == 1
    assert decision['reason'] == 'instance type g5.xlarge has 1 NVIDIA A10G'


def test_the_same_bake_reading_the_build_hosts_pci_bus_would_pick_the_proprietary_modules(bake_facts):
    """The control, as issue 16 found it: the V100s of the build host decided."""
    decision = nvidia_decision(bake_facts('p3.16xlarge', 'g5.xlarge', image=False), 'g5.xlarge')
    assert decision['kernel_module'] == 'proprietary'


def test_a_p3_bake_on_a_host_without_gpus_still_gets_the_proprietary_modules(bake_facts):
    decision = nvidia_decision(bake_facts('inf1.6xlarge', 'p3.8xlarge'), 'p3.8xlarge')
    assert decision['kernel_module'] == 'proprietary'
    assert decision['volta'] is True


def test_an_inf2_bake_on_an_inf1_build_host_pins_the_current_driver(bake_facts):
    defaults = load('neuron_driver', 'defaults', 'main.yml')
    pin = neuron_pin(bake_facts('inf1.6xlarge', 'inf2.xlarge'), 'inf2.xlarge')
    assert pin == defaults['neuron_driver_dkms_version']
    assert not pin.startswith('2.24')


def test_the_same_bake_reading_the_build_hosts_pci_bus_would_pin_the_inf1_driver(bake_facts):
    pin = neuron_pin(bake_facts('inf1.6xlarge', 'inf2.xlarge', image=False), 'inf2.xlarge')
    assert pin == '2.24.*'


def test_an_inf1_bake_on_a_gpu_build_host_pins_the_inf1_driver(bake_facts):
    assert neuron_pin(bake_facts('p3.16xlarge', 'inf1.6xlarge'), 'inf1.6xlarge') == '2.24.*'


def test_a_bake_with_only_a_vendor_on_a_v100_host_gets_the_default_open_modules(bake_facts):
    """accel_nodes_bake_vendor=nvidia and no instance type: nothing names the hardware, nvidia_driver_force does."""
    decision = nvidia_decision(bake_facts('p3.16xlarge', None), '')
    assert decision['present'] is True
    assert decision['reason'] == 'nvidia_driver_force is true'
    assert decision['kernel_module'] == 'open'
    assert int(decision['pci_gpus']) == 0  # a string on ansible-core 2.18


def test_a_bake_with_only_a_vendor_on_an_inf1_host_pins_the_current_driver(bake_facts):
    defaults = load('neuron_driver', 'defaults', 'main.yml')
    assert neuron_pin(bake_facts('inf1.6xlarge', None), '') == defaults['neuron_driver_dkms_version']
