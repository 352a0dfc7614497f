#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_cuda_check
short_description: Prove that CUDA works on an NVIDIA host, with no CUDA toolkit
version_added: 0.1.0
description:
  - Initialises CUDA through the driver API in C(libcuda.so.1) with C(ctypes), the way any CUDA program starts.
    C(cuInit), C(cuDeviceGetCount), then for every device CUDA sees its primary context
    (C(cuDevicePrimaryCtxRetain), C(cuCtxSetCurrent)), an allocation (C(cuMemAlloc_v2)), a copy host to device
    to host (C(cuMemcpyHtoD_v2), C(cuMemcpyDtoH_v2)) of random bytes compared byte for byte, and the clean-up
    (C(cuMemFree_v2), C(cuDevicePrimaryCtxRelease_v2)).
    Each GPU that fails is reported with the call that failed and the error's name and string (C(cuGetErrorName),
    C(cuGetErrorString)).
  - The CUDA probe runs in a child process with a time limit (O(timeout)), so that a hung driver or a crash
    fails the check instead of hanging or killing the module. The time it took is returned.
  - In the same run it checks that C(/dev/nvidia-uvm) exists, that persistence mode is what
    O(expect_persistence) asks, and on NVSwitch systems the fabric state of every GPU and that the Fabric Manager
    service is active. Each check that fails names its cause and the fix.
  - Every check is returned in C(checks), in the shape of the checks of the C(accel.nodes.accelerator_validation)
    role's report.
  - The module changes no file. Initialising CUDA may make the driver create device nodes such as
    C(/dev/nvidia-uvm), as any CUDA program does.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
  - accel.nodes.attributes.info_module
options:
  library:
    description:
      - The CUDA driver library, a file name (searched for) or an absolute path.
    type: str
    default: libcuda.so.1
  search_loader:
    description:
      - Ask the dynamic loader (C(LD_LIBRARY_PATH), the C(ld.so) cache, the default directories) for O(library)
        first, then look in O(library_dirs).
    type: bool
    default: true
  library_dirs:
    description:
      - Directories to look for O(library) in, in order, when the dynamic loader does not find it. The defaults are
        the driver root that the NVIDIA container toolkit and GPU Operator use, and the distribution directories.
    type: list
    elements: path
    default: [/usr/local/nvidia/lib64, /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64]
  cuda_visible_devices:
    description:
      - C(CUDA_VISIBLE_DEVICES) for the CUDA probe, for example V(0,1) or a GPU UUID. Left out, the probe inherits
        the module's environment.
    type: str
  environment:
    description:
      - More environment variables for the CUDA probe.
    type: dict
    default: {}
  allocation_bytes:
    description:
      - The size of the allocation and of the copy on each GPU.
    type: int
    default: 1048576
  timeout:
    description:
      - Seconds the CUDA probe may take, on all GPUs together, before it is killed and the check fails.
    type: int
    default: 120
  root:
    description:
      - The files (C(/dev/nvidia-uvm), C(/sys/bus/pci/devices)) are read under this directory, as if it were C(/).
        The CUDA probe, C(nvidia-smi) and C(systemctl) always run on the live host.
    type: path
    default: /
  expect_persistence:
    description:
      - V(true) fails a GPU whose persistence mode is off, V(false) one whose persistence mode is on,
        as C(nvidia-smi -q -x) reports it. Left out, persistence mode is not checked.
    type: bool
  nvswitch:
    description:
      - Whether the host is an NVSwitch system (HGX baseboards, EC2 P4d, P4de, P5, P5e, P5en, P6). On one, the
        fabric state of every GPU and the Fabric Manager service are checked.
      - Left out, the module looks for NVSwitches on the PCI bus under O(root) (vendor NVIDIA, class C(0x0680)).
    type: bool
  fabric_manager_service:
    description:
      - The systemd unit of NVIDIA Fabric Manager.
    type: str
    default: nvidia-fabricmanager
  nvidia_smi_path:
    description:
      - The C(nvidia-smi) to run for persistence mode and the fabric state. Empty searches C(PATH) and the usual places.
    type: path
  skip:
    description:
      - Checks not to run, each with the reason the result gives for it. Keys are V(cuda), V(nvidia_uvm),
        V(nvidia_persistence_mode), V(nvswitch_fabric) and V(nvidia_fabricmanager).
    type: dict
    default: {}
  fail_on_error:
    description:
      - Fail the task when a check fails. V(false) returns the same result without failing, for a caller that
        judges C(checks) itself.
    type: bool
    default: true
