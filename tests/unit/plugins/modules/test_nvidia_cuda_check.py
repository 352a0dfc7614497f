# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _cuda
from ansible_collections.accel.nodes.plugins.modules import nvidia_cuda_check

sys.path.insert(0, str(Path(__file__).parents[1]))
from fake_libcuda import FakeLibcuda  # noqa: E402  pylint: disable=wrong-import-position

TESTS = Path(__file__).parents[3]
SMI = TESTS / 'fixtures' / 'facts' / 'commands' / 'nvidia-smi'
REPLAY_SMI = TESTS / 'doubles' / 'replay' / 'nvidia-smi'


def h200s(count, extra=None):
    return [dict({'name': 'NVIDIA H200', 'pci_bus_id': '00000000:%02X:00.0' % (0x10 + i)}, **(extra or {}).get(i, {}))
            for i in range(count)]


@pytest.fixture
def libcuda(monkeypatch):
    """libcuda(gpus) makes the module's CUDA probe load a FakeLibcuda of those GPUs (in its forked child)."""
    def install(gpus, **kwargs):
        fake = FakeLibcuda(gpus, **kwargs)
        monkeypatch.setattr(_cuda, 'child_probe', functools.partial(_cuda.child_probe, loader=lambda name: fake))
        return fake
    return install


@pytest.fixture
def smi_output(monkeypatch, tmp_path):
    """smi_output(text) makes the replay nvidia-smi double print text; returns its path."""
    def install(text):
        path = tmp_path / 'nvidia-smi-q-x.xml'
        path.write_text(text)
        monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(path))
        return str(REPLAY_SMI)
    return install


@pytest.fixture
def systemctl(monkeypatch, tmp_path):
    """systemctl(state, rc) puts a systemctl on PATH that answers is-active with state."""
    def install(state, rc):
        bindir = tmp_path / 'bin'
        bindir.mkdir()
        script = bindir / 'systemctl'
        script.write_text('#!/bin/sh\n[ "$1" = is-active ] || exit 2\necho %s\nexit %d\n' % (state, rc))
        script.chmod(0o755)
        monkeypatch.setenv('PATH', '%s:/usr/bin:/bin' % bindir)
    return install


@pytest.fixture
def run(run_module, fact_roots):
    """run(**args) with the real H200 tree as root (it has /dev/nvidia-uvm)."""
    def _run(**args):
        args.setdefault('root', str(fact_roots / 'h200'))
        return run_module(nvidia_cuda_check.main, args)
    return _run


def by_name(result):
    return dict((c['name'], c) for c in result['checks'])


def test_pass_on_every_gpu(run, libcuda, smi_output):
    libcuda(h200s(2))
    result = run(expect_persistence=True, nvidia_smi_path=smi_output((SMI / 'h200-v13.xml').read_text()), nvswitch=False)
    assert not result.get('failed'), result['msg']
    assert result['status'] == 'pass'
    assert [(c['name'], c['status']) for c in result['checks']] == [
        ('cuda', 'pass'), ('nvidia_uvm', 'pass'), ('nvidia_persistence_mode', 'pass')]
    cuda = by_name(result)['cuda']
    assert cuda['detail'].startswith('CUDA 13.0 (libcuda.so.1): 2 of 2 GPU(s) allocate 1048576 bytes and copy them '
                                     'host->device->host intact, in ')
    assert cuda['measured']['elapsed_ms'] == result['cuda']['elapsed_ms'] > 0
    assert [d['status'] for d in result['cuda']['devices']] == ['pass', 'pass']
    assert result['changed'] is False


def test_check_mode_runs_the_probe_too(run, libcuda):
    libcuda(h200s(1))
    result = run(_ansible_check_mode=True, nvswitch=False)
    assert by_name(result)['cuda']['status'] == 'pass'
    assert result['changed'] is False


def test_a_gpu_that_does_not_exist_fails_cuinit(run, libcuda):
    libcuda(h200s(1))
    result = run(cuda_visible_devices='7', nvswitch=False)
    assert result['failed'] is True
    assert result['msg'].startswith('cuda: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected), '
                                    'with CUDA_VISIBLE_DEVICES=7, in ')
    assert 'check CUDA_VISIBLE_DEVICES' in result['msg']
    assert result['cuda']['environment'] == {'CUDA_VISIBLE_DEVICES': '7'}


def test_every_failing_gpu_is_named(run, libcuda):
    libcuda(h200s(3, {1: {'memory': 1024}, 2: {'fail': {'cuDevicePrimaryCtxRetain': 802}}}))
    result = run(nvswitch=False)
    assert result['failed'] is True
    detail = by_name(result)['cuda']['detail']
    assert detail.startswith('2 of 3 GPU(s) fail, in ')
    assert 'GPU 1 (NVIDIA H200, 00000000:11:00.0) cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)' in detail
    assert 'GPU 2 (NVIDIA H200, 00000000:12:00.0) cuDevicePrimaryCtxRetain: CUDA_ERROR_SYSTEM_NOT_READY (system not yet initialized)' in detail
    assert 'GPU 0' not in detail
    assert [f['index'] for f in by_name(result)['cuda']['measured']['failed']] == [1, 2]


