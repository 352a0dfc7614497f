# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accelerator_validation_plan: what the validation role runs, from its probe, as the filters it composes decide."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_plan import accelerator_validation_plan as plan

sys.path.insert(0, os.path.dirname(__file__))
from test_validation_checks import H200, docker_info, inf1_facts, p3_facts  # noqa: E402  pylint: disable=wrong-import-position

CONFIG = '/etc/nvidia-container-runtime/config.toml'
SETTINGS = {'layers': ['host', 'runtime', 'container', 'cri'], 'skip': {}, 'image': 'ubuntu:24.04',
            'nvidia_config_path': CONFIG, 'nvidia_runtime': 'nvidia', 'nvidia_command': ['nvidia-smi', '-L'],
            'neuron_runtime': 'oci-neuron', 'neuron_command': ['neuron-ls', '-j'], 'neuron_mode': 'auto',
            'cri_endpoint': 'unix:///run/containerd/containerd.sock'}
CRI_MISSING = {'rc': 127, 'stdout': '', 'stderr': 'crictl: command not found'}


def probe(info=None, config='[nvidia-container-runtime]\nmode = "legacy"\n', image_rc=0, cdi=None, **more):
    commands = {'docker_info': info or docker_info(), 'image': {'rc': image_rc, 'stdout': '', 'stderr': ''},
                'toolkit_version': {'rc': 0, 'stdout': 'NVIDIA Container Toolkit CLI version 1.17.8', 'stderr': ''},
                'cri_version': CRI_MISSING, 'cri_info': CRI_MISSING}
    if cdi is not None:
        commands['cdi_devices'] = cdi
    commands.update(more)
    return {'commands': commands, 'paths': {CONFIG: {'exists': True, 'type': 'file', 'text': config}},
            'cuda': {'checks': []}}


def test_four_v100s_run_four_containers_and_no_pod_without_crictl():
    got = plan(p3_facts(), probe(), SETTINGS)
    assert got['run'] == {'container': True, 'cri': False}
    assert got['containers']['toolkit_mode'] == 'legacy' and len(got['containers']['cases']) >= 4
    assert got['engine']['present'] and got['cri']['present'] is False
    assert got['summary'].startswith('layers host, runtime, container, cri; containers: ')
    assert got['cuda'] == {'checks': []} and got['docker_info']['rc'] == 0


def test_a_skipped_layer_runs_nothing_and_says_why():
    got = plan(p3_facts(), probe(), dict(SETTINGS, skip={'container': 'no image here'}))
    assert got['run']['container'] is False and got['run_layers'] == ['host', 'runtime', 'cri']
    assert 'containers: layer skipped' in got['summary'] or 'containers: ' in got['summary']


def test_check_mode_without_the_image_runs_no_container():
    got = plan(p3_facts(), probe(image_rc=1), SETTINGS, check_mode=True)
    assert got['run']['container'] is False and 'check mode pulls no image' in got['containers']['skip']


def test_cdi_devices_are_read_only_where_nvidia_ctk_listed_them():
    listed = {'rc': 0, 'stdout': 'nvidia.com/gpu=0\nnvidia.com/gpu=all\n', 'stderr': ''}
    cdi_config = '[nvidia-container-runtime]\nmode = "cdi"\n'
    info = docker_info(version='28.2.2')
    info['stdout'] = json.dumps(dict(json.loads(info['stdout']), CDISpecDirs=['/etc/cdi', '/var/run/cdi']))
    with_list = plan(p3_facts(1), probe(info=info, config=cdi_config, cdi=listed), SETTINGS)
    failed = plan(p3_facts(1), probe(info=info, config=cdi_config, cdi=dict(listed, rc=1)), SETTINGS)
    assert with_list['containers']['toolkit_mode'] == 'cdi'
    assert with_list['containers']['cases'] != failed['containers']['cases']


def test_a_node_without_docker_skips_the_container_layer():
    got = plan(H200, probe(info={'rc': 127, 'stdout': '', 'stderr': 'docker: command not found'}), SETTINGS)
    assert got['run']['container'] is False and got['containers']['skip'] == 'no container engine'


def test_neuron_in_device_mode():
    got = plan(inf1_facts(), probe(), dict(SETTINGS, neuron_mode='device'))
    assert got['run']['container'] is True
    assert all(case['vendor'] == 'neuron' for case in got['containers']['cases'])


def test_a_probe_that_did_not_run_has_no_answers():
    got = plan(p3_facts(), {'skipped': True, 'changed': False}, dict(SETTINGS, layers=['host']))
    assert got['run'] == {'container': False, 'cri': False} and got['engine']['present'] is False


def test_bad_input_says_what_is_wrong():
    with pytest.raises(AnsibleFilterError, match='needs the accelerator facts'):
        plan(None, probe(), SETTINGS)
    assert json.dumps(plan(p3_facts(), probe(), SETTINGS))  # the plan is plain data, for the log
