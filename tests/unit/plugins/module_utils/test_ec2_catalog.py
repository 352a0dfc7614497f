# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog


@pytest.mark.parametrize('instance_type, expected', [
    ('p3.2xlarge', {'vendor': 'nvidia', 'model': 'V100', 'count': 1, 'memory_mib_each': 16384}),
    ('p3.8xlarge', {'vendor': 'nvidia', 'model': 'V100', 'count': 4, 'memory_mib_each': 16384}),
    ('p3.16xlarge', {'vendor': 'nvidia', 'model': 'V100', 'count': 8, 'memory_mib_each': 16384}),
    ('p3dn.24xlarge', {'vendor': 'nvidia', 'model': 'V100', 'count': 8, 'memory_mib_each': 32768}),
    ('g4dn.xlarge', {'vendor': 'nvidia', 'model': 'T4', 'count': 1, 'memory_mib_each': 16384}),
    ('g4dn.12xlarge', {'vendor': 'nvidia', 'model': 'T4', 'count': 4, 'memory_mib_each': 16384}),
    ('g4dn.metal', {'vendor': 'nvidia', 'model': 'T4', 'count': 8, 'memory_mib_each': 16384}),
    ('g5.16xlarge', {'vendor': 'nvidia', 'model': 'A10G', 'count': 1, 'memory_mib_each': 24576}),
    ('g5.12xlarge', {'vendor': 'nvidia', 'model': 'A10G', 'count': 4, 'memory_mib_each': 24576}),
    ('g5.24xlarge', {'vendor': 'nvidia', 'model': 'A10G', 'count': 4, 'memory_mib_each': 24576}),
    ('g5.48xlarge', {'vendor': 'nvidia', 'model': 'A10G', 'count': 8, 'memory_mib_each': 24576}),
    ('p4d.24xlarge', {'vendor': 'nvidia', 'model': 'A100', 'count': 8, 'memory_mib_each': 40960}),
    ('p4de.24xlarge', {'vendor': 'nvidia', 'model': 'A100', 'count': 8, 'memory_mib_each': 81920}),
    ('p5.48xlarge', {'vendor': 'nvidia', 'model': 'H100', 'count': 8, 'memory_mib_each': 81920}),
    ('p5e.48xlarge', {'vendor': 'nvidia', 'model': 'H200', 'count': 8, 'memory_mib_each': 144384}),
    ('p5.4xlarge', {'vendor': 'nvidia', 'model': 'H100', 'count': 1, 'memory_mib_each': 81920}),
    ('p5en.48xlarge', {'vendor': 'nvidia', 'model': 'H200', 'count': 8, 'memory_mib_each': 144384}),
    ('p6-b200.48xlarge', {'vendor': 'nvidia', 'model': 'B200', 'count': 8, 'memory_mib_each': 184320}),
    ('p6-b300.48xlarge', {'vendor': 'nvidia', 'model': 'B300', 'count': 8, 'memory_mib_each': 274432}),
    ('p6e-gb200.36xlarge', {'vendor': 'nvidia', 'model': 'GB200', 'count': 4, 'memory_mib_each': 189440}),
    ('g7e.2xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 6000 Blackwell Server Edition', 'count': 1,
                     'memory_mib_each': 98304}),
    ('g7e.12xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 6000 Blackwell Server Edition', 'count': 2,
                      'memory_mib_each': 98304}),
    ('g7e.48xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 6000 Blackwell Server Edition', 'count': 8,
                      'memory_mib_each': 98304}),
    ('g7.8xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 4500 Blackwell Server Edition', 'count': 1,
                    'memory_mib_each': 32768}),
    ('g7.12xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 4500 Blackwell Server Edition', 'count': 2,
                     'memory_mib_each': 32768}),
    ('g7.24xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 4500 Blackwell Server Edition', 'count': 4,
                     'memory_mib_each': 32768}),
    ('g7.48xlarge', {'vendor': 'nvidia', 'model': 'RTX PRO 4500 Blackwell Server Edition', 'count': 8,
                     'memory_mib_each': 32768}),
    ('g6.xlarge', {'vendor': 'nvidia', 'model': 'L4', 'count': 1, 'memory_mib_each': 24576}),
    ('g6.12xlarge', {'vendor': 'nvidia', 'model': 'L4', 'count': 4, 'memory_mib_each': 24576}),
    ('g6.48xlarge', {'vendor': 'nvidia', 'model': 'L4', 'count': 8, 'memory_mib_each': 24576}),
    ('g6e.xlarge', {'vendor': 'nvidia', 'model': 'L40S', 'count': 1, 'memory_mib_each': 49152}),
    ('g6e.24xlarge', {'vendor': 'nvidia', 'model': 'L40S', 'count': 4, 'memory_mib_each': 49152}),
    ('g6e.48xlarge', {'vendor': 'nvidia', 'model': 'L40S', 'count': 8, 'memory_mib_each': 49152}),
    ('trn2.48xlarge', {'vendor': 'neuron', 'devices': 16, 'cores': 64}),
    ('trn2u.48xlarge', {'vendor': 'neuron', 'devices': 16, 'cores': 64}),
    ('inf1.xlarge', {'vendor': 'neuron', 'devices': 1, 'cores': 4}),
    ('inf1.2xlarge', {'vendor': 'neuron', 'devices': 1, 'cores': 4}),
    ('inf1.6xlarge', {'vendor': 'neuron', 'devices': 4, 'cores': 16}),
    ('inf1.24xlarge', {'vendor': 'neuron', 'devices': 16, 'cores': 64}),
    ('inf2.xlarge', {'vendor': 'neuron', 'devices': 1, 'cores': 2}),
    ('inf2.8xlarge', {'vendor': 'neuron', 'devices': 1, 'cores': 2}),
    ('inf2.24xlarge', {'vendor': 'neuron', 'devices': 6, 'cores': 12}),
    ('inf2.48xlarge', {'vendor': 'neuron', 'devices': 12, 'cores': 24}),
    ('trn1.2xlarge', {'vendor': 'neuron', 'devices': 1, 'cores': 2}),
    ('trn1.32xlarge', {'vendor': 'neuron', 'devices': 16, 'cores': 32}),
    ('trn1n.32xlarge', {'vendor': 'neuron', 'devices': 16, 'cores': 32}),
    ('P3.8XLARGE ', {'vendor': 'nvidia', 'model': 'V100', 'count': 4, 'memory_mib_each': 16384}),
    ('m5.large', None),
    # Named by AWS, but no AWS page we could read gives their accelerator count.
    ('p6e-gb200.72xlarge', None),
    ('p6e-gb300.36xlarge', None),
    ('trn3.48xlarge', None),
    ('g7.metal', None),          # announced, not offered yet
    ('', None),
    (None, None),
])
def test_expected(instance_type, expected):
    assert _ec2_catalog.expected(instance_type) == expected


