# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_containers import (
    runtime_mode, toolkit_mode, validation_container_checks, validation_container_plan)

FIXTURES = Path(__file__).parents[3] / 'fixtures'
# Real captures: the facts of the H200 host, and config.toml of toolkit 1.17.6 (mode "legacy") and 1.18 (mode "auto").
H200 = json.loads((FIXTURES / 'facts' / 'h200-real-run.json').read_text())['ansible_facts']['accelerators']
TOOLKIT_LEGACY = (FIXTURES / 'toml' / 'nvidia-container-toolkit-1.17.6.toml').read_text()
TOOLKIT_AUTO = (FIXTURES / 'toml' / 'nvidia-container-toolkit-1.18-rpm.toml').read_text()
TOOLKIT_CDI = TOOLKIT_LEGACY.replace('mode = "legacy"', 'mode = "cdi"')

# nvidia-smi's own message when it cannot load NVML, as a container printed it
# in an image without an ld cache (issue 13; NVIDIA/nvidia-docker#1163).
NO_NVML = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
           "Display Driver is properly installed and present in your system.\n"
           "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n")
# The hook's refusal outside legacy mode (toolkit 1.17.8 cmd/nvidia-container-runtime-hook/main.go), as Docker wraps it.
HOOK_REFUSED = ('Error response from daemon: failed to create task for container: failed to create shim task: OCI '
                'runtime create failed: runc create failed: unable to start container process: error during container '
                'init: error running prestart hook #0: exit status 1, stdout: , stderr: invoking the NVIDIA Container '
                'Runtime Hook directly (e.g. specifying the docker --gpus flag) is not supported. Please use the NVIDIA '
                'Container Runtime (e.g. specify the --runtime=nvidia flag) instead.: unknown')

# Docker 20.10 (Debian 12), which has no CDI, as validation_engine describes it.
RUNC = {'present': True, 'answers': True, 'version': '20.10.24+dfsg1', 'default_runtime': 'runc',
        'runtimes': ['io.containerd.runc.v2', 'nvidia', 'runc'], 'neuron_mode': 'device', 'cdi_spec_dirs': []}
# Docker 28.5 (forky's), with CDI on by default.
DOCKER_28 = dict(RUNC, version='28.5.2+dfsg4', cdi_spec_dirs=['/etc/cdi', '/var/run/cdi'])
# What nvidia-ctk cdi list prints (stdout) where a spec names the devices of one GPU.
CDI_DEVICES = 'nvidia.com/gpu=0\nnvidia.com/gpu=GPU-6d0a6ec1-4fa8-4b7d-b24e-4d8c9c7f9a01\nnvidia.com/gpu=all\n'
HOOK_PATH = "Docker's nvidia driver: nvidia-container-runtime-hook, in legacy mode (nvidia-container-cli)"
NVIDIA_DEFAULT = dict(RUNC, default_runtime='nvidia')


def gpus(count):
    return [{'index': i, 'name': 'Tesla V100-SXM2-16GB', 'uuid': 'GPU-1a5e2b3c-0000-4000-8000-00000000000%d' % i}
            for i in range(count)]


def nvidia_facts(count):
    facts = copy.deepcopy(H200)
    facts['nvidia']['gpus'] = gpus(count)
    return facts


def plan(facts, engine=None, config=TOOLKIT_LEGACY, **kwargs):
    return validation_container_plan(facts, engine=engine or RUNC, image='accel-test/busybox:1', toolkit_config=config, **kwargs)


def smi_list(facts, indices):
    """nvidia-smi -L in a container that got the GPUs at these host indices: numbered from 0, the host's UUIDs."""
    return ''.join('GPU %d: %s (UUID: %s)\n' % (n, facts['nvidia']['gpus'][i]['name'], facts['nvidia']['gpus'][i]['uuid'])
                   for n, i in enumerate(indices))


