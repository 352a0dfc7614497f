#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: accelerator_facts
short_description: Discover NVIDIA GPUs, AWS Neuron devices, their drivers and container runtimes
version_added: 0.1.0
description:
  - Finds which accelerators a host has on its PCI bus, what state their kernel drivers
    and user-space tools are in, which container runtimes are registered, and what the
    EC2 instance type promises.
  - Returns all of it as C(ansible_facts.accelerators). Roles of this collection decide
    from these facts instead of probing the hardware again.
  - Reads sysfs and procfs first and runs C(nvidia-smi -q -x) and C(neuron-ls -j) at most
    once each, with C(LANG=C). Their output is parsed whatever their exit code.
  - It never changes the host and never fails because a tool or file is missing.
    What it finds wrong is listed in C(problems).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
  - accel.nodes.attributes.facts
  - accel.nodes.attributes.info_module
attributes:
  facts:
    support: full
options:
  root:
    description:
      - Every file is read under this directory, as if it were C(/).
      - Point it at a mounted image, or at the host's root from inside a container.
      - When it is not C(/), no command is run unless its path is given explicitly
        (O(nvidia_smi_path), O(neuron_ls_path)), and the instance metadata service is
        never asked.
    type: path
    default: /
  gather:
    description:
      - The sources to probe. Each one left out is recorded as V(skipped) in C(sources).
      - V(pci) scans C(/sys/bus/pci/devices), the ground truth for what is present.
      - V(nvidia_procfs) reads C(/proc/driver/nvidia/version) and C(/proc/driver/nvidia/gpus).
      - V(nvidia_smi) runs C(nvidia-smi -q -x), only when the PCI scan finds an NVIDIA GPU
        or could not be done, or when O(nvidia_smi_path) is given.
      - V(neuron) reads C(/sys/class/neuron_device) and C(/sys/module/neuron/version) and runs
        C(neuron-ls -j) (only when the PCI scan finds a Neuron device or could not be done,
        or when O(neuron_ls_path) is given).
      - V(kernel_modules) reads C(/proc/modules); V(device_nodes) lists C(/dev/nvidia*) and C(/dev/neuron*).
      - V(container_runtimes) reads C(/etc/docker/daemon.json), C(/etc/containerd/config.toml)
        with the drop-ins it imports, and the CDI specs in C(/etc/cdi) and C(/var/run/cdi).
      - V(ec2) reads DMI and asks the instance metadata service (IMDSv2) only when DMI says
        the host is an EC2 instance. V(imds) asks the metadata service even when DMI says
        nothing (a Xen instance whose hypervisor UUID is hidden, for example).
    type: list
    elements: str
    choices: [pci, nvidia_procfs, nvidia_smi, neuron, kernel_modules, device_nodes, container_runtimes, ec2, imds]
    default: [pci, nvidia_procfs, nvidia_smi, neuron, kernel_modules, device_nodes, container_runtimes, ec2]
  nvidia_smi_path:
    description:
      - The C(nvidia-smi) to run.
      - By default it is looked up in E(PATH), then in C(/usr/bin), C(/usr/local/nvidia/bin)
        (where the NVIDIA container toolkit and GPU operator mount the driver),
        C(/usr/local/bin) and C(/opt/nvidia/bin).
    type: path
  neuron_ls_path:
    description:
      - The C(neuron-ls) to run.
      - By default it is looked up in E(PATH), then in C(/opt/aws/neuron/bin).
    type: path
  instance_type:
    description:
      - The EC2 instance type to compare the host against, instead of the one DMI or the
        metadata service reports. Use it when baking an AMI on a build host of another type.
    type: str
  image:
    description:
      - The host is a build host and the root an image baked for another machine (an AMI bake in a chroot,
        where C(/proc), C(/sys) and C(/dev) are the build host's).
      - The build host's hardware is then never read. O(gather)'s V(pci), V(nvidia_procfs), V(nvidia_smi),
        V(neuron), V(kernel_modules), V(device_nodes), V(ec2) and V(imds) are left out and recorded as V(image)
        in C(sources), so the facts have no device, no loaded driver and no module.
      - The hardware is what O(instance_type) promises, from the EC2 catalog (C(ec2.expected), and the NVSwitch
        fabric of the instance type). Without O(instance_type) the facts name no hardware at all.
      - The image has none of the promised devices, so nothing is compared with the catalog and no problem is
        reported for them. V(container_runtimes) still reads the image's configuration.
    type: bool
    default: false
  nvswitch:
    description:
      - Whether the host manages an NVSwitch fabric (and so needs NVIDIA Fabric Manager),
        instead of what the PCI bus and the EC2 catalog say.
      - Unset, NVIDIA bridges of class C(0x0680) on the PCI bus (the NVSwitches of HGX A100,
        H100 and H200) or ConnectX bridges whose VPD names C(SW_MNG) (the NVSwitch management
        bridges of HGX B200) decide; where the bus shows no GPU or was not read, the EC2
        catalog does (P4d, P4de, P5, P5e, P5en, P6-B200).
    type: bool
  imds_timeout:
    description:
      - Seconds the whole IMDSv2 exchange (token, then instance type) may take.
      - V(0) never asks the metadata service.
    type: float
    default: 1.0
notes:
  - The EC2 instance type comes from O(instance_type), else from IMDSv2, else from DMI's
    product name, which holds the instance type on Nitro instances.
  - Compute capability is not in C(nvidia-smi -q -x); it comes from a table of PCI device
    ids and is null for a GPU not in the table.
  - GPU memory is compared with the EC2 catalog allowing 10% either way, because
    C(nvidia-smi) reports less than EC2 lists (a T4 is listed with 16384 MiB and reports 15360).
seealso:
  - name: nvidia-smi documentation
    description: The NVIDIA System Management Interface and its exit codes.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
  - name: neuron-ls user guide
    description: The AWS Neuron tool that lists Neuron devices.
    link: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-ls.html
"""

EXAMPLES = r"""
- name: Discover accelerators
  accel.nodes.accelerator_facts:

- name: Stop when the host does not have what its instance type promises
  ansible.builtin.assert:
    that: ansible_facts.accelerators.problems | length == 0
    fail_msg: "{{ ansible_facts.accelerators.problems | join('; ') }}"

- name: Inspect an AMI's root file system mounted at /mnt/image, for a p4d.24xlarge
  accel.nodes.accelerator_facts:
    root: /mnt/image
    instance_type: p4d.24xlarge

- name: Read only the PCI bus and the NVIDIA driver, without running any command
  accel.nodes.accelerator_facts:
    gather: [pci, nvidia_procfs, kernel_modules]

- name: Bake an AMI for a g5.xlarge in a chroot, whatever devices the build host has
  accel.nodes.accelerator_facts:
    instance_type: g5.xlarge
    image: true

- name: Decide from the facts
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.accelerators.nvidia.gpus | length }} GPU(s),
      driver {{ ansible_facts.accelerators.nvidia.driver_version | default('not loaded', true) }}
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to C(ansible_facts).
  returned: always
  type: dict
  contains:
    accelerators:
      description:
        - What the host has. The names below are a contract that roles rely on; a change to
          them bumps RV(ansible_facts.accelerators.schema_version).
        - A value the host does not give is null.
      returned: always
      type: dict
      contains:
        schema_version:
          description: Version of this layout.
          type: int
          sample: 1
        vendors:
          description: Accelerator vendors physically present, V(nvidia) and V(neuron), sorted.
          type: list
          elements: str
          sample: [nvidia]
        nvidia:
          description: The NVIDIA driver and GPUs.
          type: dict
          contains:
            driver_version:
              description: Version of the loaded kernel module, from C(/proc/driver/nvidia/version).
              type: str
              sample: 580.159.04
            userspace_driver_version:
              description:
                - Version that C(nvidia-smi) and NVML report. It differs from RV(ansible_facts.accelerators.nvidia.driver_version)
                  after a driver upgrade without a reboot.
              type: str
              sample: 580.159.04
            cuda_version:
              description: Highest CUDA version the driver supports.
              type: str
              sample: "13.0"
            kernel_module_flavor:
              description: V(open) for NVIDIA's open kernel modules, V(proprietary) for the closed ones.
              type: str
              sample: open
            gpus:
              description: One entry per physical GPU, sorted by PCI bus id.
              type: list
              elements: dict
              contains:
                index:
                  description: Position in this list; nvidia-smi uses the same order when it sees every GPU.
                  type: int
                name:
                  description: Product name from nvidia-smi (or the driver's procfs); null while the driver does not know the model.
                  type: str
                  sample: NVIDIA H200
                uuid:
                  description: GPU UUID.
                  type: str
                  sample: GPU-92185b04-1559-f871-0910-0fb475d30f06
                pci_bus_id:
                  description: PCI address in sysfs form, lower case with a 4-digit domain.
                  type: str
                  sample: "0000:00:06.0"
                pci_device_id:
                  description: PCI device id.
                  type: str
                  sample: "0x2335"
                memory_total_mib:
                  description: Frame buffer size that nvidia-smi reports.
                  type: int
                  sample: 143771
                compute_capability:
                  description: CUDA compute capability, from the PCI device id.
                  type: str
                  sample: "9.0"
                mig_mode:
                  description: Current MIG mode, V(enabled) or V(disabled); null where MIG is not supported.
                  type: str
                  sample: disabled
                persistence_mode:
                  description: Whether persistence mode is on.
                  type: bool
                numa_node:
                  description: NUMA node of the GPU; null when sysfs says -1.
                  type: int
            nvswitch:
              description:
                - Whether the host manages an NVSwitch fabric, on which CUDA waits for NVIDIA Fabric Manager.
                - C(present) is V(false) on GB200/GB300 hosts, whose switch trays manage the fabric.
                - C(generation) is the NVSwitch generation (2 HGX A100, 3 HGX H100/H200, 4 HGX B200),
                  from the GPUs' compute capability or the EC2 catalog; null when not present.
                - C(source) says what decided, V(pci), V(ec2) or V(option) (null when nothing could).
                - C(devices) lists the PCI bus ids of the NVSwitches or NVSwitch management bridges found.
              type: dict
              sample: {present: true, generation: 3, source: pci, devices: ["0000:07:00.0", "0000:08:00.0"]}
        neuron:
          description: The AWS Neuron driver and devices (Inferentia, Trainium).
          type: dict
          contains:
            driver_version:
              description: Version of the loaded neuron kernel module.
              type: str
            devices:
              description: One entry per Neuron device, sorted by PCI bus id.
              type: list
              elements: dict
              contains:
                index:
                  description: Position in this list.
                  type: int
                pci_bus_id:
                  description: PCI address in sysfs form.
                  type: str
                  sample: "0000:00:1c.0"
                pci_device_id:
                  description: PCI device id.
                  type: str
                  sample: "0x7064"
                name:
                  description:
                    - V(Inferentia), V(Trainium), V(Inferentia2), V(Trainium2) or V(Trainium3); null for an Amazon device
                      whose PCI id is not known yet (the facts' C(problems) name it).
                  type: str
                core_count:
                  description: NeuronCores on the device, from neuron-ls or sysfs.
                  type: int
                memory_bytes:
                  description: Device memory, from neuron-ls.
                  type: int
            core_count_total:
              description: Sum of the known core counts.
              type: int
        ec2:
          description: The EC2 instance type and what it promises.
          type: dict
          contains:
            instance_type:
              description: The instance type; null off EC2 or when nothing says.
              type: str
              sample: p3.8xlarge
            source:
              description: Where the instance type came from, V(imds), V(dmi) or V(option).
              type: str
            expected:
              description:
                - The accelerators the catalog lists for the instance type, or null for a type
                  without accelerators or not in the catalog.
                - "For GPUs C({vendor: nvidia, model, count, memory_mib_each}); for Neuron
                  C({vendor: neuron, devices, cores})."
              type: dict
              sample: {vendor: nvidia, model: V100, count: 4, memory_mib_each: 16384}
        container_runtimes:
          description: Container runtime configuration; null when not gathered.
          type: dict
          contains:
            docker:
              description:
                - Runtimes registered in C(/etc/docker/daemon.json) and its C(default-runtime)
                  (null when it sets none, so Docker uses runc).
              type: dict
              sample: {runtimes: [nvidia], default_runtime: nvidia}
            containerd:
              description:
                - C(config_files) read (C(/etc/containerd/config.toml) and the drop-ins it imports),
                  the C(runtimes) they register and the C(default_runtime) they set, in the config
                  containerd builds from them.
                - Unless a file has config version 3 or later (containerd 2.x), each file's CRI plugin
                  section replaces the earlier ones, as containerd 1.x merges imports; runtimes that only
                  containerd 2.x would keep are named in RV(ansible_facts.accelerators.problems).
              type: dict
              sample: {config_files: [/etc/containerd/config.toml], runtimes: [nvidia, runc], default_runtime: runc}
            cdi_specs:
              description: CDI spec files, each with the C(kind) of device it describes.
              type: list
              elements: dict
              sample: [{path: /etc/cdi/nvidia.yaml, kind: nvidia.com/gpu}]
        problems:
          description: What is wrong, one human-readable sentence per finding.
          type: list
          elements: str
          sample: ["p3.8xlarge should have 4 NVIDIA V100 GPU(s); the PCI bus shows 3"]
        sources:
          description:
            - How each source went. V(ok), V(missing) (no such file or tool), V(skipped)
              (not gathered or not needed), V(image) (the build host's, not read because of O(image)),
              V(rc N) (a command's exit code), V(unreachable) (IMDS), or a short error.
            - Keys are V(pci), V(nvidia_procfs), V(nvidia_smi), V(neuron), V(neuron_ls),
              V(kernel_modules), V(device_nodes), V(container_runtimes), V(dmi) and V(imds).
          type: dict
          sample: {pci: ok, nvidia_smi: ok, imds: skipped}
        observed:
          description:
            - Raw observations behind the facts, for troubleshooting. Not part of the versioned
              contract; do not build decisions on it.
            - C(kernel_modules) lists the accelerator modules loaded, C(device_nodes) the
              accelerator device nodes in C(/dev); each is null when not gathered.
          type: dict
          sample: {kernel_modules: [nvidia, nvidia_uvm], device_nodes: [/dev/nvidia0, /dev/nvidiactl]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _accelerators


def main():
    module = AnsibleModule(argument_spec=_accelerators.ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={'accelerators': _accelerators.gather(module)})


if __name__ == '__main__':
    main()
