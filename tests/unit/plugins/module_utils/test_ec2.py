# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import socket
import time

from ansible_collections.accel.nodes.plugins.module_utils import _ec2


# -- DMI ------------------------------------------------------------------------

def test_nitro_dmi_names_the_instance_type(fact_roots):
    dmi = _ec2.read_dmi(str(fact_roots / 'inf1.6xlarge'))
    assert _ec2.looks_like_ec2(dmi)
    assert _ec2.dmi_instance_type(dmi) == 'inf1.6xlarge'


def test_xen_p3_is_ec2_by_its_hypervisor_uuid_but_dmi_has_no_type(fact_roots):
    dmi = _ec2.read_dmi(str(fact_roots / 'p3.16xlarge'))
    assert dmi['sys_vendor'] == 'Xen' and dmi['product_name'] == 'HVM domU'
    assert _ec2.looks_like_ec2(dmi)
    assert _ec2.dmi_instance_type(dmi) is None


def test_a_host_without_dmi_is_not_ec2(fact_roots):
    dmi = _ec2.read_dmi(str(fact_roots / 'h200'))
    assert dmi is None
    assert not _ec2.looks_like_ec2(dmi)
    assert _ec2.dmi_instance_type(dmi) is None


def test_another_vendor_is_not_ec2(tmp_path):
    (tmp_path / 'sys/class/dmi/id').mkdir(parents=True)
    (tmp_path / 'sys/class/dmi/id/sys_vendor').write_text('QEMU\n')
    (tmp_path / 'sys/class/dmi/id/product_name').write_text('Standard PC (Q35 + ICH9, 2009)\n')
    dmi = _ec2.read_dmi(str(tmp_path))
    assert not _ec2.looks_like_ec2(dmi)
    assert _ec2.dmi_instance_type(dmi) is None


# -- IMDSv2 -----------------------------------------------------------------------

def test_imds_v2_token_then_instance_type(fake_imds):
    assert _ec2.imds_instance_type(1.0, endpoint=fake_imds.endpoint) == ('p3.8xlarge', 'ok')
    assert fake_imds.requests == [
        ('PUT', '/latest/api/token', '60'),
        ('GET', '/latest/meta-data/instance-type', fake_imds.token),
    ]


def test_imds_ignores_a_proxy_from_the_environment(fake_imds, monkeypatch):
    monkeypatch.setenv('http_proxy', 'http://127.0.0.1:9')
    monkeypatch.setenv('HTTP_PROXY', 'http://127.0.0.1:9')
    assert _ec2.imds_instance_type(1.0, endpoint=fake_imds.endpoint) == ('p3.8xlarge', 'ok')


def test_imds_refusing_the_token_is_reported(fake_imds, monkeypatch):
    monkeypatch.setattr(fake_imds, 'token_status', 403)
    assert _ec2.imds_instance_type(1.0, endpoint=fake_imds.endpoint) == (None, 'HTTP 403 from IMDS')
    assert [r[0] for r in fake_imds.requests] == ['PUT']


def test_imds_nothing_listening_is_unreachable_at_once():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    assert _ec2.imds_instance_type(1.0, endpoint='http://127.0.0.1:%d' % port) == (None, 'unreachable')
    assert time.monotonic() - started < 0.5


def test_imds_that_never_answers_costs_no_more_than_the_budget():
    # A listening socket that nobody serves: the connection is accepted by the
    # kernel, then nothing comes back, as behind a filtering firewall.
    with socket.socket() as silent:
        silent.bind(('127.0.0.1', 0))
        silent.listen(8)
        started = time.monotonic()
        result = _ec2.imds_instance_type(0.3, endpoint='http://127.0.0.1:%d' % silent.getsockname()[1])
        elapsed = time.monotonic() - started
    assert result == (None, 'unreachable')
    assert 0.25 <= elapsed < 0.8


def test_imds_answer_that_is_not_an_instance_type(fake_imds, monkeypatch):
    monkeypatch.setattr(fake_imds, 'instance_type', '<html>captive portal</html>')
    assert _ec2.imds_instance_type(1.0, endpoint=fake_imds.endpoint) == (None, 'IMDS gave no instance type')
