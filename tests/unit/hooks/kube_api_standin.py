# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A loopback stand-in of the Kubernetes API server, for the scheduler hooks' tests (extras/hooks).

It is not Kubernetes. It serves only what kubernetes.core.k8s_drain 6.2.0 asks for, keeps one cluster's nodes
and pods in memory, and records every request, so that a test can say which calls a hook made and in which
order. What the module asks for, read in its source (ansible_collections/kubernetes/core/plugins/modules/
k8s_drain.py, shipped by ansible==12.3.0) and in the Python client's generated CoreV1Api (kubernetes==37.0.2,
kubernetes/client/api/core_v1_api.py):

  read_node                       GET   /api/v1/nodes/{name}
  patch_node                      PATCH /api/v1/nodes/{name}             body {"spec": {"unschedulable": bool}}
  list_pod_for_all_namespaces     GET   /api/v1/pods?fieldSelector=spec.nodeName={name}
  create_namespaced_pod_eviction  POST  /api/v1/namespaces/{ns}/pods/{name}/eviction
  read_namespaced_pod             GET   /api/v1/namespaces/{ns}/pods/{name}   (wait_timeout: until 404)

and the discovery that the collection's dynamic client makes when it is created
(plugins/module_utils/client/discovery.py: /version, /api, /apis, then the group versions it lists).

The answers follow the Kubernetes documentation where it speaks: an eviction the PodDisruptionBudget forbids is
"429 Too Many Requests", an allowed one "200 OK", after which the pod is deleted ("API-initiated Eviction",
https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/). Errors carry a Status body with
Content-Type application/json, which is where k8s_drain reads the message (format_dynamic_api_exc). The HTTP
reason phrase matters too: k8s_drain compares ApiException.reason with "Not Found", and http.server sends the
standard phrases.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

PodKey = Tuple[str, str]


def node(name: str, unschedulable: bool = False) -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name},
            'spec': {'unschedulable': unschedulable} if unschedulable else {}}


def pod(namespace: str, name: str, node_name: str, owner: Optional[str] = None, emptydir: bool = False,
        phase: str = 'Running') -> Dict[str, Any]:
    """A pod on node_name; owner is the kind of its controller (ReplicaSet, DaemonSet, ...), None for a bare pod."""
    meta: Dict[str, Any] = {'name': name, 'namespace': namespace}
    if owner:
        meta['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': owner, 'name': name.rsplit('-', 1)[0],
                                    'uid': 'uid-' + name, 'controller': True}]
    spec: Dict[str, Any] = {'nodeName': node_name, 'containers': [{'name': 'main', 'image': 'stand-in'}]}
    if emptydir:
        spec['volumes'] = [{'name': 'scratch', 'emptyDir': {}}]
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta, 'spec': spec, 'status': {'phase': phase}}


def _status(code: int, reason: str, message: str, details: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    body = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'message': message,
            'reason': reason, 'code': code}
    if details:
        body['details'] = details
    return body


