# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""What each EC2 accelerator instance type promises, and how a host measures up.

Sources (checked 2026-11): the EC2 accelerated computing pages
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html), the AWS Batch
GPU jobs table (https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html),
and the AWS Neuron architecture pages for Inf1, Inf2, Trn1/Trn1n and Trn2.
Memory is per GPU in MiB as EC2 lists it (GiB x 1024); the P5e's H200 is
listed as 141 GB, the P6-B200's B200 as 180 GB (1,440 GB for eight).
P6-B300, P6e-GB200, G7 and G7e (added 2026-11) cite their sources where they
are listed; ac.html itself could not be read for them, so each figure below names
the AWS page it comes from and who quoted it.
"""

from __future__ import annotations

# nvidia-smi reports a little less than the listed memory (T4: 16384 listed,
# 15109 to 15360 reported; V100: 16160; A10G: 23028), so the comparison allows
# this much either way.
MEMORY_TOLERANCE = 0.10

_T4 = ('nvidia', 'T4', 16384)
_A10G = ('nvidia', 'A10G', 24576)
_V100 = ('nvidia', 'V100', 16384)
# G6: NVIDIA L4, 24 GiB each; G6e: NVIDIA L40S, 48 GiB each (EC2 G6 and G6e pages,
# AWS Batch GPU jobs table).
_L4 = ('nvidia', 'L4', 24576)
_L40S = ('nvidia', 'L40S', 49152)
# Blackwell GPUs (compute capability 10.x: the open kernel modules only). The
# model is the GPU's name in NVIDIA's "Compatible GPUs" table (README of
# NVIDIA/open-gpu-kernel-modules, 610.43.03), which is what nvidia-smi prints,
# less "NVIDIA ": B300 SXM6 AC is PCI device 0x3182, GB200 is 0x2941.
# P6-B300: eight B300 with 2,144 GB in all, so 268 GiB each (AWS's P6-B300
# announcement and https://aws.amazon.com/ec2/instance-types/p6/, as third-party
# translations of its table quote it; summaries of the AWS ML blog post on
# SageMaker and Blackwell give 268 GB too). nvidia-smi shows 275040 MiB
# (third-party captures).
_B300 = ('nvidia', 'B300', 274432)
# P6e-GB200: four Blackwell GPUs on an arm64 (Grace) host; the EKS user guide ("Use P6e-GB200 UltraServers with Amazon
# EKS") says p6e-gb200.36xlarge has 4 NVIDIA Blackwell GPUs and is sold only as
# UltraServers (u-p6e-gb200x36: 9 instances, u-p6e-gb200x72: 18) and points to
# the AL2023 ARM NVIDIA AMI. GPU memory 740 GB for four, so 185 each (AWS's P6
# table as third-party copies quote it; the AWS ML blog's 13.4 TB for 72 GPUs
# and NVIDIA's MIG user guide, GB200 186 GB, agree within the tolerance).
# The nvidia_driver role maps aarch64 to NVIDIA's sbsa repository but
# has never run on arm64, and the collection sets up no nvidia-imex, which the
# UltraServer's NVLink across instances needs (README, "Not set up on P4d, P5
# and P6").
_GB200 = ('nvidia', 'GB200', 189440)
# G7e: NVIDIA RTX PRO 6000 Blackwell Server Edition (0x2bb5), 96 GB each; G7:
# NVIDIA RTX PRO 4500 Blackwell Server Edition (0x2c3a), 32 GB each. Both
# compute capability 12.0 (developer.nvidia.com/cuda-gpus): Blackwell, the open
# kernel modules only; PCIe, no NVSwitch. Sizes and GPU counts (1, 1, 1, 2, 4
# and 8 from 2xlarge to 48xlarge, for both) from AWS's launch announcements and
# product pages (https://aws.amazon.com/ec2/instance-types/g7e/ and /g7/), as
# third-party copies of their tables quote them. dstack's G7 offers from the
# AWS API (dstackai/dstack#4063) agree up to 24xlarge; one open
# kubernetes/autoscaler pull request (#9862) gives g7.8xlarge 2 and
# g7.12xlarge 4, against all of these. The announced g7.metal is not offered
# yet and stays out.
_RTX_PRO_6000 = ('nvidia', 'RTX PRO 6000 Blackwell Server Edition', 98304)
_RTX_PRO_4500 = ('nvidia', 'RTX PRO 4500 Blackwell Server Edition', 32768)
# Not in the catalog, for want of an AWS figure: p6e-gb200.72xlarge and
# p6e-gb300.36xlarge/.72xlarge (AWS PCS "Configure UltraServer instances" names
# them, with no GPU count or memory), and every Trn3 type. The Trn3 architecture
# page (Neuron docs, about-neuron/arch/neuron-hardware/trn3-arch) describes the
# UltraServers (Gen1: four servers of 16 Trainium3; Gen2: 36 servers of four)
# but names no instance type, and AWS lists no Trn3 size with its device count;
# the Neuron driver's platform map names trn3.48xlarge, trn3p.48xlarge and
# trn3e.24xlarge without one either. A Trainium3 has eight NeuronCore-v4 and
# 144 GiB (Trainium3 architecture page); its PCI ids are in _pci.py.

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
    'g6.xlarge': _L4 + (1,),
    'g6.2xlarge': _L4 + (1,),
    'g6.4xlarge': _L4 + (1,),
    'g6.8xlarge': _L4 + (1,),
    'g6.16xlarge': _L4 + (1,),
    'g6.12xlarge': _L4 + (4,),
    'g6.24xlarge': _L4 + (4,),
    'g6.48xlarge': _L4 + (8,),
    'g6e.xlarge': _L40S + (1,),
    'g6e.2xlarge': _L40S + (1,),
    'g6e.4xlarge': _L40S + (1,),
    'g6e.8xlarge': _L40S + (1,),
    'g6e.16xlarge': _L40S + (1,),
    'g6e.12xlarge': _L40S + (4,),
    'g6e.24xlarge': _L40S + (4,),
    'g6e.48xlarge': _L40S + (8,),
    # p5.4xlarge is the single-H100 size of P5 (no NVSwitch: one GPU).
    'p5.4xlarge': ('nvidia', 'H100', 81920, 1),
    'p5.48xlarge': ('nvidia', 'H100', 81920, 8),
    'p5e.48xlarge': ('nvidia', 'H200', 144384, 8),
    'p5en.48xlarge': ('nvidia', 'H200', 144384, 8),
    'p6-b200.48xlarge': ('nvidia', 'B200', 184320, 8),
    'p6-b300.48xlarge': _B300 + (8,),
    'p6e-gb200.36xlarge': _GB200 + (4,),
    'g7e.2xlarge': _RTX_PRO_6000 + (1,),
    'g7e.4xlarge': _RTX_PRO_6000 + (1,),
    'g7e.8xlarge': _RTX_PRO_6000 + (1,),
    'g7e.12xlarge': _RTX_PRO_6000 + (2,),
    'g7e.24xlarge': _RTX_PRO_6000 + (4,),
    'g7e.48xlarge': _RTX_PRO_6000 + (8,),
    'g7.2xlarge': _RTX_PRO_4500 + (1,),
    'g7.4xlarge': _RTX_PRO_4500 + (1,),
    'g7.8xlarge': _RTX_PRO_4500 + (1,),
    'g7.12xlarge': _RTX_PRO_4500 + (2,),
    'g7.24xlarge': _RTX_PRO_4500 + (4,),
    'g7.48xlarge': _RTX_PRO_4500 + (8,),
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
    # Trn2 (and its UltraServer nodes, Trn2u): 16 Trainium2 devices of eight
    # physical NeuronCore-v3 each. The default logical NeuronCore configuration
    # (LNC=2) pairs them, so a healthy host reports 64; 64 is the floor compared.
    'trn2.48xlarge': ('neuron', 16, 64),
    'trn2u.48xlarge': ('neuron', 16, 64),
}

# Instance types built on an HGX baseboard whose GPUs talk through NVSwitch,
# with the NVSwitch generation of the NVIDIA Fabric Manager User Guide: HGX
# A100 (P4d, P4de) has the second generation, HGX H100/H200 (P5, P5e, P5en)
# the third, HGX B200 (P6-B200) the fourth. p5.4xlarge has one GPU and no fabric.
# HGX B300 (P6-B300) is an NVSwitch baseboard too (NVIDIA AI Enterprise,
# "NVIDIA NVSwitch": platform support lists the HGX B300 8-GPU baseboard) with
# Blackwell's NVLink 5, the fourth generation, as its compute capability 10.3
# also tells _nvswitch. Whether the host reaches those switches through
# SW_MNG bridges as on HGX B200 is not documented where we could read it; the
# PCI scan decides on the host, and the catalog only when baking.
# P6e-GB200 is left out on purpose: its NVSwitches sit in the rack's switch
# trays and are managed there, so the host runs no Fabric Manager (README, "Not
# set up on P4d, P5 and P6"; _nvswitch.OFF_HOST_FABRIC_GPUS). Listing it here
# would make a bake for it install Fabric Manager.
NVSWITCH_GENERATION = {
    'p4d.24xlarge': 2,
    'p4de.24xlarge': 2,
    'p5.48xlarge': 3,
    'p5e.48xlarge': 3,
    'p5en.48xlarge': 3,
    'p6-b200.48xlarge': 4,
    'p6-b300.48xlarge': 4,
}


def expected(instance_type):
    """The facts contract's `ec2.expected` for an instance type, or None."""
    entry = CATALOG.get((instance_type or '').strip().lower())
    if entry is None:
        return None
    if entry[0] == 'nvidia':
        return {'vendor': 'nvidia', 'model': entry[1], 'count': entry[3], 'memory_mib_each': entry[2]}
    return {'vendor': 'neuron', 'devices': entry[1], 'cores': entry[2]}


def nvswitch_generation(instance_type):
    """The NVSwitch generation the instance type's baseboard carries, or None."""
    return NVSWITCH_GENERATION.get((instance_type or '').strip().lower())


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
