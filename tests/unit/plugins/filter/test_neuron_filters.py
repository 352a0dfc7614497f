# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The Neuron roles' decisions (plugins/filter/neuron.py), fed with the facts that
accelerator_facts returns for the captured inf1.6xlarge tree, the inf2.xlarge facts of
the neuron_device scenario, and the packages dpkg knew on the converged neuron node."""

from __future__ import annotations

import copy
import fnmatch
from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter import neuron, neuron_runtime_plan
from ansible_collections.accel.nodes.plugins.module_utils import _node_probe
from ansible_collections.accel.nodes.plugins.modules import accelerator_facts

TOP = Path(__file__).parents[4]
ROOTS = TOP / 'tests' / 'fixtures' / 'facts' / 'roots'
NEURON = TOP / 'tests' / 'fixtures' / 'neuron'
ROLES = TOP / 'roles'


def _role_yaml(role, *parts):
    with open(ROLES.joinpath(role, *parts)) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope='module')
def scenario_facts():
    """The facts the Molecule scenarios inject: inf1.6xlarge (neuron) and inf2.xlarge (neuron_device)."""
    def read(scenario):
        with open(TOP / 'molecule' / scenario / 'molecule.yml') as f:
            return yaml.safe_load(f)['provisioner']['inventory']['group_vars']['all']['accel_test_accelerators']
    return {'inf1.6xlarge': read('neuron'), 'inf2.xlarge': read('neuron_device')}


@pytest.fixture
def inf1_tree_facts(run_module):
    """accelerator_facts on the inf1.6xlarge tree, as a bake (image) reads it: the bus, no instance type asked."""
    def _facts(image=False, instance_type=None):
        args = {'root': str(ROOTS / 'inf1.6xlarge'), 'image': image}
        if instance_type:
            args['instance_type'] = instance_type
        result = run_module(accelerator_facts.main, args)
        assert not result.get('failed'), result
        return result['ansible_facts']['accelerators']
    return _facts


def driver_settings(os_family='Debian', **extra):
    """The settings the role passes, from its own defaults and vars."""
    defaults = _role_yaml('neuron_driver', 'defaults', 'main.yml')
    osvars = _role_yaml('neuron_driver', 'vars', '%s.yml' % os_family)['__neuron_driver_os']
    settings = {
        'instance_type': '',
        'version_separator': osvars['version_separator'],
        'version_glob': osvars['version_glob'],
    }
    for key in ('dkms_version', 'inf1_dkms_version', 'inf1_allow_unsupported_driver', 'tools_version',
                'install_runtime_lib', 'runtime_lib_version', 'install_collectives', 'collectives_version'):
        settings[key] = defaults['neuron_driver_' + key]
    settings.update(extra)
    return settings


# neuron_driver: the Inf1 pin

def test_the_captured_inf1_bus_pins_the_last_driver_line_that_supports_inf1(inf1_tree_facts):
    plan = neuron.neuron_driver_plan(inf1_tree_facts(), driver_settings())
    assert plan['is_inf1'] is True
    assert plan['dkms_pin'] == '2.24.*'
    assert plan['problem'] is None
    assert plan['target_instance_type'] == 'inf1.6xlarge'  # the tree's DMI names it


def test_an_inf2_node_gets_the_current_driver(scenario_facts):
    defaults = _role_yaml('neuron_driver', 'defaults', 'main.yml')
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], driver_settings())
    assert plan['is_inf1'] is False
    assert plan['dkms_pin'] == defaults['neuron_driver_dkms_version']


def test_a_trn1_bake_on_the_inf1_tree_reads_the_instance_type_not_the_bus(inf1_tree_facts):
    plan = neuron.neuron_driver_plan(inf1_tree_facts(image=True, instance_type='trn1.32xlarge'),
                                     driver_settings(instance_type='trn1.32xlarge'))
    assert plan['is_inf1'] is False
    assert not plan['dkms_pin'].startswith('2.24')


def test_inf1_by_instance_type_alone():
    plan = neuron.neuron_driver_plan({'ec2': {'instance_type': None}, 'neuron': {'devices': []}},
                                     driver_settings(instance_type='inf1.xlarge'))
    assert plan['is_inf1'] is True and plan['target_instance_type'] == 'inf1.xlarge'


@pytest.mark.parametrize('pin', ['2.27.*', '2.25.1.0', '3.0.0', 'latest'])
def test_a_driver_after_the_inf1_line_is_refused_with_the_fix(scenario_facts, pin):
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], driver_settings(inf1_dkms_version=pin))
    assert 'no longer support Inf1' in plan['problem']
    assert 'neuron_driver_inf1_allow_unsupported_driver' in plan['problem']
    assert "'2.24.*' (the default)" in plan['problem']
    assert 'inf1.6xlarge' in plan['problem']


@pytest.mark.parametrize('pin', ['2.24.*', '2.24.13.0', '2.23.1.0', '1.9'])
def test_a_driver_up_to_the_inf1_line_is_accepted(scenario_facts, pin):
    assert neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'],
                                     driver_settings(inf1_dkms_version=pin))['problem'] is None


def test_the_refusal_can_be_overridden_and_names_the_bus_without_an_instance_type(scenario_facts):
    facts = copy.deepcopy(scenario_facts['inf1.6xlarge'])
    facts['ec2']['instance_type'] = None
    settings = driver_settings(inf1_dkms_version='2.27.*')
    assert 'Inferentia PCI devices 1d0f:7064-7067' in neuron.neuron_driver_plan(facts, settings)['problem']
    settings['inf1_allow_unsupported_driver'] = 'true'  # a string on ansible-core 2.18
    assert neuron.neuron_driver_plan(facts, settings)['problem'] is None


# apt matches a pin against the whole Debian version, and the Neuron apt repository
# versions aws-neuronx-runtime-lib and aws-neuronx-collectives with a build hash
# (aws-neuronx-runtime-lib_2.31.24.0-0b044f4ce_amd64.deb). AWS's own Neuron containers
# pin them as name=2.21.41.0*. dnf keeps the hash in the release, outside name-version.
@pytest.mark.parametrize('os_family', ['Debian', 'RedHat'])
def test_pins_match_hashed_versions(scenario_facts, os_family):
    settings = driver_settings(os_family, install_runtime_lib=True, runtime_lib_version='2.31.24.0')
    specs = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], settings)['package_specs']
    if os_family == 'Debian':
        assert specs == ['aws-neuronx-dkms=2.24.*', 'aws-neuronx-tools=2.33.38.0*', 'aws-neuronx-runtime-lib=2.31.24.0*']
        assert fnmatch.fnmatchcase('2.31.24.0-0b044f4ce', specs[2].split('=')[1])
    else:
        assert specs == ['aws-neuronx-dkms-2.24.*', 'aws-neuronx-tools-2.33.38.0', 'aws-neuronx-runtime-lib-2.31.24.0']


def test_the_libraries_are_installed_only_when_asked(scenario_facts):
    def names(settings):
        return [p['name'] for p in neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], settings)['packages']]
    assert names(driver_settings()) == ['aws-neuronx-dkms', 'aws-neuronx-tools']
    assert names(driver_settings(install_runtime_lib=True, install_collectives='True')) == [
        'aws-neuronx-dkms', 'aws-neuronx-tools', 'aws-neuronx-runtime-lib', 'aws-neuronx-collectives']


def test_settings_without_a_key_fail_with_its_name():
    with pytest.raises(AnsibleFilterError, match='dkms_version'):
        neuron.neuron_driver_plan({}, {'tools_version': '1'})


# neuron_driver: what is left to do, from the dpkg status of the converged neuron node.
# The capture (2026-11-24) was taken under the Neuron SDK 2.29.0 pins; the Inf1 driver
# line has not moved since, the tools have. The tests that ask whether that node is
# converged ask with the pins it was converged to.
CAPTURED_PINS = {'tools_version': '2.29.18.0'}


@pytest.fixture(scope='module')
def converged():
    """The packages accel.nodes.node_probe reads on the converged neuron node (Debian 12)."""
    text = (NEURON / 'dpkg-status-inf1-converged').read_text()
    patterns = neuron.neuron_driver_probe_request({})['packages']
    return _node_probe.parse_dpkg_status(text, patterns)


def package_settings(**extra):
    defaults = _role_yaml('neuron_driver', 'defaults', 'main.yml')
    settings = {
        'legacy_packages': defaults['neuron_driver_legacy_packages'],
        'headers_packages': ['linux-headers-6.1.0-98-cloud-amd64', 'linux-headers-6.1.0-99-cloud-amd64'],
        'version_glob': '*',
        'kernel_packages': _role_yaml('neuron_driver', 'vars', 'Debian.yml')['__neuron_driver_os']['kernel_packages'],
        'hold_packages': True,
        'hold_kernel': True,
    }
    settings.update(extra)
    return settings


def test_a_converged_node_has_nothing_left_to_do(converged, scenario_facts):
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], driver_settings(**CAPTURED_PINS))
    actions = neuron.neuron_driver_packages(converged, plan, package_settings())
    assert actions == {'kept': True, 'legacy': [], 'headers': package_settings()['headers_packages'],
                       'headers_missing': [], 'install': False, 'moving': [], 'driver_moving': False,
                       'kernel_packages': actions['kernel_packages'], 'hold_packages': [], 'hold_kernel': []}
    # The headers the role installed, and the kernel image prepare.yml installed, are held.
    assert {'linux-image-6.1.0-98-cloud-amd64', 'linux-headers-6.1.0-98-cloud-amd64',
            'linux-headers-6.1.0-99-cloud-amd64'} <= set(actions['kernel_packages'])


def _released(packages, *names):
    packages = copy.deepcopy(packages)
    for name in names:
        packages[name]['selection'] = 'install'
    return packages


def test_a_released_hold_is_held_again_and_nothing_else(converged, scenario_facts):
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], driver_settings(**CAPTURED_PINS))
    actions = neuron.neuron_driver_packages(_released(converged, 'aws-neuronx-tools', 'linux-image-6.1.0-98-cloud-amd64'),
                                            plan, package_settings())
    assert actions['hold_packages'] == ['aws-neuronx-tools']
    assert actions['hold_kernel'] == ['linux-image-6.1.0-98-cloud-amd64']
    assert actions['install'] is False and actions['kept'] is False
    assert neuron.neuron_driver_packages(_released(converged, 'linux-image-6.1.0-98-cloud-amd64'), plan,
                                         package_settings(hold_kernel=False))['kept'] is True
    assert neuron.neuron_driver_packages(_released(converged, 'linux-image-6.1.0-98-cloud-amd64'), plan,
                                         package_settings(hold_kernel=False))['hold_kernel'] == []


def test_a_new_pin_installs_and_a_missing_header_is_installed(converged, scenario_facts):
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'],
                                     driver_settings(inf1_dkms_version='2.23.*', **CAPTURED_PINS))
    settings = package_settings(headers_packages=['linux-headers-6.1.0-99-cloud-amd64', 'linux-headers-cloud-amd64'])
    actions = neuron.neuron_driver_packages(converged, plan, settings)
    assert actions['install'] is True
    assert actions['moving'] == ['aws-neuronx-dkms']
    assert actions['driver_moving'] is True  # the role looks for work on the devices first
    assert actions['headers_missing'] == ['linux-headers-cloud-amd64']
    assert actions['kept'] is False


def test_a_loaded_module_of_another_driver_is_a_driver_change_even_at_the_pin(converged, scenario_facts):
    """A run whose reload could not be done leaves the package at its pin and the old module loaded: the next run
    must still swap it (/sys/module/neuron/version is the loaded MODULE_VERSION)."""
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], driver_settings(**CAPTURED_PINS))
    installed = converged['aws-neuronx-dkms']['version']
    assert neuron.neuron_driver_packages(converged, plan, package_settings(loaded_version=installed))['driver_moving'] is False
    stale = neuron.neuron_driver_packages(converged, plan, package_settings(loaded_version='2.23.30.0\n'))
    assert stale['driver_moving'] is True and stale['kept'] is True  # nothing for the package tasks to do
    assert neuron.neuron_driver_packages(converged, plan, package_settings(loaded_version=''))['driver_moving'] is False


def test_the_default_pins_move_the_tools_of_the_captured_node_and_keep_its_inf1_driver(converged, scenario_facts):
    """A node converged under older pins: the defaults move aws-neuronx-tools, never the Inf1 driver."""
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], driver_settings())
    assert plan['dkms_pin'] == '2.24.*'
    actions = neuron.neuron_driver_packages(converged, plan, package_settings())
    assert actions['install'] is True
    assert actions['moving'] == ['aws-neuronx-tools']
    assert actions['driver_moving'] is False  # new tools leave the loaded module alone
    assert actions['legacy'] == [] and actions['headers_missing'] == []


def test_a_fresh_node_removes_the_legacy_package_and_installs_everything():
    """The dpkg status before the role: prepare.yml's legacy aws-neuron-tools, the other family's hook."""
    text = (NEURON / 'dpkg-status-inf1-prepared').read_text()
    installed = _node_probe.parse_dpkg_status(text, ['^aws-neuron', '^linux-'])
    plan = neuron.neuron_driver_plan({'ec2': {'instance_type': 'inf1.6xlarge'}}, driver_settings())
    actions = neuron.neuron_driver_packages(installed, plan, package_settings())
    assert actions['legacy'] == ['aws-neuron-tools']
    assert actions['install'] is True
    assert actions['hold_packages'] == []  # nothing to hold before the install
    assert actions['headers_missing'] == package_settings()['headers_packages']


def test_a_legacy_package_removed_without_purge_is_purged():
    installed = {'aws-neuron-dkms': {'version': '1.0', 'selection': 'deinstall', 'status': 'config-files'}}
    plan = neuron.neuron_driver_plan({}, driver_settings())
    actions = neuron.neuron_driver_packages(installed, plan, package_settings())
    assert actions['legacy'] == ['aws-neuron-dkms']
    assert actions['install'] is True
    assert actions['driver_moving'] is False  # only its configuration is left: no module of it is loaded
    installed['aws-neuron-dkms'].update(selection='install', status='installed')
    assert neuron.neuron_driver_packages(installed, plan, package_settings())['driver_moving'] is True


def test_unknown_packages_run_every_task():
    plan = neuron.neuron_driver_plan({}, driver_settings())
    actions = neuron.neuron_driver_packages(None, plan, package_settings())
    assert actions['legacy'] == package_settings()['legacy_packages']
    assert actions['install'] is True and actions['headers_missing'] == package_settings()['headers_packages']


def test_rpm_holds_every_installed_package_as_versionlock_is_idempotent():
    # node_probe's rpm versions are VERSION-RELEASE; dnf reads the pins (name-2.33.38.0, name-2.24.*) as any release.
    installed = {'aws-neuronx-dkms': {'version': '2.31.7.0-1', 'release': '1', 'selection': None, 'status': 'installed'},
                 'aws-neuronx-tools': {'version': '2.33.38.0-1', 'release': '1', 'selection': None, 'status': 'installed'},
                 'kernel-core': {'version': '6.1.102-108.177.amzn2023', 'release': '108.177.amzn2023', 'selection': None,
                                 'status': 'installed'}}
    plan = neuron.neuron_driver_plan({'ec2': {'instance_type': 'inf2.xlarge'}}, driver_settings('RedHat'))
    kernel = _role_yaml('neuron_driver', 'vars', 'RedHat.yml')['__neuron_driver_os']['kernel_packages']
    actions = neuron.neuron_driver_packages(installed, plan, package_settings(version_glob='', kernel_packages=kernel))
    assert actions['install'] is False
    assert actions['hold_packages'] == ['aws-neuronx-dkms', 'aws-neuronx-tools']
    assert actions['hold_kernel'] == ['kernel-core']


# neuron_driver: the role's plan, from its probe and the per-OS data (the role's own templating of its
# settings is tests/unit/roles/test_role_os_vars.py's).

def role_settings(**extra):
    defaults = _role_yaml('neuron_driver', 'defaults', 'main.yml')
    settings = dict((k[len('neuron_driver_'):], v) for k, v in defaults.items())
    settings.update(extra)
    return settings


def role_node(os_family='Debian', **extra):
    node = dict(_role_yaml('neuron_driver', 'vars', '%s.yml' % os_family)['__neuron_driver_os'],
                os_family=os_family, distribution_release='bookworm', bake=False, profile_content='# PATH\n')
    node.update(extra)
    return node


def probed(**paths):
    """node_probe's answer for every path the role asks, none of them there, but those given."""
    seen = dict((p, {'exists': False}) for p in neuron.neuron_driver_probe_request({})['paths'])
    seen.update(paths)
    return {'packages': {}, 'paths': seen}


