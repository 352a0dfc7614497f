# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Fixtures of accelerator_facts' tests: the fake host trees, and a stand-in
for the EC2 instance metadata service on a local port."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest


@pytest.fixture(scope='session')
def fact_roots():
    """Path of the fake host trees, tests/fixtures/facts/roots (see its README)."""
    return Path(__file__).parents[2] / 'fixtures' / 'facts' / 'roots'


class FakeImds(http.server.BaseHTTPRequestHandler):
    """IMDSv2 as EC2 answers it: a PUT for a token, then GETs that carry it."""
    token = 'AQAEAFakeToken=='
    token_status = 200
    instance_type = 'p3.8xlarge'
    requests = []

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        self.send_response(code)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        self.requests.append(('PUT', self.path, self.headers.get('X-aws-ec2-metadata-token-ttl-seconds')))
        if self.path == '/latest/api/token' and self.headers.get('X-aws-ec2-metadata-token-ttl-seconds'):
            self._reply(self.token_status, self.token.encode())
        else:
            self._reply(400, b'')

    def do_GET(self):
        self.requests.append(('GET', self.path, self.headers.get('X-aws-ec2-metadata-token')))
        if self.headers.get('X-aws-ec2-metadata-token') != self.token:
            self._reply(401, b'')
        elif self.path == '/latest/meta-data/instance-type':
            self._reply(200, self.instance_type.encode())
        else:
            self._reply(404, b'')


@pytest.fixture
def fake_imds(monkeypatch):
    """The FakeImds handler class (its .requests record what was asked), with
    its endpoint URL as .endpoint; class attributes set here last one test."""
    monkeypatch.setattr(FakeImds, 'requests', [])
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), FakeImds)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    monkeypatch.setattr(FakeImds, 'endpoint', 'http://127.0.0.1:%d' % server.server_address[1], raising=False)
    yield FakeImds
    server.shutdown()
    server.server_close()
