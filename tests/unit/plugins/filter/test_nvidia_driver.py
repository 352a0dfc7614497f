# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA driver decision (plugins/filter/nvidia_driver.py): which driver branch and
kernel modules a host gets, and which inputs the hardware refuses.

Where a case has a host, its facts are what accel.nodes.accelerator_facts gathers
from the host trees of tests/fixtures/facts/roots (see that README), or the real
H200 run of tests/fixtures/facts/h200-real-run.json; hand-made facts cover the
corners those hosts do not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.filter.nvidia_driver import (
    FilterModule, nvidia_driver_decision, nvidia_driver_input_errors, nvidia_driver_missing_packages,
    nvidia_driver_packages)
from ansible_collections.accel.nodes.plugins.module_utils import _ec2
from ansible_collections.accel.nodes.plugins.modules import accelerator_facts

FACTS = Path(__file__).parents[3] / 'fixtures' / 'facts'
# Every key the role and playbooks/bake.yml read from nvidia_driver_decision.
KEYS = {'present', 'reason', 'branch', 'version', 'kernel_module', 'volta', 'older_than_turing', 'blackwell',
        'loaded_version', 'loaded_kernel_module', 'satisfied', 'bake', 'expected_gpus', 'pci_gpus', 'smi_gpus',
        'instance_type', 'nouveau_bound', 'source', 'fabric_manager', 'nvswitch_generation', 'nvlsm', 'summary'}


@pytest.fixture
def gathered(fact_roots, run_module, monkeypatch):
    """gathered(root, instance_type=None, image=False) -> accelerator facts of a host tree, without nvidia-smi."""
    def refuse(*args, **kwargs):
        raise AssertionError('the test hosts have no instance metadata service')
    monkeypatch.setattr(_ec2, 'imds_instance_type', refuse)

    def _gathered(root, instance_type=None, image=False):
        args = {'root': str(fact_roots / root), 'gather': ['pci', 'nvidia_procfs', 'kernel_modules', 'ec2'],
                'image': image}
        if instance_type:
            args['instance_type'] = instance_type
        result = run_module(accelerator_facts.main, args)
        assert not result.get('failed'), result
        return result['ansible_facts']['accelerators']
    return _gathered


@pytest.fixture(scope='module')
def h200():
    """The real facts of a single-H200 host with the open modules of 580.159.04 loaded."""
    return json.loads((FACTS / 'h200-real-run.json').read_text())['ansible_facts']['accelerators']


# -- real and captured hosts -------------------------------------------------

def test_h200_with_580_loaded_is_satisfied_and_uses_the_open_modules(h200):
    d = nvidia_driver_decision(h200)
    assert set(d) == KEYS
    assert d['present'] and d['satisfied'] and d['kernel_module'] == 'open'
    assert (d['volta'], d['older_than_turing'], d['blackwell']) == (False, False, False)
    assert (d['loaded_version'], d['loaded_kernel_module'], d['branch']) == ('580.159.04', 'open', '580')
    assert (d['pci_gpus'], d['expected_gpus'], d['smi_gpus']) == (1, 1, 1)
    assert d['summary'] == ('1 NVIDIA GPU(s) on the PCI bus: driver 580.159.04 is loaded and satisfies branch 580, '
                            'nothing to change')
    assert nvidia_driver_input_errors(d) == []


def test_h200_asked_for_another_version_or_the_proprietary_modules_is_not_satisfied(h200):
    assert not nvidia_driver_decision(h200, version='580.95.05')['satisfied']
    assert not nvidia_driver_decision(h200, branch='590')['satisfied']
    d = nvidia_driver_decision(h200, kernel_module='proprietary')
    assert not d['satisfied'] and d['kernel_module'] == 'proprietary'
    # Hopper takes either flavour.
    assert nvidia_driver_input_errors(d) == []