def run_all(cases, facts, see=None, **override):
    """Loop results as community.docker.docker_container with failed_when: false returns them; each container sees
    what it asked for unless see(case) says otherwise."""
    results = []
    for case in cases:
        if case['skip']:
            results.append({'skipped': True, 'item': case, 'changed': False, 'false_condition': 'not item.skip'})
            continue
        result = {'item': case, 'changed': False, 'failed': False, 'status': 0,
                  'container': {'Output': smi_list(facts, see(case) if see else case['requested'])}}
        result.update(override.get(case['name'], {}))
        results.append(result)
    return results


def by_name(checks):
    return {check['name']: check for check in checks}


@pytest.mark.parametrize('config, mode', [
    (TOOLKIT_LEGACY, 'legacy'),
    (TOOLKIT_AUTO, 'auto'),
    (TOOLKIT_CDI, 'cdi'),
    (None, 'auto'),  # no config.toml: the toolkit's default
    ('[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n', 'auto'),
    ('mode = cdi\n[', None),
])
def test_toolkit_mode(config, mode):
    assert toolkit_mode(config) == mode


def test_four_gpus_in_legacy_mode_take_every_path_as_typed():
    facts = nvidia_facts(4)
    result = plan(facts)
    assert result['skip'] == '' and result['toolkit_mode'] == 'legacy'
    cases = by_name(result['cases'])
    assert list(cases) == ['container_nvidia_gpus_all', 'container_nvidia_gpus_2', 'container_nvidia_gpus_device',
                           'container_nvidia_visible_devices', 'container_nvidia_cdi_all']
    # --gpus as the docker CLI sends it, through the default runtime (Docker's own hook in legacy mode).
    assert cases['container_nvidia_gpus_all']['device_requests'] == [{'count': -1, 'capabilities': [['gpu']]}]
    assert cases['container_nvidia_gpus_2']['device_requests'] == [{'count': 2, 'capabilities': [['gpu']]}]
    assert cases['container_nvidia_gpus_device']['device_requests'] == [{'device_ids': ['0', '1'], 'capabilities': [['gpu']]}]
    assert [cases[name]['runtime'] for name in cases] == ['', '', '', 'nvidia', '']
    assert [cases[name]['how'] for name in cases] == [
        '--gpus all', '--gpus 2', '--gpus \'"device=0,1"\'', '--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=3',
        '--device nvidia.com/gpu=all']
    assert [cases[name]['requested'] for name in cases] == [[0, 1, 2, 3], [0, 1], [0, 1], [3], [0, 1, 2, 3]]
    # Which path each check takes: --gpus through Docker's hook, the variable through the runtime, in legacy mode.
    assert [cases[name]['path'] for name in cases][:4] == [HOOK_PATH] * 3 + [
        'the nvidia runtime in legacy mode (its hook runs nvidia-container-cli)']
    # Docker 20.10 has no CDI: the path users type on newer Docker is a skip that says so.
    assert cases['container_nvidia_cdi_all']['skip'] == (
        'Docker 20.10.24+dfsg1 has no CDI: --device nvidia.com/gpu=all needs Docker 25.0 or later')
    assert cases['container_nvidia_visible_devices']['env'] == {'NVIDIA_VISIBLE_DEVICES': '3'}
    assert cases['container_nvidia_visible_devices']['expected_uuids'] == [facts['nvidia']['gpus'][3]['uuid']]
    assert all(case['command'] == ['nvidia-smi', '-L'] and case['total'] == 4 and case['skip'] == ''
               for case in result['cases'][:4])


