# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A loopback stand-in for kubelet's device manager, for the real-GPU tier.

No kubelet can run on the GPU node (no API server, no node object), yet issue 26
must show that NVIDIA's k8s-device-plugin, run on a host this collection
prepared, registers and answers Allocate as it would for kubelet. This script
plays kubelet's part of the device-plugin API, v1beta1, and nothing more:

1. it serves ``v1beta1.Registration/Register`` on ``DIR/kubelet.sock``;
2. it waits for the registration of RESOURCE (``nvidia.com/gpu``);
3. it dials ``DIR/<endpoint>``, as kubelet does (``path.Join(DevicePluginPath,
   endpoint)``, api.proto:27-29), calls GetDevicePluginOptions, reads the first
   ListAndWatch message, calls GetPreferredAllocation where the options offer it,
   and Allocate for one device;
4. it prints one JSON document: what it was told, the ContainerAllocateResponse,
   the same answer as CRI ContainerConfig fields (``cri``), and the timings.

It exits 0 when all went through, 1 with an ``error`` in the JSON and a line on
stderr when one step failed or timed out, and 2 when it cannot start (no grpc).

    python3 kubelet_stub.py --proto API_PROTO [--dir DIR] [--resource NAME] [--device ID] [--timeout S]

The stubs are generated from API_PROTO at every start, with grpc_tools.protoc, into
a temporary directory: the proto is the one the plugin vendors
(k8s-device-plugin-0.20.0/vendor/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto,
proto3, package v1beta1, no imports). On the node the modules come from Debian
(python3-grpcio, python3-grpc-tools, python3-protobuf); in the unit tests from PyPI.

Vendor facts (k8s-device-plugin-0.20.0/, DP below):
- the socket directory and kubelet's socket, and the version string "v1beta1":
  DP/vendor/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go:26,30,32,48;
- the plugin registers Version, Endpoint = the base name of its socket
  (nvidia-gpu.sock), ResourceName and GetPreferredAllocationAvailable = true:
  DP/internal/plugin/server.go:103-106,241-249;
- the resource name nvidia.com/gpu: DP/api/config/v1/consts.go:25 and
  DP/internal/rm/rm.go:111;
- the ContainerAllocateResponse fields: api.proto:177-188 (Mount: 192-199,
  DeviceSpec: 202-212, CDIDevice: 157-163).
CRI field names (json tags of k8s.io/cri-api v0.36.0, cri-tools-1.36.0/vendor/
k8s.io/cri-api/pkg/apis/runtime/v1/api.pb.go): ContainerConfig envs, mounts, devices,
annotations, CDI_devices (5639-5680); KeyValue key/value (4270-4271); Mount
container_path, host_path, readonly (1091-1099); Device container_path, host_path,
permissions (5509-5516); CDIDevice name (5579).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import threading
import time
from concurrent import futures
from types import ModuleType
from typing import Any, Callable

# constants.go:26 (Version) and :48 (SupportedVersions); constants.go:30,32.
API_VERSION = 'v1beta1'
DEVICE_PLUGIN_PATH = '/var/lib/kubelet/device-plugins'
KUBELET_SOCKET_NAME = 'kubelet.sock'
DEFAULT_RESOURCE = 'nvidia.com/gpu'


class StubError(Exception):
    """A step that failed; its message says which and why."""


def generate_stubs(proto: str, into: str) -> tuple[ModuleType, ModuleType]:
    """Compile PROTO with grpc_tools.protoc into INTO and import <name>_pb2 and <name>_pb2_grpc."""
    from grpc_tools import protoc

    proto = os.path.abspath(proto)
    if not os.path.isfile(proto):
        raise StubError('no proto at %s' % proto)
    include, name = os.path.split(proto)
    # grpc_tools.protoc.main takes argv with the program name first; 0 means success.
    rc = protoc.main(['protoc', '-I' + include, '--python_out=' + into, '--grpc_python_out=' + into, name])
    if rc != 0:
        raise StubError('grpc_tools.protoc failed on %s (rc %s)' % (proto, rc))
    module = os.path.splitext(name)[0]
    if into not in sys.path:
        sys.path.insert(0, into)  # <name>_pb2_grpc imports <name>_pb2 by its bare name
    return importlib.import_module(module + '_pb2'), importlib.import_module(module + '_pb2_grpc')


