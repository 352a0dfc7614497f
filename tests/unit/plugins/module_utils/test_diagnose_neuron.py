# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The Neuron findings of accel.nodes.diagnose (issue 28), on the accelerator facts that accelerator_facts' own code
gathers from the documented inf1.6xlarge tree, and on AWS's own files for the OCI hook.
tests/fixtures/diagnose/neuron/README.md names each source."""

from __future__ import annotations

import os
import sys
import shutil
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.filter import diagnose
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _diagnose_neuron, _node_probe

sys.path.insert(0, os.path.dirname(__file__))
from diagnose_shape import check_shape, gather, ids  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
NEURON = FIXTURES / 'diagnose' / 'neuron'
FIND_INF1 = (NEURON / 'find-dev-inf1.6xlarge.txt').read_text()
PROBE_PATHS = _diagnose_neuron.PROBE['paths']


@pytest.fixture
def inf1_root(fact_roots, tmp_path):
    """A copy of the documented inf1.6xlarge tree, for tests that change it."""
    root = tmp_path / 'inf1.6xlarge'
    shutil.copytree(str(fact_roots / 'inf1.6xlarge'), str(root), symlinks=True)
    return root


def node_files(tmp_path, files):
    """node_probe's paths for PROBE's paths: files is {absolute path: (text or None, mode)}, the rest missing."""
    paths = {}
    for path in PROBE_PATHS:
        paths[path] = _node_probe.describe(str(tmp_path / 'missing'))
        paths[path]['path'] = path
    for path, (text, mode) in files.items():
        local = tmp_path / 'node' / path.lstrip('/')
        local.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            local.mkdir(exist_ok=True)
        else:
            local.write_text(text)
            local.chmod(mode)
        paths[path] = dict(_node_probe.describe(str(local)), path=path)
    return paths


def probe(accelerators, paths=None, packages=None, find=FIND_INF1, find_rc=0, oci_version=None):
    return {'ansible_facts': {'accelerators': accelerators}, 'paths': paths or {},
            'packages': packages if packages is not None else {},
            'commands': {'neuron_device_nodes': {'rc': find_rc, 'stdout': find, 'stderr': ''},
                         'neuron_oci_add_hooks_version': oci_version or {'rc': 127, 'stdout': '',
                                                                         'stderr': 'command not found'}}}


def dkms(version):
    return {'aws-neuronx-dkms': {'version': version, 'selection': 'hold', 'status': 'installed'}}


def loaded_paths(tmp_path):
    return node_files(tmp_path, {'/sys/module/neuron': (None, 0o755)})


# --- a healthy node, and nodes without Neuron devices ---------------------------------------------------------------

def test_the_documented_inf1_node_has_no_findings(fact_roots, tmp_path):
    facts = gather(fact_roots / 'inf1.6xlarge')
    assert [d['pci_device_id'] for d in facts['neuron']['devices']] == ['0x7064'] * 4
    assert facts['neuron']['driver_version'] == '2.19.64.0'
    assert _diagnose_neuron.findings(probe(facts, loaded_paths(tmp_path), dkms('2.19.64.0-dkms')), {}) == []


def test_a_node_without_neuron_devices_has_no_neuron_findings(fact_roots, tmp_path):
    """No module, no device node, AWS's daemon.json and no oci-add-hooks: still nothing, without Neuron devices."""
    facts = gather(fact_roots / 'p3.16xlarge')
    assert facts['neuron']['devices'] == []
    paths = node_files(tmp_path, {'/etc/docker/daemon.json': ((NEURON / 'docker-daemon.json').read_text(), 0o644)})
    assert _diagnose_neuron.findings(probe(facts, paths, dkms('2.31.7.0'), find=''), {}) == []


def test_the_probe_merges_with_the_other_areas_and_the_filter_runs_it(fact_roots, tmp_path):
    merged = diagnose.diagnose_probe({})
    assert _diagnose_neuron.SYS_MODULE in merged['paths']
    assert merged['commands']['neuron_device_nodes'][0] == 'find'
    result = probe(gather(fact_roots / 'inf1.6xlarge'), loaded_paths(tmp_path), dkms('2.31.7.0'))
    assert 'neuron.driver.inf1_unsupported' in ids(diagnose.diagnose_findings(result))