def test_four_gpus_pass_and_show_restriction():
    facts = nvidia_facts(4)
    checks = by_name(validation_container_checks(run_all(plan(facts)['cases'], facts)))
    assert [check['status'] for check in checks.values()] == ['pass'] * 4 + ['skip', 'pass']
    assert list(checks)[-1] == 'container_nvidia_restriction'
    assert checks['container_nvidia_restriction']['measured']['shown_by'] == [
        'container_nvidia_gpus_2', 'container_nvidia_gpus_device', 'container_nvidia_visible_devices']
    assert checks['container_nvidia_gpus_2']['measured'] == {
        'seen': 2, 'expected': 2, 'total': 4, 'requested': [0, 1], 'runtime': None, 'exit_status': 0,
        'path': HOOK_PATH, 'uuids': [gpu['uuid'] for gpu in facts['nvidia']['gpus'][:2]]}
    assert checks['container_nvidia_gpus_all']['detail'] == (
        'nvidia-smi -L in a container (docker run --gpus all, through %s) sees 4 of 4 GPU(s), the 4 asked for' % HOOK_PATH)


def test_one_gpu_cannot_show_restriction():
    """The H200 host: every request is all of its one GPU, so restriction is skipped with the reason, never claimed."""
    result = plan(H200)
    cases = by_name(result['cases'])
    assert cases['container_nvidia_gpus_2']['skip'] == 'the host has 1 GPU: --gpus 2 asks for more than there are'
    assert cases['container_nvidia_gpus_device']['device_requests'] == [{'device_ids': ['0'], 'capabilities': [['gpu']]}]
    assert cases['container_nvidia_visible_devices']['env'] == {'NVIDIA_VISIBLE_DEVICES': '0'}
    checks = by_name(validation_container_checks(run_all(result['cases'], H200)))
    assert {name: check['status'] for name, check in checks.items()} == {
        'container_nvidia_gpus_all': 'pass', 'container_nvidia_gpus_2': 'skip', 'container_nvidia_gpus_device': 'pass',
        'container_nvidia_visible_devices': 'pass', 'container_nvidia_cdi_all': 'skip',
        'container_nvidia_restriction': 'skip'}
    assert checks['container_nvidia_restriction']['detail'] == (
        'skipped: the host has 1 GPU(s): every request asks for all of them, so no container can show that the '
        'others are kept out')
    assert checks['container_nvidia_gpus_2']['detail'].startswith('skipped: the host has 1 GPU')


def test_two_gpus_show_restriction_with_the_variable_only():
    facts = nvidia_facts(2)
    checks = by_name(validation_container_checks(run_all(plan(facts)['cases'], facts)))
    assert checks['container_nvidia_restriction']['status'] == 'pass'
    assert checks['container_nvidia_restriction']['measured']['shown_by'] == ['container_nvidia_visible_devices']
    assert checks['container_nvidia_restriction']['detail'] == (
        'containers see only the GPU(s) they ask for: --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=1 saw 1 of 2')


def test_a_container_that_sees_every_gpu_fails_restriction():
    """A runtime that ignores the request: the count is wrong for --gpus 2, the UUIDs for the variable."""
    facts = nvidia_facts(4)
    ignore = {'container_nvidia_gpus_2': [0, 1, 2, 3], 'container_nvidia_visible_devices': [0]}
    results = run_all(plan(facts)['cases'], facts, see=lambda case: ignore.get(case['name'], case['requested']))
    checks = by_name(validation_container_checks(results))
    assert checks['container_nvidia_gpus_2']['status'] == 'fail'
    assert checks['container_nvidia_gpus_2']['detail'].startswith(
        'nvidia-smi -L in a container (docker run --gpus 2, through %s) sees 4 of 4 GPU(s), expected 2: exit 0 ' % HOOK_PATH)
    assert checks['container_nvidia_visible_devices']['status'] == 'fail'
    assert 'but not the ones asked for (GPU-1a5e2b3c-0000-4000-8000-000000000003)' in checks['container_nvidia_visible_devices']['detail']
    assert checks['container_nvidia_restriction']['status'] == 'fail'
    assert checks['container_nvidia_restriction']['detail'] == (
        'not shown: a container that asked for a part of the 4 GPU(s) did not see exactly those: --gpus 2; '
        '--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=3')