def test_the_role_plan_writes_only_what_the_probe_found_different(scenario_facts):
    settings = role_settings(update_pciids=False)
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], settings, probed(), role_node())
    assert [(f['path'], f['state']) for f in plan['files']] == [
        ('/usr/local/sbin/update-pciids', 'present'), ('/etc/apt/apt.conf.d/90accel-nodes-neuron-driver', 'present'),
        ('/etc/profile.d/aws-neuron.sh', 'present')]
    written = dict((f['path'], {'exists': True, 'type': 'file', 'text': f['content'], 'mode': f['mode'], 'uid': 0,
                                'gid': 0}) for f in plan['files'])
    again = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], settings, probed(**written), role_node())
    assert again['files'] == [] and again['problems'] == []
    assert 'update-pciids' not in again['summary'] and again['summary'].startswith('inf1.6xlarge (Inf1): aws-neuronx-dkms 2.24.*')
    # The defaults: nothing to remove where nothing is there, the login shells' PATH to write.
    plan = neuron.neuron_driver_plan(scenario_facts['inf1.6xlarge'], role_settings(), probed(), role_node('RedHat'))
    assert [(f['path'], f['state']) for f in plan['files']] == [('/etc/profile.d/aws-neuron.sh', 'present')]


def test_the_role_plan_refuses_an_update_pciids_it_did_not_write(scenario_facts):
    foreign = {'/usr/local/sbin/update-pciids': {'exists': True, 'type': 'file', 'text': '#!/bin/sh\n'}}
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(update_pciids=False),
                                     probed(**foreign), role_node())
    assert plan['problems'] == ["/usr/local/sbin/update-pciids exists and is not the role's: the role leaves it alone. "
                                "Remove it, or set neuron_driver_update_pciids back to true."]
    assert 'stop: /usr/local/sbin/update-pciids' in plan['summary']
    # With update-pciids on, the role leaves a foreign one alone without complaint.
    assert neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(), probed(**foreign),
                                     role_node())['problems'] == []


