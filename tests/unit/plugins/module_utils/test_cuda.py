# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _cuda

sys.path.insert(0, str(Path(__file__).parents[1]))
from fake_libcuda import FakeLibcuda  # noqa: E402  pylint: disable=wrong-import-position

SMI = Path(__file__).parents[3] / 'fixtures' / 'facts' / 'commands' / 'nvidia-smi'
H200 = {'name': 'NVIDIA H200', 'pci_bus_id': '00000000:00:06.0'}
SIZE = 4096


def gpus(count, extra=None):
    """count H200s at buses 10, 11, ...; extra maps an index to what the fake should do on that GPU."""
    return [dict(H200, pci_bus_id='00000000:%02X:00.0' % (0x10 + i), **(extra or {}).get(i, {})) for i in range(count)]


def bound(fake):
    """The fake, through the same binding as the real library."""
    return _cuda.DriverApi(fake)


def assert_clean(fake):
    assert fake.allocations == {}, 'memory left allocated'
    assert all(count == 0 for count in fake.retained.values()), 'primary context left retained'
    assert fake.current is None


def test_every_gpu_passes_and_nothing_is_left_behind():
    fake = FakeLibcuda(gpus(2))
    result = _cuda.probe(bound(fake), SIZE)
    assert result['error'] is None
    assert result['driver_version'] == '13.0'
    assert result['device_count'] == 2
    assert [(d['index'], d['status'], d['pci_bus_id'], d['name']) for d in result['devices']] == [
        (0, 'pass', '00000000:10:00.0', 'NVIDIA H200'), (1, 'pass', '00000000:11:00.0', 'NVIDIA H200')]
    assert fake.calls.count('cuMemcpyDtoH_v2') == 2
    assert_clean(fake)


def test_a_copy_that_comes_back_different_fails():
    fake = FakeLibcuda(gpus(2, {1: {'corrupt': True}}))
    devices = _cuda.probe(bound(fake), SIZE)['devices']
    assert devices[0]['status'] == 'pass'
    assert devices[1]['status'] == 'fail'
    assert devices[1]['error']['name'] == 'DATA_MISMATCH'
    assert '1 of 4096 bytes' in devices[1]['error']['string']
    assert_clean(fake)


def test_no_device_stops_at_cuinit_with_the_error_name():
    fake = FakeLibcuda(gpus(1))
    os.environ['CUDA_VISIBLE_DEVICES'] = '7'
    try:
        result = _cuda.probe(bound(fake), SIZE)
    finally:
        del os.environ['CUDA_VISIBLE_DEVICES']
    assert result['device_count'] is None
    assert result['devices'] == []
    assert result['error'] == {'call': 'cuInit', 'code': 100, 'name': 'CUDA_ERROR_NO_DEVICE',
                               'string': 'no CUDA-capable device is detected', 'hint': _cuda.HINTS['CUDA_ERROR_NO_DEVICE']}


def test_one_gpu_that_fails_is_named_and_the_others_still_run():
    fake = FakeLibcuda(gpus(3, {1: {'fail': {'cuDevicePrimaryCtxRetain': 802}}}))
    devices = _cuda.probe(bound(fake), SIZE)['devices']
    assert [d['status'] for d in devices] == ['pass', 'fail', 'pass']
    error = devices[1]['error']
    assert (error['call'], error['code'], error['name'], error['string']) == (
        'cuDevicePrimaryCtxRetain', 802, 'CUDA_ERROR_SYSTEM_NOT_READY', 'system not yet initialized')
    assert 'Fabric Manager' in error['hint']
    assert_clean(fake)


def test_an_allocation_that_fails_still_releases_the_context():
    fake = FakeLibcuda(gpus(1, {0: {'memory': 1024}}))
    device = _cuda.probe(bound(fake), SIZE)['devices'][0]
    assert device['status'] == 'fail'
    assert (device['error']['call'], device['error']['name'], device['error']['string']) == (
        'cuMemAlloc_v2', 'CUDA_ERROR_OUT_OF_MEMORY', 'out of memory')
    assert 'cuMemFree_v2' not in fake.calls
    assert 'cuMemcpyHtoD_v2' not in fake.calls
    assert_clean(fake)


def test_a_failed_copy_still_frees_the_memory():
    fake = FakeLibcuda(gpus(1, {0: {'fail': {'cuMemcpyHtoD_v2': 999}}}))
    device = _cuda.probe(bound(fake), SIZE)['devices'][0]
    assert device['error']['name'] == 'CUDA_ERROR_UNKNOWN'
    assert 'cuMemFree_v2' in fake.calls
    assert_clean(fake)


def test_an_error_code_the_driver_does_not_name():
    fake = FakeLibcuda(gpus(1), init_error=12345)
    error = _cuda.probe(bound(fake), SIZE)['error']
    assert (error['name'], error['string']) == ('CUresult 12345', None)