def test_p3_16xlarge_eight_v100s_get_the_proprietary_modules_of_r580(gathered):
    acc = gathered('p3.16xlarge', instance_type='p3.16xlarge')
    d = nvidia_driver_decision(acc)
    assert d['volta'] and d['older_than_turing'] and d['kernel_module'] == 'proprietary'
    assert (d['pci_gpus'], d['expected_gpus'], d['instance_type']) == (8, 8, 'p3.16xlarge')
    # Driver 470 is loaded: not the branch asked for.
    assert d['loaded_version'] == '470.256.02' and not d['satisfied']
    assert d['summary'] == ('8 NVIDIA GPU(s) on the PCI bus: branch 580, proprietary kernel modules, '
                            'for every kernel that could boot, from cuda_repo')


def test_p3_16xlarge_refuses_a_branch_after_r580_and_the_open_modules(gathered):
    acc = gathered('p3.16xlarge', instance_type='p3.16xlarge')
    errors = nvidia_driver_input_errors(nvidia_driver_decision(acc, branch='620'), branch='620')
    assert len(errors) == 1
    assert errors[0].startswith('The GPUs of this host (instance type p3.16xlarge) are Volta (Tesla V100, EC2 P3): '
                                "NVIDIA's R580 is the last driver branch that supports Volta, and R620 was asked for.")
    assert 'nvidia_driver_ignore_hardware_limits: true to install R620 anyway' in errors[0]
    errors = nvidia_driver_input_errors(nvidia_driver_decision(acc, kernel_module='open'))
    assert errors == ['nvidia_driver_kernel_module is open, but this host has a GPU older than Turing (Volta), which '
                      'the open kernel modules do not support. Use nvidia_driver_kernel_module: auto or proprietary, '
                      'or set nvidia_driver_ignore_hardware_limits: true.']
    both = nvidia_driver_decision(acc, branch='595', kernel_module='open')
    assert len(nvidia_driver_input_errors(both)) == 2
    assert nvidia_driver_input_errors(both, ignore_hardware_limits='true') == []


def test_p5_48xlarge_needs_fabric_manager_but_not_nvlsm(gathered):
    d = nvidia_driver_decision(gathered('p5.48xlarge'))
    assert d['kernel_module'] == 'open' and d['satisfied']  # open 580.95.05 loaded
    assert d['fabric_manager'] and d['nvswitch_generation'] == 3 and not d['nvlsm']
    assert not nvidia_driver_decision(gathered('p5.48xlarge'), fabric_manager='never')['fabric_manager']
    errors = nvidia_driver_input_errors(nvidia_driver_decision(gathered('p5.48xlarge'), source='distro'),
                                        distro_packages={'open': ['nvidia-driver-580-server-open']},
                                        distribution='Ubuntu', distribution_version='24.04')
    assert errors == ['This host needs NVIDIA Fabric Manager (an NVSwitch system, or nvidia_driver_fabric_manager is '
                      "always): CUDA waits for it, and it must match the driver's version exactly. The role installs "
                      "both from NVIDIA's CUDA repository only: set nvidia_driver_source: cuda_repo, or "
                      'nvidia_driver_fabric_manager: never to install Fabric Manager yourself.']


def test_p6_b200_is_blackwell_gets_the_open_modules_and_nvlsm(gathered):
    d = nvidia_driver_decision(gathered('p6-b200.48xlarge'))
    assert d['blackwell'] and d['kernel_module'] == 'open' and not d['satisfied']
    assert d['fabric_manager'] and d['nvswitch_generation'] == 4 and d['nvlsm']
    errors = nvidia_driver_input_errors(nvidia_driver_decision(gathered('p6-b200.48xlarge'),
                                                               kernel_module='proprietary'))
    assert errors == ['nvidia_driver_kernel_module is proprietary, but this host has a Blackwell GPU (compute '
                      'capability 10.0 or newer), which only the open kernel modules support. Use '
                      'nvidia_driver_kernel_module: auto or open, or set nvidia_driver_ignore_hardware_limits: true.']


