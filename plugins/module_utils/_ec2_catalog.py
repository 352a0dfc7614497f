# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""What each EC2 accelerator instance type promises, and how a host measures up.

Sources (checked 2026-11): the EC2 accelerated computing pages, the AWS Batch
GPU jobs table, and the AWS Neuron architecture pages for Inf1, Inf2 and
Trn1/Trn1n. Memory is per GPU in MiB as EC2 lists it (GiB x 1024); the P5e's
H200 is listed as 141 GB.
"""

from __future__ import annotations

# nvidia-smi reports a little less than the listed memory (T4: 16384 listed,
# 15109 to 15360 reported; V100: 16160; A10G: 23028), so the comparison allows
# this much either way.
MEMORY_TOLERANCE = 0.10

_T4 = ('nvidia', 'T4', 16384)
_A10G = ('nvidia', 'A10G', 24576)
_V100 = ('nvidia', 'V100', 16384)

# instance type: (vendor, model, memory_mib_each, count) for GPUs,
#                (vendor, devices, cores) for Neuron.
CATALOG = {
    'p3.2xlarge': _V100 + (1,),
    'p3.8xlarge': _V100 + (4,),
    'p3.16xlarge': _V100 + (8,),
    'p3dn.24xlarge': ('nvidia', 'V100', 32768, 8),
    'g4dn.xlarge': _T4 + (1,),
    'g4dn.2xlarge': _T4 + (1,),
    'g4dn.4xlarge': _T4 + (1,),
    'g4dn.8xlarge': _T4 + (1,),
    'g4dn.16xlarge': _T4 + (1,),
    'g4dn.12xlarge': _T4 + (4,),
    'g4dn.metal': _T4 + (8,),
    'g5.xlarge': _A10G + (1,),
    'g5.2xlarge': _A10G + (1,),
    'g5.4xlarge': _A10G + (1,),
    'g5.8xlarge': _A10G + (1,),
    'g5.16xlarge': _A10G + (1,),
    'g5.12xlarge': _A10G + (4,),
    'g5.24xlarge': _A10G + (4,),
    'g5.48xlarge': _A10G + (8,),
    'p4d.24xlarge': ('nvidia', 'A100', 40960, 8),
    'p4de.24xlarge': ('nvidia', 'A100', 81920, 8),
    'p5.48xlarge': ('nvidia', 'H100', 81920, 8),
    'p5e.48xlarge': ('nvidia', 'H200', 144384, 8),
    'p5en.48xlarge': ('nvidia', 'H200', 144384, 8),
    'inf1.xlarge': ('neuron', 1, 4),
    'inf1.2xlarge': ('neuron', 1, 4),
    'inf1.6xlarge': ('neuron', 4, 16),
    'inf1.24xlarge': ('neuron', 16, 64),
    'inf2.xlarge': ('neuron', 1, 2),
    'inf2.8xlarge': ('neuron', 1, 2),
    'inf2.24xlarge': ('neuron', 6, 12),
    'inf2.48xlarge': ('neuron', 12, 24),
    'trn1.2xlarge': ('neuron', 1, 2),
    'trn1.32xlarge': ('neuron', 16, 32),
    'trn1n.32xlarge': ('neuron', 16, 32),
}


def expected(instance_type):
    """The facts contract's `ec2.expected` for an instance type, or None."""
    entry = CATALOG.get((instance_type or '').strip().lower())
    if entry is None:
        return None
    if entry[0] == 'nvidia':
        return {'vendor': 'nvidia', 'model': entry[1], 'count': entry[3], 'memory_mib_each': entry[2]}
    return {'vendor': 'neuron', 'devices': entry[1], 'cores': entry[2]}


def _compare_gpus(instance_type, want, gpus, where):
    problems = []
    if len(gpus) < want['count']:
        problems.append('%s should have %d NVIDIA %s GPU(s); %s shows %d' % (
            instance_type, want['count'], want['model'], where, len(gpus)))
    low = want['memory_mib_each'] * (1 - MEMORY_TOLERANCE)
    high = want['memory_mib_each'] * (1 + MEMORY_TOLERANCE)
    for gpu in gpus:
        if gpu['name'] and want['model'].lower() not in gpu['name'].lower():
            problems.append('GPU %s is %s, but %s should have %s' % (
                gpu['pci_bus_id'], gpu['name'], instance_type, want['model']))
        memory = gpu['memory_total_mib']
        if memory is not None and not low <= memory <= high:
            problems.append('GPU %s has %d MiB, but the %s of %s should have about %d MiB' % (
                gpu['pci_bus_id'], memory, want['model'], instance_type, want['memory_mib_each']))
    return problems


def _compare_neuron(instance_type, want, devices, where):
    problems = []
    if len(devices) < want['devices']:
        problems.append('%s should have %d Neuron device(s); %s shows %d' % (
            instance_type, want['devices'], where, len(devices)))
    cores = [d['core_count'] for d in devices]
    if devices and None not in cores and sum(cores) < want['cores']:
        problems.append('%s should have %d NeuronCores; its devices report %d' % (
            instance_type, want['cores'], sum(cores)))
    return problems


def compare(instance_type, want, gpus, neuron_devices, where):
    """Human-readable problems where the host falls short of the catalog.

    gpus and neuron_devices are the facts' device lists; where names what
    counted them (for example 'the PCI bus').
    """
    if not want:
        return []
    if want['vendor'] == 'nvidia':
        return _compare_gpus(instance_type, want, gpus, where)
    return _compare_neuron(instance_type, want, neuron_devices, where)