def test_the_role_plan_takes_the_repository_mirror_and_the_module_state(scenario_facts):
    probe = probed(**{'/sys/module/neuron': {'exists': True},
                      '/sys/module/neuron/version': {'exists': True, 'text': '2.31.7.0\n'}})
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(repo_url='http://mirror/neuron//'),
                                     probe, role_node(bake='True'))
    assert plan['repository'] == {'url': 'http://mirror/neuron',
                                  'key_url': 'http://mirror/neuron/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB', 'suite': 'bookworm'}
    assert plan['loaded'] is True and plan['bake'] is True
    assert plan['package_settings']['loaded_version'] == '2.31.7.0'


def test_the_role_plan_for_state_absent_names_what_it_removes():
    probe = dict(probed(), packages={'aws-neuronx-tools': {'version': '2.33.38.0'}, 'linux-image-6.1': {}})
    plan = neuron.neuron_driver_plan(None, role_settings(state='absent'), probe, role_node())
    assert plan['installed'] == ['aws-neuronx-tools']
    assert plan['remove'][:4] == plan['all_packages'] and 'aws-neuron-dkms' in plan['remove']
    assert plan['files'] == [] and plan['problems'] == []
    assert plan['summary'].startswith('remove the Neuron driver, tools and libraries (installed: aws-neuronx-tools)')