def test_g4dn_with_nouveau_bound_is_turing_and_says_so(gathered):
    d = nvidia_driver_decision(gathered('g4dn.xlarge-nouveau'))
    assert d['nouveau_bound'] and d['kernel_module'] == 'open' and not d['older_than_turing']
    assert not nvidia_driver_decision(gathered('g4dn.xlarge-driver-not-loaded'))['nouveau_bound']


def test_inf1_is_no_nvidia_host(gathered):
    d = nvidia_driver_decision(gathered('inf1.6xlarge'))
    assert not d['present']
    assert d['reason'] == 'no NVIDIA GPU on the PCI bus and instance type inf1.6xlarge has none'
    assert d['summary'] == d['reason'] + ': no NVIDIA driver is installed (nvidia_driver_force: true installs it anyway)'
    # A host without a driver to install has no inputs to refuse.
    assert nvidia_driver_input_errors(d, branch='x') == []


# -- baking: the instance type stands in for the GPUs ------------------------

def test_a_g5_bake_on_a_host_with_eight_v100s_gets_the_open_modules(gathered):
    d = nvidia_driver_decision(gathered('p3.16xlarge', 'g5.xlarge', image=True), force=True, bake=True)
    assert d['kernel_module'] == 'open' and not d['volta'] and d['bake'] and not d['satisfied']
    assert (d['pci_gpus'], d['expected_gpus']) == (0, 1)
    assert d['reason'] == 'instance type g5.xlarge has 1 NVIDIA A10G'


def test_a_p3_bake_on_a_host_without_gpus_is_volta(gathered):
    d = nvidia_driver_decision(gathered('inf1.6xlarge', 'p3.8xlarge', image=True), bake=True)
    assert d['present'] and d['volta'] and d['kernel_module'] == 'proprietary' and d['expected_gpus'] == 4
    assert d['summary'] == ('instance type p3.8xlarge has 4 NVIDIA V100: branch 580, proprietary kernel modules, '
                            'for every kernel that could boot, from cuda_repo (baking: nothing is started or '
                            'rebooted)')
    errors = nvidia_driver_input_errors(nvidia_driver_decision(gathered('inf1.6xlarge', 'p3.8xlarge', image=True),
                                                               branch='595', bake=True), branch='595')
    assert len(errors) == 1 and 'Volta' in errors[0] and 'R595' in errors[0]


def test_a_bake_for_a_p6_b200_on_a_host_without_gpus_is_blackwell():
    acc = _facts(expected=B200_EXPECTED, instance_type='p6-b200.48xlarge',
                 nvswitch={'present': True, 'generation': 4, 'source': 'ec2', 'devices': []})
    d = nvidia_driver_decision(acc, bake=True)
    assert d['blackwell'] and d['kernel_module'] == 'open' and d['fabric_manager'] and d['nvlsm']


def test_a_bake_with_only_a_vendor_gets_the_open_modules_by_force(gathered):
    d = nvidia_driver_decision(gathered('p3.16xlarge', image=True), force='true', bake=True)
    assert d['present'] and d['reason'] == 'nvidia_driver_force is true' and d['kernel_module'] == 'open'
    assert d['pci_gpus'] == 0


# -- corners, with hand-made facts -------------------------------------------

def _gpu(name, cc):
    return {'name': name, 'compute_capability': cc, 'pci_bus_id': '0000:00:1e.0'}


def _facts(gpus=(), driver=None, flavor=None, expected=None, instance_type=None, vendors=None, problems=(),
           nvswitch=None):
    return {
        'schema_version': 1,
        'vendors': vendors if vendors is not None else (['nvidia'] if gpus else []),
        'nvidia': {'driver_version': driver, 'kernel_module_flavor': flavor, 'gpus': list(gpus), 'nvswitch': nvswitch},
        'ec2': {'instance_type': instance_type, 'expected': expected},
        'problems': list(problems),
    }


