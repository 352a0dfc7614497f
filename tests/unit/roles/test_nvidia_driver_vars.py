# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Render the nvidia_driver role's per-OS data for every supported OS.

The role loads vars/<os_family>.yml, then the first of vars/<Distribution>-<major>.yml
and vars/<os_family>-<major>.yml (tasks/main.yml). This test does the same, adds
defaults/main.yml and vars/main.yml, and templates the results with Ansible's own
Templar: no playbook runs. The decision itself is Python, tested in
tests/unit/plugins/filter/test_nvidia_driver.py.
"""

from __future__ import annotations

import os
import sys
import re

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.module_utils import _kernels
from ansible_collections.accel.nodes.plugins.filter.driver_plan import nvidia_driver_probe_request

sys.path.insert(0, os.path.dirname(__file__))
from role_files import ROLES, load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

CUDA = 'https://developer.download.nvidia.com/compute/cuda/repos'
KERNEL = '6.8.0-1024-aws'


def os_vars_files(facts):
    """The vars files the role loads for these facts, in load order, or None when
    the distribution is not supported."""
    family = '%s.yml' % facts['os_family']
    candidates = ['%s-%s.yml' % (facts['distribution'], facts['distribution_major_version']),
                  '%s-%s.yml' % (facts['os_family'], facts['distribution_major_version'])]
    found = [c for c in candidates if os.path.exists(os.path.join(ROLES, 'nvidia_driver', 'vars', c))]
    if not found or not os.path.exists(os.path.join(ROLES, 'nvidia_driver', 'vars', family)):
        return None
    return [family, found[0]]


def render(facts, decision=None, kernel=KERNEL, **overrides):
    """A templar over the role's variables for a host with these facts."""
    variables = {}
    variables.update(load('nvidia_driver', 'defaults', 'main.yml'))
    variables.update(load('nvidia_driver', 'vars', 'main.yml'))
    files = os_vars_files(facts)
    assert files, 'no vars file for %r' % facts
    for name in files:
        variables.update(load('nvidia_driver', 'vars', name))
    variables.update(trusted(overrides))
    variables['ansible_facts'] = dict(facts, kernel=kernel)
    variables['ansible_check_mode'] = False
    # What accel.nodes.dkms_kernels answers for a node with this one kernel.
    headers = [_kernels.headers_package(facts['distribution'], kernel)]
    variables.setdefault('nvidia_driver_kernels_report', {
        'target': kernel, 'targets': [kernel], 'headers_metapackages': [], 'module_versions': [],
        'headers_packages': headers, 'headers_to_install': headers})
    variables['nvidia_driver_probe'] = {'packages': {}}
    variables['nvidia_driver_decision'] = dict({
        'branch': '580', 'version': '', 'kernel_module': 'open', 'source': 'cuda_repo', 'kernel': kernel,
    }, **(decision or {}))
    return Templar(loader=DataLoader(), variables=variables)


def value(templar, name):
    return templar.template(trust_as_template('{{ %s }}' % name))


def repository(templar):
    """The CUDA repository and key of nvidia_driver_plan, as tasks/main.yml sets it (for the removal, whose plan
    needs no decision: the repository does not depend on it)."""
    task = next(t for t in load('nvidia_driver', 'tasks', 'main.yml') if t['name'] == 'Decide what the role does on this node')
    expr = task['ansible.builtin.set_fact']['nvidia_driver_plan'].replace(
        '__nvidia_driver_settings |', '(__nvidia_driver_settings | combine({"state": "absent"})) |')
    return templar.template(trust_as_template(expr))['repo']


def packages_plan(templar):
    """nvidia_driver_packages_plan as tasks/install.yml sets it after accel.nodes.dkms_kernels."""
    task = next(t for t in load('nvidia_driver', 'tasks', 'install.yml') if t['name'] == 'Decide the packages to install')
    return templar.template(task['ansible.builtin.set_fact']['nvidia_driver_packages_plan'])


def host(distribution, version, os_family, architecture='x86_64'):
    return {
        'distribution': distribution,
        'distribution_version': version,
        'distribution_major_version': version.split('.')[0],
        'os_family': os_family,
        'architecture': architecture,
    }


