# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The Neuron container runtime role's plan (plugins/filter/neuron_runtime_plan.py), fed as tasks/main.yml feeds
it: the role's defaults templated through vars/main.yml's __neuron_container_runtime_settings, the OS vars, and a
node_probe result that answers every requested path."""

from __future__ import annotations

import os
import sys

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter.neuron_runtime_plan import HOOK_PACKAGES, VERSIONLOCK_PACKAGE, \
    neuron_container_runtime_plan, neuron_container_runtime_probe_request
from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

ROLE = 'neuron_container_runtime'
DEFAULTS = load(ROLE, 'defaults', 'main.yml')
HOOK = DEFAULTS['neuron_container_runtime_hook_path']
WRAPPER = DEFAULTS['neuron_container_runtime_wrapper_path']
HOOK_CONFIG = DEFAULTS['neuron_container_runtime_hook_config_path']
INF1 = {'ec2': {'instance_type': 'inf1.6xlarge'}, 'neuron': {'devices': [{'pci_device_id': '0x7064'}]}}
INF2 = {'ec2': {'instance_type': 'inf2.xlarge'}, 'neuron': {'devices': [{'pci_device_id': '0x7264'}]}}


def settings(**more):
    """vars/main.yml's __neuron_container_runtime_settings, templated from the defaults and these variables."""
    variables = dict(DEFAULTS)
    variables.update(load(ROLE, 'vars', 'main.yml'))
    variables.update(trusted({'neuron_container_runtime_%s' % k: v for k, v in more.items()}))
    return Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template('{{ __neuron_container_runtime_settings }}'))


def node(os_family='Debian', accelerators=None, **more):
    """The node dict tasks/main.yml passes: the OS vars of the family, the facts, the switches."""
    osvars = load(ROLE, 'vars', '%s.yml' % os_family)
    given = {'os_family': os_family, 'version_separator': osvars['__neuron_container_runtime_version_separator'],
             'version_glob': osvars['__neuron_container_runtime_version_glob'],
             'accelerators': INF1 if accelerators is None else accelerators, 'chroot': False, 'bake': False}
    given.update(more)
    return given


def missing():
    return {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'executable': False, 'text': None}


def plan(more=None, packages=None, paths=None, executables=None, versions=None, **node_more):
    """The plan, from a probe that answers every path of the probe request: those not given are missing."""
    given = settings(**(more or {}))
    request = neuron_container_runtime_probe_request(given)
    seen = dict((path, missing()) for path in request['paths'])
    seen.update(paths or {})
    probe = {'packages': packages or {}, 'paths': seen, 'executables': executables or {}, 'versions': versions or {}}
    return neuron_container_runtime_plan(given, probe, node(**node_more))


def chain_found():
    return {'executables': {'oci_add_hooks': '/usr/local/bin/oci-add-hooks', 'runc': '/usr/bin/runc', 'hook': HOOK},
            'versions': {'oci_add_hooks': {'rc': 0, 'stdout': 'commit: 1234\n', 'stderr': ''}}}


def test_every_setting_of_the_role_reaches_the_plan():
    names = set(load(ROLE, 'meta', 'argument_specs.yml')['argument_specs']['main']['options'])
    taken = {'neuron_container_runtime_' + k for k in settings()} | {'neuron_container_runtime_hold_packages'}
    # Read through the bake switch of vars/main.yml.
    assert names - taken == {'neuron_container_runtime_manage_service'}


def test_device_mode_probes_only_the_hook_packages():
    request = neuron_container_runtime_probe_request(settings())
    assert request == {'packages': ['^aws-neuron-runtime-base$', '^aws-neuronx-oci-hook$', '^$',
                                    '^python3-dnf-plugin-versionlock$'],
                       'executables': {}, 'versions': [], 'paths': []}