def test_the_headers_come_from_the_kernels_dkms_kernels_lists(scenario_facts):
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(), probed(), role_node())
    report = {'headers_packages': ['linux-headers-6.1.0-28-cloud-amd64'], 'headers_metapackages': ['linux-headers-cloud-amd64'],
              'targets': ['6.1.0-28-cloud-amd64'], 'target': '6.1.0-28-cloud-amd64'}
    actions = neuron.neuron_driver_packages({}, plan, kernels_report=report)
    assert actions['headers'] == ['linux-headers-6.1.0-28-cloud-amd64', 'linux-headers-cloud-amd64']
    assert actions['headers_failed'] % 'no candidate' == (
        'The headers of kernel 6.1.0-28-cloud-amd64 cannot be installed (linux-headers-6.1.0-28-cloud-amd64, '
        'linux-headers-cloud-amd64: no candidate). DKMS needs' + actions['headers_failed'].split('DKMS needs', 1)[1])
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(kernels='target'), probed(), role_node())
    assert neuron.neuron_driver_packages({}, plan, kernels_report=report)['headers'] == ['linux-headers-6.1.0-28-cloud-amd64']
    plan = neuron.neuron_driver_plan(scenario_facts['inf2.xlarge'], role_settings(kernel_headers_package='none'),
                                     probed(), role_node())
    assert neuron.neuron_driver_packages({}, plan, kernels_report=report)['headers'] == []