V100 = _gpu('Tesla V100-SXM2-16GB', '7.0')
T4 = _gpu('Tesla T4', '7.5')
H100 = _gpu('NVIDIA H100 80GB HBM3', '9.0')
B200 = _gpu('NVIDIA B200', '10.0')
B200_EXPECTED = {'vendor': 'nvidia', 'model': 'B200', 'count': 8, 'memory_mib_each': 184320}


@pytest.mark.parametrize('gpus, volta, module', [
    ([V100], True, 'proprietary'),
    ([_gpu('Tesla V100-SXM2-16GB', None)], True, 'proprietary'),  # name alone, capability unknown
    ([_gpu('Graphics Device', '7.0')], True, 'proprietary'),  # capability alone
    ([T4], False, 'open'),
    ([H100, H100], False, 'open'),
    ([V100, T4], True, 'proprietary'),  # mixed: the older GPU decides
    ([_gpu('Tesla P100-PCIE-16GB', '6.0')], False, 'proprietary'),
    ([_gpu('Graphics Device', None)], False, 'open'),  # nothing known: the default
])
def test_volta_and_kernel_module(gpus, volta, module):
    d = nvidia_driver_decision(_facts(gpus))
    assert d['present'] and d['volta'] == volta and d['kernel_module'] == module
    assert d['expected_gpus'] == len(gpus)


def test_no_gpu_and_no_force():
    d = nvidia_driver_decision(_facts())
    assert not d['present'] and d['reason'] == 'no NVIDIA GPU on the PCI bus'
    d = nvidia_driver_decision(_facts(), force=True)
    assert d['present'] and d['kernel_module'] == 'open' and d['reason'] == 'nvidia_driver_force is true'
    # No facts at all (none gathered, none injected) is a host without a GPU.
    assert not nvidia_driver_decision(None)['present']


@pytest.mark.parametrize('driver, args, satisfied', [
    ('580.95.05', {}, True),
    ('580.159.04', {}, True),
    ('570.172.08', {}, False),
    (None, {}, False),
    ('580.95.05', {'version': '580.95.05'}, True),
    ('580.159.04', {'version': '580.95.05'}, False),
    ('580.95.05', {'kernel_module': 'open'}, False),  # proprietary loaded, open asked for
    ('580.95.05', {'kernel_module': 'proprietary'}, True),
    ('580.95.05', {'bake': True}, False),  # a builder's driver says nothing of the image
])
def test_satisfied(driver, args, satisfied):
    assert nvidia_driver_decision(_facts([H100], driver=driver, flavor='proprietary'), **args)['satisfied'] == satisfied


def test_branch_from_version_and_as_a_string():
    d = nvidia_driver_decision(_facts([B200]), version='590.44.01')
    assert d['branch'] == '590' and d['version'] == '590.44.01' and d['blackwell'] and d['kernel_module'] == 'open'
    assert d['summary'].endswith('branch 590 (590.44.01), open kernel modules, for every kernel that could boot, '
                                 'from cuda_repo')
    # An integer from the inventory is still the branch "580".
    assert nvidia_driver_decision(_facts([H100]), branch=580)['branch'] == '580'
    assert 'for the target kernel only' in nvidia_driver_decision(_facts([H100]), kernels='target')['summary']


def test_a_branch_that_is_no_number_is_refused():
    errors = nvidia_driver_input_errors(nvidia_driver_decision(_facts([H100]), branch='latest'), branch='latest')
    assert errors == ['nvidia_driver_branch must be a driver branch such as "580", and nvidia_driver_version a '
                      'version such as "580.95.05"; got branch latest and version .']