SUPPORTED = [
    # facts, CUDA repository directory, package manager, headers package
    (host('Ubuntu', '20.04', 'Debian'), 'ubuntu2004', 'apt', 'linux-headers-' + KERNEL),
    (host('Ubuntu', '22.04', 'Debian'), 'ubuntu2204', 'apt', 'linux-headers-' + KERNEL),
    (host('Ubuntu', '24.04', 'Debian'), 'ubuntu2404', 'apt', 'linux-headers-' + KERNEL),
    (host('Debian', '12.8', 'Debian'), 'debian12', 'apt', 'linux-headers-' + KERNEL),
    (host('Debian', '13.2', 'Debian'), 'debian13', 'apt', 'linux-headers-' + KERNEL),
    (host('Amazon', '2023', 'RedHat'), 'amzn2023', 'dnf', 'kernel6.8-devel-' + KERNEL),
    (host('RedHat', '9.4', 'RedHat'), 'rhel9', 'dnf', 'kernel-devel-' + KERNEL),
    (host('Rocky', '9.4', 'RedHat'), 'rhel9', 'dnf', 'kernel-devel-' + KERNEL),
    (host('AlmaLinux', '9.4', 'RedHat'), 'rhel9', 'dnf', 'kernel-devel-' + KERNEL),
]
IDS = ['%s-%s' % (f['distribution'], f['distribution_version']) for f, _d, _p, _h in SUPPORTED]


@pytest.mark.parametrize('facts, dist, manager, headers', SUPPORTED, ids=IDS)
def test_repository_and_headers(facts, dist, manager, headers):
    t = render(facts)
    # NVIDIA signs the debian13 tree with its own key (NVIDIA/cuda-repo-management#39).
    key = {'apt': '3bf863cc.pub', 'dnf': 'D42D0685.pub'}[manager] if dist != 'debian13' else '8793F200.pub'
    assert value(t, '__nvidia_driver_package_manager') == manager
    assert repository(t)['url'] == '%s/%s/x86_64/' % (CUDA, dist)
    assert repository(t)['key_url'] == '%s/%s/x86_64/%s' % (CUDA, dist, key)
    # The headers package is named in Python now (accel.nodes.dkms_kernels), and installed as the role lists it.
    assert _kernels.headers_package(facts['distribution'], KERNEL) == headers
    assert packages_plan(t)['required'][0] == headers


@pytest.mark.parametrize('facts, dist, manager, headers', SUPPORTED, ids=IDS)
@pytest.mark.parametrize('flavour', ['open', 'proprietary'])
def test_cuda_repo_packages(facts, dist, manager, headers, flavour):
    t = render(facts, {'kernel_module': flavour})
    packages = packages_plan(t)['driver']
    pins = packages_plan(t)['pin']
    if manager == 'apt':
        # NVIDIA's pinning package keeps apt on the branch; the metapackages resolve inside it.
        assert pins == ['nvidia-driver-pinning-580']
        assert packages[0] == {'open': 'nvidia-open', 'proprietary': 'cuda-drivers'}[flavour]
    else:
        # dnf: the module stream is the pin.
        assert pins == []
        assert packages[0] == {'open': '@nvidia-driver:580-open', 'proprietary': '@nvidia-driver:580-dkms'}[flavour]
    # Ubuntu's CUDA metapackages pull nvidia-persistenced with the utilities; elsewhere it is a package of its own.
    assert packages[1:] == ([] if facts['distribution'] == 'Ubuntu' else ['nvidia-persistenced'])
    required = packages_plan(t)['required']
    assert required[:2] == [headers, 'dkms']
    assert not [p for p in required if p.startswith('@')]


@pytest.mark.parametrize('facts, dist, manager, headers', SUPPORTED, ids=IDS)
def test_exact_version(facts, dist, manager, headers):
    t = render(facts, {'version': '580.95.05', 'kernel_module': 'proprietary'})
    if manager == 'apt':
        assert packages_plan(t)['pin'] == ['nvidia-driver-pinning-580.95.05']
        assert packages_plan(t)['driver'][0] == 'cuda-drivers'
    else:
        assert packages_plan(t)['driver'][:3] == [
            '@nvidia-driver:580-dkms', 'nvidia-driver-580.95.05', 'kmod-nvidia-latest-dkms-580.95.05']