# neuron_container_runtime. AWS's "Tutorial Docker Neuron OCI Hook Setup": Inf1 installs
# aws-neuron-runtime-base, Inf2 and Trn1 aws-neuronx-oci-hook.

def hook_settings(os_family='Debian', **extra):
    defaults = _role_yaml('neuron_container_runtime', 'defaults', 'main.yml')
    osvars = _role_yaml('neuron_container_runtime', 'vars', '%s.yml' % os_family)
    settings = {
        'instance_type': defaults['neuron_container_runtime_instance_type'],
        'inf1_pci_device_ids': neuron_runtime_plan.INF1_PCI_DEVICE_IDS,
        'inf1_hook_package': neuron_runtime_plan.INF1_HOOK_PACKAGE,
        'neuronx_hook_package': neuron_runtime_plan.NEURONX_HOOK_PACKAGE,
        'oci_hook_package': defaults['neuron_container_runtime_oci_hook_package'],
        'oci_hook_version': defaults['neuron_container_runtime_oci_hook_version'],
        'inf1_oci_hook_version': defaults['neuron_container_runtime_inf1_oci_hook_version'],
        'version_separator': osvars['__neuron_container_runtime_version_separator'],
        'version_glob': osvars['__neuron_container_runtime_version_glob'],
    }
    settings.update(extra)
    return settings