@pytest.mark.parametrize('nvswitch, setting, fabric_manager, nvlsm', [
    ({'present': True, 'generation': 3, 'source': 'pci', 'devices': ['0000:07:00.0']}, 'auto', True, False),
    ({'present': True, 'generation': 4, 'source': 'pci', 'devices': ['0000:03:00.0']}, 'auto', True, True),
    ({'present': False, 'generation': None, 'source': 'pci', 'devices': []}, 'auto', False, False),
    (None, 'auto', False, False),            # facts from before nvidia.nvswitch existed
    (None, 'always', True, False),
    ({'present': True, 'generation': 3, 'source': 'pci', 'devices': []}, 'never', False, False),
])
def test_fabric_manager_decision(nvswitch, setting, fabric_manager, nvlsm):
    d = nvidia_driver_decision(_facts([H100] * 8, nvswitch=nvswitch), fabric_manager=setting)
    assert d['fabric_manager'] == fabric_manager and d['nvlsm'] == nvlsm


def test_nouveau_from_problems():
    d = nvidia_driver_decision(_facts([T4], problems=['nouveau is bound to NVIDIA GPU(s) 0000:00:1e.0']))
    assert d['nouveau_bound']
    assert not nvidia_driver_decision(_facts([T4], problems=['something else']))['nouveau_bound']


# -- the distribution's own packages -----------------------------------------

DEBIAN_PACKAGES = {'open': ['nvidia-driver', 'nvidia-open-kernel-dkms'],
                   'proprietary': ['nvidia-driver', 'nvidia-kernel-dkms']}


def test_debian_ships_one_branch():
    d = nvidia_driver_decision(_facts([T4]), source='distro')
    errors = nvidia_driver_input_errors(d, distro_packages=DEBIAN_PACKAGES, distro_branches=['535'],
                                        distribution='Debian', distribution_version='12.8')
    assert errors == ['nvidia_driver_source is distro, but Debian 12.8 ships only branch 535, not 580. '
                      'Set nvidia_driver_source: cuda_repo or nvidia_driver_branch: "535".']
    d = nvidia_driver_decision(_facts([T4]), source='distro', branch='535')
    assert nvidia_driver_input_errors(d, distro_packages=DEBIAN_PACKAGES, distro_branches=['535'],
                                      allow_unsupported_branch=True) == []


def test_amazon_linux_has_no_driver_of_its_own():
    d = nvidia_driver_decision(_facts([T4]), source='distro')
    assert nvidia_driver_input_errors(d, distro_packages={}, distribution='Amazon', distribution_version='2023') == [
        'nvidia_driver_source is distro, but Amazon 2023 has no NVIDIA driver packages of its own. '
        'Set nvidia_driver_source: cuda_repo.']


def test_ubuntu_ships_every_branch():
    d = nvidia_driver_decision(_facts([T4]), source='distro', branch='595')
    assert nvidia_driver_input_errors(d, distro_packages={'open': ['x'], 'proprietary': ['y']},
                                      distro_branches=[]) == []


# -- the packages the package manager cannot install ---------------------------

# accel.nodes.dkms_kernels' answer for a node with an old kernel whose headers are gone.
REPORT = {'target': '6.1.0-99-cloud-amd64', 'targets': ['6.1.0-98-cloud-amd64', '6.1.0-99-cloud-amd64'],
          'kernels': [{'version': '6.1.0-98-cloud-amd64', 'headers_package': 'linux-headers-6.1.0-98-cloud-amd64'},
                      {'version': '6.1.0-99-cloud-amd64', 'headers_package': 'linux-headers-6.1.0-99-cloud-amd64'}]}
HEADERS = ['linux-headers-6.1.0-98-cloud-amd64', 'linux-headers-6.1.0-99-cloud-amd64', 'linux-headers-cloud-amd64']


def test_nothing_missing_is_no_message():
    assert nvidia_driver_missing_packages([], HEADERS, REPORT) == ''


