# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Read what the NVIDIA driver reports: its procfs files and `nvidia-smi -q -x`.

Pure parsing: callers hand in text and get dicts back, with None wherever the
source has no value. Nothing here runs a command.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree

from ansible_collections.accel.nodes.plugins.module_utils import _pci
from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

# Where nvidia-smi lives besides PATH: distribution packages (/usr/bin),
# the driver root that the NVIDIA container toolkit and GPU operator mount
# (/usr/local/nvidia/bin; our H200 host), the .run installer's prefix
# (/usr/local/bin) and /opt/nvidia/bin.
SMI_SEARCH_DIRS = ['/usr/bin', '/usr/local/nvidia/bin', '/usr/local/bin', '/opt/nvidia/bin']
# One query gives every fact we need; the module runs nvidia-smi exactly once.
SMI_ARGS = ['-q', '-x']

PROC_VERSION = '/proc/driver/nvidia/version'
PROC_GPUS = '/proc/driver/nvidia/gpus'

# nvidia-smi's XML carries no compute capability (the 580 driver's v13 schema
# does not either), so it comes from the PCI device id. Extend this table when
# a new GPU reaches our fleet; an unknown id gives null, never a guess.
# Device ids: supported-gpus.json of the 580.82.07 driver (as the EKS AMI's
# nvidia-open-supported-devices-580.txt lists it); compute capabilities:
# https://developer.nvidia.com/cuda-gpus (10.0 B200/GB200, 10.3 B300/GB300,
# 9.0 H100/H200, 8.9 L4/L40S) and /cuda-legacy-gpus (7.0 V100). The RTX PRO
# Blackwell Server Editions' ids come from the "Compatible GPUs" table of the
# NVIDIA/open-gpu-kernel-modules README (610.43.03); cuda-gpus gives them 12.0.
COMPUTE_CAPABILITY = {
    '0x102d': '3.7',  # Tesla K80 (P2)
    '0x13f2': '5.2',  # Tesla M60 (G3)
    '0x1db1': '7.0',  # Tesla V100 SXM2 16GB (P3)
    '0x1db4': '7.0',  # Tesla V100 PCIe 16GB
    '0x1db5': '7.0',  # Tesla V100 SXM2 32GB (P3dn)
    '0x1db6': '7.0',  # Tesla V100 PCIe 32GB
    '0x1df6': '7.0',  # Tesla V100S PCIe 32GB
    '0x1eb8': '7.5',  # Tesla T4 (G4dn)
    '0x20b0': '8.0',  # A100 SXM4 40GB (P4d)
    '0x20b2': '8.0',  # A100 SXM4 80GB (P4de)
    '0x20b5': '8.0',  # A100 PCIe 80GB
    '0x20f1': '8.0',  # A100 PCIe 40GB
    '0x2236': '8.6',  # A10
    '0x2237': '8.6',  # A10G (G5)
    '0x27b8': '8.9',  # L4 (G6)
    '0x26b9': '8.9',  # L40S (G6e)
    '0x2330': '9.0',  # H100 SXM5 80GB (P5)
    '0x2331': '9.0',  # H100 PCIe
    '0x2335': '9.0',  # H200 SXM 141GB (P5e, P5en)
    '0x2901': '10.0',  # B200 (P6-B200)
    '0x2941': '10.0',  # GB200 (P6e-GB200)
    '0x2bb5': '12.0',  # RTX PRO 6000 Blackwell Server Edition (G7e)
    '0x2c3a': '12.0',  # RTX PRO 4500 Blackwell Server Edition (G7)
    '0x3182': '10.3',  # B300 SXM6 AC (P6-B300)
    '0x31c2': '10.3',  # GB300
}

# How nvidia-smi spells "no value".
_NO_VALUE = frozenset([
    '', 'N/A', '[N/A]', 'Not Supported', '[Not Supported]', 'Unknown Error',
    '[Unknown Error]', 'None', 'Insufficient Permissions', '[Insufficient Permissions]',
])
# What an older driver calls a GPU it does not know yet.
PLACEHOLDER_NAME = 'Graphics Device'

_PROC_VERSION_RE = re.compile(r'NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)')
_LOST_RE = re.compile(
    r'Unable to determine the device handle for (?:GPU\s*)?'
    r'([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])?\s*:\s*([^\r\n]+)')
_NVML_VERSION_RE = re.compile(r'NVML library version:\s*(\d+(?:\.\d+)*)')
_NOT_LOADED_RE = re.compile(r"couldn.t communicate with the NVIDIA driver", re.IGNORECASE)

RC_DRIVER_NOT_LOADED = 9
RC_GPU_LOST = 15


def _value(text):
    if text is None:
        return None
    text = text.strip()
    return None if text in _NO_VALUE else text


def parse_proc_version(text):
    """(driver version, 'open' | 'proprietary') from /proc/driver/nvidia/version."""
    if not text:
        return None, None
    match = _PROC_VERSION_RE.search(text)
    if not match:
        return None, None
    flavor = 'open' if 'Open Kernel Module' in match.group(0) else 'proprietary'
    return match.group(1), flavor


