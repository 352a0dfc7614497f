# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _pci


def add_device(root, bus_id, vendor, device, pci_class, numa_node='-1', driver=None, physfn=False):
    base = root / 'sys/bus/pci/devices' / bus_id
    base.mkdir(parents=True)
    for name, value in (('vendor', vendor), ('device', device), ('class', pci_class), ('numa_node', numa_node)):
        (base / name).write_text(value + '\n')
    if driver:
        os.symlink('../../../../bus/pci/drivers/' + driver, base / 'driver')
    if physfn:
        os.symlink('../0000:00:1e.0', base / 'physfn')


@pytest.mark.parametrize('text, expected', [
    ('00000000:00:06.0', '0000:00:06.0'),      # nvidia-smi
    ('00000000:00:1E.0', '0000:00:1e.0'),
    ('0000:00:06.0', '0000:00:06.0'),          # sysfs
    ('00:1e.0', '0000:00:1e.0'),               # neuron-ls
    ('00010000:E1:00.0', '10000:e1:00.0'),     # a VMD domain past 0xffff keeps all its digits
    ('GPU-92185b04', None),
    ('0:1:0', None),                           # nvidia-smi before 2012: not a bus id
    ('', None),
    (None, None),
])
def test_normalise_bus_id(text, expected):
    assert _pci.normalise_bus_id(text) == expected


def test_bus_id_key_orders_numerically():
    ids = ['10000:00:00.0', '0000:c1:00.0', '0000:1b:00.0', '0000:00:1e.0']
    assert sorted(ids, key=_pci.bus_id_key) == ['0000:00:1e.0', '0000:1b:00.0', '0000:c1:00.0', '10000:00:00.0']


def test_scan_real_h200_tree_keeps_the_gpu_and_drops_virtio(fact_roots):
    found = _pci.scan(str(fact_roots / 'h200'))
    assert found == [{
        'kind': 'nvidia',
        'pci_bus_id': '0000:00:06.0',
        'pci_device_id': '0x2335',
        'numa_node': None,
        'driver': 'nvidia',
    }]


def test_scan_inferentia_skips_amazon_ena_nvme_and_vga(fact_roots):
    found = _pci.scan(str(fact_roots / 'inf1.6xlarge'))
    assert [d['pci_bus_id'] for d in found] == ['0000:00:1c.0', '0000:00:1d.0', '0000:00:1e.0', '0000:00:1f.0']
    assert set(d['kind'] for d in found) == {'neuron'}
    assert set(d['pci_device_id'] for d in found) == {'0x7064'}
    assert found[0]['numa_node'] == 0


def test_scan_skips_nvswitch_audio_virtual_functions_and_other_vendors(tmp_path):
    add_device(tmp_path, '0000:10:1c.0', '0x10de', '0x20b0', '0x030200', '0', 'nvidia')
    add_device(tmp_path, '0000:07:00.0', '0x10de', '0x1af1', '0x068000', '0')          # NVSwitch
    add_device(tmp_path, '0000:01:00.1', '0x10de', '0x10f8', '0x040300', '0')          # GPU's HDMI audio
    add_device(tmp_path, '0000:00:1e.1', '0x10de', '0x20b0', '0x030200', '0', physfn=True)  # SR-IOV VF
    add_device(tmp_path, '0000:00:02.0', '0x1013', '0x00b8', '0x030000')              # Cirrus VGA
    add_device(tmp_path, '0000:03:00.0', '0x10de', '0x1eb8', '0x030000', '1')          # VGA-class GPU
    add_device(tmp_path, '0000:00:1f.0', '0x1d0f', '0x7164', '0x088000', '1', 'neuron')  # Trainium
    add_device(tmp_path, '0000:00:05.0', '0x1d0f', '0xefa1', '0x020000', '0')          # EFA
    found = _pci.scan(str(tmp_path))
    assert [(d['pci_bus_id'], d['kind'], d['numa_node'], d['driver']) for d in found] == [
        ('0000:00:1f.0', 'neuron', 1, 'neuron'),
        ('0000:03:00.0', 'nvidia', 1, None),
        ('0000:10:1c.0', 'nvidia', 0, 'nvidia'),
    ]


def test_scan_without_pci_sysfs_is_none(tmp_path):
    assert _pci.scan(str(tmp_path)) is None


def test_scan_an_empty_bus_is_an_empty_list(tmp_path):
    (tmp_path / 'sys/bus/pci/devices').mkdir(parents=True)
    assert _pci.scan(str(tmp_path)) == []


