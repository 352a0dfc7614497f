# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A few calls of the Docker Engine API over its Unix socket, with the standard library.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Why not community.docker's client: its module_utils are private to that
collection, and accel.nodes.run_containers needs only create, start, wait,
logs, remove, image inspect and pull. The endpoints and bodies are the
Engine API's (https://docs.docker.com/reference/api/engine/), unversioned
paths, which the daemon serves at its own API version; DeviceRequests needs
API 1.40 (Docker 19.03) or later.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
from typing import Any, Dict, Optional, Tuple
from urllib.parse import quote, urlencode

DEFAULT_SOCKET = '/var/run/docker.sock'


class DockerAPIError(Exception):
    """The daemon answered with an error status; message is its own words."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__('localhost', timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerAPI:
    """One connection per call: the calls of one container run one after another, containers run in threads."""

    def __init__(self, path: str = DEFAULT_SOCKET, timeout: float = 60) -> None:
        self.path = path
        self.timeout = timeout

    def call(self, method: str, url: str, body: Optional[Dict[str, Any]] = None,
             query: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None) -> Tuple[int, bytes]:
        connection = _UnixConnection(self.path, self.timeout if timeout is None else timeout)
        try:
            if query:
                url += '?' + urlencode(query)
            data = json.dumps(body).encode('utf-8') if body is not None else None
            headers = {'Content-Type': 'application/json'} if data is not None else {}
            connection.request(method, url, body=data, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        if response.status >= 400:
            raise DockerAPIError(response.status, _message(payload) or response.reason)
        return response.status, payload

    def image_exists(self, image: str) -> bool:
        try:
            self.call('GET', '/images/%s/json' % quote(image, safe=''))
        except DockerAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def pull(self, image: str, timeout: float) -> None:
        """Pull image; the daemon streams JSON progress lines and reports a failure in one of them."""
        name, tag = split_reference(image)
        status, payload = self.call('POST', '/images/create', query={'fromImage': name, 'tag': tag}, timeout=timeout)
        for line in payload.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get('error'):
                raise DockerAPIError(status, str(event['error']))

    def run(self, name: str, config: Dict[str, Any], timeout: float) -> Tuple[int, str]:
        """Create, start and wait for a container, read its output and remove it: (exit status, output)."""
        self.remove(name)
        status, payload = self.call('POST', '/containers/create', body=config, query={'name': name})
        container = json.loads(payload)['Id']
        try:
            self.call('POST', '/containers/%s/start' % container)
            try:
                status, payload = self.call('POST', '/containers/%s/wait' % container, timeout=timeout)
            except socket.timeout:
                raise DockerAPIError(0, 'the container did not exit within %s s' % timeout)
            exit_status = int(json.loads(payload).get('StatusCode', -1))
            status, payload = self.call('GET', '/containers/%s/logs' % container,
                                        query={'stdout': 1, 'stderr': 1})
            return exit_status, demultiplex(payload)
        finally:
            self.remove(container)

    def remove(self, container: str) -> None:
        try:
            self.call('DELETE', '/containers/%s' % quote(container, safe=''), query={'force': 1, 'v': 1})
        except DockerAPIError as exc:
            if exc.status != 404:
                raise


def _message(payload: bytes) -> str:
    try:
        return str(json.loads(payload).get('message') or '')
    except (ValueError, AttributeError):
        return payload.decode('utf-8', 'replace').strip()


def split_reference(image: str) -> Tuple[str, str]:
    """('registry:5000/name', 'tag') of an image reference; a digest stays in the name, the tag is then ''."""
    if '@' in image:
        return image, ''
    slash = image.rfind('/')
    colon = image.rfind(':')
    if colon > slash:
        return image[:colon], image[colon + 1:]
    return image, 'latest'


def demultiplex(payload: bytes) -> str:
    """The text of a container's log stream: without a TTY, frames of an 8-byte header (stream 0, 1 or 2,
    three zero bytes, big-endian size) and the bytes, stdout and stderr in the order written; with a TTY,
    the bytes as they are."""
    if len(payload) < 8 or payload[0] > 2 or payload[1:4] != b'\x00\x00\x00':
        return payload.decode('utf-8', 'replace')
    out = []
    offset = 0
    while offset + 8 <= len(payload):
        size = struct.unpack('>I', payload[offset + 4:offset + 8])[0]
        out.append(payload[offset + 8:offset + 8 + size])
        offset += 8 + size
    return b''.join(out).decode('utf-8', 'replace')