def test_library_hidden(run, tmp_path):
    result = run(search_loader=False, library_dirs=[str(tmp_path)], nvswitch=False)
    assert result['failed'] is True
    assert result['msg'].startswith('cuda: libcuda.so.1 not found in %s, in ' % tmp_path)
    assert result['cuda']['error']['name'] == 'LIBRARY_NOT_FOUND'


def test_a_hung_driver_fails_at_the_timeout(run, monkeypatch):
    def hang(**kwargs):
        time.sleep(60)
    monkeypatch.setattr(_cuda, 'child_probe', hang)
    start = time.monotonic()
    result = run(timeout=1, nvswitch=False)
    assert time.monotonic() - start < 10
    assert result['failed'] is True
    assert result['msg'].startswith('cuda: the CUDA probe did not finish in 1 s and was killed, in ')


def test_fail_on_error_false_returns_the_failure(run, tmp_path):
    result = run(search_loader=False, library_dirs=[str(tmp_path)], nvswitch=False, fail_on_error=False)
    assert not result.get('failed')
    assert result['status'] == 'fail'
    assert by_name(result)['cuda']['status'] == 'fail'


def test_uvm_missing(run, tmp_path):
    result = run(root=str(tmp_path), skip={'cuda': 'simulated node'}, nvswitch=False)
    checks = by_name(result)
    assert checks['cuda'] == {'name': 'cuda', 'layer': 'host', 'status': 'skip', 'detail': 'skipped: simulated node', 'measured': {}}
    assert checks['nvidia_uvm']['status'] == 'fail'
    assert result['msg'].startswith('nvidia_uvm: /dev/nvidia-uvm is missing')
    assert result['cuda'] is None


def test_persistence_off_on_one_gpu(run, smi_output):
    path = smi_output((SMI / 'p4d-two-gpus-mig-v12.xml').read_text())
    result = run(skip={'cuda': 'x'}, expect_persistence=True, nvidia_smi_path=path, nvswitch=False)
    check = by_name(result)['nvidia_persistence_mode']
    assert check['status'] == 'fail'
    wrong = [bus for bus, mode in check['measured']['gpus'].items() if mode is not True]
    assert len(wrong) == 1
    assert check['detail'].startswith('persistence mode is not on on %s: enable nvidia-persistenced' % wrong[0])


