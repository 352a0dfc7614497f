# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

"""tests/hardware/kubelet_stub.py against a fake device plugin, over real gRPC on unix sockets.

The real plugin needs NVML and a GPU, so it runs only in the real-GPU tier
(tests/hardware/allocate.sh). Here a Python plugin, built from the same api.proto,
answers as NVIDIA's k8s-device-plugin v0.20.0 does (internal/plugin/server.go:241-249
registration, :259-264 options, :306-366 Allocate, :399-405 CDI devices, :482 the
NVIDIA_VISIBLE_DEVICES list), and the stub runs as a program, as allocate.sh runs it.

The api.proto is read from the vendor archive k8s-device-plugin-0.20.0.tar.gz
(ACCEL_DP_API_PROTO names a file instead; else ACCEL_TOOLKIT_SRC, a directory or the
archive, as tests/rig/device-plugin.sh takes it; else ../shared/vendor-src).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any, Iterator

import pytest

TOP = Path(__file__).resolve().parents[3]
STUB = TOP / 'tests' / 'hardware' / 'kubelet_stub.py'
ARCHIVE = 'k8s-device-plugin-0.20.0.tar.gz'
MEMBER = 'k8s-device-plugin-0.20.0/vendor/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto'
UUIDS = ['GPU-317e3c34-36f4-b3a0-fd6a-a9ae83859bb2', 'GPU-0b6c7b7a-0f6b-4a9e-9d55-2b1f5c1e7e01']


def _load_stub() -> Any:
    spec = importlib.util.spec_from_file_location('kubelet_stub', STUB)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kubelet_stub = _load_stub()


def test_cri_fields_map_every_allocate_field_by_the_cri_json_tags() -> None:
    """Mount.read_only becomes readonly, cdi_devices CDI_devices; empty fields are left out."""
    response = {
        'envs': {'NVIDIA_VISIBLE_DEVICES': '/var/run/nvidia-container-devices'},
        'mounts': [{'container_path': '/var/run/nvidia-container-devices/' + UUIDS[0], 'host_path': '/dev/null',
                    'read_only': False}],
        'devices': [{'container_path': '/dev/nvidia0', 'host_path': '/dev/nvidia0', 'permissions': 'rw'}],
        'annotations': {'cdi.k8s.io/nvidia-device-plugin_x': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[0]},
        'cdi_devices': [{'name': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[0]}],
    }
    assert kubelet_stub.cri_fields(response) == {
        'envs': [{'key': 'NVIDIA_VISIBLE_DEVICES', 'value': '/var/run/nvidia-container-devices'}],
        'mounts': [{'container_path': '/var/run/nvidia-container-devices/' + UUIDS[0], 'host_path': '/dev/null',
                    'readonly': False}],
        'devices': [{'container_path': '/dev/nvidia0', 'host_path': '/dev/nvidia0', 'permissions': 'rw'}],
        'annotations': {'cdi.k8s.io/nvidia-device-plugin_x': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[0]},
        'CDI_devices': [{'name': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[0]}],
    }
    assert kubelet_stub.cri_fields({'envs': {}, 'mounts': [], 'devices': [], 'annotations': {},
                                    'cdi_devices': []}) == {}


# -- over gRPC ---------------------------------------------------------------------------


def _archive() -> Path | None:
    src = os.environ.get('ACCEL_TOOLKIT_SRC', '')
    for candidate in (Path(src) if src.endswith('.tar.gz') else Path(src or '/nonexistent') / ARCHIVE,
                      TOP.parent / 'shared' / 'vendor-src' / ARCHIVE):
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope='module')
def proto(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip('grpc', reason='grpcio is not installed in this Python (PyPI: grpcio, grpcio-tools)')
    pytest.importorskip('grpc_tools', reason='grpcio-tools is not installed in this Python (PyPI: grpcio-tools)')
    if os.environ.get('ACCEL_DP_API_PROTO'):
        return Path(os.environ['ACCEL_DP_API_PROTO'])
    archive = _archive()
    if archive is None:
        pytest.skip('no %s (ACCEL_TOOLKIT_SRC, ../shared/vendor-src) and no ACCEL_DP_API_PROTO: '
                    'the device-plugin api.proto comes from there' % ARCHIVE)
    out = tmp_path_factory.mktemp('proto') / 'api.proto'
    with tarfile.open(archive) as tar:
        f = tar.extractfile(MEMBER)
        assert f is not None, MEMBER
        out.write_bytes(f.read())
    return out


@pytest.fixture(scope='module')
def api(proto: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return kubelet_stub.generate_stubs(str(proto), str(tmp_path_factory.mktemp('stubs')))


@pytest.fixture
def sockets() -> Iterator[Path]:
    # A short directory: a unix socket path has at most 107 bytes.
    d = Path(tempfile.mkdtemp(prefix='dp-', dir='/tmp'))
    yield d
    shutil.rmtree(d, ignore_errors=True)


class FakePlugin:
    """NVIDIA's plugin as far as kubelet sees it: two GPUs, one strategy."""

    def __init__(self, api: tuple[Any, Any], directory: Path, strategy: str) -> None:
        import grpc

        pb2, pb2_grpc = api
        self.pb2, self.pb2_grpc, self.grpc = pb2, pb2_grpc, grpc
        self.allocated: list[list[str]] = []
        self.stop = threading.Event()
        fake = self

        class Servicer(pb2_grpc.DevicePluginServicer):
            def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
                return pb2.DevicePluginOptions(get_preferred_allocation_available=True)

            def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
                yield pb2.ListAndWatchResponse(devices=[pb2.Device(ID=u, health='Healthy') for u in UUIDS])
                while context.is_active() and not fake.stop.is_set():
                    time.sleep(0.05)

            def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
                return pb2.PreferredAllocationResponse(container_responses=[
                    pb2.ContainerPreferredAllocationResponse(deviceIDs=list(r.available_deviceIDs)[:r.allocation_size])
                    for r in request.container_requests])

            def Allocate(self, request: Any, context: Any) -> Any:
                responses = []
                for r in request.container_requests:
                    ids = list(r.devices_ids)
                    fake.allocated.append(ids)
                    if strategy == 'cdi-cri':
                        responses.append(pb2.ContainerAllocateResponse(cdi_devices=[
                            pb2.CDIDevice(name='k8s.device-plugin.nvidia.com/gpu=' + i) for i in ids]))
                    else:
                        responses.append(pb2.ContainerAllocateResponse(envs={'NVIDIA_VISIBLE_DEVICES': ','.join(ids)}))
                return pb2.AllocateResponse(container_responses=responses)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb2_grpc.add_DevicePluginServicer_to_server(Servicer(), self.server)
        self.server.add_insecure_port('unix:%s/nvidia-gpu.sock' % directory)
        self.server.start()
        self.directory = directory

    def register(self, version: str = 'v1beta1') -> None:
        with self.grpc.insecure_channel('unix:%s/kubelet.sock' % self.directory) as channel:
            self.pb2_grpc.RegistrationStub(channel).Register(self.pb2.RegisterRequest(
                version=version, endpoint='nvidia-gpu.sock', resource_name='nvidia.com/gpu',
                options=self.pb2.DevicePluginOptions(get_preferred_allocation_available=True)), timeout=5)

    def close(self) -> None:
        self.stop.set()
        self.server.stop(None)