# --- the neuron module ------------------------------------------------------------------------------------------------

def test_devices_without_the_module_are_named_with_the_fix(inf1_root, tmp_path):
    """The documented tree with the module unloaded: no /sys/module/neuron, no neuron line in /proc/modules."""
    shutil.rmtree(str(inf1_root / 'sys' / 'module' / 'neuron'))
    modules = inf1_root / 'proc' / 'modules'
    modules.write_text(''.join(line for line in modules.read_text().splitlines(True) if not line.startswith('neuron ')))
    for node in (inf1_root / 'dev').iterdir():
        node.unlink()
    facts = gather(inf1_root)
    assert facts['observed']['kernel_modules'] == [] and facts['neuron']['driver_version'] is None
    found = _diagnose_neuron.findings(probe(facts, node_files(tmp_path, {}), dkms('2.19.64.0'), find=''), {})
    check_shape(found)
    assert ids(found) == ['neuron.module.not_loaded']
    assert found[0]['severity'] == _diagnose.BROKEN
    assert '4 Neuron device(s)' in found[0]['summary']
    assert 'PCI 0000:00:1c.0: Inferentia (1d0f:7064)' in found[0]['evidence']
    assert '/sys/module/neuron: missing' in found[0]['evidence']
    assert 'modprobe neuron' in found[0]['fix'] and 'accel.nodes.neuron_driver' in found[0]['fix']


def test_proc_modules_alone_counts_as_loaded(fact_roots, tmp_path):
    """/sys/module unread (a missing entry) but the module in /proc/modules: loaded."""
    facts = gather(fact_roots / 'inf1.6xlarge')
    assert facts['observed']['kernel_modules'] == ['neuron']
    assert _diagnose_neuron.findings(probe(facts, node_files(tmp_path, {}), dkms('2.19.64.0')), {}) == []


# --- the device nodes -------------------------------------------------------------------------------------------------

def test_a_missing_device_node_is_named(fact_roots, tmp_path):
    find = ''.join(line for line in FIND_INF1.splitlines(True) if not line.startswith('/dev/neuron2 '))
    found = _diagnose_neuron.findings(probe(gather(fact_roots / 'inf1.6xlarge'), loaded_paths(tmp_path),
                                            dkms('2.19.64.0'), find=find), {})
    check_shape(found)
    assert ids(found) == ['neuron.devices.missing']
    assert '3 Neuron device node(s) for 4' in found[0]['summary']
    assert '/dev: /dev/neuron0, /dev/neuron1, /dev/neuron3' in found[0]['evidence']
    assert 'modprobe -r neuron && modprobe neuron' in found[0]['fix']


def test_without_find_the_facts_device_nodes_count(inf1_root, tmp_path):
    (inf1_root / 'dev' / 'neuron3').unlink()
    found = _diagnose_neuron.findings(probe(gather(inf1_root), loaded_paths(tmp_path), dkms('2.19.64.0'),
                                            find='', find_rc=127), {})
    assert ids(found) == ['neuron.devices.missing']


def test_a_device_node_of_another_mode_is_named(fact_roots, tmp_path):
    find = FIND_INF1.replace('/dev/neuron1 666 c', '/dev/neuron1 600 c')
    facts = gather(fact_roots / 'inf1.6xlarge')
    found = _diagnose_neuron.findings(probe(facts, loaded_paths(tmp_path), dkms('2.19.64.0'), find=find), {})
    check_shape(found)
    assert ids(found) == ['neuron.devices.mode']
    assert found[0]['summary'].startswith('/dev/neuron1 has mode 0600, not 0666')
    assert 'accel.nodes.neuron_container_runtime' in found[0]['fix']
    # A node that limits the devices to a group on purpose says so in the options.
    group = FIND_INF1.replace(' 666 ', ' 660 ')
    assert _diagnose_neuron.findings(probe(facts, loaded_paths(tmp_path), dkms('2.19.64.0'), find=group),
                                     {'neuron_device_mode': '0660'}) == []