def cri_fields(response: dict[str, Any]) -> dict[str, Any]:
    """The ContainerAllocateResponse as CRI ContainerConfig fields, as kubelet passes them on.

    Only fields the answer has are given: crictl reads the file into the CRI struct
    by its json tags (cri-tools-1.36.0/cmd/crictl/util.go:201-212).
    """
    out: dict[str, Any] = {}
    if response['envs']:
        out['envs'] = [{'key': k, 'value': v} for k, v in sorted(response['envs'].items())]
    if response['mounts']:
        out['mounts'] = [{'container_path': m['container_path'], 'host_path': m['host_path'],
                          'readonly': m['read_only']} for m in response['mounts']]
    if response['devices']:
        out['devices'] = [dict(d) for d in response['devices']]
    if response['annotations']:
        out['annotations'] = dict(response['annotations'])
    if response['cdi_devices']:
        out['CDI_devices'] = [{'name': d['name']} for d in response['cdi_devices']]
    return out


def _options(msg: Any) -> dict[str, bool]:
    return {'pre_start_required': msg.pre_start_required,
            'get_preferred_allocation_available': msg.get_preferred_allocation_available}


def _allocate_response(msg: Any) -> dict[str, Any]:
    return {
        'envs': dict(sorted(msg.envs.items())),
        'mounts': [{'container_path': m.container_path, 'host_path': m.host_path, 'read_only': m.read_only}
                   for m in msg.mounts],
        'devices': [{'container_path': d.container_path, 'host_path': d.host_path, 'permissions': d.permissions}
                    for d in msg.devices],
        'annotations': dict(sorted(msg.annotations.items())),
        'cdi_devices': [{'name': d.name} for d in msg.cdi_devices],
    }


def run(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Kubelet's side, step by step; fills REPORT as it goes, raises StubError on a failed step."""
    import grpc

    start = time.monotonic()
    timings = report['timings_ms']

    def lap(name: str) -> None:
        timings[name] = round((time.monotonic() - start) * 1000, 1)

    with tempfile.TemporaryDirectory(prefix='kubelet-stub-') as gen:
        pb2, pb2_grpc = generate_stubs(args.proto, gen)
        lap('stubs_generated')

        registered = threading.Event()
        requests: list[Any] = []  # every registration, refused ones too
        accepted: list[Any] = []

        class Registration(pb2_grpc.RegistrationServicer):
            def Register(self, request: Any, context: Any) -> Any:
                requests.append(request)
                # kubelet refuses a version it does not support (constants.go:48).
                if request.version != API_VERSION:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                  'version %r is not supported; kubelet speaks %s' % (request.version, API_VERSION))
                if request.resource_name == args.resource:
                    accepted.append(request)
                    registered.set()
                return pb2.Empty()

        os.makedirs(args.dir, exist_ok=True)
        socket = os.path.join(args.dir, KUBELET_SOCKET_NAME)
        if os.path.exists(socket):
            os.unlink(socket)  # kubelet removes a stale socket before it listens
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb2_grpc.add_RegistrationServicer_to_server(Registration(), server)
        if not server.add_insecure_port('unix:' + socket):
            raise StubError('cannot listen on %s' % socket)
        server.start()
        report['kubelet_socket'] = socket
        lap('listening')
        print('kubelet_stub: listening on %s for %s' % (socket, args.resource), file=sys.stderr, flush=True)
        try:
            if not registered.wait(args.timeout):
                seen = ', '.join(r.resource_name for r in requests) or 'none'
                raise StubError('no registration for %s on %s within %ss (registrations seen: %s): did the plugin '
                                'start, and does it use this kubelet socket?' % (args.resource, socket, args.timeout, seen))
            request = accepted[0]
            report['registration'] = {'version': request.version, 'endpoint': request.endpoint,
                                      'resource_name': request.resource_name, 'options': _options(request.options)}
            lap('registered')
            _ask_plugin(args, pb2, pb2_grpc, os.path.join(args.dir, request.endpoint), report, lap)
        finally:
            # Kubelet keeps serving; this one serves until the end, so that the plugin's
            # Register call, which may still be sending its answer, is never cut off.
            server.stop(1).wait()
            if os.path.exists(socket):
                os.unlink(socket)


