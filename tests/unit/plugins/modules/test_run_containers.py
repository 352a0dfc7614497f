# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.run_containers against a fake Docker Engine API on a Unix socket.

The fake answers the calls the module makes with the bodies the Engine API
documents (https://docs.docker.com/reference/api/engine/version/v1.43/):
create -> {"Id"}, wait -> {"StatusCode"}, logs -> the multiplexed stream of a
container without a TTY, errors -> {"message"}.
"""

from __future__ import annotations

import http.server
import json
import socketserver
import struct
import threading
import time

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _docker_api
from ansible_collections.accel.nodes.plugins.modules import run_containers


def frame(stream, text):
    data = text.encode()
    return struct.pack('>BxxxI', stream, len(data)) + data


class FakeDocker:
    """Containers run 'nvidia-smi -L' against a list of GPUs; the device requests pick which."""

    def __init__(self, gpus=2, images=('img:1',), runtimes=('runc', 'nvidia')):
        self.gpus = gpus
        self.images = set(images)
        self.runtimes = runtimes
        self.containers = {}
        self.calls = []
        self.running = 0
        self.max_running = 0
        self.lock = threading.Lock()

    def handle(self, method, path, query, body):
        self.calls.append((method, path))
        if method == 'GET' and path.startswith('/images/'):
            name = path.split('/')[2]
            from urllib.parse import unquote
            return (200, {}) if unquote(name) in self.images else (404, {'message': 'No such image: ' + unquote(name)})
        if method == 'POST' and path == '/images/create':
            if query['fromImage'][0] == 'unreachable/img':
                return 200, b'{"status":"Pulling"}\n{"error":"pull access denied for unreachable/img"}\n'
            self.images.add('%s:%s' % (query['fromImage'][0], query['tag'][0]))
            return 200, b'{"status":"Downloaded newer image"}\n'
        if method == 'POST' and path == '/containers/create':
            if body['Image'] not in self.images:
                return 404, {'message': 'No such image: %s' % body['Image']}
            runtime = body['HostConfig'].get('Runtime', 'runc')
            if runtime not in self.runtimes:
                return 400, {'message': 'unknown or invalid runtime name: %s' % runtime}
            cid = 'c%d' % len(self.containers)
            self.containers[cid] = dict(body, name=query['name'][0])
            return 201, {'Id': cid, 'Warnings': []}
        parts = path.split('/')
        cid = parts[2] if len(parts) > 2 else ''
        if method == 'DELETE':
            if cid in self.containers or any(c['name'] == cid for c in self.containers.values()):
                self.containers = {k: v for k, v in self.containers.items() if cid not in (k, v['name'])}
                return 204, b''
            return 404, {'message': 'No such container: ' + cid}
        container = self.containers[cid]
        if path.endswith('/start'):
            requests = container['HostConfig']['DeviceRequests']
            if requests and 'nvidia' not in self.runtimes:
                return 500, {'message': 'could not select device driver "" with capabilities: [[gpu]]'}
            return 204, b''
        if path.endswith('/wait'):
            with self.lock:
                self.running += 1
                self.max_running = max(self.max_running, self.running)
            time.sleep(0.2)
            with self.lock:
                self.running -= 1
            return 200, {'StatusCode': 9 if container['Cmd'][0] == 'false' else 0}
        if path.endswith('/logs'):
            return 200, self.output(container)
        return 404, {'message': 'page not found'}

    def output(self, container):
        if container['Cmd'][0] == 'false':
            return frame(2, 'something failed\n')
        seen = list(range(self.gpus))
        for request in container['HostConfig']['DeviceRequests']:
            if request['DeviceIDs']:
                seen = [int(i) for i in request['DeviceIDs']]
            elif request['Count'] > 0:
                seen = seen[:request['Count']]
        return b''.join(frame(1, 'GPU %d: Tesla V100-SXM2-16GB (UUID: GPU-%d)\n' % (i, i)) for i in seen)


@pytest.fixture
def docker(tmp_path):
    fake = FakeDocker()
    path = str(tmp_path / 'docker.sock')

    class Handler(http.server.BaseHTTPRequestHandler):
        def _serve(self):
            from urllib.parse import parse_qs, urlparse
            url = urlparse(self.path)
            length = int(self.headers.get('Content-Length') or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, payload = fake.handle(self.command, url.path, parse_qs(url.query), body)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args):
            pass

        def address_string(self):
            return 'unix'

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = Server(path, Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.socket = path
    yield fake
    server.shutdown()
    server.server_close()


def run(run_module, docker, containers, **args):
    return run_module(run_containers.main, dict(dict(image='img:1', socket=docker.socket, containers=containers), **args))


GPU_ALL = {'name': 'container_nvidia_gpus_all', 'command': ['nvidia-smi', '-L'],
           'device_requests': [{'count': -1, 'capabilities': [['gpu', 'utility']]}], 'vendor': 'nvidia'}
GPU_1 = {'name': 'gpu_1', 'command': ['nvidia-smi', '-L'], 'runtime': 'nvidia',
         'device_requests': [{'device_ids': [1], 'capabilities': [['gpu']]}]}


def test_runs_each_container_side_by_side_and_returns_its_output(run_module, docker):
    result = run(run_module, docker, [GPU_ALL, GPU_1, dict(GPU_ALL, name='x', skip='not asked for')])
    first, second, skipped = result['results']
    assert result['changed'] is False
    assert first['item'] == GPU_ALL and first['status'] == 0 and first['failed'] is False
    assert first['container']['Output'].count('GPU ') == 2
    assert second['container']['Output'] == 'GPU 1: Tesla V100-SXM2-16GB (UUID: GPU-1)\n'
    assert skipped == {'item': dict(GPU_ALL, name='x', skip='not asked for'), 'skipped': True,
                       'skip_reason': 'not asked for'}
    assert docker.max_running == 2
    assert docker.containers == {}  # removed after the run


def test_sends_the_engine_api_body_docker_run_would(run_module, docker):
    config = run_containers.create_config(
        dict(GPU_1, env={'NVIDIA_VISIBLE_DEVICES': '1'}, devices=['/dev/neuron0', '/dev/neuron1:/dev/neuron9:rw']),
        'img:1', {'LD_LIBRARY_PATH': '/x'}, 'none')
    assert config['Cmd'] == ['nvidia-smi', '-L']
    assert config['Env'] == ['LD_LIBRARY_PATH=/x', 'NVIDIA_VISIBLE_DEVICES=1']
    assert config['HostConfig'] == {
        'NetworkMode': 'none', 'Runtime': 'nvidia',
        'Devices': [{'PathOnHost': '/dev/neuron0', 'PathInContainer': '/dev/neuron0', 'CgroupPermissions': 'rwm'},
                    {'PathOnHost': '/dev/neuron1', 'PathInContainer': '/dev/neuron9', 'CgroupPermissions': 'rw'}],
        'DeviceRequests': [{'Driver': '', 'Count': 0, 'DeviceIDs': ['1'], 'Capabilities': [['gpu']], 'Options': {}}],
    }


def test_a_failing_container_fails_only_its_result_with_the_daemon_words(run_module, docker):
    docker.runtimes = ('runc',)
    result = run(run_module, docker, [GPU_ALL, GPU_1, {'name': 'bad', 'command': ['false']}])
    gpus_all, gpu_1, bad = result['results']
    assert 'failed' not in result or result['failed'] is False
    assert gpus_all['failed'] is True and 'could not select device driver' in gpus_all['msg']
    assert gpu_1['failed'] is True and 'unknown or invalid runtime name: nvidia' in gpu_1['msg']
    assert bad['failed'] is True and bad['status'] == 9 and bad['msg'] == 'exit 9'
    assert bad['container']['Output'] == 'something failed\n'
    assert docker.containers == {}


def test_pulls_a_missing_image_once_and_never_when_told_not_to(run_module, docker):
    result = run(run_module, docker, [GPU_ALL], image='new/img:2')
    assert result['results'][0]['status'] == 0
    assert ('POST', '/images/create') in docker.calls
    docker.calls.clear()
    never = run(run_module, docker, [GPU_ALL], image='other:3', pull='never')
    assert ('POST', '/images/create') not in docker.calls
    assert never['results'][0]['failed'] is True and 'No such image: other:3' in never['results'][0]['msg']


def test_a_failed_pull_fails_every_container_that_would_run(run_module, docker):
    result = run(run_module, docker, [GPU_ALL, dict(GPU_1, skip='no')], image='unreachable/img')
    pulled, skipped = result['results']
    assert pulled['failed'] is True and 'pull access denied' in pulled['msg']
    assert skipped['skipped'] is True


def test_says_when_the_daemon_cannot_be_reached(run_module, tmp_path):
    result = run_module(run_containers.main, dict(image='img:1', socket=str(tmp_path / 'none.sock'),
                                                  containers=[GPU_ALL]))
    assert result['results'][0]['failed'] is True
    assert 'Cannot reach the Docker daemon' in result['results'][0]['msg']


def test_refuses_a_container_without_a_command(run_module, docker):
    result = run(run_module, docker, [{'name': 'x'}])
    assert result['failed'] is True and 'needs a name and a command' in result['msg']


@pytest.mark.parametrize('image, parts', [
    ('busybox', ('busybox', 'latest')),
    ('accel-test/busybox:1', ('accel-test/busybox', '1')),
    ('registry:5000/cuda', ('registry:5000/cuda', 'latest')),
    ('nvcr.io/nvidia/cuda:12.9.1-base', ('nvcr.io/nvidia/cuda', '12.9.1-base')),
    ('x/y@sha256:abc', ('x/y@sha256:abc', '')),
])
def test_splits_image_references(image, parts):
    assert _docker_api.split_reference(image) == parts


def test_demultiplexes_both_streams_in_order():
    assert _docker_api.demultiplex(frame(1, 'a\n') + frame(2, 'b\n') + frame(1, 'c')) == 'a\nb\nc'
    assert _docker_api.demultiplex(b'tty output') == 'tty output'