def test_scan_survives_unreadable_attributes(tmp_path):
    base = tmp_path / 'sys/bus/pci/devices/0000:00:1e.0'
    base.mkdir(parents=True)
    (base / 'vendor').write_text('0x10de\n')
    (base / 'class').write_text('0x030200\n')
    found = _pci.scan(str(tmp_path))
    assert found == [{'kind': 'nvidia', 'pci_bus_id': '0000:00:1e.0', 'pci_device_id': None,
                      'numa_node': None, 'driver': None}]


def test_scan_fabric_finds_the_nvswitches_of_a_p5(fact_roots):
    fabric = _pci.scan_fabric(str(fact_roots / 'p5.48xlarge'))
    assert fabric == {
        'nvswitches': ['0000:07:00.0', '0000:08:00.0', '0000:09:00.0', '0000:0a:00.0'],
        'management_bridges': [],
    }
    # The switches are bridges, not GPUs.
    assert len(_pci.scan(str(fact_roots / 'p5.48xlarge'))) == 8


def test_scan_fabric_finds_the_management_bridge_of_a_p6_b200(fact_roots):
    assert _pci.scan_fabric(str(fact_roots / 'p6-b200.48xlarge')) == {
        'nvswitches': [],
        'management_bridges': ['0000:03:00.0'],
    }


def test_scan_fabric_ignores_other_bridges_and_unreadable_vpd(tmp_path):
    add_device(tmp_path, '0000:00:01.0', '0x8086', '0x1234', '0x068000')   # not NVIDIA
    add_device(tmp_path, '0000:00:02.0', '0x10de', '0x2330', '0x030200')   # a GPU
    add_device(tmp_path, '0000:00:03.0', '0x15b3', '0x1021', '0x020700')   # no vpd file
    assert _pci.scan_fabric(str(tmp_path)) == {'nvswitches': [], 'management_bridges': []}
    add_device(tmp_path, '0000:00:04.0', '0x10de', '0x1af1', '0x068000')   # A100 NVSwitch
    assert _pci.scan_fabric(str(tmp_path))['nvswitches'] == ['0000:00:04.0']


def test_scan_fabric_without_sysfs(tmp_path):
    assert _pci.scan_fabric(str(tmp_path)) is None


@pytest.mark.parametrize('device, driver, neuron', [
    ('0x7064', None, True),             # Inferentia
    ('0x7364', 'neuron-driver', True),  # Trainium2
    ('0x7564', None, True),             # Trainium3 (TRN3_DEVICE_ID0)
    ('0x7565', None, True),             # Trainium3 (TRN3_DEVICE_ID1)
    ('0x7f64', None, True),             # made up: an id of the Neuron pattern that no table knows
    ('0x1234', 'neuron-driver', True),  # made up: an id the Neuron driver claimed
    ('0xec20', 'ena', False),           # ENA
    ('0xefa1', None, False),            # EFA
    ('0x8061', 'nvme', False),          # NVMe
    ('0x1111', None, False),            # Amazon's VGA
    (None, None, False),                # unreadable id
])
def test_is_neuron_device(device, driver, neuron):
    assert _pci.is_neuron_device(device, driver) is neuron


def test_scan_keeps_trainium3_and_neuron_devices_it_does_not_know(tmp_path):
    # A synthetic tree: two Trainium3, one made-up Neuron id, one made-up id the Neuron driver bound, and an EFA.
    add_device(tmp_path, '0000:10:1c.0', '0x1d0f', '0x7564', '0x088000', '0', 'neuron-driver')
    add_device(tmp_path, '0000:10:1d.0', '0x1d0f', '0x7565', '0x088000', '0', 'neuron-driver')
    add_device(tmp_path, '0000:10:1e.0', '0x1d0f', '0x7f64', '0x088000', '1')
    add_device(tmp_path, '0000:10:1f.0', '0x1d0f', '0x1234', '0x088000', '1', 'neuron-driver')
    add_device(tmp_path, '0000:00:05.0', '0x1d0f', '0xefa1', '0x020000', '0', 'efa')
    found = _pci.scan(str(tmp_path))
    assert [(d['pci_bus_id'], d['kind'], d['pci_device_id'], d['driver']) for d in found] == [
        ('0000:10:1c.0', 'neuron', '0x7564', 'neuron-driver'),
        ('0000:10:1d.0', 'neuron', '0x7565', 'neuron-driver'),
        ('0000:10:1e.0', 'neuron', '0x7f64', None),
        ('0000:10:1f.0', 'neuron', '0x1234', 'neuron-driver'),
    ]
    assert _pci.NEURON_DEVICE_NAMES['0x7564'] == _pci.NEURON_DEVICE_NAMES['0x7565'] == 'Trainium3'