def test_counts_alone_judge_a_command_without_uuids():
    facts = nvidia_facts(4)
    results = run_all(plan(facts, nvidia_command=['sh', '-c', 'nvidia-smi -L | cut -d"(" -f1'])['cases'], facts)
    for result in results:
        if not result.get('skipped'):
            result['container']['Output'] = ''.join('GPU %d: Tesla V100-SXM2-16GB\n' % n
                                                    for n in range(len(result['item']['requested'])))
    checks = by_name(validation_container_checks(results))
    assert [name for name, check in checks.items() if check['status'] != 'pass'] == ['container_nvidia_cdi_all']
    assert checks['container_nvidia_gpus_2']['measured']['uuids'] is None


@pytest.mark.parametrize('engine, config', [(RUNC, TOOLKIT_CDI), (dict(RUNC, default_runtime=None), TOOLKIT_CDI)])
def test_cdi_mode_without_nvidia_as_default_names_the_runtime_and_says_why(engine, config):
    result = plan(H200, engine=engine, config=config)
    cases = result['cases']
    assert cases[0]['name'] == 'container_nvidia_gpus_default_runtime'
    assert cases[0]['skip'].startswith('docker run --gpus without --runtime=nvidia fails on this node: the toolkit is in '
                                       'cdi mode and Docker\'s default runtime is ')
    assert 'nvidia_container_toolkit_default_runtime: true' in cases[0]['skip']
    gpus_cases = [case for case in cases[1:] if case['device_requests'] and not case['skip']]
    assert [case['how'] for case in gpus_cases] == ['--runtime=nvidia --gpus all', '--runtime=nvidia --gpus \'"device=0"\'']
    assert {case['runtime'] for case in gpus_cases} == {'nvidia'}
    checks = by_name(validation_container_checks(run_all(cases, H200)))
    assert checks['container_nvidia_gpus_default_runtime']['status'] == 'skip'
    assert checks['container_nvidia_gpus_all']['status'] == 'pass'


def test_cdi_mode_with_nvidia_as_default_takes_gpus_as_typed():
    cases = plan(nvidia_facts(4), engine=NVIDIA_DEFAULT, config=TOOLKIT_CDI)['cases']
    assert cases[0]['name'] == 'container_nvidia_gpus_all'
    assert [case['runtime'] for case in cases] == ['', '', '', 'nvidia', '']
    # Under the nvidia runtime, by default, --gpus takes the runtime's path.
    assert cases[0]['path'] == 'the nvidia runtime in cdi mode (the CDI spec on the node)'


def test_an_image_without_an_ld_cache_is_named_with_the_fix():
    results = run_all(plan(H200, config=TOOLKIT_CDI, engine=NVIDIA_DEFAULT)['cases'], H200)
    for result in results:
        if not result.get('skipped'):
            result.update(status=12, container={'Output': NO_NVML})
    checks = validation_container_checks(results)
    failed = [check for check in checks if check['status'] == 'fail']
    assert len(failed) == 3
    for check in failed:
        assert 'sees 0 of 1 GPU(s), expected 1: exit 12 NVIDIA-SMI couldn\'t find libnvidia-ml.so' in check['detail']
        assert 'the image has no ld cache' in check['detail']
        assert '/etc/ld.so.cache' in check['detail'] and 'RUN ldconfig' in check['detail']
        assert 'LD_LIBRARY_PATH' in check['detail']


def test_the_hooks_refusal_is_explained():
    results = run_all(plan(H200)['cases'], H200)
    results[0].update(status=None, container={}, msg=HOOK_REFUSED)
    check = validation_container_checks(results)[0]
    assert check['status'] == 'fail' and check['measured']['exit_status'] is None
    assert 'expected 1: Error response from daemon' in check['detail']
    assert check['detail'].endswith(': the toolkit is not in legacy mode, where docker run --gpus works only through '
                                    'the nvidia runtime: make nvidia Docker\'s default runtime '
                                    '(accel.nodes.nvidia_container_toolkit: nvidia_container_toolkit_default_runtime: true)')