@pytest.mark.parametrize('version, flavour, expected', [
    ('22.04', 'open', ['nvidia-driver-580-server-open']),
    ('24.04', 'proprietary', ['nvidia-driver-580-server']),
])
def test_ubuntu_distro_packages(version, flavour, expected):
    t = render(host('Ubuntu', version, 'Debian'), {'source': 'distro', 'kernel_module': flavour})
    assert packages_plan(t)['driver'] == expected
    assert packages_plan(t)['pin'] == []
    t = render(host('Ubuntu', version, 'Debian'), {'source': 'distro', 'kernel_module': flavour, 'version': '580.95.05'})
    assert packages_plan(t)['driver'] == [expected[0] + '=580.95.05-*']


def test_debian_distro_packages():
    t = render(host('Debian', '12.8', 'Debian'), {'source': 'distro', 'kernel_module': 'proprietary', 'branch': '535'})
    assert packages_plan(t)['driver'] == ['nvidia-driver', 'nvidia-kernel-dkms', 'nvidia-persistenced']
    assert value(t, '__nvidia_driver_distro_branches') == ['535']
    t = render(host('Debian', '12.8', 'Debian'), {'source': 'distro', 'kernel_module': 'open', 'branch': '535'})
    assert packages_plan(t)['driver'][:2] == ['nvidia-driver', 'nvidia-open-kernel-dkms']


@pytest.mark.parametrize('facts', [host('Amazon', '2023', 'RedHat'), host('Rocky', '9.4', 'RedHat')])
def test_no_distro_driver_on_dnf(facts):
    assert value(render(facts), '__nvidia_driver_distro_packages') == {}


def test_arm64_uses_sbsa():
    t = render(host('Ubuntu', '24.04', 'Debian', architecture='aarch64'))
    assert repository(t)['url'] == CUDA + '/ubuntu2404/sbsa/'
    assert repository(t)['arch'] == 'sbsa'


def test_mirror_and_overrides():
    t = render(host('Debian', '12.8', 'Debian'),
               nvidia_driver_repo_url='file:///srv/accel-repos/cuda/',
               nvidia_driver_repo_key_url='file:///srv/accel-repos/keys/cuda.asc',
               nvidia_driver_packages=['nvidia-driver-580-open'])
    assert repository(t)['url'] == 'file:///srv/accel-repos/cuda/debian12/x86_64/'
    assert repository(t)['key_url'] == 'file:///srv/accel-repos/keys/cuda.asc'
    # Packages of one's own replace the role's choice, pin included.
    assert packages_plan(t)['driver'] == ['nvidia-driver-580-open']
    assert packages_plan(t)['pin'] == []


def test_default_fingerprints_are_the_cuda_keys():
    defaults = load('nvidia_driver', 'defaults', 'main.yml')
    assert defaults['nvidia_driver_repo_key_fingerprint'] == [
        'EB693B3035CD5710E231E123A4B469963BF863CC',  # 3bf863cc.pub, apt
        '610C7B14E068A878070DA4E99CD0A493D42D0685',  # D42D0685.pub, RPM
        '02182E60104FCDC26EAE1B8597A5D4CB8793F200',  # 8793F200.pub, debian13
    ]


# AL2023 ships its 6.1 kernel as the package "kernel" and each newer series as a
# package of its own (kernel6.12, kernel6.18), headers included: the EKS AMI's
# install-neuron-driver.sh installs "${KERNEL_PACKAGE}-devel" with
# KERNEL_PACKAGE=kernel6.12 on a 6.12 kernel.
@pytest.mark.parametrize('kernel, headers', [
    ('6.1.102-108.177.amzn2023.x86_64', 'kernel-devel-6.1.102-108.177.amzn2023.x86_64'),
    ('6.12.40-63.114.amzn2023.x86_64', 'kernel6.12-devel-6.12.40-63.114.amzn2023.x86_64'),
    ('6.18.2-10.45.amzn2023.aarch64', 'kernel6.18-devel-6.18.2-10.45.amzn2023.aarch64'),
])
def test_amazon_linux_2023_headers_follow_the_kernel_series(kernel, headers):
    assert _kernels.headers_package('Amazon', kernel) == headers
    t = render(host('Amazon', '2023', 'RedHat'), kernel=kernel)
    assert packages_plan(t)['required'][0] == headers


