# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""TEST DOUBLE of libcuda.so.1 for the unit tests of nvidia_cuda_check, not the driver.

It answers the driver API calls that plugins/module_utils/_cuda.py makes, the way
NVIDIA's CUDA Driver API reference documents them (tests/doubles/README.md,
"Fake libcuda", lists each behaviour and its source): every call returns a
CUresult and hands results back through out-parameters; calls before cuInit
return CUDA_ERROR_NOT_INITIALIZED; cuInit reads CUDA_VISIBLE_DEVICES from the
environment when it runs. Each function is a plain function attribute, as on a
ctypes.CDLL, so that _cuda.DriverApi can set argtypes and restype on it.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, List, Optional

# cuda.h, enum cudaError_enum; the strings are what cuGetErrorString returns.
ERRORS = {
    0: ('CUDA_SUCCESS', 'no error'),
    1: ('CUDA_ERROR_INVALID_VALUE', 'invalid argument'),
    2: ('CUDA_ERROR_OUT_OF_MEMORY', 'out of memory'),
    3: ('CUDA_ERROR_NOT_INITIALIZED', 'initialization error'),
    100: ('CUDA_ERROR_NO_DEVICE', 'no CUDA-capable device is detected'),
    101: ('CUDA_ERROR_INVALID_DEVICE', 'invalid device ordinal'),
    201: ('CUDA_ERROR_INVALID_CONTEXT', 'invalid device context'),
    802: ('CUDA_ERROR_SYSTEM_NOT_READY', 'system not yet initialized'),
    999: ('CUDA_ERROR_UNKNOWN', 'unknown error'),
}
SUCCESS, INVALID_VALUE, NOT_INITIALIZED, NO_DEVICE, INVALID_DEVICE, INVALID_CONTEXT = 0, 1, 3, 100, 101, 201


def _value(arg: Any) -> Any:
    return arg.value if hasattr(arg, 'value') else arg