def test_docker_without_the_nvidia_device_driver_is_explained():
    results = run_all(plan(H200)['cases'], H200)
    results[0].update(status=None, container={},
                      msg='Error starting container: could not select device driver "" with capabilities: [[gpu]]')
    check = validation_container_checks(results)[0]
    assert check['status'] == 'fail'
    assert 'nvidia-container-runtime-hook is on its PATH as it starts' in check['detail']


@pytest.mark.parametrize('engine, kwargs, skip', [
    ({'present': False, 'answers': False}, {}, 'no container engine'),
    ({'present': True, 'answers': False}, {}, 'Docker does not answer'),
    (RUNC, {'image': ''}, 'accelerator_validation_image is not set'),
    (RUNC, {'check_mode': True, 'image_present': False},
     'check mode pulls no image, and accel-test/busybox:1 is not on the node: run without --check to pull it, '
     'or load it on the node first'),
])
def test_reasons_to_run_no_container(engine, kwargs, skip):
    arguments = dict(engine=engine, image='accel-test/busybox:1', toolkit_config=TOOLKIT_LEGACY)
    arguments.update(kwargs)
    assert validation_container_plan(H200, **arguments) == {'skip': skip, 'toolkit_mode': 'legacy',
                                                            'runtime_mode': 'legacy', 'cases': []}


def test_no_accelerator_runs_no_container():
    facts = copy.deepcopy(H200)
    facts['vendors'] = []
    assert plan(facts)['skip'] == 'no accelerator to test'


def test_check_mode_runs_the_containers_with_the_image_on_the_node():
    assert plan(H200, check_mode=True, image_present=True)['cases'] == plan(H200)['cases']


def test_no_gpu_in_the_facts_is_a_skip_not_a_silence():
    checks = validation_container_checks(run_all(plan(nvidia_facts(0))['cases'], nvidia_facts(0)))
    assert [(check['name'], check['status']) for check in checks] == [
        ('container_nvidia_gpus_all', 'skip'), ('container_nvidia_restriction', 'skip')]
    assert checks[1]['detail'] == 'skipped: no nvidia container ran'


def neuron_facts(count):
    facts = copy.deepcopy(H200)
    facts['vendors'] = ['neuron']
    facts['neuron']['devices'] = [{'index': i, 'name': 'Inferentia'} for i in range(count)]
    return facts


def neuron_ls(count):
    return json.dumps([{'neuron_device': i, 'nc_count': 4} for i in range(count)])


@pytest.mark.parametrize('mode, how, runtime, env, devices', [
    ('oci_hook', '--runtime=oci-neuron -e AWS_NEURON_VISIBLE_DEVICES=0', 'oci-neuron', {'AWS_NEURON_VISIBLE_DEVICES': '0'}, []),
    ('device', '--device=/dev/neuron0', '', {}, ['/dev/neuron0:/dev/neuron0']),
])
def test_neuron_device_zero(mode, how, runtime, env, devices):
    (case,) = plan(neuron_facts(4), engine=dict(RUNC, neuron_mode=mode))['cases']
    assert (case['name'], case['how'], case['runtime'], case['env'], case['devices']) == (
        'container_neuron_' + mode, how, runtime, env, devices)
    assert case['requested'] == [0] and case['total'] == 4 and case['command'] == ['neuron-ls', '-j']


@pytest.mark.parametrize('count, seen, statuses', [
    (4, 1, ['pass', 'pass']),
    (4, 4, ['fail', 'fail']),
    (1, 1, ['pass', 'skip']),
])
def test_neuron_restriction(count, seen, statuses):
    (case,) = plan(neuron_facts(count), engine=dict(RUNC, neuron_mode='oci_hook'))['cases']
    checks = validation_container_checks([{'item': case, 'status': 0, 'container': {'Output': neuron_ls(seen)}}])
    assert [check['name'] for check in checks] == ['container_neuron_oci_hook', 'container_neuron_restriction']
    assert [check['status'] for check in checks] == statuses


