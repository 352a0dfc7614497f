# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _neuron

FACTS = Path(__file__).parents[3] / 'fixtures' / 'facts'


def neuron_ls(name):
    return (FACTS / 'commands' / 'neuron-ls' / name).read_text()


def test_parse_neuron_ls_inf1_6xlarge():
    assert _neuron.parse_neuron_ls(neuron_ls('inf1.6xlarge.json')) == [
        {'pci_bus_id': '0000:00:1c.0', 'core_count': 4, 'memory_bytes': 8589934592},
        {'pci_bus_id': '0000:00:1d.0', 'core_count': 4, 'memory_bytes': 8589934592},
        {'pci_bus_id': '0000:00:1e.0', 'core_count': 4, 'memory_bytes': 8589934592},
        {'pci_bus_id': '0000:00:1f.0', 'core_count': 4, 'memory_bytes': 8589934592},
    ]


def test_parse_neuron_ls_newer_fields_and_full_bdf():
    # Newer tools add numa_node (a string), neuroncore_ids and instance_type.
    text = ('[{"neuron_device": 0, "bdf": "0000:00:1e.0", "cpu_affinity": "0-7", "numa_node": "-1",'
            ' "connected_to": null, "nc_count": 2, "memory_size": 34359738368,'
            ' "neuroncore_ids": [0, 1], "neuron_processes": [], "instance_type": "trn1.2xlarge"}]')
    assert _neuron.parse_neuron_ls(text) == [
        {'pci_bus_id': '0000:00:1e.0', 'core_count': 2, 'memory_bytes': 34359738368}]


def test_parse_neuron_ls_missing_values_are_null():
    assert _neuron.parse_neuron_ls('[{"bdf": "bogus", "nc_count": "n/a"}, 7]') == [
        {'pci_bus_id': None, 'core_count': None, 'memory_bytes': None}]


def test_old_neuron_ls_prints_a_table_which_is_not_json():
    assert _neuron.parse_neuron_ls(neuron_ls('table-only.txt')) is None
    assert _neuron.parse_neuron_ls('') is None
    assert _neuron.parse_neuron_ls('{"neuron_devices": []}') is None


def test_read_sysfs_inf1(fact_roots):
    assert _neuron.read_sysfs(str(fact_roots / 'inf1.6xlarge')) == {
        'driver_version': '2.19.64.0', 'core_counts': [4, 4, 4, 4]}


def test_read_sysfs_orders_devices_numerically(tmp_path):
    for index, cores in ((10, 2), (2, 8), (1, 8)):
        device = tmp_path / 'sys/class/neuron_device' / ('neuron%d' % index)
        device.mkdir(parents=True)
        (device / 'core_count').write_text('%d\n' % cores)
    assert _neuron.read_sysfs(str(tmp_path)) == {'driver_version': None, 'core_counts': [8, 8, 2]}


def test_read_sysfs_without_the_driver_is_none(tmp_path):
    assert _neuron.read_sysfs(str(tmp_path)) is None


def test_device_names():
    assert [_neuron.device_name(d) for d in ('0x7064', '0x7164', '0x7264', '0x7364', '0x7564', '0x7565')] == [
        'Inferentia', 'Trainium', 'Inferentia2', 'Trainium2', 'Trainium3', 'Trainium3']
    assert _neuron.device_name('0x7f64') is None
    assert _neuron.device_name(None) is None


def test_unknown_device_ids_are_one_problem_each():
    devices = [
        {'pci_bus_id': '0000:00:1c.0', 'pci_device_id': '0x7564'},
        {'pci_bus_id': '0000:00:1d.0', 'pci_device_id': '0x7f64'},   # made-up ids
        {'pci_bus_id': '0000:00:1e.0', 'pci_device_id': '0x7f64'},
        {'pci_bus_id': '0000:00:1f.0', 'pci_device_id': '0x7e64'},
        {'pci_bus_id': '0000:00:20.0', 'pci_device_id': None},       # seen by neuron-ls only: no id to judge
    ]
    assert _neuron.unknown_device_problems(devices) == [
        'Neuron device(s) 0000:00:1f.0 have PCI device id 0x7e64, which accel.nodes does not know: they are '
        'listed with no model name. Update accel.nodes to a release that knows this device.',
        'Neuron device(s) 0000:00:1d.0, 0000:00:1e.0 have PCI device id 0x7f64, which accel.nodes does not know: '
        'they are listed with no model name. Update accel.nodes to a release that knows this device.',
    ]
    assert _neuron.unknown_device_problems(devices[:1]) == []
