# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from ansible_collections.accel.nodes.plugins.module_utils import _nvswitch

H100 = {'pci_device_id': '0x2330', 'compute_capability': '9.0'}
A100 = {'pci_device_id': '0x20b0', 'compute_capability': '8.0'}
B200 = {'pci_device_id': '0x2901', 'compute_capability': '10.0'}
GB200 = {'pci_device_id': '0x2941', 'compute_capability': '10.0'}
NONE = {'nvswitches': [], 'management_bridges': []}
SWITCHES = {'nvswitches': ['0000:07:00.0', '0000:08:00.0'], 'management_bridges': []}
BRIDGE = {'nvswitches': [], 'management_bridges': ['0000:03:00.0']}


def test_pci_nvswitches_decide_and_the_gpus_give_the_generation():
    facts, problems = _nvswitch.decide(SWITCHES, [H100] * 8, 8, None, None)
    assert facts == {'present': True, 'generation': 3, 'source': 'pci', 'devices': SWITCHES['nvswitches']}
    assert problems == []
    assert _nvswitch.decide(SWITCHES, [A100] * 8, 8, 'p4d.24xlarge', None)[0]['generation'] == 2


def test_a_management_bridge_is_a_fourth_generation_fabric():
    facts, problems = _nvswitch.decide(BRIDGE, [B200] * 8, 8, None, None)
    assert facts == {'present': True, 'generation': 4, 'source': 'pci', 'devices': ['0000:03:00.0']}
    assert problems == []


def test_pcie_gpus_without_a_fabric():
    facts, problems = _nvswitch.decide(NONE, [H100], 1, 'p5.4xlarge', None)
    assert facts == {'present': False, 'generation': None, 'source': 'pci', 'devices': []}
    assert problems == []


def test_baking_for_a_p5_on_a_host_without_gpus_trusts_the_catalog():
    facts, problems = _nvswitch.decide(NONE, [], 0, 'p5.48xlarge', None)
    assert facts == {'present': True, 'generation': 3, 'source': 'ec2', 'devices': []}
    assert problems == []
    assert _nvswitch.decide(None, [], 0, 'p6-b200.48xlarge', None)[0]['generation'] == 4


def test_a_p5_whose_bus_shows_gpus_but_no_switch_is_a_problem():
    facts, problems = _nvswitch.decide(NONE, [H100] * 8, 8, 'p5.48xlarge', None)
    assert facts['present'] is True and facts['source'] == 'ec2'
    assert problems == ['p5.48xlarge carries NVSwitches (generation 3), but the PCI bus shows neither an '
                        'NVSwitch nor an NVSwitch management bridge']


def test_gb200_fabric_is_managed_off_host():
    facts, problems = _nvswitch.decide(BRIDGE, [GB200] * 4, 4, None, None)
    assert facts['present'] is False and facts['generation'] is None


def test_the_override_wins_both_ways():
    assert _nvswitch.decide(NONE, [H100] * 8, 8, None, True)[0] == {
        'present': True, 'generation': 3, 'source': 'option', 'devices': []}
    assert _nvswitch.decide(SWITCHES, [H100] * 8, 8, 'p5.48xlarge', False)[0] == {
        'present': False, 'generation': None, 'source': 'option', 'devices': SWITCHES['nvswitches']}


def test_nothing_to_go_on():
    assert _nvswitch.decide(None, [], 0, None, None)[0] == {
        'present': False, 'generation': None, 'source': None, 'devices': []}