def test_rhel_headers_stay_kernel_devel():
    assert _kernels.headers_package('Rocky', '5.14.0-427.13.1.el9_4.x86_64') == 'kernel-devel-5.14.0-427.13.1.el9_4.x86_64'


def test_every_kernel_headers_and_the_metapackage_are_required():
    report = {'target': KERNEL, 'targets': [KERNEL, '6.8.0-1025-aws'], 'module_versions': [],
              'headers_packages': ['linux-headers-' + KERNEL, 'linux-headers-6.8.0-1025-aws'],
              'headers_metapackages': ['linux-headers-aws'],
              'headers_to_install': _kernels.headers_to_install(
                  ['linux-headers-' + KERNEL, 'linux-headers-6.8.0-1025-aws'], ['linux-headers-aws'], 'all')}
    t = render(host('Ubuntu', '24.04', 'Debian'), nvidia_driver_kernels_report=report)
    assert packages_plan(t)['required'][:4] == [
        'linux-headers-' + KERNEL, 'linux-headers-6.8.0-1025-aws', 'linux-headers-aws', 'dkms']


@pytest.mark.parametrize('facts', [
    host('Ubuntu', '26.04', 'Debian'), host('Debian', '14.0', 'Debian'), host('Amazon', '2', 'RedHat'),
    host('RedHat', '10.0', 'RedHat'), host('SLES', '15.6', 'Suse'),
    # ansible-core 2.17 and later cannot manage EL8's platform Python 3.6.
    host('RedHat', '8.10', 'RedHat'), host('Rocky', '8.10', 'RedHat'),
])
def test_unsupported_os_has_no_vars(facts):
    assert os_vars_files(facts) is None


@pytest.mark.parametrize('name, matches', [
    ('cuda-drivers', True), ('nvidia-driver-pinning-580', True), ('nvidia-kernel-dkms', True),
    ('libnvidia-compute-580', True), ('libcuda1', True), ('nvidia-persistenced', True),
    ('nvidia-container-toolkit', False), ('libnvidia-container1', False),
    # Fabric Manager and NVLSM move with the driver: held with it, removed with it.
    ('nvidia-fabricmanager-580', True), ('nvidia-fabricmanager', True), ('nvlsm', True),
    ('nvidia-fabricmanager-dev-580', False), ('libibumad3', False), ('infiniband-diags', False),
    ('nvidia-cuda-toolkit', False), ('linux-headers-6.1.0-28-amd64', False), ('dkms', False),
])
def test_owned_packages_on_apt(name, matches):
    t = render(host('Debian', '12.8', 'Debian'))
    owned = re.match(value(t, '__nvidia_driver_owned_packages'), name)
    foreign = re.match(value(t, '__nvidia_driver_foreign_packages'), name)
    assert bool(owned and not foreign) == matches


def test_injected_plain_variable():
    """set_fact without cacheable leaves ansible_facts alone: the plain variable counts too."""
    t = render(host('Debian', '12.8', 'Debian'), accelerators={'vendors': ['nvidia']})
    assert value(t, '__nvidia_driver_facts') == {'vendors': ['nvidia']}
    t = render(host('Debian', '12.8', 'Debian'))
    assert value(t, '__nvidia_driver_facts') in (None, '')  # '' on ansible-core 2.18