def test_bad_input_says_what_is_wrong():
    with pytest.raises(AnsibleFilterError, match='needs the accelerator facts and the engine state'):
        validation_container_plan(None, engine=RUNC, image='x')
    with pytest.raises(AnsibleFilterError, match='needs the results list'):
        validation_container_checks({'results': []})
    with pytest.raises(AnsibleFilterError, match='each result needs the case'):
        validation_container_checks([{'item': 'container_nvidia_all'}])


# -- toolkit 1.18 and later, Docker 25 and later ----------------------------------------------

@pytest.mark.parametrize('mode, version, resolved', [
    ('auto', 'NVIDIA Container Toolkit CLI version 1.20.0\ncommit: 5505e2f', 'jit-cdi'),  # v1.20.0 internal/info/auto.go
    ('auto', 'NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80', 'legacy'),
    ('auto', None, 'legacy'),
    ('cdi', 'NVIDIA Container Toolkit CLI version 1.20.0', 'cdi'),
    ('legacy', 'NVIDIA Container Toolkit CLI version 1.20.0', 'legacy'),
])
def test_the_runtime_resolves_auto_as_its_version_does(mode, version, resolved):
    assert runtime_mode(mode, version) == resolved


def test_toolkit_1_20_in_auto_mode_takes_gpus_through_the_hook_and_the_variable_through_jit_cdi():
    cases = by_name(plan(H200, config=TOOLKIT_AUTO, toolkit_version='NVIDIA Container Toolkit CLI version 1.20.0')['cases'])
    assert cases['container_nvidia_gpus_all']['runtime'] == '' and cases['container_nvidia_gpus_all']['path'] == HOOK_PATH
    assert cases['container_nvidia_visible_devices']['path'] == (
        'the nvidia runtime in jit-cdi mode (a CDI spec made for the container)')


def test_docker_28_runs_the_cdi_path_where_a_spec_names_the_gpus():
    cases = by_name(plan(H200, engine=DOCKER_28, cdi_devices=CDI_DEVICES)['cases'])
    case = cases['container_nvidia_cdi_all']
    assert case['skip'] == '' and case['device_requests'] == [{'driver': 'cdi', 'device_ids': ['nvidia.com/gpu=all']}]
    assert case['requested'] == [0] and case['expected_uuids'] == [H200['nvidia']['gpus'][0]['uuid']]
    checks = by_name(validation_container_checks(run_all(list(cases.values()), H200)))
    assert checks['container_nvidia_cdi_all']['status'] == 'pass'
    assert checks['container_nvidia_cdi_all']['detail'].startswith(
        "nvidia-smi -L in a container (docker run --device nvidia.com/gpu=all, through Docker's CDI driver")


@pytest.mark.parametrize('engine, devices, reason', [
    (DOCKER_28, '', 'no CDI spec on this node names nvidia.com/gpu=all (nvidia-ctk cdi list)'),
    (dict(DOCKER_28, version='26.1.5+dfsg1', cdi_spec_dirs=[]), CDI_DEVICES, 'CDI is off in Docker 26.1.5+dfsg1'),
])
def test_the_cdi_path_says_why_it_cannot_run(engine, devices, reason):
    case = by_name(plan(H200, engine=engine, cdi_devices=devices)['cases'])['container_nvidia_cdi_all']
    assert case['skip'].startswith(reason)


def test_docker_29_2_takes_gpus_through_cdi_first():
    # moby#50228 (29.2): --gpus goes to the CDI driver where a spec names the device, else to the hook.
    engine = dict(DOCKER_28, version='29.2.0')
    case = by_name(plan(H200, engine=engine, cdi_devices=CDI_DEVICES)['cases'])['container_nvidia_gpus_all']
    assert case['path'].startswith("Docker's CDI driver where a spec names the GPUs")
