# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Prove that CUDA works through the driver API (libcuda.so.1), with no toolkit.

The calls and their signatures are those of NVIDIA's CUDA Driver API reference
(https://docs.nvidia.com/cuda/cuda-driver-api/, modules Initialization, Version
Management, Device Management, Primary Context Management, Context Management,
Memory Management and Error Handling) and of cuda.h, which maps the plain names
to the versioned symbols that libcuda.so.1 exports:
  #define cuMemAlloc cuMemAlloc_v2, cuMemFree cuMemFree_v2,
  cuMemcpyHtoD cuMemcpyHtoD_v2, cuMemcpyDtoH cuMemcpyDtoH_v2,
  cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2.
Every call returns a CUresult (an enum, an int; CUDA_SUCCESS is 0) and hands its
results back through out-parameters.

The probe runs in a forked child (run_in_child) so that a driver that hangs or
crashes cannot hang or kill the caller; the parent never loads libcuda.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.accel.nodes.plugins.module_utils import _nvidia
from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

LIBRARY = 'libcuda.so.1'
# Besides the dynamic loader: the driver root that the NVIDIA container toolkit
# and GPU Operator use (/usr/local/nvidia/lib64, where our H200 host keeps the
# driver, tests/fixtures/facts/README.md), and the multiarch and lib64
# directories where distribution and CUDA-repository driver packages put it.
LIBRARY_DIRS = ['/usr/local/nvidia/lib64', '/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64']

CUDA_SUCCESS = 0

# typedef int CUdevice; typedef struct CUctx_st *CUcontext;
# typedef unsigned long long CUdeviceptr (64-bit hosts) -- cuda.h.
CUdevice = ctypes.c_int
CUcontext = ctypes.c_void_p
CUdeviceptr = ctypes.c_ulonglong

