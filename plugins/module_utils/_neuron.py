# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Read what the AWS Neuron driver and tools report about Inferentia and Trainium."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ansible_collections.accel.nodes.plugins.module_utils import _pci
from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

# aws-neuronx-tools installs here and does not put it on PATH for services.
LS_SEARCH_DIRS = ['/opt/aws/neuron/bin']
LS_ARGS = ['-j']  # --json-output; tools before it print only a table

SYSFS_DEVICES = '/sys/class/neuron_device'
DRIVER_VERSION = '/sys/module/neuron/version'


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def device_name(device_id: Optional[str]) -> Optional[str]:
    """Inferentia, Trainium, ... for a Neuron PCI device id; None for one the table lacks."""
    return _pci.NEURON_DEVICE_NAMES.get(device_id)


def unknown_device_problems(devices: List[Dict[str, Any]]) -> List[str]:
    """One problem per PCI device id of the facts' Neuron devices that no table here
    names: the device is listed, its model is not known."""
    unknown: Dict[str, List[str]] = {}
    for device in devices:
        device_id = device.get('pci_device_id')
        if device_id and device_name(device_id) is None:
            unknown.setdefault(device_id, []).append(device['pci_bus_id'])
    return [
        'Neuron device(s) %s have PCI device id %s, which accel.nodes does not know: they are listed '
        'with no model name. Update accel.nodes to a release that knows this device.' % (', '.join(bus_ids), device_id)
        for device_id, bus_ids in sorted(unknown.items())
    ]


def parse_neuron_ls(text):
    """Devices from `neuron-ls -j`: a list of dicts with pci_bus_id, core_count
    and memory_bytes, or None when the output is not the JSON array it prints."""
    try:
        data = json.loads(text or '')
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    devices = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        devices.append({
            'pci_bus_id': _pci.normalise_bus_id(entry.get('bdf')),
            'core_count': _int_or_none(entry.get('nc_count')),
            'memory_bytes': _int_or_none(entry.get('memory_size')),
        })
    return devices


def read_sysfs(root):
    """The loaded driver's version and each device's core count, in the
    driver's device order; None when the driver has left no trace."""
    names = _rootfs.list_dir(root, SYSFS_DEVICES)
    version = _rootfs.read_value(root, DRIVER_VERSION)
    if names is None and version is None:
        return None
    devices = [n for n in names or [] if n.startswith('neuron') and n[6:].isdigit()]
    devices.sort(key=lambda n: int(n[6:]))
    return {
        'driver_version': version or None,
        'core_counts': [
            _int_or_none(_rootfs.read_value(root, '%s/%s/core_count' % (SYSFS_DEVICES, n)))
            for n in devices
        ],
    }