def gpu(bus_id, name, memory):
    return {'pci_bus_id': bus_id, 'name': name, 'memory_total_mib': memory}


def test_t4_reporting_less_memory_than_listed_is_within_tolerance():
    want = _ec2_catalog.expected('g4dn.xlarge')
    for memory in (15360, 15109):
        assert _ec2_catalog.compare('g4dn.xlarge', want, [gpu('0000:00:1e.0', 'Tesla T4', memory)], [], 'the PCI bus') == []


def test_missing_gpu_wrong_model_and_wrong_memory_are_each_a_problem():
    want = _ec2_catalog.expected('p4d.24xlarge')
    gpus = [gpu('0000:10:1c.0', 'NVIDIA A100-SXM4-80GB', 81920), gpu('0000:10:1d.0', 'NVIDIA A10G', 23028)]
    gpus += [gpu('0000:20:%02x.0' % n, 'NVIDIA A100-SXM4-40GB', 40960) for n in range(5)]
    assert _ec2_catalog.compare('p4d.24xlarge', want, gpus, [], 'the PCI bus') == [
        'p4d.24xlarge should have 8 NVIDIA A100 GPU(s); the PCI bus shows 7',
        'GPU 0000:10:1c.0 has 81920 MiB, but the A100 of p4d.24xlarge should have about 40960 MiB',
        'GPU 0000:10:1d.0 is NVIDIA A10G, but p4d.24xlarge should have A100',
        'GPU 0000:10:1d.0 has 23028 MiB, but the A100 of p4d.24xlarge should have about 40960 MiB',
    ]


def test_unknown_name_and_memory_are_not_held_against_the_host():
    want = _ec2_catalog.expected('p3.2xlarge')
    assert _ec2_catalog.compare('p3.2xlarge', want, [gpu('0000:00:1e.0', None, None)], [], 'the PCI bus') == []