def test_missing_headers_come_first_and_name_the_kernel_and_the_fix():
    msg = nvidia_driver_missing_packages(['linux-headers-6.1.0-98-cloud-amd64', 'dkms', 'cuda-drivers'], HEADERS,
                                         REPORT)
    assert msg.startswith('The headers of kernel 6.1.0-98-cloud-amd64 cannot be installed: no repository offers '
                          'linux-headers-6.1.0-98-cloud-amd64. DKMS needs them to build the NVIDIA module for every '
                          'kernel the node could boot into (6.1.0-98-cloud-amd64, 6.1.0-99-cloud-amd64)')
    assert 'nvidia_driver_kernels: target to build for the target kernel 6.1.0-99-cloud-amd64 only' in msg
    assert msg.endswith('nvidia_driver_kernel_headers_package.')


def test_missing_dkms_says_where_it_comes_from():
    assert nvidia_driver_missing_packages(['dkms', 'cuda-drivers'], HEADERS, REPORT, dkms_hint='dkms comes from EPEL') == (
        'dkms cannot be installed, and the driver needs it to build its kernel module: dkms comes from EPEL. '
        'Nothing was installed.')


def test_missing_driver_packages_name_the_repository():
    url = 'https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/'
    assert nvidia_driver_missing_packages(['nvidia-driver-pinning-590'], HEADERS, REPORT, repo_url=url, branch='590',
                                          cuda_dist='debian12') == (
        "nvidia-driver-pinning-590 cannot be installed from the configured repositories (NVIDIA's CUDA repository at "
        + url + '). Check that NVIDIA publishes branch 590 for debian12 there, or choose another nvidia_driver_branch '
        'or nvidia_driver_version. Nothing was installed.')
    assert nvidia_driver_missing_packages(['nvidia-driver-580-server'], source='distro') == (
        "nvidia-driver-580-server cannot be installed from the configured repositories (the distribution's archive): "
        'enable the archive component that carries them, or set nvidia_driver_source: cuda_repo. Nothing was '
        'installed.')


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {'nvidia_driver_decision', 'nvidia_driver_input_errors',
                                             'nvidia_driver_missing_packages', 'nvidia_driver_packages'}


# -- what the role installs --------------------------------------------------

def _decision(**kwargs):
    return dict({'source': 'cuda_repo', 'kernel_module': 'open', 'version': '', 'branch': '580'}, **kwargs)


def test_apt_cuda_repo_pins_the_branch_first():
    p = nvidia_driver_packages(_decision(), 'apt', headers=['linux-headers-6.1.0-28-amd64'],
                               pin_package='nvidia-driver-pinning-580',
                               cuda_repo_packages={'open': ['nvidia-open'], 'proprietary': ['cuda-drivers']},
                               persistenced_packages=['nvidia-persistenced'])
    assert p == {'pin': ['nvidia-driver-pinning-580'], 'driver': ['nvidia-open', 'nvidia-persistenced'],
                 'required': ['linux-headers-6.1.0-28-amd64', 'dkms', 'nvidia-driver-pinning-580', 'nvidia-open',
                              'nvidia-persistenced']}


def test_dnf_streams_are_not_required_and_versions_name_the_packages():
    p = nvidia_driver_packages(_decision(kernel_module='proprietary', version='580.95.05'), 'dnf',
                               cuda_repo_packages={'proprietary': ['@nvidia-driver:580-dkms']},
                               cuda_repo_version_packages={'proprietary': ['nvidia-driver-580.95.05']},
                               persistenced_packages=['nvidia-persistenced'], persistence_mode='false')
    assert p['pin'] == [] and p['driver'] == ['@nvidia-driver:580-dkms', 'nvidia-driver-580.95.05']
    assert p['required'] == ['dkms', 'nvidia-driver-580.95.05']


