# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_cri import (
    FilterModule, validation_cri_checks, validation_cri_engine, validation_cri_plan)
from ansible_collections.accel.nodes.plugins.module_utils._cri import (
    container_config, crictl_error, hints, parse_info, parse_version, pod_config)

# Real captures of crictl 1.36.0 (tests/rig/crictl.sh) against Debian's containerd on the rig's nodes:
# bookworm 1.6.20, trixie 1.7.24, forky-engines 2.1.9, each as the package installs it (tests/fixtures/cri/README.md).
CRI = Path(__file__).parents[3] / 'fixtures' / 'cri'
ENDPOINT = 'unix:///run/containerd/containerd.sock'


def answer(name):
    return {'rc': 0, 'stdout': (CRI / name).read_text(), 'stderr': ''}


def engine(version, runtimes=None, **config):
    """The engine of a capture, with the handlers a role registered (as containerd's info reports them) added."""
    info = json.loads((CRI / ('containerd-%s-info.json' % version)).read_text())
    for name, options in (runtimes or {}).items():
        info['config']['containerd']['runtimes'][name] = {'runtimeType': 'io.containerd.runc.v2', 'options': options}
    info['config'].update(config)
    return validation_cri_engine(answer('containerd-%s-version.txt' % version),
                                 {'rc': 0, 'stdout': json.dumps(info), 'stderr': ''}, ENDPOINT)


def gpus(count=2):
    return [{'index': i, 'name': 'NVIDIA H200', 'uuid': 'GPU-92185b04-1559-f871-0910-0fb475d30f0%d' % (6 + i)}
            for i in range(count)]