def parse_gpu_information(text):
    """Model, UUID and bus location from /proc/driver/nvidia/gpus/<bdf>/information."""
    fields = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields[key.strip()] = value.strip()
    name = _value(fields.get('Model'))
    return {
        'name': None if name == PLACEHOLDER_NAME else name,
        'uuid': _value(fields.get('GPU UUID')),
        'pci_bus_id': _pci.normalise_bus_id(fields.get('Bus Location')),
    }


def read_procfs(root):
    """The loaded kernel module and the GPUs it drives, or None when it is not loaded."""
    version, flavor = parse_proc_version(_rootfs.read_text(root, PROC_VERSION))
    bus_ids = _rootfs.list_dir(root, PROC_GPUS)
    if version is None and bus_ids is None:
        return None
    gpus = {}
    for name in bus_ids or []:
        info = parse_gpu_information(_rootfs.read_text(root, PROC_GPUS + '/' + name + '/information'))
        bus_id = info['pci_bus_id'] or _pci.normalise_bus_id(name)
        if bus_id:
            info['pci_bus_id'] = bus_id
            gpus[bus_id] = info
    return {'driver_version': version, 'kernel_module_flavor': flavor, 'gpus': gpus}


def _text(elem, path):
    found = elem.find(path)
    return None if found is None else _value(found.text)


def _mebibytes(text):
    if not text:
        return None
    number, _sep, unit = text.partition(' ')
    if unit.strip() not in ('MiB', ''):
        return None
    try:
        return int(number)
    except ValueError:
        return None


def _device_id(text):
    # <pci_device_id>233510DE</pci_device_id>: device id, then vendor id.
    if text and len(text) == 8:
        return '0x' + text[:4].lower()
    return None


def _gpu_from_xml(gpu):
    name = _text(gpu, 'product_name')
    mig = _text(gpu, 'mig_mode/current_mig')
    persistence = _text(gpu, 'persistence_mode')
    bus_id = _pci.normalise_bus_id(_text(gpu, 'pci/pci_bus_id') or gpu.get('id'))
    return {
        'pci_bus_id': bus_id,
        'name': None if name == PLACEHOLDER_NAME else name,
        'placeholder_name': name == PLACEHOLDER_NAME,
        'uuid': _text(gpu, 'uuid'),
        'pci_device_id': _device_id(_text(gpu, 'pci/pci_device_id')),
        'memory_total_mib': _mebibytes(_text(gpu, 'fb_memory_usage/total')),
        'mig_mode': {'Enabled': 'enabled', 'Disabled': 'disabled'}.get(mig),
        'persistence_mode': {'Enabled': True, 'Disabled': False}.get(persistence),
    }


def _xml_part(text):
    start = text.find('<nvidia_smi_log')
    end = text.rfind('</nvidia_smi_log>')
    if start < 0 or end < 0:
        return None
    return text[start:end + len('</nvidia_smi_log>')]


def parse_smi(rc, stdout, stderr):
    """Everything `nvidia-smi -q -x` said, whatever its exit code.

    gpus is a dict keyed by sysfs-form bus id, or None when no XML came back.
    nvidia-smi prints its errors on stdout, so both streams are searched.
    """
    result = {
        'driver_version': None,
        'cuda_version': None,
        'gpus': None,
        'mismatch': False,
        'nvml_version': None,
        'driver_not_loaded': rc == RC_DRIVER_NOT_LOADED,
        'lost': [],
        'error': None,
    }
    xml = _xml_part(stdout or '')
    if xml is not None:
        try:
            log = ElementTree.fromstring(xml)
        except ElementTree.ParseError as e:
            result['error'] = 'nvidia-smi XML could not be parsed: %s' % e
        else:
            result['driver_version'] = _text(log, 'driver_version')
            result['cuda_version'] = _text(log, 'cuda_version')
            gpus = {}
            for elem in log.findall('gpu'):
                gpu = _gpu_from_xml(elem)
                if gpu['pci_bus_id']:
                    gpus[gpu['pci_bus_id']] = gpu
            result['gpus'] = gpus
    # Error lines may come before or after a partial XML document.
    outside = (stdout or '').replace(xml, '') if xml is not None else stdout or ''
    messages = '%s\n%s' % (outside, stderr or '')
    if 'driver/library version mismatch' in messages.lower():
        result['mismatch'] = True
        match = _NVML_VERSION_RE.search(messages)
        result['nvml_version'] = match.group(1) if match else None
    if _NOT_LOADED_RE.search(messages):
        result['driver_not_loaded'] = True
    for match in _LOST_RE.finditer(messages):
        result['lost'].append({
            'pci_bus_id': _pci.normalise_bus_id(match.group(1)),
            'reason': match.group(2).strip(),
        })
    if rc == RC_GPU_LOST and not result['lost']:
        result['lost'].append({'pci_bus_id': None, 'reason': 'nvidia-smi exited %d' % rc})
    return result
