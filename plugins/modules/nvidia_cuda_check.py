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

import os
import time
from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _cuda
from ansible_collections.accel.nodes.plugins.module_utils import _nvidia
from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

CHECKS = ['cuda', 'nvidia_uvm', 'nvidia_persistence_mode', 'nvswitch_fabric', 'nvidia_fabricmanager']
COMMAND_ENV = {'LANG': 'C', 'LC_ALL': 'C'}
UVM = '/dev/nvidia-uvm'


def _check(name: str, status: str, detail: str, measured: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {'name': name, 'layer': 'host', 'status': status, 'detail': detail, 'measured': measured or {}}


def _error_text(error: Dict[str, Any]) -> str:
    text = error['name'] + (' (%s)' % error['string'] if error.get('string') and error['string'] != error['name'] else '')
    return '%s: %s' % (error['call'], text) if error['call'] not in ('dlopen', 'dlsym', 'probe') else error['string']


def judge_cuda(result: Dict[str, Any], size: int, environment: Dict[str, str]) -> Dict[str, Any]:
    """The cuda check from what the probe returned."""
    measured = {'elapsed_ms': result.get('elapsed_ms'), 'library': result.get('library'),
                'driver_version': result.get('driver_version'), 'device_count': result.get('device_count'),
                'environment': environment,
                'failed': [{'index': d['index'], 'pci_bus_id': d['pci_bus_id'], 'error': d['error']}
                           for d in result.get('devices') or [] if d['status'] != 'pass']}
    where = ''.join(', with %s=%s' % item for item in sorted(environment.items()))
    took = ', in %s ms' % result.get('elapsed_ms')
    error = result.get('error')
    if error:
        if error['call'] == 'cuInit':
            detail = 'cuInit failed: %s' % _error_text(error).split(': ', 1)[1]
        else:
            detail = _error_text(error)
        return _check('cuda', 'fail', '%s%s%s: %s' % (detail, where, took, error['hint']), measured)
    devices = result.get('devices') or []
    if not devices:
        return _check('cuda', 'fail', 'CUDA initialised but sees no GPU%s%s: %s' % (where, took, _cuda.HINTS['CUDA_ERROR_NO_DEVICE']),
                      measured)
    failed = [d for d in devices if d['status'] != 'pass']
    if failed:
        parts = ['GPU %d%s %s' % (d['index'], ' (%s)' % ', '.join(filter(None, [d['name'], d['pci_bus_id']])) if d['name'] or d['pci_bus_id'] else '',
                                  _error_text(d['error'])) for d in failed]
        hints = sorted(set(d['error']['hint'] for d in failed))
        return _check('cuda', 'fail', '%d of %d GPU(s) fail%s%s: %s: %s' % (len(failed), len(devices), where, took, '; '.join(parts), '; '.join(hints)),
                      measured)
    return _check('cuda', 'pass', 'CUDA %s (%s): %d of %d GPU(s) allocate %d bytes and copy them host->device->host intact%s%s'
                  % (result.get('driver_version') or '?', result.get('library'), len(devices), len(devices), size, where, took), measured)


def judge_uvm(before: bool, after: bool, probed: bool) -> Dict[str, Any]:
    measured = {'before_cuda': before, 'after_cuda': after}
    if after and not before and probed:
        return _check('nvidia_uvm', 'pass', '%s exists; it did not before this check initialised CUDA, so containers started earlier '
                      'after boot had none' % UVM, measured)
    if after:
        return _check('nvidia_uvm', 'pass', '%s exists' % UVM, measured)
    # nvidia-modprobe(1): the driver's user-space components run it to load the
    # modules and create their device files; -u (--unified-memory) is nvidia-uvm.
    return _check('nvidia_uvm', 'fail', '%s is missing, so CUDA in containers fails: load the nvidia-uvm kernel module and create its '
                  'device file: nvidia-modprobe -u -c=0' % UVM, measured)


def judge_persistence(gpus: Optional[List[Dict[str, Any]]], smi_error: Optional[str], expected: bool) -> Dict[str, Any]:
    word = 'on' if expected else 'off'
    if gpus is None:
        return _check('nvidia_persistence_mode', 'fail', 'cannot read persistence mode: %s: install or load the driver '
                      '(accel.nodes.nvidia_driver)' % smi_error, {'expected': expected})
    modes = dict((g['pci_bus_id'], g['persistence_mode']) for g in gpus)
    wrong = sorted(bus for bus, mode in modes.items() if mode is not expected)
    measured = {'expected': expected, 'gpus': modes}
    if not gpus:
        return _check('nvidia_persistence_mode', 'fail', 'nvidia-smi lists no GPU to read persistence mode from', measured)
    if wrong:
        fix = ('enable nvidia-persistenced (accel.nodes.nvidia_driver, nvidia_driver_persistence_mode: true; systemctl enable --now '
               'nvidia-persistenced)' if expected else 'stop nvidia-persistenced, or expect persistence mode on')
        return _check('nvidia_persistence_mode', 'fail', 'persistence mode is not %s on %s: %s' % (word, ', '.join(wrong), fix), measured)
    return _check('nvidia_persistence_mode', 'pass', 'persistence mode is %s on %d GPU(s)' % (word, len(gpus)), measured)


def judge_fabric(gpus: Optional[List[Dict[str, Any]]], smi_error: Optional[str], service: str) -> Dict[str, Any]:
    if gpus is None:
        return _check('nvswitch_fabric', 'fail', 'cannot read the fabric state: %s: install or load the driver (accel.nodes.nvidia_driver)'
                      % smi_error, {})
    states = dict((g['pci_bus_id'], {'state': g['fabric_state'], 'status': g['fabric_status']}) for g in gpus)
    measured = {'gpus': states}
    reported = dict((bus, s) for bus, s in states.items() if s['state'] is not None)
    if not reported:
        return _check('nvswitch_fabric', 'skip', 'skipped: the driver reports no fabric state for %s (GPUs before Hopper have none); '
                      'the %s check stands for it' % (', '.join(sorted(states)) or 'any GPU', service), measured)
    bad = []
    for bus in sorted(reported):
        state, status = reported[bus]['state'], reported[bus]['status']
        if state == _cuda.FABRIC_DONE and status == _cuda.FABRIC_OK_STATUS:
            continue
        if state == _cuda.FABRIC_DONE:
            bad.append('%s completed with status %s: the GPU failed to register with the fabric; read journalctl -u %s, '
                       'then reset the GPU or reboot' % (bus, status, service))
        elif state == 'In Progress':
            bad.append('%s is still In Progress: Fabric Manager has not finished training the fabric; wait, then read journalctl -u %s'
                       % (bus, service))
        elif state == 'Not Started':
            bad.append('%s is Not Started: Fabric Manager did not configure it; start %s at the driver\'s version' % (bus, service))
        else:
            bad.append('%s is %s (status %s): read journalctl -u %s' % (bus, state, status, service))
    if bad:
        return _check('nvswitch_fabric', 'fail', 'fabric state: ' + '; '.join(bad), measured)
    return _check('nvswitch_fabric', 'pass', 'fabric state Completed, status Success on %d GPU(s)' % len(reported), measured)


def judge_service(rc: Optional[int], state: str, service: str) -> Dict[str, Any]:
    measured = {'unit': service, 'active_state': state}
    if state == 'active':
        return _check('nvidia_fabricmanager', 'pass', '%s is active' % service, measured)
    if rc is None:
        return _check('nvidia_fabricmanager', 'fail', 'cannot ask systemd about %s: %s' % (service, state), measured)
    return _check('nvidia_fabricmanager', 'fail', '%s is %s, so CUDA cannot start on this NVSwitch system: install nvidia-fabricmanager '
                  'at exactly the driver\'s version and run systemctl enable --now %s (journalctl -u %s says why it stopped)'
                  % (service, state or 'unknown', service, service), measured)


def _find_smi(explicit: Optional[str]) -> Optional[str]:
    if explicit:
        return explicit
    for directory in os.environ.get('PATH', '').split(os.pathsep) + _nvidia.SMI_SEARCH_DIRS:
        path = os.path.join(directory, 'nvidia-smi')
        if directory and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def run_smi(module: AnsibleModule, explicit: Optional[str]):
    """(gpus, None) from nvidia-smi -q -x, or (None, why not)."""
    path = _find_smi(explicit)
    if path is None:
        return None, 'nvidia-smi not found'
    try:
        rc, out, err = module.run_command([path, '-q', '-x'], environ_update=COMMAND_ENV, handle_exceptions=False)
    except OSError as e:
        return None, '%s: %s' % (path, e)
    gpus = _cuda.gpu_health(out)
    if gpus is None:
        return None, '%s -q -x exited %d without XML: %s' % (path, rc, ' '.join((err or out or '').split())[:300])
    return gpus, None


def run_systemctl(module: AnsibleModule, service: str):
    """(rc, ActiveState word); rc None when systemctl could not run."""
    path = module.get_bin_path('systemctl')
    if path is None:
        return None, 'systemctl not found'
    try:
        rc, out, _err = module.run_command([path, 'is-active', service], environ_update=COMMAND_ENV, handle_exceptions=False)
    except OSError as e:
        return None, str(e)
    return rc, (out.strip().splitlines() or [''])[0]


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            library=dict(type='str', default=_cuda.LIBRARY),
            search_loader=dict(type='bool', default=True),
            library_dirs=dict(type='list', elements='path', default=list(_cuda.LIBRARY_DIRS)),
            cuda_visible_devices=dict(type='str'),
            environment=dict(type='dict', default={}),
            allocation_bytes=dict(type='int', default=1048576),
            timeout=dict(type='int', default=120),
            root=dict(type='path', default='/'),
            expect_persistence=dict(type='bool'),
            nvswitch=dict(type='bool'),
            fabric_manager_service=dict(type='str', default='nvidia-fabricmanager'),
            nvidia_smi_path=dict(type='path'),
            skip=dict(type='dict', default={}),
            fail_on_error=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    start = time.monotonic()
    p = module.params
    root = p['root'] or '/'
    unknown = sorted(set(p['skip']) - set(CHECKS))
    if unknown:
        module.fail_json(msg='skip: unknown check(s) %s; the checks are %s' % (', '.join(unknown), ', '.join(CHECKS)))
    if p['allocation_bytes'] < 1 or p['timeout'] < 1:
        module.fail_json(msg='allocation_bytes and timeout must be positive, not %d and %d' % (p['allocation_bytes'], p['timeout']))
    environment = dict((str(k), str(v)) for k, v in p['environment'].items())
    if p['cuda_visible_devices'] is not None:
        environment['CUDA_VISIBLE_DEVICES'] = p['cuda_visible_devices']
    skip = p['skip']
    checks = []
    cuda = None

    uvm_before = _rootfs.exists(root, UVM)
    if 'cuda' in skip:
        checks.append(_check('cuda', 'skip', 'skipped: %s' % skip['cuda']))
    else:
        forked = time.monotonic()
        cuda, why = _cuda.run_in_child(_cuda.child_probe, dict(
            library=p['library'], library_dirs=p['library_dirs'], search_loader=p['search_loader'],
            size=p['allocation_bytes'], environment=environment), p['timeout'])
        if cuda is None:
            cuda = {'library': None, 'driver_version': None, 'device_count': None, 'devices': [],
                    'error': {'call': 'probe', 'code': None, 'name': 'PROBE_FAILED', 'string': 'the CUDA probe ' + why,
                              'hint': _cuda.DEFAULT_HINT}}
        cuda.setdefault('devices', [])
        cuda['environment'] = environment
        cuda['elapsed_ms'] = round((time.monotonic() - forked) * 1000, 1)
        checks.append(judge_cuda(cuda, p['allocation_bytes'], environment))
    if 'nvidia_uvm' in skip:
        checks.append(_check('nvidia_uvm', 'skip', 'skipped: %s' % skip['nvidia_uvm']))
    else:
        checks.append(judge_uvm(uvm_before, _rootfs.exists(root, UVM), 'cuda' not in skip))

    nvswitch = p['nvswitch']
    switches = None
    if nvswitch is None:
        switches = _cuda.nvswitches(root)
        nvswitch = bool(switches)
    want_persistence = p['expect_persistence'] is not None and 'nvidia_persistence_mode' not in skip
    want_fabric = nvswitch and 'nvswitch_fabric' not in skip
    gpus, smi_error = run_smi(module, p['nvidia_smi_path']) if want_persistence or want_fabric else (None, None)
    if 'nvidia_persistence_mode' in skip:
        checks.append(_check('nvidia_persistence_mode', 'skip', 'skipped: %s' % skip['nvidia_persistence_mode']))
    elif want_persistence:
        checks.append(judge_persistence(gpus, smi_error, p['expect_persistence']))
    if nvswitch:
        if 'nvswitch_fabric' in skip:
            checks.append(_check('nvswitch_fabric', 'skip', 'skipped: %s' % skip['nvswitch_fabric']))
        else:
            checks.append(judge_fabric(gpus, smi_error, p['fabric_manager_service']))
        if 'nvidia_fabricmanager' in skip:
            checks.append(_check('nvidia_fabricmanager', 'skip', 'skipped: %s' % skip['nvidia_fabricmanager']))
        else:
            rc, state = run_systemctl(module, p['fabric_manager_service'])
            checks.append(judge_service(rc, state, p['fabric_manager_service']))
        if switches:
            for check in checks[-2:]:
                check['measured']['nvswitches'] = switches

    failed = [c for c in checks if c['status'] == 'fail']
    result = dict(
        changed=False,
        status='fail' if failed else 'pass',
        checks=checks,
        cuda=cuda,
        msg='; '.join('%s: %s' % (c['name'], c['detail']) for c in failed) or
            'NVIDIA host checks pass: ' + ', '.join('%s %s' % (c['name'], c['status']) for c in checks),
        elapsed_ms=round((time.monotonic() - start) * 1000, 1),
    )
    if failed and p['fail_on_error']:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