@pytest.mark.parametrize('os_family', ['Debian', 'RedHat'])
@pytest.mark.parametrize('instance_type, pci_ids, package, version', [
    ('inf1.6xlarge', (), 'aws-neuron-runtime-base', '1.*'),
    ('', ('0x7064',), 'aws-neuron-runtime-base', '1.*'),  # Inferentia by PCI id, no instance type
    ('inf2.xlarge', ('0x7264',), 'aws-neuronx-oci-hook', '2.19.65.0'),
    ('trn1.32xlarge', (), 'aws-neuronx-oci-hook', '2.19.65.0'),
])
def test_the_hook_package_of_each_family(os_family, instance_type, pci_ids, package, version):
    facts = {'ec2': {'instance_type': instance_type}, 'neuron': {'devices': [{'pci_device_id': p} for p in pci_ids]}}
    hook = neuron.neuron_hook_package(facts, {}, hook_settings(os_family))
    assert hook['package'] == package and hook['version'] == version
    apt = os_family == 'Debian'
    glob_ = '' if version.endswith('*') or not apt else '*'
    assert hook['spec'] == package + ('=' if apt else '-') + version + glob_


def test_a_named_hook_package_wins_over_the_instance_family():
    hook = neuron.neuron_hook_package({'ec2': {'instance_type': 'inf1.xlarge'}}, {},
                                      hook_settings(oci_hook_package='aws-neuronx-oci-hook'))
    assert hook['package'] == 'aws-neuronx-oci-hook'
    assert hook['version'] == '2.19.65.0'