class FakeLibcuda(object):
    """gpus: one dict per physical GPU: name, pci_bus_id, and optionally fail ({call name: CUresult}),
    corrupt (True: the copy back has one byte changed), memory (bytes it can allocate, default 1 GiB)."""

    def __init__(self, gpus: List[Dict[str, Any]], driver_version: int = 13000, init_error: Optional[int] = None) -> None:
        self.gpus = gpus
        self.driver_version = driver_version
        self.init_error = init_error
        self.visible: Optional[List[int]] = None
        self.retained: Dict[int, int] = {}
        self.current: Optional[int] = None
        self.allocations: Dict[int, bytearray] = {}
        self.owner: Dict[int, int] = {}
        self.next_address = 0x7f0000000000
        self.calls: List[str] = []
        for name in ['cuGetErrorName', 'cuGetErrorString', 'cuInit', 'cuDriverGetVersion', 'cuDeviceGetCount',
                     'cuDeviceGet', 'cuDeviceGetName', 'cuDeviceGetPCIBusId', 'cuDevicePrimaryCtxRetain',
                     'cuDevicePrimaryCtxRelease_v2', 'cuCtxSetCurrent', 'cuMemAlloc_v2', 'cuMemcpyHtoD_v2',
                     'cuMemcpyDtoH_v2', 'cuMemFree_v2']:
            setattr(self, name, self._function(name))

    def _function(self, name: str):
        method = getattr(self, '_' + name)

        def function(*args):
            self.calls.append(name)
            return method(*args)
        return function

    # -- error handling: usable before cuInit -------------------------------
    def _error_field(self, code, p_str, field):
        code = _value(code)
        if code not in ERRORS:
            p_str[0] = None
            return INVALID_VALUE
        p_str[0] = ERRORS[code][field].encode()
        return SUCCESS

    def _cuGetErrorName(self, code, p_str):
        return self._error_field(code, p_str, 0)

    def _cuGetErrorString(self, code, p_str):
        return self._error_field(code, p_str, 1)

    # -- initialisation -------------------------------------------------------
    def _cuInit(self, flags):
        if _value(flags) != 0:
            return INVALID_VALUE
        if self.init_error is not None:
            return self.init_error
        wanted = os.environ.get('CUDA_VISIBLE_DEVICES')
        if wanted is None:
            visible = list(range(len(self.gpus)))
        else:
            # The driver takes indices up to the first one that is invalid.
            visible = []
            for item in wanted.split(','):
                if not item.strip().isdigit() or int(item) >= len(self.gpus):
                    break
                visible.append(int(item))
        if not visible:
            return NO_DEVICE
        self.visible = visible
        return SUCCESS

    def _ready(self):
        return self.visible is not None

    def _cuDriverGetVersion(self, out):
        out[0] = self.driver_version
        return SUCCESS

    def _cuDeviceGetCount(self, out):
        if not self._ready():
            return NOT_INITIALIZED
        out[0] = len(self.visible)
        return SUCCESS

    def _cuDeviceGet(self, out, ordinal):
        if not self._ready():
            return NOT_INITIALIZED
        ordinal = _value(ordinal)
        if not 0 <= ordinal < len(self.visible):
            return INVALID_DEVICE
        out[0] = ordinal
        return SUCCESS

    def _gpu(self, device):
        return self.gpus[self.visible[_value(device)]]

    def _failure(self, device, call):
        return self._gpu(device).get('fail', {}).get(call)

    def _cuDeviceGetName(self, buffer, length, device):
        buffer.value = self._gpu(device)['name'].encode()[:_value(length) - 1]
        return SUCCESS

    def _cuDeviceGetPCIBusId(self, buffer, length, device):
        buffer.value = self._gpu(device)['pci_bus_id'].encode()[:_value(length) - 1]
        return SUCCESS

    # -- contexts -------------------------------------------------------------
    def _cuDevicePrimaryCtxRetain(self, out, device):
        if not self._ready():
            return NOT_INITIALIZED
        failure = self._failure(device, 'cuDevicePrimaryCtxRetain')
        if failure:
            return failure
        device = _value(device)
        self.retained[device] = self.retained.get(device, 0) + 1
        out[0] = 0x1000 + device
        return SUCCESS

    def _cuDevicePrimaryCtxRelease_v2(self, device):
        device = _value(device)
        if self.retained.get(device, 0) < 1:
            return INVALID_CONTEXT
        self.retained[device] -= 1
        return SUCCESS

    def _cuCtxSetCurrent(self, context):
        context = _value(context)
        if context is None:
            self.current = None
            return SUCCESS
        if self.retained.get(context - 0x1000, 0) < 1:
            return INVALID_CONTEXT
        self.current = context - 0x1000
        return SUCCESS

    # -- memory -------------------------------------------------------------
    def _cuMemAlloc_v2(self, out, size):
        if self.current is None:
            return INVALID_CONTEXT
        failure = self._failure(self.current, 'cuMemAlloc_v2')
        if failure:
            return failure
        size = _value(size)
        if size == 0:
            return INVALID_VALUE
        if size > self._gpu(self.current).get('memory', 1 << 30):
            return 2
        address = self.next_address
        self.next_address += 1 << 21
        self.allocations[address] = bytearray(size)
        self.owner[address] = self.current
        out[0] = address
        return SUCCESS

    def _block(self, address, size):
        block = self.allocations.get(_value(address))
        if block is None or _value(size) > len(block) or self.owner[_value(address)] != self.current:
            return None
        return block

    def _cuMemcpyHtoD_v2(self, address, source, size):
        if self.current is None:
            return INVALID_CONTEXT
        failure = self._failure(self.current, 'cuMemcpyHtoD_v2')
        if failure:
            return failure
        block = self._block(address, size)
        if block is None:
            return INVALID_VALUE
        size = _value(size)
        block[:size] = ctypes.string_at(source, size)
        return SUCCESS

    def _cuMemcpyDtoH_v2(self, destination, address, size):
        if self.current is None:
            return INVALID_CONTEXT
        block = self._block(address, size)
        if block is None:
            return INVALID_VALUE
        size = _value(size)
        data = bytearray(block[:size])
        if self._gpu(self.current).get('corrupt') and data:
            data[0] ^= 0xff
        ctypes.memmove(destination, bytes(data), size)
        return SUCCESS

    def _cuMemFree_v2(self, address):
        if self.allocations.pop(_value(address), None) is None:
            return INVALID_VALUE
        self.owner.pop(_value(address))
        return SUCCESS