def _ask_plugin(args: argparse.Namespace, pb2: ModuleType, pb2_grpc: ModuleType, endpoint: str,
                report: dict[str, Any], lap: Callable[[str], None]) -> None:
    """Kubelet's calls to a registered plugin, up to Allocate for one device."""
    import grpc

    report['plugin_socket'] = endpoint
    with grpc.insecure_channel('unix:' + endpoint) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=args.timeout)
        except grpc.FutureTimeoutError:
            raise StubError('the plugin registered %s but does not answer on %s within %ss'
                            % (os.path.basename(endpoint), endpoint, args.timeout)) from None
        plugin = pb2_grpc.DevicePluginStub(channel)
        try:
            report['options'] = _options(plugin.GetDevicePluginOptions(pb2.Empty(), timeout=args.timeout))
            lap('options')
            stream = plugin.ListAndWatch(pb2.Empty(), timeout=args.timeout)
            first = next(stream)
            stream.cancel()  # kubelet keeps the stream; one list is all this test needs
            devices = [{'ID': d.ID, 'health': d.health} for d in first.devices]
            report['devices'] = devices
            lap('list_and_watch')
            ids = [d['ID'] for d in devices]
            if not ids:
                raise StubError('ListAndWatch listed no devices for %s' % args.resource)
            device = args.device or ids[-1]
            if device not in ids:
                raise StubError('device %s is not among those ListAndWatch listed: %s' % (device, ', '.join(ids)))
            if report['options']['get_preferred_allocation_available']:
                preferred = plugin.GetPreferredAllocation(pb2.PreferredAllocationRequest(container_requests=[
                    pb2.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=1)]),
                    timeout=args.timeout)
                report['preferred_allocation'] = [list(r.deviceIDs) for r in preferred.container_responses]
                lap('preferred_allocation')
            report['allocate_request'] = {'container_requests': [{'devices_ids': [device]}]}
            answer = plugin.Allocate(pb2.AllocateRequest(container_requests=[
                pb2.ContainerAllocateRequest(devices_ids=[device])]), timeout=args.timeout)
            lap('allocated')
        except StopIteration:
            raise StubError('ListAndWatch ended before its first message') from None
        except grpc.RpcError as e:
            raise StubError('%s: %s' % (e.code(), e.details())) from None
    if len(answer.container_responses) != 1:
        raise StubError('Allocate answered %d container responses for 1 request' % len(answer.container_responses))
    response = _allocate_response(answer.container_responses[0])
    report['allocated'] = device
    report['container_allocate_response'] = response
    report['cri'] = cri_fields(response)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--proto', required=True, help='the device-plugin api.proto the plugin vendors')
    parser.add_argument('--dir', default=DEVICE_PLUGIN_PATH, help='the device-plugin socket directory (%(default)s)')
    parser.add_argument('--resource', default=DEFAULT_RESOURCE, help='the resource to wait for (%(default)s)')
    parser.add_argument('--device', help='the device ID to allocate (default: the last one listed)')
    parser.add_argument('--timeout', type=float, default=60.0, help='seconds to wait for each step (%(default)s)')
    args = parser.parse_args(argv)
    report: dict[str, Any] = {'api_version': API_VERSION, 'resource': args.resource, 'timings_ms': {}}
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError as e:
        print('kubelet_stub: %s: install python3-grpcio and python3-grpc-tools (Debian) or grpcio-tools (PyPI)' % e,
              file=sys.stderr)
        return 2
    rc = 0
    try:
        run(args, report)
    except StubError as e:
        report['error'] = str(e)
        print('kubelet_stub: %s' % e, file=sys.stderr)
        rc = 1
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write('\n')
    return rc


if __name__ == '__main__':
    sys.exit(main())