def test_the_converged_inf1_node_has_its_hook_at_the_pin_and_held(converged, scenario_facts):
    text = (NEURON / 'dpkg-status-inf1-converged').read_text()
    installed = _node_probe.parse_dpkg_status(text, ['^aws-neuron-runtime-base$', '^aws-neuronx-oci-hook$'])
    hook = neuron.neuron_hook_package(scenario_facts['inf1.6xlarge'], installed, hook_settings())
    assert (hook['installed'], hook['at_pin'], hook['held'], hook['others'], hook['kept']) == (True, True, True, [], True)
    # Unheld, it is kept only where holds are not wanted.
    installed['aws-neuron-runtime-base']['selection'] = 'install'
    assert neuron.neuron_hook_package(scenario_facts['inf1.6xlarge'], installed, hook_settings())['kept'] is False
    assert neuron.neuron_hook_package(scenario_facts['inf1.6xlarge'], installed, hook_settings(hold=False))['kept'] is True


def test_the_prepared_inf1_node_removes_the_other_familys_hook(scenario_facts):
    text = (NEURON / 'dpkg-status-inf1-prepared').read_text()
    installed = _node_probe.parse_dpkg_status(text, ['^aws-neuron-runtime-base$', '^aws-neuronx-oci-hook$'])
    hook = neuron.neuron_hook_package(scenario_facts['inf1.6xlarge'], installed, hook_settings())
    assert hook['package'] == 'aws-neuron-runtime-base'
    assert (hook['installed'], hook['at_pin'], hook['others'], hook['kept']) == (False, False, ['aws-neuronx-oci-hook'], False)
    assert neuron.neuron_hook_package(scenario_facts['inf1.6xlarge'], None, hook_settings())['others'] == [
        'aws-neuronx-oci-hook']


# The runtime chain (aws-neuron-sdk#911)

CHAIN = {'oci_add_hooks_candidates': ['/usr/local/bin/oci-add-hooks', '/usr/bin/oci-add-hooks'],
         'runc_candidates': ['/usr/bin/runc', '/usr/sbin/runc'],
         'hook_path': '/opt/aws/neuron/bin/oci_neuron_hook', 'hook_package': 'aws-neuron-runtime-base'}
WHOLE = {'executables': {'oci_add_hooks': '/usr/local/bin/oci-add-hooks', 'runc': '/usr/sbin/runc',
                         'hook': '/opt/aws/neuron/bin/oci_neuron_hook'},
         'versions': {'oci_add_hooks': {'rc': 0, 'stdout': 'commit: 2fdc948c9b098299b47636a49639dcad8f88ae52',
                                        'stderr': ''}}}


def test_a_whole_chain_names_its_tools_and_lacks_nothing():
    chain = neuron.neuron_runtime_chain(WHOLE, CHAIN)
    assert chain == {'oci_add_hooks': '/usr/local/bin/oci-add-hooks', 'runc': '/usr/sbin/runc', 'problems': []}


def test_each_missing_link_is_named_with_its_fix():
    probe = {'executables': {'oci_add_hooks': '', 'runc': '', 'hook': ''}, 'versions': {'oci_add_hooks': None}}
    problems = neuron.neuron_runtime_chain(probe, CHAIN)['problems']
    assert problems == [
        'oci-add-hooks is not an executable regular file at /usr/local/bin/oci-add-hooks or /usr/bin/oci-add-hooks'
        ' (install it with the role accel.nodes.oci_add_hooks, or set neuron_container_runtime_oci_add_hooks_path)',
        'runc is not an executable regular file at /usr/bin/runc or /usr/sbin/runc (install the container engine,'
        ' or set neuron_container_runtime_runc_path)',
        'the Neuron OCI hook /opt/aws/neuron/bin/oci_neuron_hook is missing or not executable'
        ' (aws-neuron-runtime-base installs it)']


def test_an_oci_add_hooks_that_does_not_answer_its_version_breaks_the_chain():
    probe = copy.deepcopy(WHOLE)
    probe['versions']['oci_add_hooks'] = {'rc': 126, 'stdout': '', 'stderr': 'exec format error\n'}
    assert neuron.neuron_runtime_chain(probe, CHAIN)['problems'] == [
        '/usr/local/bin/oci-add-hooks --version failed (rc 126: exec format error)']
    probe['versions']['oci_add_hooks'] = {'rc': 0, 'stdout': 'oci-add-hooks 1.0', 'stderr': ''}
    assert len(neuron.neuron_runtime_chain(probe, CHAIN)['problems']) == 1