def test_persistence_without_nvidia_smi(run, smi_output, monkeypatch):
    path = smi_output("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_RC', '9')
    result = run(skip={'cuda': 'x'}, expect_persistence=True, nvidia_smi_path=path, nvswitch=False)
    detail = by_name(result)['nvidia_persistence_mode']['detail']
    assert detail.startswith('cannot read persistence mode: %s -q -x exited 9 without XML: NVIDIA-SMI has failed' % path)


def fabric(state, status):
    text = (SMI / 'h200-v13.xml').read_text()
    assert '<state>N/A</state>' in text and '<status>N/A</status>' in text
    return text.replace('<state>N/A</state>', '<state>%s</state>' % state).replace('<status>N/A</status>', '<status>%s</status>' % status)


@pytest.mark.parametrize('state, status, expected, words', [
    ('Completed', 'Success', 'pass', 'fabric state Completed, status Success on 1 GPU(s)'),
    ('In Progress', 'N/A', 'fail', '00000000:00:06.0 is still In Progress: Fabric Manager has not finished training the fabric'),
    ('Not Started', 'N/A', 'fail', '00000000:00:06.0 is Not Started: Fabric Manager did not configure it'),
    ('Completed', 'Insufficient Resources', 'fail', '00000000:00:06.0 completed with status Insufficient Resources'),
    ('N/A', 'N/A', 'skip', 'skipped: the driver reports no fabric state for 00000000:00:06.0'),
])
def test_fabric_state(run, smi_output, systemctl, state, status, expected, words):
    systemctl('active', 0)
    result = run(skip={'cuda': 'x'}, nvswitch=True, nvidia_smi_path=smi_output(fabric(state, status)))
    checks = by_name(result)
    assert checks['nvswitch_fabric']['status'] == expected
    assert words in checks['nvswitch_fabric']['detail']
    assert checks['nvidia_fabricmanager']['status'] == 'pass'
    assert result['status'] == ('fail' if expected == 'fail' else 'pass')


def test_fabric_manager_stopped(run, smi_output, systemctl):
    systemctl('inactive', 3)
    result = run(skip={'cuda': 'x'}, nvswitch=True, nvidia_smi_path=smi_output(fabric('Completed', 'Success')))
    check = by_name(result)['nvidia_fabricmanager']
    assert check['status'] == 'fail'
    assert check['detail'].startswith('nvidia-fabricmanager is inactive, so CUDA cannot start on this NVSwitch system: '
                                      'install nvidia-fabricmanager at exactly the driver\'s version and run systemctl enable --now')
    assert result['failed'] is True


def test_nvswitch_found_on_the_pci_bus(run, smi_output, systemctl, tmp_path):
    systemctl('failed', 3)
    device = tmp_path / 'sys' / 'bus' / 'pci' / 'devices' / '0000:07:00.0'
    device.mkdir(parents=True)
    (device / 'vendor').write_text('0x10de\n')
    (device / 'class').write_text('0x068000\n')
    result = run(root=str(tmp_path), skip={'cuda': 'x', 'nvidia_uvm': 'x'}, nvidia_smi_path=smi_output(fabric('Completed', 'Success')))
    checks = by_name(result)
    assert checks['nvidia_fabricmanager']['status'] == 'fail'
    assert checks['nvidia_fabricmanager']['measured']['nvswitches'] == ['0000:07:00.0']


def test_no_nvswitch_no_fabric_checks(run, tmp_path):
    result = run(root=str(tmp_path), skip={'cuda': 'x', 'nvidia_uvm': 'x'})
    assert [c['name'] for c in result['checks']] == ['cuda', 'nvidia_uvm']


def test_unknown_skip_key(run):
    result = run(skip={'cude': 'typo'})
    assert result['failed'] is True
    assert result['msg'].startswith('skip: unknown check(s) cude; the checks are cuda, nvidia_uvm')


def _without_timings(value):
    if isinstance(value, dict):
        return dict((k, _without_timings(v)) for k, v in value.items() if k != 'elapsed_ms' and ' in ' not in str(k))
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


@pytest.mark.parametrize('gpus, args', [
    (h200s(2), dict(expect_persistence=True, nvswitch=False)),
    # One GPU fails: the module fails (fail_on_error), the probe returns the same checks without failing.
    (h200s(3, {1: {'memory': 1024}, 2: {'fail': {'cuDevicePrimaryCtxRetain': 802}}}), dict(nvswitch=False)),
])
def test_node_probe_runs_the_same_checks(run_module, fact_roots, libcuda, smi_output, gpus, args):
    from ansible_collections.accel.nodes.plugins.modules import node_probe
    libcuda(gpus)
    args = dict(args, root=str(fact_roots / 'h200'), nvidia_smi_path=smi_output((SMI / 'h200-v13.xml').read_text()))
    alone = run_module(nvidia_cuda_check.main, dict(args))
    probed = run_module(node_probe.main, dict(cuda=dict(args)))
    assert not probed.get('failed')
    assert probed['cuda']['status'] == alone['status'] == ('pass' if len(gpus) == 2 else 'fail')
    assert alone.get('failed') is (len(gpus) == 3 or None)
    for check in alone['checks'] + probed['cuda']['checks']:
        check['detail'] = check['detail'].split(', in ')[0].split(' in ')[0]
        check['measured'].pop('elapsed_ms', None)
    assert _without_timings(probed['cuda']['checks']) == _without_timings(alone['checks'])
    assert probed['cuda']['msg'].split(' in ')[0] == alone['msg'].split(' in ')[0]


def test_node_probe_checks_the_cuda_options_as_the_module_does(run_module):
    from ansible_collections.accel.nodes.plugins.modules import node_probe
    result = run_module(node_probe.main, dict(cuda=dict(skip={'gpu_burn': 'no'})))
    assert result['failed'] and result['msg'].startswith('skip: unknown check(s) gpu_burn')
    result = run_module(node_probe.main, dict(cuda=dict(timeout='soon')))
    assert result['failed'] and result['msg'].startswith('cuda: ')


def test_node_probe_follows_the_fresh_facts_on_nvswitch_and_vendor(run_module, fact_roots):
    # The B200's NVSwitches show on its PCI bus only through a Mellanox management bridge, which the facts
    # know and the module's own PCI count does not: with the facts gathered in the same run, the fabric is
    # checked, as it was when the role passed the facts' verdict.
    from ansible_collections.accel.nodes.plugins.modules import node_probe
    skip = {'cuda': 'simulated', 'nvidia_uvm': 'simulated'}
    root = str(fact_roots / 'p6-b200.48xlarge')
    alone = run_module(nvidia_cuda_check.main, dict(root=root, skip=skip, fail_on_error=False))
    assert 'nvswitch_fabric' not in [c['name'] for c in alone['checks']]
    probed = run_module(node_probe.main, dict(accelerators=dict(root=root, gather=['pci', 'ec2']),
                                              cuda=dict(root=root, skip=skip)))
    assert probed['ansible_facts']['accelerators']['nvidia']['nvswitch']['present'] is True
    assert 'nvswitch_fabric' in [c['name'] for c in probed['cuda']['checks']]
    # Given, the option wins.
    probed = run_module(node_probe.main, dict(accelerators=dict(root=root, gather=['pci', 'ec2']),
                                              cuda=dict(root=root, skip=skip, nvswitch=False)))
    assert 'nvswitch_fabric' not in [c['name'] for c in probed['cuda']['checks']]
    # No NVIDIA GPU in the fresh facts: nothing to check.
    inf1 = str(fact_roots / 'inf1.6xlarge')
    probed = run_module(node_probe.main, dict(accelerators=dict(root=inf1, gather=['pci']), cuda=dict(root=inf1, skip=skip)))
    assert probed['cuda'] is None