def _start_stub(proto: Path, directory: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(STUB), '--proto', str(proto), '--dir', str(directory), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, stub: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 10
    while not path.exists():
        assert stub.poll() is None, stub.communicate()
        assert time.monotonic() < deadline, '%s did not appear' % path
        time.sleep(0.05)


def _finish(stub: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = stub.communicate(timeout=30)
    return stub.returncode, json.loads(out), err


@pytest.mark.parametrize('strategy', ['envvar', 'cdi-cri'])
def test_the_stub_registers_lists_and_allocates_the_last_device(proto: Path, api: tuple[Any, Any], sockets: Path,
                                                                strategy: str) -> None:
    stub = _start_stub(proto, sockets, '--timeout', '10')
    _wait_for(sockets / 'kubelet.sock', stub)
    plugin = FakePlugin(api, sockets, strategy)
    try:
        plugin.register()
        rc, report, err = _finish(stub)
    finally:
        plugin.close()
    assert rc == 0, (report, err)
    assert report['registration'] == {'version': 'v1beta1', 'endpoint': 'nvidia-gpu.sock',
                                      'resource_name': 'nvidia.com/gpu',
                                      'options': {'pre_start_required': False,
                                                  'get_preferred_allocation_available': True}}
    assert report['plugin_socket'] == str(sockets / 'nvidia-gpu.sock')
    assert report['options'] == {'pre_start_required': False, 'get_preferred_allocation_available': True}
    assert report['devices'] == [{'ID': u, 'health': 'Healthy'} for u in UUIDS]
    assert report['preferred_allocation'] == [[UUIDS[0]]]
    assert report['allocate_request'] == {'container_requests': [{'devices_ids': [UUIDS[-1]]}]}
    assert plugin.allocated == [[UUIDS[-1]]]
    assert report['allocated'] == UUIDS[-1]
    answer = report['container_allocate_response']
    if strategy == 'envvar':
        assert answer['envs'] == {'NVIDIA_VISIBLE_DEVICES': UUIDS[-1]} and answer['cdi_devices'] == []
        assert report['cri'] == {'envs': [{'key': 'NVIDIA_VISIBLE_DEVICES', 'value': UUIDS[-1]}]}
    else:
        assert answer['envs'] == {} and answer['cdi_devices'] == [{'name': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[-1]}]
        assert report['cri'] == {'CDI_devices': [{'name': 'k8s.device-plugin.nvidia.com/gpu=' + UUIDS[-1]}]}
    steps = ['stubs_generated', 'listening', 'registered', 'options', 'list_and_watch', 'preferred_allocation',
             'allocated']
    assert list(report['timings_ms']) == steps
    assert [report['timings_ms'][s] for s in steps] == sorted(report['timings_ms'][s] for s in steps)
    assert not (sockets / 'kubelet.sock').exists()  # the stub takes its socket away


def _allocate(proto: Path, api: tuple[Any, Any], sockets: Path, device: str) -> tuple[int, Any, str, Any]:
    """Run the stub for one --device against an envvar plugin: (rc, report, stderr, plugin)."""
    stub = _start_stub(proto, sockets, '--timeout', '10', '--device', device)
    _wait_for(sockets / 'kubelet.sock', stub)
    plugin = FakePlugin(api, sockets, 'envvar')
    try:
        plugin.register()
        rc, report, err = _finish(stub)
    finally:
        plugin.close()
    return rc, report, err, plugin


def test_the_stub_allocates_the_device_it_is_given(proto: Path, api: tuple[Any, Any], sockets: Path) -> None:
    rc, report, err, plugin = _allocate(proto, api, sockets, UUIDS[0])
    assert rc == 0, (report, err)
    assert plugin.allocated == [[UUIDS[0]]]
    assert report['cri']['envs'] == [{'key': 'NVIDIA_VISIBLE_DEVICES', 'value': UUIDS[0]}]


def test_a_device_the_plugin_did_not_list_is_an_error(proto: Path, api: tuple[Any, Any], sockets: Path) -> None:
    rc, report, err, plugin = _allocate(proto, api, sockets, 'GPU-not-there')
    assert rc == 1
    assert report['error'] == 'device GPU-not-there is not among those ListAndWatch listed: %s' % ', '.join(UUIDS)
    assert plugin.allocated == []
    assert 'GPU-not-there' in err


def test_another_api_version_is_refused_and_the_stub_keeps_waiting(proto: Path, api: tuple[Any, Any],
                                                                   sockets: Path) -> None:
    import grpc

    stub = _start_stub(proto, sockets, '--timeout', '10')
    _wait_for(sockets / 'kubelet.sock', stub)
    plugin = FakePlugin(api, sockets, 'envvar')
    try:
        with pytest.raises(grpc.RpcError) as refused:
            plugin.register(version='v1alpha1')
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        plugin.register()
        rc, report, err = _finish(stub)
    finally:
        plugin.close()
    assert rc == 0, (report, err)
    assert report['registration']['version'] == 'v1beta1'


def test_no_registration_times_out_with_a_clear_message(proto: Path, sockets: Path) -> None:
    started = time.monotonic()
    rc, report, err = _finish(_start_stub(proto, sockets, '--timeout', '1'))
    assert rc == 1
    assert report['error'].startswith('no registration for nvidia.com/gpu on %s/kubelet.sock within 1.0s '
                                      '(registrations seen: none)' % sockets)
    assert 'kubelet_stub: no registration' in err
    assert 'allocated' not in report
    assert time.monotonic() - started < 20
    assert not (sockets / 'kubelet.sock').exists()


def test_a_plugin_that_registers_but_does_not_serve_times_out(proto: Path, api: tuple[Any, Any],
                                                              sockets: Path) -> None:
    import grpc

    pb2, pb2_grpc = api
    stub = _start_stub(proto, sockets, '--timeout', '1')
    _wait_for(sockets / 'kubelet.sock', stub)
    with grpc.insecure_channel('unix:%s/kubelet.sock' % sockets) as channel:
        pb2_grpc.RegistrationStub(channel).Register(pb2.RegisterRequest(
            version='v1beta1', endpoint='nvidia-gpu.sock', resource_name='nvidia.com/gpu'), timeout=5)
    rc, report, err = _finish(stub)
    assert rc == 1
    assert report['error'] == ('the plugin registered nvidia-gpu.sock but does not answer on %s/nvidia-gpu.sock '
                               'within 1.0s' % sockets)