FACTS = {'vendors': ['nvidia'], 'nvidia': {'gpus': gpus()}, 'neuron': {'devices': []}}
NVIDIA = {'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}


@pytest.mark.parametrize('version, runtime_version, enable_cdi, sandbox', [
    ('1.6.20', '1.6.20~ds1', None, 'registry.k8s.io/pause:3.6'),
    ('1.7.24', '1.7.24~ds1', False, 'registry.k8s.io/pause:3.8'),
    # 2.x reports the runtime plugin's config; the sandbox image lives in the images plugin.
    ('2.1.9', '2.1.9+unknown', True, None),
])
def test_the_real_answers_of_each_containerd(version, runtime_version, enable_cdi, sandbox):
    cri = engine(version)
    assert cri['present'] and cri['answers'] and cri['ready']
    assert (cri['runtime_name'], cri['version'], cri['skip']) == ('containerd', runtime_version, '')
    assert cri['runtimes'] == {'runc': {'type': 'io.containerd.runc.v2', 'options': cri['runtimes']['runc']['options']}}
    assert cri['runtimes']['runc']['options']['SystemdCgroup'] is False
    assert (cri['default_runtime'], cri['enable_cdi'], cri['sandbox_image']) == ('runc', enable_cdi, sandbox)


def test_why_the_layer_cannot_run():
    assert validation_cri_engine(None)['skip'].startswith('no crictl on the node')
    assert validation_cri_engine({'rc': 127, 'stdout': '', 'stderr': 'crictl: not found'})['present'] is False
    gone = {'rc': 1, 'stdout': '', 'stderr': 'validate service connection: validate CRI v1 runtime API for endpoint '
            '"unix:///run/containerd/containerd.sock": rpc error: code = Unavailable desc = connection error: desc = '
            '"transport: Error while dialing: dial unix /run/containerd/containerd.sock: connect: no such file or directory"'}
    assert validation_cri_engine(gone, None, ENDPOINT)['skip'].startswith('no CRI runtime listens at ' + ENDPOINT)
    no_cri = {'rc': 1, 'stdout': '', 'stderr': 'validate service connection: validate CRI v1 runtime API for endpoint '
              '"unix:///run/containerd/containerd.sock": rpc error: code = Unimplemented desc = unknown service '
              'runtime.v1.RuntimeService'}
    assert 'disabled_plugins = ["cri"]' in validation_cri_engine(no_cri, None, ENDPOINT)['skip']
    # Anything else is the runtime's trouble: the checks fail with what crictl said.
    refused = {'rc': 1, 'stdout': '', 'stderr': 'connect: connection refused'}
    cri = validation_cri_engine(refused, None, ENDPOINT)
    assert (cri['skip'], cri['answers']) == ('', False)
    checks = validation_cri_checks(FACTS, cri, validation_cri_plan(FACTS, cri, 'img'))
    assert [(c['name'], c['status']) for c in checks] == [('cri', 'fail')]
    assert checks[0]['detail'] == ('crictl cannot reach the runtime at %s: connect: connection refused '
                                   '(systemctl status containerd; journalctl -u containerd)' % ENDPOINT)


def test_the_pods_of_an_nvidia_node_on_containerd_2():
    cri = engine('2.1.9', {'nvidia': NVIDIA})
    cri['default_runtime'] = 'nvidia'
    plan = validation_cri_plan(FACTS, cri, 'docker.io/accel-test/busybox:1', toolkit_config='[nvidia-container-runtime]\nmode = "cdi"\n',
                               toolkit_version='NVIDIA Container Toolkit CLI version 1.20.0',
                               cdi_devices='nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all')
    assert plan['skip'] == ''
    visible, cdi = plan['cases']
    assert (visible['name'], visible['handler'], visible['env'], visible['requested'], visible['systemd_cgroup']) == (
        'cri_nvidia_visible_devices', 'nvidia', {'NVIDIA_VISIBLE_DEVICES': '1'}, [1], True)
    assert visible['expected_uuids'] == [gpus()[1]['uuid']]
    assert visible['path'] == 'the nvidia handler, the nvidia runtime in cdi mode'
    # The default handler, which here is nvidia's, and a CDI device in the CRI request.
    assert (cdi['name'], cdi['handler'], cdi['cdi_devices'], cdi['env'], cdi['skip'], cdi['systemd_cgroup']) == (
        'cri_nvidia_cdi', '', ['nvidia.com/gpu=1'], {}, '', True)


@pytest.mark.parametrize('version, config, skip', [
    ('1.6.20', {}, 'CDI devices through the CRI need containerd 1.7 or later (found 1.6.20~ds1)'),
    ('1.7.24', {}, "CDI is off in containerd's CRI plugin (enable_cdi = false): nvidia_container_toolkit_cdi: true turns it on"),
    ('1.7.24', {'enableCDI': True}, ''),
    ('2.1.9', {}, ''),
])
def test_cdi_through_the_cri_needs_containerd_1_7_and_enable_cdi(version, config, skip):
    cri = engine(version, {'nvidia': NVIDIA}, **config)
    cases = validation_cri_plan(FACTS, cri, 'img')['cases']
    assert cases[1]['skip'] == skip


def test_a_spec_that_does_not_name_the_device_skips_the_cdi_pod():
    plan = validation_cri_plan(FACTS, engine('2.1.9', {'nvidia': NVIDIA}), 'img', cdi_devices='nvidia.com/gpu=0\n')
    assert plan['cases'][1]['skip'] == 'no CDI spec on this node names nvidia.com/gpu=1 (nvidia-ctk cdi list)'


def test_the_hardened_toolkit_takes_the_devices_as_volume_mounts():
    config = ('accept-nvidia-visible-devices-as-volume-mounts = true\n'
              'accept-nvidia-visible-devices-envvar-when-unprivileged = false\n')
    visible = validation_cri_plan(FACTS, engine('2.1.9', {'nvidia': NVIDIA}), 'img', toolkit_config=config)['cases'][0]
    assert visible['env'] == {'NVIDIA_VISIBLE_DEVICES': '/var/run/nvidia-container-devices'}
    assert visible['mounts'] == [{'host_path': '/dev/null', 'container_path': '/var/run/nvidia-container-devices/1'}]


@pytest.mark.parametrize('cri, kwargs, skip', [
    (validation_cri_engine(None), {}, 'no crictl on the node'),
    (engine('1.7.24'), {'check_mode': True, 'image_present': False}, 'check mode pulls no image'),
    (engine('1.7.24'), {'image': ''}, 'accelerator_validation_image is not set'),
])
def test_the_plan_says_why_no_pod_runs(cri, kwargs, skip):
    kwargs.setdefault('image', 'img')
    plan = validation_cri_plan(FACTS, cri, **kwargs)
    assert plan['skip'].startswith(skip) and plan['cases'] == []
    checks = validation_cri_checks(FACTS, cri, plan)
    assert checks[-1]['status'] == 'skip' and checks[-1]['detail'].startswith('skipped: ' + skip)


def test_neuron_pods_take_the_oci_neuron_handler_where_containerd_has_it():
    facts = {'vendors': ['neuron'], 'neuron': {'devices': [{'index': 0}, {'index': 1}]}}
    hook = validation_cri_plan(facts, engine('1.7.24', {'oci-neuron': {'BinaryName': '/usr/local/bin/oci_neuron_hook_wrapper.sh'}}), 'img')
    assert [(c['name'], c['handler'], c['env'], c['devices']) for c in hook['cases']] == [
        ('cri_neuron_oci_hook', 'oci-neuron', {'AWS_NEURON_VISIBLE_DEVICES': '0'}, [])]
    device = validation_cri_plan(facts, engine('1.7.24'), 'img')
    assert [(c['name'], c['handler'], c['devices']) for c in device['cases']] == [('cri_neuron_device', '', ['/dev/neuron0'])]


def run(case, output, status=0, msg=None):
    result = {'item': case, 'status': status, 'container': {'Output': output}, 'failed': status != 0}
    if msg:
        result.update(failed=True, msg=msg)
        del result['status']
    return result


def test_the_checks_judge_each_pod_and_a_missing_handler_fails_with_containerds_error():
    cri = engine('1.6.20', {'nvidia': NVIDIA})
    plan = validation_cri_plan(FACTS, cri, 'img')
    seen = 'GPU 0: NVIDIA H200 (UUID: %s)\n' % gpus()[1]['uuid']
    runs = {'results': [run(plan['cases'][0], seen), {'item': plan['cases'][1], 'skipped': True}]}
    checks = {c['name']: c for c in validation_cri_checks(FACTS, cri, plan, runs)}
    assert [c['status'] for c in checks.values()] == ['pass', 'pass', 'pass', 'skip', 'pass']
    assert checks['cri']['detail'] == 'containerd 1.6.20~ds1 answers through the CRI at %s, default runtime runc' % ENDPOINT
    assert checks['cri_runtime_nvidia']['detail'] == "containerd's CRI has the runtime handler nvidia"
    assert checks['cri_nvidia_visible_devices']['detail'] == (
        'nvidia-smi -L in a container (crictl runp runtime handler nvidia, NVIDIA_VISIBLE_DEVICES=1, through the nvidia '
        'handler, the nvidia runtime in legacy mode) sees 1 of 2 GPU(s), the 1 asked for')
    assert checks['cri_nvidia_restriction']['layer'] == 'cri'
    # The handler a RuntimeClass names, missing: the check says so, and the pod fails with containerd's words.
    missing = validation_cri_plan(FACTS, cri, 'img', nvidia_runtime='nvidia-missing')
    error = ('crictl runp: time="2026-11-27T11:30:00Z" level=fatal msg="run pod sandbox: rpc error: code = Unknown desc = '
             'failed to get sandbox runtime: no runtime for \\"nvidia-missing\\" is configured"').replace('\\"', '"')
    runs = {'results': [run(missing['cases'][0], '', msg=error), {'item': missing['cases'][1], 'skipped': True}]}
    checks = {c['name']: c for c in validation_cri_checks(FACTS, cri, missing, runs, nvidia_runtime='nvidia-missing')}
    assert checks['cri_runtime_nvidia-missing']['status'] == 'fail'
    assert checks['cri_runtime_nvidia-missing']['detail'].startswith(
        "containerd's CRI has no runtime handler nvidia-missing (it has nvidia, runc)")
    detail = checks['cri_nvidia_visible_devices']['detail']
    assert checks['cri_nvidia_visible_devices']['status'] == 'fail'
    assert 'no runtime for "nvidia-missing" is configured' in detail
    assert 'containerd has no runtime under that handler name: register it' in detail


def test_the_crictl_files_have_the_cri_field_names():
    assert pod_config('p', 'u', '/var/log/x', True) == {
        'metadata': {'name': 'p', 'namespace': 'accel-nodes', 'uid': 'u', 'attempt': 0}, 'log_directory': '/var/log/x',
        'linux': {'cgroup_parent': 'accel_nodes_validation.slice', 'security_context': {'namespace_options': {'network': 2}}}}
    assert pod_config('p', 'u', '/l', False)['linux']['cgroup_parent'] == '/accel-nodes-validation'
    config = container_config('c', 'img', ['nvidia-smi', '-L'], {'A': 1}, ['/dev/neuron0'], ['nvidia.com/gpu=0'],
                              [{'host_path': '/dev/null', 'container_path': '/x'}], {'k': 'v'})
    assert config == {
        'metadata': {'name': 'c'}, 'image': {'image': 'img'}, 'command': ['nvidia-smi', '-L'],
        'envs': [{'key': 'A', 'value': '1'}],
        'devices': [{'host_path': '/dev/neuron0', 'container_path': '/dev/neuron0', 'permissions': 'rwm'}],
        'CDI_devices': [{'name': 'nvidia.com/gpu=0'}], 'mounts': [{'host_path': '/dev/null', 'container_path': '/x'}],
        'annotations': {'k': 'v'}, 'log_path': 'c.log', 'linux': {}}


def test_parsers_take_what_they_cannot_read():
    assert parse_version('') == {}
    assert parse_version((CRI / 'containerd-2.1.9-version.txt').read_text())['RuntimeVersion'] == '2.1.9+unknown'
    assert parse_info('not json')['runtimes'] == {}
    assert parse_info('[]')['ready'] is False
    assert hints('failed to get sandbox image "registry.k8s.io/pause:3.8": failed to pull image')[0].startswith(
        'containerd cannot find the pod sandbox (pause) image')


def test_bad_input_and_exports():
    with pytest.raises(AnsibleFilterError, match='validation_cri_plan: needs'):
        validation_cri_plan(None, {}, 'img')
    assert set(FilterModule().filters()) == {'validation_cri_engine', 'validation_cri_plan', 'validation_cri_checks'}


def test_crictls_fatal_message_is_unquoted():
    # What crictl 1.36.0 wrote on stderr against containerd 1.6.20 for a handler it does not have (Molecule,
    # nvidia_container_toolkit_containerd, 2026-11-27).
    stderr = ('time="2026-11-27T11:43:50Z" level=warning msg="Config \\"/etc/crictl.yaml\\" does not exist, trying next: '
              '\\"/usr/local/bin/crictl.yaml\\""\n'
              'E1127 11:43:50.458008    3217 remote_runtime.go:237] "RunPodSandbox from runtime service failed" err="rpc '
              'error: code = Unknown desc = failed to get sandbox runtime: no runtime for \\"nvidia-missing\\" is configured"\n'
              'time="2026-11-27T11:43:50Z" level=fatal msg="run pod sandbox: rpc error: code = Unknown desc = failed to get '
              'sandbox runtime: no runtime for \\"nvidia-missing\\" is configured"\n')
    said = crictl_error(stderr)
    assert said == ('run pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for '
                    '"nvidia-missing" is configured')
    assert hints(said)[0].startswith('containerd has no runtime under that handler name')
    assert crictl_error('time="x" level=warning msg="w"\nsomething broke\n') == 'something broke'
    assert crictl_error('') == ''