def test_neuron_devices_and_cores():
    want = _ec2_catalog.expected('inf1.6xlarge')
    devices = [{'core_count': 4}] * 3
    assert _ec2_catalog.compare('inf1.6xlarge', want, [], devices, 'the PCI bus') == [
        'inf1.6xlarge should have 4 Neuron device(s); the PCI bus shows 3',
        'inf1.6xlarge should have 16 NeuronCores; its devices report 12',
    ]
    # Unknown core counts prove nothing.
    assert _ec2_catalog.compare('inf1.6xlarge', want, [], [{'core_count': None}] * 4, 'the PCI bus') == []


def test_no_expectation_no_problem():
    assert _ec2_catalog.compare('m5.large', None, [], [], 'the PCI bus') == []


@pytest.mark.parametrize('instance_type, generation', [
    ('p4d.24xlarge', 2),
    ('p4de.24xlarge', 2),
    ('p5.48xlarge', 3),
    ('p5e.48xlarge', 3),
    ('P5EN.48XLARGE', 3),
    ('p6-b200.48xlarge', 4),
    ('p6-b300.48xlarge', 4),
    ('p6e-gb200.36xlarge', None),  # NVSwitches in the rack's switch trays, no Fabric Manager on the host
    ('p5.4xlarge', None),      # one H100, no fabric
    ('g6e.48xlarge', None),    # eight L40S on PCIe
    ('g7e.48xlarge', None),    # eight RTX PRO 6000 on PCIe
    ('g7.48xlarge', None),     # eight RTX PRO 4500 on PCIe
    ('p3.16xlarge', None),     # NVLink between V100s, no NVSwitch
    (None, None),
])
def test_nvswitch_generation(instance_type, generation):
    assert _ec2_catalog.nvswitch_generation(instance_type) == generation


def test_b200_reporting_less_memory_than_listed_is_within_tolerance():
    # nvidia-smi shows 183359 MiB for a B200 (HGX B200 with the 580 driver).
    want = _ec2_catalog.expected('p6-b200.48xlarge')
    gpus = [gpu('0000:%02x:00.0' % bus, 'NVIDIA B200', 183359) for bus in range(8)]
    assert _ec2_catalog.compare('p6-b200.48xlarge', want, gpus, [], 'the PCI bus') == []


def test_b300_and_gb200_as_nvidia_smi_names_them_match_the_catalog():
    # nvidia-smi names them "NVIDIA B300 SXM6 AC" (275040 MiB) and "NVIDIA GB200" (memory left unknown here).
    want = _ec2_catalog.expected('p6-b300.48xlarge')
    gpus = [gpu('0000:%02x:00.0' % bus, 'NVIDIA B300 SXM6 AC', 275040) for bus in range(8)]
    assert _ec2_catalog.compare('p6-b300.48xlarge', want, gpus, [], 'the PCI bus') == []
    want = _ec2_catalog.expected('p6e-gb200.36xlarge')
    gpus = [gpu('0008:%02x:00.0' % bus, 'NVIDIA GB200', None) for bus in range(4)]
    assert _ec2_catalog.compare('p6e-gb200.36xlarge', want, gpus, [], 'the PCI bus') == []


def test_a_b200_host_is_not_a_p6_b300():
    want = _ec2_catalog.expected('p6-b300.48xlarge')
    gpus = [gpu('0000:%02x:00.0' % bus, 'NVIDIA B200', 183359) for bus in range(8)]
    problems = _ec2_catalog.compare('p6-b300.48xlarge', want, gpus, [], 'the PCI bus')
    assert problems[0] == 'GPU 0000:00:00.0 is NVIDIA B200, but p6-b300.48xlarge should have B300'
    assert problems[1] == ('GPU 0000:00:00.0 has 183359 MiB, but the B300 of p6-b300.48xlarge should have '
                           'about 274432 MiB')
    assert len(problems) == 16


def test_a_g7e_with_the_wrong_gpu_is_told_which():
    want = _ec2_catalog.expected('g7e.12xlarge')
    gpus = [gpu('0000:00:1e.0', 'NVIDIA RTX PRO 6000 Blackwell Server Edition', None),
            gpu('0000:00:1f.0', 'NVIDIA RTX PRO 4500 Blackwell Server Edition', None)]
    assert _ec2_catalog.compare('g7e.12xlarge', want, gpus, [], 'the PCI bus') == [
        'GPU 0000:00:1f.0 is NVIDIA RTX PRO 4500 Blackwell Server Edition, but g7e.12xlarge should have '
        'RTX PRO 6000 Blackwell Server Edition']