notes:
  - The driver API is documented in NVIDIA's CUDA Driver API reference; the versioned symbol names
    (C(cuMemAlloc_v2) and others) are those that C(cuda.h) maps the plain names to.
  - Fabric Manager and the fabric state are documented in NVIDIA's Fabric Manager User Guide; the state values
    are NVML's C(nvmlGpuFabricState_t) as C(nvidia-smi) prints them.
seealso:
  - name: CUDA Driver API
    description: The functions the probe calls, and their error codes.
    link: https://docs.nvidia.com/cuda/cuda-driver-api/index.html
  - name: NVIDIA Fabric Manager User Guide
    description: Fabric Manager on NVSwitch systems, and its nvidia-fabricmanager service.
    link: https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html
"""

EXAMPLES = r"""
- name: Prove that CUDA works on every GPU, and that persistence mode is on
  accel.nodes.nvidia_cuda_check:
    expect_persistence: true

- name: The same on GPU 0 only, without failing the task; the caller judges the checks
  accel.nodes.nvidia_cuda_check:
    cuda_visible_devices: "0"
    fail_on_error: false
  register: cuda_check

- name: An NVSwitch system (P5) whose driver lives in the GPU Operator's driver root
  accel.nodes.nvidia_cuda_check:
    nvswitch: true
    search_loader: false
    library_dirs: [/run/nvidia/driver/usr/lib/x86_64-linux-gnu]
"""

RETURN = r"""
status:
  description: V(fail) when a check failed, else V(pass).
  returned: always
  type: str
  sample: pass
msg:
  description: One line, the failed checks' details, or a summary.
  returned: always
  type: str
  sample: "cuda: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected), with CUDA_VISIBLE_DEVICES=7: check ..."
checks:
  description:
    - One entry per check, C(name), C(layer) (always V(host)), C(status) (V(pass), V(fail) or V(skip)), C(detail)
      (what was seen, and the fix when it failed) and C(measured).
    - Names are V(cuda), V(nvidia_uvm), V(nvidia_persistence_mode) (only with O(expect_persistence)),
      V(nvswitch_fabric) and V(nvidia_fabricmanager) (only on NVSwitch systems).
  returned: always
  type: list
  elements: dict
  sample:
    - name: cuda
      layer: host
      status: pass
      detail: "CUDA 13.0 (/usr/local/nvidia/lib64/libcuda.so.580.159.04): 1 of 1 GPU(s) allocate 1048576 bytes and copy them
        host->device->host intact, in 212.4 ms"
      measured: {elapsed_ms: 212.4, device_count: 1}
cuda:
  description: What the CUDA probe found; null when the cuda check was skipped.
  returned: always
  type: dict
  contains:
    library:
      description: The library loaded (the file the dynamic loader mapped), or null.
      type: str
    driver_version:
      description: The CUDA version of the driver, from C(cuDriverGetVersion).
      type: str
    device_count:
      description: What C(cuDeviceGetCount) said; null when CUDA did not initialise.
      type: int
    devices:
      description: Per device C(index), C(name), C(pci_bus_id), C(status), C(error) (null, or C(call), C(code),
        C(name), C(string), C(hint)) and C(ms).
      type: list
      elements: dict
    error:
      description: The error that stopped the probe before the devices (library not found, C(cuInit) failed,
        time-out, crash), in the form of a device's error; null when none did.
      type: dict
    environment:
      description: The environment given to the probe.
      type: dict
    elapsed_ms:
      description: Milliseconds the CUDA probe took, from the fork to its result.
      type: float
elapsed_ms:
  description: Milliseconds the whole module run took.
  returned: always
  type: float
  sample: 250.3
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _nvidia_host_checks


def main() -> None:
    module = AnsibleModule(argument_spec=_nvidia_host_checks.ARGUMENT_SPEC, supports_check_mode=True)
    result = _nvidia_host_checks.run(module, module.params)
    if result['status'] == 'fail' and module.params['fail_on_error']:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