@pytest.mark.parametrize('value, mode', [(None, '0666'), ('', '0666'), ('660', '0660'), ('0660', '0660'), (0o660, '0660')])
def test_the_device_mode_option(value, mode):
    assert _diagnose_neuron.device_mode(value) == mode


# --- the driver line on Inf1 ------------------------------------------------------------------------------------------

def test_inf1_with_a_driver_after_2_24_loaded_is_broken(inf1_root, tmp_path):
    (inf1_root / 'sys' / 'module' / 'neuron' / 'version').write_text('2.31.7.0\n')
    found = _diagnose_neuron.findings(probe(gather(inf1_root), loaded_paths(tmp_path), dkms('2.31.7.0')), {})
    check_shape(found)
    assert ids(found) == ['neuron.driver.inf1_unsupported']
    assert found[0]['severity'] == _diagnose.BROKEN
    assert 'instance type inf1.6xlarge (EC2)' in found[0]['evidence']
    assert 'loaded neuron module: 2.31.7.0 (/sys/module/neuron/version)' in found[0]['evidence']
    assert 'neuron_driver_inf1_dkms_version' in found[0]['fix'] and 'aws-neuronx-dkms=2.24.*' in found[0]['fix']


def test_inf1_with_2_24_loaded_and_a_newer_package_will_break(fact_roots, tmp_path):
    found = _diagnose_neuron.findings(probe(gather(fact_roots / 'inf1.6xlarge'), loaded_paths(tmp_path),
                                            dkms('2.25.4.0')), {})
    assert ids(found) == ['neuron.driver.inf1_unsupported']
    assert found[0]['severity'] == _diagnose.WILL_BREAK


@pytest.mark.parametrize('version', ['2.24.13.0', '2.24.7.0-dkms', '2.21.37.0'])
def test_inf1_on_the_supported_lines_is_fine(fact_roots, tmp_path, version):
    assert _diagnose_neuron.findings(probe(gather(fact_roots / 'inf1.6xlarge'), loaded_paths(tmp_path),
                                           dkms(version)), {}) == []


def test_inferentia2_with_driver_2_31_is_fine(inf1_root, tmp_path):
    """The tree as an inf2 node: Inferentia2's device id (neuron_device.h) and its instance type in DMI."""
    for device in (inf1_root / 'sys' / 'bus' / 'pci' / 'devices').iterdir():
        if (device / 'device').read_text().strip() == '0x7064':
            (device / 'device').write_text('0x7264\n')
    (inf1_root / 'sys' / 'class' / 'dmi' / 'id' / 'product_name').write_text('inf2.24xlarge\n')
    (inf1_root / 'sys' / 'module' / 'neuron' / 'version').write_text('2.31.7.0\n')
    facts = gather(inf1_root)
    assert set(d['name'] for d in facts['neuron']['devices']) == {'Inferentia2'}
    assert _diagnose_neuron.findings(probe(facts, loaded_paths(tmp_path), dkms('2.31.7.0')), {}) == []


# --- oci-neuron and its hook (aws-neuron-sdk#911) ---------------------------------------------------------------------

def hook_files(tmp_path, without=()):
    files = {
        '/sys/module/neuron': (None, 0o755),
        '/etc/docker/daemon.json': ((NEURON / 'docker-daemon.json').read_text(), 0o644),
        '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh': ('#!/bin/sh\n', 0o755),
        '/opt/aws/neuron/share/oci_neuron_hook_config.json': ((NEURON / 'oci_neuron_hook_config.json').read_text(), 0o644),
        '/opt/aws/neuron/bin/oci_neuron_hook': ('#!/bin/sh\n', 0o755),
        '/usr/local/bin/oci-add-hooks': ('#!/bin/sh\n', 0o755),
        '/usr/sbin/runc': ('#!/bin/sh\n', 0o755),
    }
    return node_files(tmp_path, dict((p, f) for p, f in files.items() if p not in without))