def test_oci_hook_probes_the_chain_the_files_and_with_containerd_who_owns_its_config():
    request = neuron_container_runtime_probe_request(settings(mode='oci_hook', oci_hook_package='a.b+c'))
    assert request['packages'][2] == r'^a\.b\+c$'
    assert request['executables'] == {
        'oci_add_hooks': ['/usr/local/bin/oci-add-hooks', '/usr/bin/oci-add-hooks', '/usr/local/sbin/oci-add-hooks',
                          '/usr/sbin/oci-add-hooks'],
        'runc': ['/usr/bin/runc', '/usr/sbin/runc', '/usr/local/bin/runc', '/usr/local/sbin/runc'],
        'hook': [HOOK]}
    assert request['versions'] == ['oci_add_hooks']
    assert request['paths'] == [HOOK_CONFIG, WRAPPER, '/etc/docker/daemon.json']
    both = neuron_container_runtime_probe_request(settings(mode='oci_hook', engines=['docker', 'containerd'],
                                                           runc_path='/opt/runc'))
    assert both['executables']['runc'] == ['/opt/runc']
    # What neuron_containerd_owner reads: _containerd_owner's own list, in its order.
    assert both['paths'] == [HOOK_CONFIG, WRAPPER, '/etc/docker/daemon.json'] + owners.probe_paths()
    assert neuron_container_runtime_probe_request(settings(mode='oci_hook', state='absent'))['paths'] == []


# AWS's "Tutorial Docker Neuron OCI Hook Setup": Inf1 installs aws-neuron-runtime-base, Inf2 and Trn1
# aws-neuronx-oci-hook.
@pytest.mark.parametrize('os_family', ['Debian', 'RedHat'])
@pytest.mark.parametrize('accelerators, package, spec', [
    (INF1, 'aws-neuron-runtime-base', {'Debian': 'aws-neuron-runtime-base=1.*', 'RedHat': 'aws-neuron-runtime-base-1.*'}),
    ({'neuron': {'devices': [{'pci_device_id': '0x7065'}]}}, 'aws-neuron-runtime-base',  # by PCI id alone
     {'Debian': 'aws-neuron-runtime-base=1.*', 'RedHat': 'aws-neuron-runtime-base-1.*'}),
    (INF2, 'aws-neuronx-oci-hook', {'Debian': 'aws-neuronx-oci-hook=2.19.65.0*', 'RedHat': 'aws-neuronx-oci-hook-2.19.65.0'}),
])
def test_the_hook_package_of_each_family(os_family, accelerators, package, spec):
    got = plan({'mode': 'oci_hook'}, os_family=os_family, accelerators=accelerators)
    assert got['hook']['package'] == package and got['hook']['spec'] == spec[os_family]
    assert got['package_tasks'] and got['chain_settings']['hook_package'] == package


def test_a_named_hook_package_wins_over_the_instance_family():
    got = plan({'mode': 'oci_hook', 'oci_hook_package': 'aws-neuronx-oci-hook'})
    assert got['hook']['package'] == 'aws-neuronx-oci-hook' and got['hook']['version'] == '2.19.65.0'


def test_a_kept_hook_package_skips_the_debian_package_tasks_only():
    kept = {'aws-neuron-runtime-base': {'version': '1.0.0', 'selection': 'hold', 'status': 'installed'}}
    assert not plan({'mode': 'oci_hook'}, packages=kept)['package_tasks']
    assert plan({'mode': 'oci_hook'}, packages=kept, os_family='RedHat')['package_tasks']
    got = plan({'mode': 'oci_hook'}, packages=dict(kept, **{'aws-neuronx-oci-hook': {'version': '2.19.65.0'}}))
    assert got['package_tasks'] and got['hook']['others'] == ['aws-neuronx-oci-hook']
    assert 'replacing aws-neuronx-oci-hook' in got['summary']


def test_the_chain_names_the_candidates_and_the_hook_package():
    got = plan({'mode': 'oci_hook'})
    assert got['chain']['oci_add_hooks'] == '' and len(got['chain']['problems']) == 3
    assert 'aws-neuron-runtime-base installs it' in got['chain']['problems'][2]
    assert got['executables'] == neuron_container_runtime_probe_request(settings(mode='oci_hook'))['executables']
    assert plan({'mode': 'oci_hook'}, **chain_found())['chain']['problems'] == []