def test_distro_versions_and_own_packages():
    p = nvidia_driver_packages(_decision(source='distro', version='580.95.05'), 'apt',
                               distro_packages={'open': ['nvidia-driver-580-server-open']},
                               pin_package='nvidia-driver-pinning-580.95.05')
    assert p['driver'] == ['nvidia-driver-580-server-open=580.95.05-*'] and p['pin'] == []
    assert p['required'] == ['dkms', 'nvidia-driver-580-server-open']
    own = nvidia_driver_packages(_decision(), 'apt', own_packages=['nvidia-driver-580-open'],
                                 pin_package='nvidia-driver-pinning-580', cuda_repo_packages={'open': ['nvidia-open']})
    assert own['pin'] == [] and own['driver'] == ['nvidia-driver-580-open']


def test_smi_gpus_only_where_the_facts_hold_what_nvidia_smi_listed(h200, gathered):
    """The role asks nvidia-smi -L itself where the facts did not run nvidia-smi (None), and counts a GPU that
    nvidia-smi did not list (no memory.total) as unseen."""
    assert nvidia_driver_decision(gathered('p3.16xlarge'))['smi_gpus'] is None  # gathered without nvidia_smi
    lost = json.loads(json.dumps(h200))
    lost['nvidia']['gpus'].append(dict(lost['nvidia']['gpus'][0], pci_bus_id='0000:19:00.0', memory_total_mib=None))
    d = nvidia_driver_decision(lost)
    assert (d['pci_gpus'], d['smi_gpus']) == (2, 1)
    failed = dict(h200, sources=dict(h200['sources'], nvidia_smi='rc 9'))
    assert nvidia_driver_decision(failed)['smi_gpus'] is None


# -- branches NVIDIA supports (Data Center Drivers 620, "Supported Drivers and CUDA Toolkit Versions") ----

@pytest.mark.parametrize('branch', ['580', '595', '620'])
def test_supported_branches_pass(branch):
    d = nvidia_driver_decision(_facts([T4]), branch=branch)
    assert d['present'] and nvidia_driver_input_errors(d, branch=branch) == []


def test_r535_from_debian_12s_archive_is_refused_with_the_reason():
    d = nvidia_driver_decision(_facts([T4]), branch='535', source='distro')
    errors = nvidia_driver_input_errors(d, branch='535', distro_packages={'open': ['nvidia-driver'], 'proprietary': []},
                                        distro_branches=['535'], distribution='Debian', distribution_version='12.8')
    assert errors == [
        'R535 reached its end of life in June 2026: NVIDIA no longer fixes it. NVIDIA supports R580 (Long Term Support '
        'Branch, end of life June 2028), R595 (Production Branch, end of life March 2027), R620 (Long Term Support '
        'Branch, end of life September 2029). Debian 12.8 ships only branch 535 in its own archive. Set '
        'nvidia_driver_branch to one of them with nvidia_driver_source: cuda_repo, or '
        'nvidia_driver_allow_unsupported_branch: true to install R535 anyway.']
    assert nvidia_driver_input_errors(d, branch='535', distro_packages={'open': ['nvidia-driver'], 'proprietary': []},
                                      distro_branches=['535'], allow_unsupported_branch='true') == []


def test_a_branch_nvidia_never_listed_for_data_center_is_refused():
    errors = nvidia_driver_input_errors(nvidia_driver_decision(_facts([T4]), branch='550'), branch='550')
    assert len(errors) == 1
    assert errors[0].startswith('R550 is not among the branches NVIDIA supports for data center GPUs. NVIDIA supports')


@pytest.mark.parametrize('instance_type', ['p6-b300.48xlarge', 'p6e-gb200.36xlarge', 'g7e.2xlarge', 'g7.2xlarge'])
def test_a_bake_for_a_newer_blackwell_type_on_a_host_without_gpus_gets_the_open_modules(instance_type):
    from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog  # pylint: disable=import-outside-toplevel
    expected = _ec2_catalog.expected(instance_type)
    acc = _facts(expected=expected, instance_type=instance_type)
    d = nvidia_driver_decision(acc, bake=True)
    assert d['blackwell'] and d['kernel_module'] == 'open'
    assert nvidia_driver_input_errors(nvidia_driver_decision(acc, bake=True, kernel_module='proprietary'))