# name: argtypes; restype is always CUresult (int).
SIGNATURES = {
    # CUresult cuGetErrorName(CUresult error, const char **pStr)
    'cuGetErrorName': [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    # CUresult cuGetErrorString(CUresult error, const char **pStr)
    'cuGetErrorString': [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    # CUresult cuInit(unsigned int Flags)  (Flags must be 0)
    'cuInit': [ctypes.c_uint],
    # CUresult cuDriverGetVersion(int *driverVersion)  (1000 * major + 10 * minor)
    'cuDriverGetVersion': [ctypes.POINTER(ctypes.c_int)],
    # CUresult cuDeviceGetCount(int *count)
    'cuDeviceGetCount': [ctypes.POINTER(ctypes.c_int)],
    # CUresult cuDeviceGet(CUdevice *device, int ordinal)
    'cuDeviceGet': [ctypes.POINTER(CUdevice), ctypes.c_int],
    # CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
    'cuDeviceGetName': [ctypes.c_char_p, ctypes.c_int, CUdevice],
    # CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
    'cuDeviceGetPCIBusId': [ctypes.c_char_p, ctypes.c_int, CUdevice],
    # CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
    'cuDevicePrimaryCtxRetain': [ctypes.POINTER(CUcontext), CUdevice],
    # CUresult cuDevicePrimaryCtxRelease(CUdevice dev)  (_v2 symbol)
    'cuDevicePrimaryCtxRelease_v2': [CUdevice],
    # CUresult cuCtxSetCurrent(CUcontext ctx)  (NULL unbinds)
    'cuCtxSetCurrent': [CUcontext],
    # CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)  (_v2 symbol)
    'cuMemAlloc_v2': [ctypes.POINTER(CUdeviceptr), ctypes.c_size_t],
    # CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)  (_v2 symbol)
    'cuMemcpyHtoD_v2': [CUdeviceptr, ctypes.c_void_p, ctypes.c_size_t],
    # CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)  (_v2 symbol)
    'cuMemcpyDtoH_v2': [ctypes.c_void_p, CUdeviceptr, ctypes.c_size_t],
    # CUresult cuMemFree(CUdeviceptr dptr)  (_v2 symbol)
    'cuMemFree_v2': [CUdeviceptr],
}

# What to do about a CUresult, by the name cuGetErrorName gives it (cuda.h's
# enum cudaError_enum documents each one).
HINTS = {
    'CUDA_ERROR_NO_DEVICE': 'check CUDA_VISIBLE_DEVICES, and that nvidia-smi -L lists the GPUs',
    'CUDA_ERROR_INVALID_DEVICE': 'check CUDA_VISIBLE_DEVICES, and that nvidia-smi -L lists the GPUs',
    'CUDA_ERROR_SYSTEM_NOT_READY': 'on an NVSwitch system Fabric Manager has not initialised the fabric: '
                                   'run nvidia-fabricmanager at the driver\'s version (journalctl -u nvidia-fabricmanager says why it did not)',
    'CUDA_ERROR_SYSTEM_DRIVER_MISMATCH': 'libcuda.so.1 and the loaded kernel module are different versions: reboot to load the installed driver',
    'CUDA_ERROR_INSUFFICIENT_DRIVER': 'the kernel module is older than libcuda.so.1: reboot to load the installed driver',
    'CUDA_ERROR_OUT_OF_MEMORY': 'other processes hold the GPU\'s memory (nvidia-smi lists them)',
    'CUDA_ERROR_DEVICE_UNAVAILABLE': 'the GPU is in an exclusive compute mode and busy, or unavailable (nvidia-smi -q)',
    'CUDA_ERROR_NOT_PERMITTED': 'the process may not use the GPU: check the permissions of /dev/nvidia*',
}
DEFAULT_HINT = 'check dmesg for NVIDIA Xid errors, and nvidia-smi -q'

# nvidia-smi -q -x, <gpu><fabric><state>/<status>: NVML's nvmlGpuFabricState_t
# (NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, _NOT_STARTED, _IN_PROGRESS, _COMPLETED)
# printed as "Not Supported", "Not Started", "In Progress", "Completed"; status is
# an nvmlReturn_t, meaningful only once the state is complete ("Success").
FABRIC_DONE = 'Completed'
FABRIC_OK_STATUS = 'Success'

# PCI class of an NVSwitch: a bridge of class "other" (0x0680xx), vendor NVIDIA.
NVSWITCH_CLASS = '0x0680'


class Failed(Exception):
    """A driver API call returned an error; .error says which and what."""

    def __init__(self, error: Dict[str, Any]) -> None:
        super(Failed, self).__init__(error['name'])
        self.error = error


def _error_text(function: Callable, code: int) -> Optional[str]:
    out = ctypes.c_char_p()
    try:
        rc = function(code, ctypes.pointer(out))
    except Exception:  # pylint: disable=broad-except
        return None
    if rc != CUDA_SUCCESS or not out.value:
        return None
    return out.value.decode('utf-8', errors='replace')


def describe(api: Any, call: str, code: int) -> Dict[str, Any]:
    """The error of a call: its CUresult, the name and the string the driver gives it."""
    name = _error_text(api.cuGetErrorName, code) or 'CUresult %d' % code
    return {'call': call, 'code': code, 'name': name,
            'string': _error_text(api.cuGetErrorString, code), 'hint': HINTS.get(name, DEFAULT_HINT)}


def _call(api: Any, name: str, *args: Any) -> None:
    rc = getattr(api, name)(*args)
    if rc != CUDA_SUCCESS:
        raise Failed(describe(api, name, rc))


def check_device(api: Any, ordinal: int, size: int, make_bytes: Callable[[int], bytes]) -> Dict[str, Any]:
    """One GPU: its primary context, an allocation, a copy host->device->host compared byte for byte, then clean-up."""
    start = time.monotonic()
    device = {'index': ordinal, 'name': None, 'pci_bus_id': None, 'status': 'fail', 'error': None, 'ms': None}
    handle, context, pointer = CUdevice(), CUcontext(), CUdeviceptr()
    retained = allocated = False
    try:
        _call(api, 'cuDeviceGet', ctypes.pointer(handle), ordinal)
        name = ctypes.create_string_buffer(256)
        if api.cuDeviceGetName(name, 256, handle) == CUDA_SUCCESS:
            device['name'] = name.value.decode('utf-8', errors='replace')
        # "[domain]:[bus]:[device].[function]", 13 characters and the NUL at least.
        bus = ctypes.create_string_buffer(64)
        if api.cuDeviceGetPCIBusId(bus, 64, handle) == CUDA_SUCCESS:
            device['pci_bus_id'] = bus.value.decode('ascii', errors='replace')
        _call(api, 'cuDevicePrimaryCtxRetain', ctypes.pointer(context), handle)
        retained = True
        _call(api, 'cuCtxSetCurrent', context)
        _call(api, 'cuMemAlloc_v2', ctypes.pointer(pointer), size)
        allocated = True
        data = make_bytes(size)
        source = ctypes.create_string_buffer(data, size)
        back = ctypes.create_string_buffer(size)
        _call(api, 'cuMemcpyHtoD_v2', pointer, source, size)
        _call(api, 'cuMemcpyDtoH_v2', back, pointer, size)
        differ = sum(1 for a, b in zip(back.raw, data) if a != b)
        if differ:
            device['error'] = {'call': 'compare', 'code': None, 'name': 'DATA_MISMATCH',
                               'string': '%d of %d bytes came back different after host->device->host' % (differ, size),
                               'hint': 'the GPU memory or the PCIe path corrupts data: ' + DEFAULT_HINT}
    except Failed as e:
        device['error'] = e.error
    finally:
        if allocated:
            rc = api.cuMemFree_v2(pointer)
            if rc != CUDA_SUCCESS and device['error'] is None:
                device['error'] = describe(api, 'cuMemFree_v2', rc)
        if retained:
            api.cuCtxSetCurrent(None)
            rc = api.cuDevicePrimaryCtxRelease_v2(handle)
            if rc != CUDA_SUCCESS and device['error'] is None:
                device['error'] = describe(api, 'cuDevicePrimaryCtxRelease_v2', rc)
    device['status'] = 'pass' if device['error'] is None else 'fail'
    device['ms'] = round((time.monotonic() - start) * 1000, 1)
    return device


def probe(api: Any, size: int, make_bytes: Callable[[int], bytes] = os.urandom) -> Dict[str, Any]:
    """cuInit, cuDeviceGetCount, then check_device for every device CUDA sees."""
    result = {'driver_version': None, 'device_count': None, 'devices': [], 'error': None}
    rc = api.cuInit(0)
    if rc != CUDA_SUCCESS:
        result['error'] = describe(api, 'cuInit', rc)
        return result
    version = ctypes.c_int()
    if api.cuDriverGetVersion(ctypes.pointer(version)) == CUDA_SUCCESS:
        result['driver_version'] = '%d.%d' % (version.value // 1000, version.value % 1000 // 10)
    count = ctypes.c_int()
    rc = api.cuDeviceGetCount(ctypes.pointer(count))
    if rc != CUDA_SUCCESS:
        result['error'] = describe(api, 'cuDeviceGetCount', rc)
        return result
    result['device_count'] = count.value
    result['devices'] = [check_device(api, ordinal, size, make_bytes) for ordinal in range(count.value)]
    return result


class DriverApi(object):
    """The functions of SIGNATURES, bound from a loaded libcuda with their argument and result types."""

    def __init__(self, library: Any) -> None:
        for name, argtypes in SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes = argtypes
            function.restype = ctypes.c_int
            setattr(self, name, function)


def _mapped_path(name: str) -> Optional[str]:
    """Where the loader found a library, from /proc/self/maps."""
    stem = name.split('.so')[0] + '.so'
    try:
        with open('/proc/self/maps') as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ''
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None


def load_library(name: str, library_dirs: List[str], search_loader: bool,
                 loader: Callable[[str], Any] = ctypes.CDLL) -> Tuple[Any, Optional[str], Optional[str]]:
    """(library, path, None), or (None, path or None, why not)."""
    places = []
    if search_loader:
        try:
            library = loader(name)
        except OSError:
            places.append("the dynamic loader's search path")
        else:
            return library, _mapped_path(name) or name, None
    for directory in library_dirs:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            places.append(directory)
            continue
        try:
            return loader(path), path, None
        except OSError as e:
            return None, path, 'cannot load %s: %s' % (path, e)
    return None, None, '%s not found in %s' % (name, ', '.join(places) or 'no place (search_loader is false and library_dirs is empty)')


def child_probe(library: str, library_dirs: List[str], search_loader: bool, size: int,
                environment: Dict[str, str], loader: Callable[[str], Any] = ctypes.CDLL) -> Dict[str, Any]:
    """What the child runs: set the environment, load libcuda, probe."""
    os.environ.update(environment)
    handle, path, why = load_library(library, library_dirs, search_loader, loader)
    if handle is None:
        return {'library': path, 'error': {'call': 'dlopen', 'code': None, 'name': 'LIBRARY_NOT_FOUND' if path is None else 'LIBRARY_NOT_LOADED',
                                           'string': why,
                                           'hint': "install the NVIDIA driver's user-space libraries (accel.nodes.nvidia_driver), "
                                                   "or name their directory in library_dirs"}}
    try:
        api = DriverApi(handle)
    except AttributeError as e:
        return {'library': path, 'error': {'call': 'dlsym', 'code': None, 'name': 'SYMBOL_NOT_FOUND', 'string': str(e),
                                           'hint': 'this libcuda.so.1 is too old or not NVIDIA\'s: install a current driver'}}
    result = probe(api, size)
    result['library'] = path
    return result


def _reap(pid: int, wait: float) -> Optional[int]:
    """The exit status of pid, waiting up to wait seconds; None if it did not end."""
    deadline = time.monotonic() + wait
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def run_in_child(target: Callable[..., Dict[str, Any]], kwargs: Dict[str, Any], timeout: float) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(target(**kwargs), None) computed in a forked child, or (None, why there is no result).

    The child's stdout and stderr go to /dev/null: a driver message on stdout
    would corrupt the module's JSON. A child still running after timeout
    seconds is killed.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            os.close(read_end)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(null, 2)
            sys.stdout = sys.stderr = open(os.devnull, 'w')
            try:
                payload = {'result': target(**kwargs)}
            except BaseException as e:  # pylint: disable=broad-except
                payload = {'exception': '%s: %s' % (type(e).__name__, e)}
            data = json.dumps(payload).encode('utf-8')
            while data:
                data = data[os.write(write_end, data):]
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _w, _x = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
        stuck = _reap(pid, 5) is None
        return None, 'did not finish in %g s and was killed%s' % (
            timeout, ' (it does not exit: it is stuck in the kernel driver)' if stuck else '')
    status = _reap(pid, timeout)
    if status is not None and os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = 'signal %d' % number
        return None, 'crashed with %s' % name
    try:
        payload = json.loads(b''.join(chunks).decode('utf-8'))
    except ValueError:
        return None, 'ended without a result'
    if 'exception' in payload:
        return None, 'raised %s' % payload['exception']
    return payload['result'], None


def gpu_health(stdout: str) -> Optional[List[Dict[str, Any]]]:
    """Per GPU of `nvidia-smi -q -x`: bus id, persistence mode and fabric state/status; None without XML."""
    from xml.etree import ElementTree  # pylint: disable=import-outside-toplevel
    xml = _nvidia._xml_part(stdout or '')  # pylint: disable=protected-access
    if xml is None:
        return None
    try:
        log = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return None
    gpus = []
    for gpu in log.findall('gpu'):
        text = _nvidia._text  # pylint: disable=protected-access
        gpus.append({
            'pci_bus_id': gpu.get('id'),
            'persistence_mode': {'Enabled': True, 'Disabled': False}.get(text(gpu, 'persistence_mode')),
            # None where the driver has no <fabric> element, or says N/A.
            'fabric_state': text(gpu, 'fabric/state'),
            'fabric_status': text(gpu, 'fabric/status'),
        })
    return gpus


def nvswitches(root: str) -> Optional[List[str]]:
    """Bus ids of the NVSwitches on the PCI bus under root; None when there is no PCI sysfs."""
    names = _rootfs.list_dir(root, '/sys/bus/pci/devices')
    if names is None:
        return None
    found = []
    for name in sorted(names):
        base = '/sys/bus/pci/devices/' + name
        if _rootfs.read_value(root, base + '/vendor') == '0x10de' and \
                (_rootfs.read_value(root, base + '/class') or '').startswith(NVSWITCH_CLASS):
            found.append(name)
    return found
