# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Find accelerators on the PCI bus through sysfs, the ground truth for presence."""

from __future__ import annotations

import re
from typing import Optional

from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

PCI_DEVICES = '/sys/bus/pci/devices'

NVIDIA_VENDOR = '0x10de'
AMAZON_VENDOR = '0x1d0f'
MELLANOX_VENDOR = '0x15b3'

# The NVIDIA driver claims every NVIDIA device of class 0x0680 ("bridge, other")
# as an NVSwitch: nvswitch_pci_table in kernel-open/nvidia/linux_nvswitch.c of
# NVIDIA/open-gpu-kernel-modules (vendor 0x10de, any device, class
# PCI_CLASS_BRIDGE_OTHER << 8). pci.ids names them "GA100 [A100 NVSwitch]" (1af1)
# and "GH100 [H100 NVSwitch]" (22a3).
NVSWITCH_CLASS = '0x0680'
# Fourth-generation NVSwitches (HGX B200) are not PCI devices of the host: the
# host reaches them through ConnectX-7 bridges whose VPD carries the SW_MNG
# keyword. nvidia-fabricmanager-start.sh (in NVIDIA's Fabric Manager package)
# looks for it to choose its NVLSM path, and so does the EKS AMI's
# nvidia-fabricmanager-condition.sh.
NVSWITCH_MANAGEMENT_VPD = 'SW_MNG'

# VGA compatible (0x0300xx) and 3D controllers (0x0302xx). NVSwitches are
# bridges (0x0680xx); the HDMI audio and USB functions of a GPU have classes of
# their own, so they fall outside this as well.
_NVIDIA_GPU_CLASSES = ('0x0300', '0x0302')

# Amazon's accelerator device ids, the *_DEVICE_ID defines of neuron_device.h in
# the Neuron driver (github.com/aws-neuron/aws-neuron-driver): INF1 0..3 (in the
# releases that still drive Inf1), TRN1, INF2 and TRN2; TRN3_DEVICE_ID0 and
# TRN3_DEVICE_ID1 from the same file at commit 9cc489ec, whose
# v4/neuron_dhal_v4.c names the device "Trainium3". Amazon's other devices
# (ENA, EFA, NVMe, the 0x1111 VGA) are not accelerators and are skipped.
NEURON_DEVICE_NAMES = {
    '0x7064': 'Inferentia',
    '0x7065': 'Inferentia',
    '0x7066': 'Inferentia',
    '0x7067': 'Inferentia',
    '0x7164': 'Trainium',
    '0x7264': 'Inferentia2',
    '0x7364': 'Trainium2',
    '0x7564': 'Trainium3',
    '0x7565': 'Trainium3',
}
# A Neuron device this table does not know yet still counts, with no name: one
# the Neuron driver has claimed (its PCI driver is "neuron-driver", struct
# pci_driver in neuron_pci.c; the module itself is "neuron"), or one numbered
# like every Neuron device so far, 0x7N6M with N the generation. That pattern is
# ours, read off the ids above, not a rule Amazon publishes; ENA (0xec20), EFA
# (0xefa0..), NVMe (0x8061) and the VGA (0x1111) fall outside it.
NEURON_PCI_DRIVER = 'neuron-driver'
_NEURON_LIKE_DEVICE = re.compile(r'^0x7[0-9a-f]6[0-9a-f]$')

_BUS_ID = re.compile(
    r'^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$')


