# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog
from ansible_collections.accel.nodes.plugins.module_utils import _nvidia

FACTS = Path(__file__).parents[3] / 'fixtures' / 'facts'


def smi(name):
    return (FACTS / 'commands' / 'nvidia-smi' / name).read_text()


# -- /proc/driver/nvidia ------------------------------------------------------

@pytest.mark.parametrize('text, expected', [
    # The H200 host, verbatim.
    ('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)\n'
     'GCC version:  gcc version 15.3.0 (GCC)\n', ('580.159.04', 'open')),
    ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026\n',
     ('580.173.02', 'proprietary')),
    ('NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)\n',
     ('570.124.06', 'open')),
    ('', (None, None)),
    (None, (None, None)),
    ('garbage\n', (None, None)),
])
def test_parse_proc_version(text, expected):
    assert _nvidia.parse_proc_version(text) == expected


def test_read_procfs_of_the_real_h200_host(fact_roots):
    assert _nvidia.read_procfs(str(fact_roots / 'h200')) == {
        'driver_version': '580.159.04',
        'kernel_module_flavor': 'open',
        'gpus': {'0000:00:06.0': {
            'name': 'NVIDIA H200',
            'uuid': 'GPU-92185b04-1559-f871-0910-0fb475d30f06',
            'pci_bus_id': '0000:00:06.0',
        }},
    }


def test_read_procfs_without_the_driver_is_none(fact_roots):
    assert _nvidia.read_procfs(str(fact_roots / 'g4dn.xlarge-driver-not-loaded')) is None


def test_gpu_information_placeholder_model_is_no_name():
    info = _nvidia.parse_gpu_information('Model: \t\t Graphics Device\nBus Location: \t 0000:10:1c.0\n')
    assert info == {'name': None, 'uuid': None, 'pci_bus_id': '0000:10:1c.0'}


# -- nvidia-smi -q -x ---------------------------------------------------------

def test_smi_real_h200_capture_schema_v13():
    result = _nvidia.parse_smi(0, smi('h200-v13.xml'), '')
    assert result['driver_version'] == '580.159.04'
    assert result['cuda_version'] == '13.0'
    assert result['gpus'] == {'0000:00:06.0': {
        'pci_bus_id': '0000:00:06.0',
        'name': 'NVIDIA H200',
        'placeholder_name': False,
        'uuid': 'GPU-92185b04-1559-f871-0910-0fb475d30f06',
        'pci_device_id': '0x2335',
        'memory_total_mib': 143771,
        'mig_mode': 'disabled',
        'persistence_mode': True,
    }}
    assert not result['mismatch'] and not result['driver_not_loaded'] and result['lost'] == []


def test_smi_eight_v100_schema_v11_has_no_mig_support():
    result = _nvidia.parse_smi(0, smi('p3.16xlarge-v11.xml'), '')
    assert result['driver_version'] == '470.256.02'
    assert sorted(result['gpus']) == ['0000:00:%02x.0' % n for n in range(0x17, 0x1f)]
    for gpu in result['gpus'].values():
        assert gpu['name'] == 'Tesla V100-SXM2-16GB'
        assert gpu['memory_total_mib'] == 16160
        assert gpu['mig_mode'] is None           # <current_mig>N/A</current_mig>
        assert gpu['persistence_mode'] is True
        assert gpu['pci_device_id'] == '0x1db1'


def test_smi_schema_v10_has_no_mig_element_at_all():
    result = _nvidia.parse_smi(0, smi('g4dn.xlarge-v10.xml'), '')
    assert result['cuda_version'] == '10.1'
    gpu = result['gpus']['0000:00:1e.0']
    assert (gpu['name'], gpu['memory_total_mib'], gpu['mig_mode'], gpu['persistence_mode']) == (
        'Tesla T4', 15109, None, False)


def test_smi_mig_enabled_and_disabled():
    gpus = _nvidia.parse_smi(0, smi('p4d-two-gpus-mig-v12.xml'), '')['gpus']
    assert gpus['0000:10:1c.0']['mig_mode'] == 'enabled'
    assert gpus['0000:10:1c.0']['memory_total_mib'] == 40960    # the whole card, not a MIG slice
    assert gpus['0000:10:1d.0']['mig_mode'] == 'disabled'
    assert gpus['0000:10:1d.0']['persistence_mode'] is False