# oci_add_hooks

SHA = 'a' * 64
OCI = {'method': 'binary', 'installed_path': '/usr/local/bin/oci-add-hooks', 'install_path': '/usr/local/bin/oci-add-hooks',
       'version': '2fdc948c9b098299b47636a49639dcad8f88ae52', 'sha256': SHA.upper(), 'package_name': 'oci-add-hooks',
       'package_version': ''}


def _oci_probe(sha=SHA, mode='0755', uid=0, stdout='commit: 2fdc948c9b098299b47636a49639dcad8f88ae52', rc=0, packages=None):
    return {'paths': {'/usr/local/bin/oci-add-hooks': {'exists': sha is not None, 'sha256': sha, 'mode': mode,
                                                       'uid': uid, 'gid': 0}},
            'versions': {'oci_add_hooks': {'rc': rc, 'stdout': stdout, 'stderr': ''} if rc is not None else None},
            'packages': packages or {}}


def test_the_binary_with_its_checksum_owner_and_mode_is_current():
    check = neuron.oci_add_hooks_check(_oci_probe(), OCI)
    assert check == {'current': True, 'runs': True, 'problem': None}


@pytest.mark.parametrize('probe', [_oci_probe(sha='b' * 64), _oci_probe(mode='0700'), _oci_probe(uid=1000),
                                   _oci_probe(sha=None, rc=None)])
def test_another_binary_is_not_current(probe):
    assert neuron.oci_add_hooks_check(probe, OCI)['current'] is False


def test_a_source_build_must_answer_the_pinned_commit():
    settings = dict(OCI, method='source')
    assert neuron.oci_add_hooks_check(_oci_probe(), settings)['current'] is True
    check = neuron.oci_add_hooks_check(_oci_probe(stdout='commit: 0123'), settings)
    assert check['current'] is False
    assert 'not "commit: ..." 2fdc948c9b098299b47636a49639dcad8f88ae52' in check['problem']
    assert 'aws-neuron-sdk#911' in check['problem']


def test_a_package_is_current_at_its_version():
    settings = dict(OCI, method='package', installed_path='/usr/bin/oci-add-hooks')
    installed = {'oci-add-hooks': {'version': '1.0.0', 'release': '1.amzn2023', 'selection': None}}
    assert neuron.oci_add_hooks_check(_oci_probe(packages=installed), settings)['current'] is True
    assert neuron.oci_add_hooks_check(_oci_probe(packages=installed), dict(settings, package_version='1.1'))['current'] is False
    assert neuron.oci_add_hooks_check(_oci_probe(), settings)['current'] is False


def test_a_binary_that_does_not_run_is_a_problem_with_the_fix():
    check = neuron.oci_add_hooks_check(_oci_probe(rc=2, stdout=''), OCI)
    assert check['runs'] is False
    assert check['problem'].startswith('`/usr/local/bin/oci-add-hooks --version` returned rc 2')
    assert 'check the binary install (URL and checksum, package, or build)' in check['problem']


@pytest.mark.parametrize('installed, pin, glob, matches', [
    ('2.24.13.0-1', '2.24.*', '', True),                      # rpm, a glob pin
    ('2.31.24.0-1a31ba186', '2.31.24.0', '', True),           # rpm, the hash in the release
    ('2.31.24.0-1a31ba186', '2.31.24.0-1a31ba186', '', True),  # rpm, an exact pin
    ('2.31.24.0-1a31ba186', '2.31.25.0', '', False),
    ('2.31.24.0-0b044f4ce', '2.31.24.0', '*', True),          # dpkg, the hash in the Debian revision
    ('2.29.18.0', '2.29.18.1', '*', False),
])
def test_a_pin_matches_as_the_package_manager_reads_it(installed, pin, glob, matches):
    from ansible_collections.accel.nodes.plugins.module_utils import _neuron_plan  # pylint: disable=import-outside-toplevel
    assert _neuron_plan.pin_matches(installed, pin, glob) is matches