@pytest.mark.parametrize('facts, manager', [(f, m) for f, _d, m, _h in SUPPORTED], ids=IDS)
@pytest.mark.parametrize('branch, version, nvlsm', [('580', '580.95.05', False), ('570', '570.172.08', True)])
def test_fabric_manager_packages(facts, manager, branch, version, nvlsm):
    t = render(facts, {'branch': branch, 'nvlsm': nvlsm}, nvidia_driver_version=version)
    if manager == 'apt':
        name = 'nvidia-fabricmanager' if branch == '580' else 'nvidia-fabricmanager-' + branch
        install = name + '=' + version + '-*'
        extra = ['libibumad3', 'infiniband-diags', 'nvlsm']
    else:
        name = 'nvidia-fabricmanager' if branch == '580' else 'nvidia-fabric-manager'
        install = name + '-' + version
        extra = ['libibumad', 'infiniband-diags', 'nvlsm']
    plan = fabric_manager_plan(t)
    assert plan['packages'] == [name] + (extra if nvlsm else [])
    assert plan['install'] == [install] + (extra if nvlsm else [])
    assert plan['to_install'] == plan['packages']  # the probe saw none of them
    assert plan['hold'] == [name] + (['nvlsm'] if nvlsm else [])


def fabric_manager_plan(templar, packages=None):
    """nvidia_driver_fabric_manager_plan as tasks/fabric-manager.yml sets it, with the role's per-OS data."""
    task = next(t for t in load('nvidia_driver', 'tasks', 'fabric-manager.yml')
                if t['name'] == "Decide Fabric Manager's version and packages")
    variables = templar.available_variables
    variables['nvidia_driver_probe'] = {'packages': packages or {}}
    templar.available_variables = variables
    return templar.template(task['ansible.builtin.set_fact']['nvidia_driver_fabric_manager_plan'])


def _built(*versions):
    """accel.nodes.dkms_kernels' answer once the module of these versions is installed for the targets."""
    return {'nvidia_driver_kernels_report': {'target': KERNEL, 'targets': [KERNEL], 'headers_packages': [],
                                             'headers_metapackages': [], 'headers_to_install': [],
                                             'module_versions': list(versions)}}


@pytest.mark.parametrize('decision, overrides, version', [
    ({'satisfied': True, 'loaded_version': '580.159.04'}, {}, '580.159.04'),
    ({'satisfied': False, 'loaded_version': None}, _built('580.95.05'), '580.95.05'),
    # Several versions on several kernels: the newest, which the next boot loads from the newest kernel.
    ({'satisfied': False, 'loaded_version': None}, _built('580.95.05', '580.105.08'), '580.105.08'),
    ({'satisfied': False, 'loaded_version': '570.172.08'}, {'nvidia_driver_version': '580.105.08'}, '580.105.08'),
    ({'satisfied': False, 'loaded_version': None}, _built(), ''),   # check mode before the install: unknown
])
def test_fabric_manager_follows_the_driver_version(decision, overrides, version):
    t = render(host('Debian', '12.8', 'Debian'), decision, **overrides)
    assert fabric_manager_plan(t)['version'] == version


def test_fabric_manager_at_the_driver_version_is_not_installed_again():
    t = render(host('Debian', '12.8', 'Debian'), {'satisfied': True, 'loaded_version': '580.95.05'})
    at = {'nvidia-fabricmanager': {'version': '580.95.05-1', 'selection': 'hold', 'status': 'installed'}}
    assert fabric_manager_plan(t, at)['to_install'] == []
    older = {'nvidia-fabricmanager': dict(at['nvidia-fabricmanager'], version='580.82.07-1')}
    assert fabric_manager_plan(t, older)['to_install'] == ['nvidia-fabricmanager']


def test_fabric_manager_already_held_runs_no_dpkg_holds():
    """hold_change: whether dpkg_holds would set a selection (nvidia_driver_hold, default true), or must judge a
    package the probe did not see."""
    t = render(host('Debian', '12.8', 'Debian'), {'satisfied': True, 'loaded_version': '580.95.05'})
    held = {'nvidia-fabricmanager': {'version': '580.95.05-1', 'selection': 'hold', 'status': 'installed'}}
    assert fabric_manager_plan(t, held)['hold_change'] is False
    assert fabric_manager_plan(t, {'nvidia-fabricmanager': dict(held['nvidia-fabricmanager'], selection='install')})[
        'hold_change'] is True
    assert fabric_manager_plan(t, {})['hold_change'] is True   # not installed yet: the install comes first
    released = render(host('Debian', '12.8', 'Debian'), {'satisfied': True, 'loaded_version': '580.95.05'},
                      nvidia_driver_hold=False)
    assert fabric_manager_plan(released, held)['hold_change'] is True