def test_smi_graphics_device_and_na_values_become_null():
    gpu = _nvidia.parse_smi(0, smi('graphics-device-na-v11.xml'), '')['gpus']['0000:10:1c.0']
    assert gpu['name'] is None and gpu['placeholder_name'] is True
    assert gpu['memory_total_mib'] is None
    assert gpu['mig_mode'] is None and gpu['persistence_mode'] is None
    assert gpu['pci_device_id'] == '0x20b0'


def test_smi_rc9_driver_not_loaded():
    result = _nvidia.parse_smi(9, smi('rc9-driver-not-loaded.txt'), '')
    assert result['driver_not_loaded'] is True
    assert result['gpus'] is None


def test_smi_driver_not_loaded_is_read_from_the_text_too():
    assert _nvidia.parse_smi(255, '', smi('rc9-driver-not-loaded.txt'))['driver_not_loaded'] is True


def test_smi_rc15_gpu_lost_names_the_gpu():
    result = _nvidia.parse_smi(15, smi('rc15-gpu-lost.txt'), '')
    assert result['lost'] == [{
        'pci_bus_id': '0000:00:1e.0',
        'reason': 'GPU is lost.  Reboot the system to recover this GPU',
    }]
    assert result['gpus'] is None


def test_smi_rc15_without_a_message_still_reports_a_lost_gpu():
    assert _nvidia.parse_smi(15, '', '')['lost'] == [{'pci_bus_id': None, 'reason': 'nvidia-smi exited 15'}]


def test_smi_lost_gpu_line_around_a_partial_xml_document():
    text = ('Unable to determine the device handle for GPU0000:00:1D.0: Unknown Error\n'
            + smi('h200-v13.xml'))
    result = _nvidia.parse_smi(15, text, '')
    assert list(result['gpus']) == ['0000:00:06.0']
    assert result['lost'] == [{'pci_bus_id': '0000:00:1d.0', 'reason': 'Unknown Error'}]


def test_smi_version_mismatch_is_a_finding_not_an_error():
    result = _nvidia.parse_smi(18, smi('rc18-version-mismatch.txt'), '')
    assert result['mismatch'] is True
    assert result['nvml_version'] == '535.183'
    assert result['gpus'] is None and result['error'] is None


def test_smi_truncated_xml_is_an_error_not_a_crash():
    text = smi('h200-v13.xml')
    cut = text[:text.index('</gpu>')] + '</nvidia_smi_log>\n'
    result = _nvidia.parse_smi(0, cut, '')
    assert result['gpus'] is None
    assert result['error'].startswith('nvidia-smi XML could not be parsed')


@pytest.mark.parametrize('stdout', ['', 'No devices were found\n'])
def test_smi_without_xml(stdout):
    result = _nvidia.parse_smi(6, stdout, '')
    assert result['gpus'] is None and result['error'] is None and result['lost'] == []


# The device id of each GPU model the EC2 catalog names (supported-gpus.json of the
# 580.82.07 driver) and its compute capability (developer.nvidia.com/cuda-gpus).
CATALOG_MODELS = {
    'V100': ('0x1db1', '7.0'),
    'T4': ('0x1eb8', '7.5'),
    'A10G': ('0x2237', '8.6'),
    'A100': ('0x20b0', '8.0'),
    'L4': ('0x27b8', '8.9'),
    'L40S': ('0x26b9', '8.9'),
    'H100': ('0x2330', '9.0'),
    'H200': ('0x2335', '9.0'),
    'B200': ('0x2901', '10.0'),
    'B300': ('0x3182', '10.3'),
    'GB200': ('0x2941', '10.0'),
    'RTX PRO 6000 Blackwell Server Edition': ('0x2bb5', '12.0'),
    'RTX PRO 4500 Blackwell Server Edition': ('0x2c3a', '12.0'),
}


def test_every_catalog_gpu_has_its_compute_capability():
    models = set(entry[1] for entry in _ec2_catalog.CATALOG.values() if entry[0] == 'nvidia')
    assert models <= set(CATALOG_MODELS)
    for model in models:
        device_id, capability = CATALOG_MODELS[model]
        assert _nvidia.COMPUTE_CAPABILITY.get(device_id) == capability, model


def test_compute_capability_table_covers_every_catalog_gpu():
    table = _nvidia.COMPUTE_CAPABILITY
    assert table['0x2901'] == '10.0'  # B200: the "no proprietary modules on Blackwell" guard reads this
    assert table['0x2335'] == '9.0'   # H200
    assert table['0x2330'] == '9.0'   # H100
    assert table['0x20b0'] == '8.0'   # A100
    assert table['0x2237'] == '8.6'   # A10G
    assert table['0x1eb8'] == '7.5'   # T4
    assert table['0x1db1'] == '7.0'   # V100