class Cluster:
    """The stand-in's state. Tests set it up, start serve(), and read calls afterwards.

    pdb_refusals: pod -> how many evictions of it to refuse with 429 before allowing one (-1: always).
    reads_before_gone: pod -> how many GETs still find it after its eviction, terminating, before it is gone
    (404); a pod not named is gone at once.
    """

    def __init__(self) -> None:
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.pods: Dict[PodKey, Dict[str, Any]] = {}
        self.pdb_refusals: Dict[PodKey, int] = {}
        self.reads_before_gone: Dict[PodKey, int] = {}
        self._terminating: Dict[PodKey, int] = {}
        self.calls: List[Dict[str, Any]] = []
        self.lock = threading.Lock()

    # What a test asks of the record.
    def api_calls(self) -> List[Tuple[str, str]]:
        """(method, path) of every call outside discovery, in order."""
        return [(c['method'], c['path']) for c in self.calls if not c['discovery']]

    def evictions(self) -> List[Tuple[str, str, int]]:
        return [(c['path'].split('/')[4], c['path'].split('/')[6], c['status']) for c in self.calls
                if c['method'] == 'POST' and c['path'].endswith('/eviction')]

    def node_patches(self) -> List[Tuple[str, Any]]:
        return [(c['path'].rsplit('/', 1)[1], c['body']) for c in self.calls if c['method'] == 'PATCH']

    # The API.
    def handle(self, method: str, path: str, query: Dict[str, List[str]], body: Any) -> Tuple[int, Any]:
        parts = path.strip('/').split('/')
        if method == 'GET' and path == '/version':
            return 200, {'major': '1', 'minor': '34', 'gitVersion': 'v1.34.0-standin', 'platform': 'linux/amd64'}
        if method == 'GET' and path == '/api':
            return 200, {'kind': 'APIVersions', 'versions': ['v1'],
                         'serverAddressByClientCIDRs': [{'clientCIDR': '0.0.0.0/0', 'serverAddress': '127.0.0.1'}]}
        if method == 'GET' and path == '/apis':
            return 200, {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': []}
        if method == 'GET' and path == '/api/v1':
            return 200, {'kind': 'APIResourceList', 'groupVersion': 'v1', 'resources': [
                {'name': 'nodes', 'singularName': 'node', 'namespaced': False, 'kind': 'Node',
                 'verbs': ['get', 'list', 'patch']},
                {'name': 'pods', 'singularName': 'pod', 'namespaced': True, 'kind': 'Pod',
                 'verbs': ['get', 'list', 'delete']},
                {'name': 'pods/eviction', 'singularName': '', 'namespaced': True, 'group': 'policy',
                 'version': 'v1', 'kind': 'Eviction', 'verbs': ['create']}]}
        if parts[:3] == ['api', 'v1', 'nodes'] and len(parts) == 4:
            return self._node(method, parts[3], body)
        if method == 'GET' and parts == ['api', 'v1', 'pods']:
            selector = query.get('fieldSelector', [''])[0]
            if not selector.startswith('spec.nodeName='):
                return 400, _status(400, 'BadRequest', 'the stand-in lists pods by spec.nodeName only')
            on_node = selector.split('=', 1)[1]
            items = [copy.deepcopy(p) for p in self.pods.values() if p['spec']['nodeName'] == on_node]
            return 200, {'kind': 'PodList', 'apiVersion': 'v1', 'metadata': {}, 'items': items}
        if parts[:3] == ['api', 'v1', 'namespaces'] and len(parts) >= 6 and parts[4] == 'pods':
            key = (parts[3], parts[5])
            if method == 'POST' and parts[6:] == ['eviction']:
                return self._evict(key)
            if method == 'GET' and len(parts) == 6:
                return self._read_pod(key)
        return 404, _status(404, 'NotFound', 'the stand-in does not serve %s %s' % (method, path))

    def _node(self, method: str, name: str, body: Any) -> Tuple[int, Any]:
        if name not in self.nodes:
            return 404, _status(404, 'NotFound', 'nodes "%s" not found' % name, {'name': name, 'kind': 'nodes'})
        if method == 'GET':
            return 200, copy.deepcopy(self.nodes[name])
        if method == 'PATCH':
            spec = (body or {}).get('spec', {})
            if 'unschedulable' in spec:
                self.nodes[name]['spec']['unschedulable'] = spec['unschedulable']
            return 200, copy.deepcopy(self.nodes[name])
        return 405, _status(405, 'MethodNotAllowed', method)

    def _evict(self, key: PodKey) -> Tuple[int, Any]:
        if key not in self.pods:
            return 404, _status(404, 'NotFound', 'pods "%s" not found' % key[1], {'name': key[1], 'kind': 'pods'})
        refusals = self.pdb_refusals.get(key, 0)
        if refusals:
            if refusals > 0:
                self.pdb_refusals[key] = refusals - 1
            return 429, _status(429, 'TooManyRequests', "Cannot evict pod as it would violate the pod's disruption "
                                'budget.', {'causes': [{'reason': 'DisruptionBudget', 'message': 'The disruption '
                                                        'budget %s-pdb needs 1 healthy pods and has 1 currently'
                                                        % key[1]}]})
        if self.reads_before_gone.get(key):
            self._terminating[key] = self.reads_before_gone[key]
        else:
            del self.pods[key]
        return 200, {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Success', 'code': 200}

    def _read_pod(self, key: PodKey) -> Tuple[int, Any]:
        if key not in self.pods:
            return 404, _status(404, 'NotFound', 'pods "%s" not found' % key[1], {'name': key[1], 'kind': 'pods'})
        found = copy.deepcopy(self.pods[key])
        if key in self._terminating:
            self._terminating[key] -= 1
            if self._terminating[key] <= 0:
                del self._terminating[key]
                del self.pods[key]
        return 200, found


DISCOVERY = ('/version', '/api', '/apis', '/api/v1')


def _handler(cluster: Cluster) -> type:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get('Content-Length') or 0)
            raw = self.rfile.read(length) if length else b''
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode('utf-8', 'replace')
            with cluster.lock:
                status, answer = cluster.handle(self.command, url.path, parse_qs(url.query), body)
                cluster.calls.append({'method': self.command, 'path': url.path, 'query': parse_qs(url.query),
                                      'content_type': self.headers.get('Content-Type'), 'body': body,
                                      'status': status, 'discovery': url.path in DISCOVERY})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # pylint: disable=redefined-builtin
            pass  # the record is cluster.calls

    return Handler


@contextlib.contextmanager
def serve(cluster: Cluster) -> Iterator[str]:
    """with serve(cluster) as url: a server on 127.0.0.1, on a port the kernel picks, until the block ends."""
    server = ThreadingHTTPServer(('127.0.0.1', 0), _handler(cluster))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