def normalise_bus_id(text):
    """A PCI address in sysfs form ('0000:00:06.0'), from sysfs, nvidia-smi
    ('00000000:00:06.0') or neuron-ls ('00:1e.0') spelling; None if it is not one."""
    if not text:
        return None
    match = _BUS_ID.match(text.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return '%04x:%02x:%02x.%s' % (int(domain or '0', 16), int(bus, 16), int(device, 16), function)


def bus_id_key(bus_id):
    """Sort key that orders bus ids numerically, so a 5-digit domain sorts last."""
    domain, bus, rest = bus_id.split(':')
    device, function = rest.split('.')
    return int(domain, 16), int(bus, 16), int(device, 16), int(function)


def is_neuron_device(device_id: Optional[str], driver: Optional[str] = None) -> bool:
    """Whether an Amazon PCI device (vendor 0x1d0f) is a Neuron device: a known
    id, one the Neuron driver has bound, or an unknown id of the Neuron pattern."""
    if device_id in NEURON_DEVICE_NAMES or driver == NEURON_PCI_DRIVER:
        return True
    return bool(device_id) and _NEURON_LIKE_DEVICE.match(device_id.lower()) is not None


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _devices(root):
    """(bus id, sysfs path, vendor) of every PCI device under root, or None
    when there is no PCI sysfs to read. Both scans below walk this list."""
    names = _rootfs.list_dir(root, PCI_DEVICES)
    if names is None:
        return None
    found = []
    for name in names:
        bus_id = normalise_bus_id(name)
        if bus_id is not None:
            base = PCI_DEVICES + '/' + name
            found.append((bus_id, base, _rootfs.read_value(root, base + '/vendor')))
    return found


def scan(root):
    """Accelerators on the PCI bus under root.

    Returns None when there is no PCI sysfs to read, else a list sorted by bus
    id of dicts: kind ('nvidia' or 'neuron'), pci_bus_id, pci_device_id,
    numa_node (None when sysfs says -1) and driver (the bound kernel driver's
    name, or None). Neuron devices whose id NEURON_DEVICE_NAMES lacks are kept
    (is_neuron_device); the facts name them None.
    """
    devices = _devices(root)
    if devices is None:
        return None
    found = []
    for bus_id, base, vendor in devices:
        if vendor == NVIDIA_VENDOR:
            pci_class = _rootfs.read_value(root, base + '/class') or ''
            if not pci_class.startswith(_NVIDIA_GPU_CLASSES):
                continue
            kind = 'nvidia'
        elif vendor == AMAZON_VENDOR:
            kind = 'neuron'
        else:
            continue
        device = _rootfs.read_value(root, base + '/device')
        driver = _rootfs.link_name(root, base + '/driver')
        if kind == 'neuron' and not is_neuron_device(device, driver):
            continue
        # An SR-IOV virtual function links to its physical function; it is a
        # slice of a device already counted.
        if _rootfs.exists(root, base + '/physfn'):
            continue
        numa_node = _int_or_none(_rootfs.read_value(root, base + '/numa_node'))
        found.append({
            'kind': kind,
            'pci_bus_id': bus_id,
            'pci_device_id': device,
            'numa_node': numa_node if numa_node is not None and numa_node >= 0 else None,
            'driver': driver,
        })
    found.sort(key=lambda d: bus_id_key(d['pci_bus_id']))
    return found


def scan_fabric(root):
    """NVSwitch fabric devices on the PCI bus under root.

    Returns None when there is no PCI sysfs to read, else a dict of sorted bus
    id lists: nvswitches (NVIDIA bridges of class 0x0680, HGX A100/H100/H200)
    and management_bridges (Mellanox devices whose VPD names SW_MNG, HGX B200).
    """
    devices = _devices(root)
    if devices is None:
        return None
    nvswitches = []
    bridges = []
    for bus_id, base, vendor in devices:
        if vendor == NVIDIA_VENDOR:
            if (_rootfs.read_value(root, base + '/class') or '').startswith(NVSWITCH_CLASS):
                nvswitches.append(bus_id)
        elif vendor == MELLANOX_VENDOR:
            # vpd is binary and readable by root only; unreadable counts as absent.
            if NVSWITCH_MANAGEMENT_VPD in (_rootfs.read_text(root, base + '/vpd') or ''):
                bridges.append(bus_id)
    return {
        'nvswitches': sorted(nvswitches, key=bus_id_key),
        'management_bridges': sorted(bridges, key=bus_id_key),
    }
