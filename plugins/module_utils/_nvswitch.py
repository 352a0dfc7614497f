# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Decide whether a host manages an NVSwitch fabric, and of which generation.

On such a host CUDA does not start until NVIDIA Fabric Manager has trained the
fabric. The PCI bus decides; the EC2 catalog stands in where the bus cannot be
read or shows no GPU (an image baked on a build host), and an explicit choice
overrides both.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog

# The NVSwitch generation that goes with each GPU architecture (Fabric Manager
# User Guide, "NVSwitch-Based Systems": V100 first, A100 second, H100/H200
# third, B200 fourth), keyed by the compute capability's major number.
GENERATION_BY_CC_MAJOR = {7: 1, 8: 2, 9: 3, 10: 4}

# GPUs whose NVSwitches sit in the rack's switch trays and are managed there
# (GB200 and GB300 NVL72): the host never runs Fabric Manager. Device ids from
# the EKS AMI's nvidia-fabricmanager-condition.sh (from supported-gpus.json).
OFF_HOST_FABRIC_GPUS = frozenset(['0x2941', '0x31c2', '0x31c3'])


def _generation_from_gpus(gpus: List[Dict[str, Any]]) -> Optional[int]:
    for gpu in gpus:
        capability = gpu.get('compute_capability')
        if capability:
            generation = GENERATION_BY_CC_MAJOR.get(int(capability.split('.')[0]))
            if generation:
                return generation
    return None


def decide(fabric: Optional[Dict[str, List[str]]], gpus: List[Dict[str, Any]], pci_gpus: int,
           instance_type: Optional[str], override: Optional[bool]) -> Tuple[Dict[str, Any], List[str]]:
    """The facts' nvidia.nvswitch, and the problems found on the way.

    fabric is _pci.scan_fabric's answer (None when PCI was not read); gpus the
    facts' GPU list; pci_gpus how many of them the PCI bus shows.
    Returns (facts, problems): facts has present, generation, source
    ('pci', 'ec2', 'option' or None) and devices (the bus ids that told).
    """
    catalog = _ec2_catalog.nvswitch_generation(instance_type)
    devices = (fabric['nvswitches'] + fabric['management_bridges']) if fabric else []
    if fabric and fabric['management_bridges'] and not fabric['nvswitches']:
        generation = 4
    else:
        generation = _generation_from_gpus(gpus) or catalog
    problems = []
    if override is not None:
        present, source = override, 'option'
    elif any(gpu.get('pci_device_id') in OFF_HOST_FABRIC_GPUS for gpu in gpus):
        present, source, generation = False, 'pci', None
    elif devices:
        present, source = True, 'pci'
    elif catalog and (fabric is None or pci_gpus == 0):
        present, source, generation = True, 'ec2', catalog
    elif catalog:
        present, source, generation = True, 'ec2', catalog
        problems.append('%s carries NVSwitches (generation %d), but the PCI bus shows neither an NVSwitch '
                        'nor an NVSwitch management bridge' % (instance_type, catalog))
    else:
        present, source = False, 'pci' if fabric is not None else None
    return {
        'present': present,
        'generation': generation if present else None,
        'source': source,
        'devices': devices,
    }, problems
