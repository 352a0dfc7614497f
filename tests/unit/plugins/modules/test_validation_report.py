# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ansible.plugins.filter.core import to_nice_json

from ansible_collections.accel.nodes.plugins.modules import validation_report

FIXTURE = Path(__file__).parents[3] / 'fixtures' / 'validation' / 'h200-validate.json'

# What roles/accelerator_validation/tasks/report.yml passes for the H200 report.
FEATURES = {
    'accel-nodes.io/validated': 'true',
    'accel-nodes.io/vendors': 'nvidia',
    'accel-nodes.io/gpu-count': 1,
    'accel-nodes.io/neuron-device-count': 0,
}

# The file the role wrote with ansible.builtin.copy before this module existed.
FEATURE_FILE = (
    '# Written by accel.nodes.accelerator_validation; read by node-feature-discovery.\n'
    'accel-nodes.io/validated=true\n'
    'accel-nodes.io/vendors=nvidia\n'
    'accel-nodes.io/gpu-count=1\n'
    'accel-nodes.io/neuron-device-count=0\n'
)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def run(module_in_tmp):
    return module_in_tmp(validation_report.main)


@pytest.fixture
def report():
    return json.loads(FIXTURE.read_text(encoding='utf-8'))


@pytest.fixture
def paths(tmp_path):
    return (tmp_path / 'var' / 'lib' / 'accel-nodes' / 'validation.json',
            tmp_path / 'etc' / 'kubernetes' / 'node-feature-discovery' / 'features.d' / 'accel-nodes')


def test_writes_both_files_and_their_parents(run, report, paths):
    path, nfd_path = paths
    result = run(path=str(path), report=report, nfd_path=str(nfd_path), nfd_features=FEATURES)
    assert result == {'changed': True, 'path': str(path), 'nfd_path': str(nfd_path)}
    assert path.read_text(encoding='utf-8') == FIXTURE.read_text(encoding='utf-8')
    assert nfd_path.read_text(encoding='utf-8') == FEATURE_FILE
    assert mode_of(path) == mode_of(nfd_path) == 0o644
    for directory in (path.parent, path.parent.parent, nfd_path.parent, nfd_path.parent.parent.parent):
        assert mode_of(directory) == 0o755


def test_report_is_what_to_nice_json_gave(run, report, tmp_path):
    report['checks'][0]['detail'] = 'found nvidia \u2013 1 GPU, \u201cH200\u201d'
    path = tmp_path / 'validation.json'
    run(path=str(path), report=report)
    assert path.read_text(encoding='utf-8') == to_nice_json(report, indent=2) + '\n'
    assert path.read_bytes().isascii()


def test_rewriting_the_report_is_no_change(run, report, tmp_path):
    path = tmp_path / 'validation.json'
    run(path=str(path), report=report)
    path.chmod(0o600)
    report['timestamp'] = '2026-11-22T08:00:00Z'
    result = run(path=str(path), report=report, _ansible_diff=True)
    assert result['changed'] is False and 'diff' not in result
    assert json.loads(path.read_text())['timestamp'] == '2026-11-22T08:00:00Z'
    assert mode_of(path) == 0o644


def test_feature_file_changes_only_when_its_content_or_mode_does(run, report, paths):
    path, nfd_path = paths
    args = dict(path=str(path), report=report, nfd_path=str(nfd_path), nfd_features=FEATURES)
    assert run(**args)['changed'] is True
    assert run(**args)['changed'] is False
    nfd_path.chmod(0o600)
    assert run(**args)['changed'] is True
    assert mode_of(nfd_path) == 0o644
    failed = dict(FEATURES, **{'accel-nodes.io/validated': 'false'})
    result = run(**dict(args, nfd_features=failed, _ansible_diff=True))
    assert result['changed'] is True
    assert result['diff']['before'] == FEATURE_FILE
    assert result['diff']['after'] == FEATURE_FILE.replace('validated=true', 'validated=false')
    assert nfd_path.read_text() == result['diff']['after']


def test_check_mode_writes_nothing_and_says_what_would_change(run, report, paths):
    path, nfd_path = paths
    args = dict(path=str(path), report=report, nfd_path=str(nfd_path), nfd_features=FEATURES, _ansible_check_mode=True)
    result = run(**dict(args, _ansible_diff=True))
    assert result['changed'] is True
    assert result['diff']['after'] == FEATURE_FILE and result['diff']['before_header'].endswith('(absent)')
    assert not path.parent.parent.exists() and not nfd_path.parent.parent.parent.exists()

    run(**dict(args, _ansible_check_mode=False))
    written = path.read_bytes()
    report['timestamp'] = '2026-11-22T08:00:00Z'
    assert run(**args)['changed'] is False
    assert run(**dict(args, nfd_features=dict(FEATURES, **{'accel-nodes.io/gpu-count': 8})))['changed'] is True
    assert path.read_bytes() == written and nfd_path.read_text() == FEATURE_FILE


def test_feature_file_alone(run, paths):
    nfd_path = paths[1]
    result = run(nfd_path=str(nfd_path), nfd_features={'accel-nodes.io/validated': False})
    assert result == {'changed': True, 'path': None, 'nfd_path': str(nfd_path)}
    assert nfd_path.read_text().splitlines()[1:] == ['accel-nodes.io/validated=false']


@pytest.mark.parametrize('args, match', [
    ({'nfd_path': '/x'}, 'parameters are required together: nfd_path, nfd_features'),
    ({'path': '/x'}, 'parameters are required together: path, report'),
    ({}, 'one of the following is required: path, nfd_path'),
    ({'nfd_path': '/x', 'nfd_features': {'a=b': 'c'}}, 'the name must not contain "="'),
    ({'nfd_path': '/x', 'nfd_features': {'a': 'b\nc=d'}}, 'neither may contain a line break'),
    ({'nfd_path': '/x', 'nfd_features': {'a': ['b']}}, 'a must be a string, number or boolean, not list'),
])
def test_bad_arguments_fail_clearly(run, args, match):
    result = run(**args)
    assert result['failed'] is True
    assert match in result['msg']