def test_library_missing_names_every_place_searched(tmp_path):
    def loader(name):
        raise OSError('%s: cannot open shared object file: No such file or directory' % name)
    library, path, why = _cuda.load_library('libcuda.so.1', [str(tmp_path / 'a'), str(tmp_path / 'b')], True, loader)
    assert (library, path) == (None, None)
    assert why == "libcuda.so.1 not found in the dynamic loader's search path, %s, %s" % (tmp_path / 'a', tmp_path / 'b')


def test_library_found_in_a_driver_root(tmp_path):
    (tmp_path / 'libcuda.so.1').write_text('')
    loaded = []
    library, path, why = _cuda.load_library('libcuda.so.1', ['/nonexistent', str(tmp_path)], False, lambda p: loaded.append(p) or 'lib')
    assert (library, path, why) == ('lib', str(tmp_path / 'libcuda.so.1'), None)
    assert loaded == [str(tmp_path / 'libcuda.so.1')]


def test_a_library_that_does_not_load_says_why(tmp_path):
    (tmp_path / 'libcuda.so.1').write_text('not ELF')

    def loader(path):
        raise OSError('%s: invalid ELF header' % path)
    library, path, why = _cuda.load_library('libcuda.so.1', [str(tmp_path)], False, loader)
    assert library is None
    assert why == 'cannot load %s: %s: invalid ELF header' % (path, path)


def test_child_probe_sets_the_environment_in_the_child_only():
    fake = FakeLibcuda(gpus(2))
    result, why = _cuda.run_in_child(_cuda.child_probe, dict(
        library='libcuda.so.1', library_dirs=[], search_loader=True, size=SIZE,
        environment={'CUDA_VISIBLE_DEVICES': '1'}, loader=lambda name: fake), 10)
    assert why is None
    assert result['device_count'] == 1
    assert result['devices'][0]['pci_bus_id'] == '00000000:11:00.0'
    assert 'CUDA_VISIBLE_DEVICES' not in os.environ


def test_child_probe_without_library(tmp_path):
    result, why = _cuda.run_in_child(_cuda.child_probe, dict(
        library='libcuda.so.1', library_dirs=[str(tmp_path)], search_loader=False, size=SIZE, environment={}), 10)
    assert why is None
    assert result['error']['name'] == 'LIBRARY_NOT_FOUND'
    assert result['error']['string'] == 'libcuda.so.1 not found in %s' % tmp_path


def _hang():
    time.sleep(60)
    return {}


def _crash():
    faulthandler.disable()  # pytest's would print a traceback of the child
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def _chatty():
    print('driver noise on stdout')
    os.write(2, b'driver noise on stderr\n')
    return {'ok': True}


def test_a_hung_probe_is_killed_at_the_timeout():
    start = time.monotonic()
    result, why = _cuda.run_in_child(_hang, {}, 1)
    assert result is None
    assert why == 'did not finish in 1 s and was killed'
    assert time.monotonic() - start < 10


def test_a_crash_is_reported_not_inherited():
    result, why = _cuda.run_in_child(_crash, {}, 10)
    assert (result, why) == (None, 'crashed with SIGSEGV')


def test_the_child_cannot_write_on_the_module_output(capfd):
    result, why = _cuda.run_in_child(_chatty, {}, 10)
    assert (result, why) == ({'ok': True}, None)
    out, err = capfd.readouterr()
    assert 'driver noise' not in out + err


def test_an_exception_in_the_child_is_reported():
    result, why = _cuda.run_in_child(lambda: 1 / 0, {}, 10)
    assert result is None
    assert why == 'raised ZeroDivisionError: division by zero'


def test_gpu_health_of_a_real_h200():
    gpus_ = _cuda.gpu_health((SMI / 'h200-v13.xml').read_text())
    assert gpus_ == [{'pci_bus_id': '00000000:00:06.0', 'persistence_mode': True, 'fabric_state': None, 'fabric_status': None}]


def test_gpu_health_of_a_driver_without_a_fabric_element():
    gpus_ = _cuda.gpu_health((SMI / 'p4d-two-gpus-mig-v12.xml').read_text())
    assert [g['persistence_mode'] for g in gpus_] == [True, False]
    assert [g['fabric_state'] for g in gpus_] == [None, None]


def test_gpu_health_without_xml():
    assert _cuda.gpu_health('NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.') is None


def test_nvswitches_on_the_pci_bus(tmp_path, fact_roots):
    assert _cuda.nvswitches(str(fact_roots / 'h200')) == []
    for bus, vendor, cls in [('0000:07:00.0', '0x10de', '0x068000'), ('0000:08:00.0', '0x10de', '0x030200'),
                             ('0000:09:00.0', '0x8086', '0x068000')]:
        device = tmp_path / 'sys' / 'bus' / 'pci' / 'devices' / bus
        device.mkdir(parents=True)
        (device / 'vendor').write_text(vendor + '\n')
        (device / 'class').write_text(cls + '\n')
    assert _cuda.nvswitches(str(tmp_path)) == ['0000:07:00.0']
    assert _cuda.nvswitches(str(tmp_path / 'nothing')) is None