@pytest.mark.parametrize('facts', [host('Debian', '12.8', 'Debian'), host('Rocky', '9.4', 'RedHat')])
def test_the_probe_reads_the_nvlink_subnet_managers_packages(facts):
    """On fourth-generation NVSwitch nodes Fabric Manager comes with the NVLink Subnet Manager's packages: the
    probe must read them all, or to_install is never empty and apt or dnf runs on every re-run."""
    t = render(facts, {'satisfied': True, 'loaded_version': '580.95.05', 'nvlsm': True})
    nvlsm = value(t, '__nvidia_driver_nvlsm_packages')
    probe = nvidia_driver_probe_request(value(t, '__nvidia_driver_settings'), None, False)['packages']
    assert len(nvlsm) == 3 and [n for n in nvlsm if not any(re.search(p, n) for p in probe)] == []
    seen = {n: {'version': '580.95.05-1', 'selection': 'hold', 'status': 'installed'} for n in nvlsm}
    seen['nvidia-fabricmanager'] = dict(seen['nvlsm'])
    assert fabric_manager_plan(t, seen)['to_install'] == []


@pytest.mark.parametrize('tasks', ['hold.yml', 'absent.yml'])
@pytest.mark.parametrize('facts', [host('Debian', '12.8', 'Debian'), host('Rocky', '9.4', 'RedHat')])
def test_the_driver_packages_among_the_installed_ones(facts, tasks):
    """apt: what accel.nodes.dpkg_holds named (kernel packages included); dnf: ansible_facts.packages."""
    installed = ['cuda-drivers', 'nvidia-driver-pinning-580', 'nvidia-container-toolkit', 'libnvidia-container1',
                 'kmod-nvidia-latest-dkms', 'dkms', 'linux-image-6.1.0-28-cloud-amd64']
    t = render(facts, nvidia_driver_holds={'names': installed})
    t.available_variables = dict(t.available_variables, nvidia_driver_plan={'owned_patterns': {
        'owned': value(t, '__nvidia_driver_owned_packages'), 'foreign': value(t, '__nvidia_driver_foreign_packages')}})
    variables = t.available_variables
    variables['ansible_facts'] = dict(variables['ansible_facts'], packages={n: [{}] for n in installed})
    t.available_variables = variables
    task = next(x for x in load('nvidia_driver', 'tasks', tasks)
                if x['name'] == 'Name the installed packages that belong to the driver')
    owned = t.template(task['ansible.builtin.set_fact']['nvidia_driver_owned_packages'])
    if facts['os_family'] == 'Debian':
        assert owned == ['cuda-drivers', 'nvidia-driver-pinning-580']
    else:
        assert owned == ['cuda-drivers', 'kmod-nvidia-latest-dkms', 'nvidia-driver-pinning-580']


# Package names of NVIDIA's CUDA repositories (Debian 12, Ubuntu, RHEL 9, Amazon Linux 2023) and of Debian's
# non-free archive, one or more for each alternative of the owned patterns, and some that are not the driver's.
DRIVER_PACKAGE_NAMES = [
    'cuda-drivers', 'cuda-drivers-580', 'cuda-drivers-fabricmanager-580', 'nvidia-driver', 'nvidia-driver-580-open',
    'nvidia-driver-pinning-580', 'nvidia-kernel-open-dkms', 'nvidia-fabricmanager-580', 'nvidia-fabric-manager',
    'nvidia-persistenced', 'nvidia-smi', 'libnvidia-ml1', 'libnvidia-compute-580', 'libcuda1', 'libcuda1-i386',
    'libnvcuvid1', 'libnvoptix1', 'libxnvctrl0', 'xserver-xorg-video-nvidia', 'firmware-nvidia-gsp',
    'kmod-nvidia-latest-dkms', 'kmod-nvidia-open-dkms', 'xorg-x11-nvidia', 'dkms-nvidia', 'nvlsm',
    'nvidia-driver-cuda-libs', 'libnvidia-fbc', 'nvidia-container-toolkit', 'libnvidia-container1', 'dkms',
    'cuda-toolkit-12-8', 'nvlsm-dev', 'libcudart12',
]