HOOK_PACKAGE = {'aws-neuronx-oci-hook': {'version': '2.19.65.0', 'selection': 'hold', 'status': 'installed'}}
OCI_ADD_HOOKS_OK = {'rc': 0, 'stdout': 'commit: 0123abc\n', 'stderr': ''}


def hook_probe(fact_roots, paths, version=None):
    return probe(gather(fact_roots / 'inf1.6xlarge'), paths, dict(dkms('2.19.64.0'), **HOOK_PACKAGE),
                 oci_version=version)


def test_the_oci_neuron_runtime_with_its_whole_chain_is_fine(fact_roots, tmp_path):
    assert _diagnose_neuron.findings(hook_probe(fact_roots, hook_files(tmp_path), OCI_ADD_HOOKS_OK), {}) == []


def test_aws_daemon_json_without_oci_add_hooks_is_issue_911(fact_roots, tmp_path):
    found = _diagnose_neuron.findings(hook_probe(fact_roots, hook_files(tmp_path, ['/usr/local/bin/oci-add-hooks'])), {})
    check_shape(found)
    assert ids(found) == ['neuron.oci_hook.missing']
    assert 'it is the default runtime' in found[0]['summary']
    assert ('/etc/docker/daemon.json: runtime oci-neuron, path /opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh, '
            'the default runtime') in found[0]['evidence']
    assert any(e.startswith('oci-add-hooks is not an executable regular file') for e in found[0]['evidence'])
    assert found[0]['fix'].startswith('Install oci-add-hooks with accel.nodes.oci_add_hooks.')
    assert 'aws-neuron-sdk#911' in found[0]['source']


def test_a_missing_hook_names_its_package(fact_roots, tmp_path):
    found = _diagnose_neuron.findings(
        hook_probe(fact_roots, hook_files(tmp_path, ['/opt/aws/neuron/bin/oci_neuron_hook']), OCI_ADD_HOOKS_OK), {})
    assert ids(found) == ['neuron.oci_hook.missing']
    assert any('the Neuron OCI hook /opt/aws/neuron/bin/oci_neuron_hook is missing' in e for e in found[0]['evidence'])
    assert found[0]['fix'].startswith('Reinstall aws-neuronx-oci-hook (apt-get install --reinstall aws-neuronx-oci-hook')


def test_a_missing_hook_config_or_wrapper_is_named(fact_roots, tmp_path):
    found = _diagnose_neuron.findings(hook_probe(
        fact_roots, hook_files(tmp_path, ['/opt/aws/neuron/share/oci_neuron_hook_config.json',
                                          '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh']), OCI_ADD_HOOKS_OK), {})
    assert ids(found) == ['neuron.oci_hook.missing']
    assert found[0]['fix'].startswith('Run accel.nodes.neuron_container_runtime')
    assert len([e for e in found[0]['evidence'] if 'is missing' in e]) == 2


def test_an_oci_add_hooks_that_does_not_answer_is_named(fact_roots, tmp_path):
    found = _diagnose_neuron.findings(hook_probe(fact_roots, hook_files(tmp_path),
                                                 {'rc': 2, 'stdout': '', 'stderr': 'exec format error'}), {})
    assert ids(found) == ['neuron.oci_hook.missing']
    assert 'accel.nodes.oci_add_hooks' in found[0]['fix']


def test_device_mode_without_a_registered_runtime_needs_no_hook(fact_roots, tmp_path):
    paths = hook_files(tmp_path, ['/usr/local/bin/oci-add-hooks', '/opt/aws/neuron/bin/oci_neuron_hook'])
    paths['/etc/docker/daemon.json'] = dict(paths['/etc/docker/daemon.json'], text='{"log-level": "warn"}\n')
    assert _diagnose_neuron.findings(hook_probe(fact_roots, paths), {}) == []