def test_the_hook_config_is_what_to_nice_json_writes():
    templar = Templar(loader=DataLoader(), variables={'hook': HOOK})
    wanted = templar.template(trust_as_template(
        "{{ {'hooks': {'prestart': [{'path': hook}]}} | to_nice_json(indent=2) }}")) + '\n'
    wanted = {'path': HOOK_CONFIG, 'content': wanted, 'owner': 'root', 'group': 'root', 'mode': '0644'}
    assert plan({'mode': 'oci_hook'})['hook_config'] == wanted


def test_docker_is_registered_only_where_daemon_json_lacks_the_runtime():
    daemon = '{\n    "runtimes": {\n        "oci-neuron": {\n            "path": "%s"\n        }\n    }\n}\n' % WRAPPER
    seen = dict(missing(), exists=True, type='file', mode='0644', uid=0, gid=0, text=daemon)
    assert plan({'mode': 'oci_hook'})['register_docker']
    kept = plan({'mode': 'oci_hook'}, paths={'/etc/docker/daemon.json': seen}, **chain_found())
    assert not kept['register_docker'] and 'docker kept' in kept['summary']
    assert plan({'mode': 'oci_hook', 'default': True}, paths={'/etc/docker/daemon.json': seen})['register_docker']
    assert not plan({'mode': 'oci_hook', 'engines': ['containerd']})['register_docker']


def test_a_k3s_node_refuses_containerd_before_anything_changes():
    k3s = '/var/lib/rancher/k3s/agent/etc/containerd'
    got = plan({'mode': 'oci_hook', 'engines': ['containerd']}, paths={k3s: dict(missing(), exists=True,
                                                                                 type='directory')})
    assert got['owner']['owner'] == 'k3s' and 'neuron_container_runtime_engines' in got['owner']['error']
    assert 'containerd refused: owned by k3s' in got['summary']
    assert plan({'mode': 'oci_hook', 'engines': ['containerd']})['owner'] == {'owner': 'containerd', 'error': ''}
    assert plan({'mode': 'oci_hook'})['owner']['error'] == ''


def test_absent_removes_the_installed_hook_packages_and_releases_dnf_locks_only_with_the_plugin():
    installed = {'aws-neuronx-oci-hook': {'version': '2.19.65.0'}, 'python3-dnf-plugin-versionlock': {'version': '4'}}
    got = plan({'state': 'absent', 'mode': 'oci_hook'}, packages=installed)
    assert got['installed_hooks'] == ['aws-neuronx-oci-hook'] and got['versionlock_installed']
    assert not got['oci_hook'] and not got['device'] and got['hook'] == {}
    assert got['summary'] == ('absent: unregister oci-neuron from docker; remove /etc/udev/rules.d/neuron-udev.rules, '
                              'aws-neuronx-oci-hook, the wrapper and the hook config')
    assert 'no hook package installed, the wrapper' in plan({'state': 'absent'})['summary']
    assert plan({'state': 'absent'})['installed_hooks'] == [] and not plan({'state': 'absent'})['versionlock_installed']
    # The plugin the dnf tasks install is the one the plan looks for.
    assert load(ROLE, 'vars', 'RedHat.yml')['__neuron_container_runtime_versionlock_package'] == VERSIONLOCK_PACKAGE


def test_device_mode_says_what_the_udev_rule_gives_and_whether_devices_are_checked():
    assert plan()['summary'] == ('device: /dev/neuron* 0666 root by /etc/udev/rules.d/neuron-udev.rules, devices '
                                 'checked; no oci-neuron runtime left registered')
    baked = plan(bake=True, chroot=True)
    assert baked['bake'] and baked['chroot'] and 'devices checked' not in baked['summary']


def test_the_hook_packages_are_the_tutorials_and_the_collections_own():
    from ansible_collections.accel.nodes.plugins.module_utils import _interrupted  # pylint: disable=import-outside-toplevel
    assert HOOK_PACKAGES == ['aws-neuron-runtime-base', 'aws-neuronx-oci-hook']
    assert all(_interrupted.ours(name) for name in HOOK_PACKAGES)
