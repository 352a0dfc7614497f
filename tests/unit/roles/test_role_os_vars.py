# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What runs where: every role's per-OS data, rendered for every OS the role claims.

Each role claims its platforms in meta/main.yml. For each claimed OS this test loads
the role's vars files the way its tasks do (defaults/main.yml, vars/main.yml, then the
per-OS files), templates the package names and repository URLs with Ansible's own
Templar, and checks them against the vendors' published tables, cited at each table.

Only Debian 12 runs in Molecule; the other rows are checked here and nowhere else.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import sys

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.module_utils import _kernels
from ansible_collections.accel.nodes.plugins.filter import neuron, neuron_runtime_plan, toolkit_plan

sys.path.insert(0, os.path.dirname(__file__))
from role_files import ROLES, load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

ALL_ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in glob.glob(os.path.join(ROLES, '*', 'meta', 'main.yml')))

# Galaxy platform names and versions, as the roles' meta/main.yml spell them, to the
# facts Ansible gathers on such a host. EL stands for RHEL and its rebuilds.
PLATFORM_HOSTS = {
    ('Ubuntu', 'focal'): [('Ubuntu', '20.04', 'Debian', 'focal')],
    ('Ubuntu', 'jammy'): [('Ubuntu', '22.04', 'Debian', 'jammy')],
    ('Ubuntu', 'noble'): [('Ubuntu', '24.04', 'Debian', 'noble')],
    ('Debian', 'bookworm'): [('Debian', '12.8', 'Debian', 'bookworm')],
    ('Debian', 'trixie'): [('Debian', '13.2', 'Debian', 'trixie')],
    ('Amazon Linux', '2023'): [('Amazon', '2023', 'RedHat', '')],
    ('EL', '9'): [('RedHat', '9.4', 'RedHat', 'Plow'), ('Rocky', '9.4', 'RedHat', 'Blue Onyx'),
                  ('AlmaLinux', '9.4', 'RedHat', 'Seafoam Ocelot')],
}

# The OSes the Molecule scenarios run (their node images, tests/rig/node-image.sh).
RUN_IN_MOLECULE = {('Debian', '12'), ('Debian', '13')}


def _load(role, *parts):
    """A role file; {} where the role has none (not every role has vars/main.yml)."""
    return load(role, *parts, missing_ok=True)


def host(distribution, version, os_family, release='', architecture='x86_64', kernel='6.8.0-1024-aws'):
    return {
        'distribution': distribution,
        'distribution_version': version,
        'distribution_major_version': version.split('.')[0],
        'distribution_release': release,
        'os_family': os_family,
        'architecture': architecture,
        'kernel': kernel,
    }


def claimed_hosts(role):
    """The hosts a role claims in meta/main.yml, as fact dicts."""
    meta = _load(role, 'meta', 'main.yml')
    hosts = []
    for platform in meta['galaxy_info']['platforms']:
        for version in platform['versions']:
            key = (platform['name'], str(version))
            assert key in PLATFORM_HOSTS, '%s claims %r, which this test does not know' % (role, key)
            hosts.extend(host(*h) for h in PLATFORM_HOSTS[key])
    return hosts


def _first(role, names):
    for name in names:
        if os.path.exists(os.path.join(ROLES, role, 'vars', name)):
            return name
    return None


def vars_files(role, facts):
    """The per-OS vars files the role's tasks load for these facts, in order."""
    d, major, family = facts['distribution'], facts['distribution_major_version'], facts['os_family']
    if role == 'nvidia_driver':  # tasks/main.yml: <family>.yml, then the first of <Dist>-<major>, <family>-<major>
        second = _first(role, ['%s-%s.yml' % (d, major), '%s-%s.yml' % (family, major)])
        return ['%s.yml' % family, second] if second else None
    if role == 'neuron_driver':  # tasks/variables.yml: <family>.yml, then <Dist>-<major>.yml if there is one
        return ['%s.yml' % family] + [n for n in ['%s-%s.yml' % (d, major)] if _first(role, [n])]
    if role in ('docker', 'nvidia_container_toolkit'):  # first_found <Dist>-<major>, <Dist>, <family>
        found = _first(role, ['%s-%s.yml' % (d, major), '%s.yml' % d, '%s.yml' % family])
        return [found] if found else None
    if role == 'neuron_container_runtime':  # tasks/variables.yml: <family>.yml
        return ['%s.yml' % family]
    return []  # oci_add_hooks, accelerator_validation: vars/main.yml only


def render(role, facts, **extra):
    variables = {}
    variables.update(_load(role, 'defaults', 'main.yml'))
    variables.update(_load(role, 'vars', 'main.yml'))
    files = vars_files(role, facts)
    assert files is not None, '%s has no vars for %r' % (role, facts)
    for name in files:
        variables.update(_load(role, 'vars', name))
    variables['ansible_facts'] = facts
    variables['ansible_check_mode'] = False
    variables.update(trusted(extra))
    return Templar(loader=DataLoader(), variables=variables)


def value(templar, expr):
    return templar.template(trust_as_template('{{ %s }}' % expr))


def _ids(hosts):
    return ['%s-%s' % (h['distribution'], h['distribution_version']) for h in hosts]


def _cases(role):
    hosts = claimed_hosts(role)
    return pytest.mark.parametrize('facts', hosts, ids=_ids(hosts))


# What the roles claim.

@pytest.mark.parametrize('role', ALL_ROLES)
def test_no_role_claims_el8(role):
    """ansible-core 2.17 and later cannot manage EL8's platform Python (3.6, the only
    one with dnf bindings), and meta/runtime.yml requires ansible-core 2.18."""
    meta = _load(role, 'meta', 'main.yml')
    for platform in meta['galaxy_info']['platforms']:
        if platform['name'] == 'EL':
            assert '8' not in [str(v) for v in platform['versions']], role
    assert not os.path.exists(os.path.join(ROLES, role, 'vars', 'RedHat-8.yml'))


@pytest.mark.parametrize('role', ALL_ROLES)
def test_every_claimed_os_has_its_vars(role):
    for facts in claimed_hosts(role):
        assert vars_files(role, facts) is not None, (role, facts)


def test_support_table():
    """Every OS some role claims, and how it was checked."""
    claimed = sorted({(h['distribution'], h['distribution_major_version']) for r in ALL_ROLES for h in claimed_hosts(r)})
    assert claimed == [('AlmaLinux', '9'), ('Amazon', '2023'), ('Debian', '12'), ('Debian', '13'), ('RedHat', '9'),
                       ('Rocky', '9'), ('Ubuntu', '20'), ('Ubuntu', '22'), ('Ubuntu', '24')]
    assert RUN_IN_MOLECULE <= set(claimed)


def test_nvidia_driver_branch_comment_names_the_branch_designations():
    """NVIDIA's support matrix (docs.nvidia.com/datacenter/tesla/drivers/620/
    supported-drivers-and-cuda-toolkit-versions.html): R580 and R620 are Long Term
    Support Branches, R595 the Production Branch; R535 ended in June 2026 (the 615 table)."""
    with open(os.path.join(ROLES, 'nvidia_driver', 'defaults', 'main.yml')) as f:
        text = f.read()
    comment = text.split('nvidia_driver_branch:')[0].rsplit('\n\n', 1)[-1]
    assert re.search(r'580 is NVIDIA.s Long Term Support branch', comment)
    assert re.search(r'the Production\s+# Branch is 595', comment)
    assert re.search(r'and so is 620 \(end of life September 2029\)', comment)
    assert re.search(r'535 reached its end of life in June\s+# 2026', comment)
    assert 'current production branch' not in comment
    assert _load('nvidia_driver', 'defaults', 'main.yml')['nvidia_driver_branch'] == '580'


# docker. Docker's install guides (docs.docker.com/engine/install/{ubuntu,debian,rhel,centos}):
# the apt repository https://download.docker.com/linux/<ubuntu|debian>, the RPM one
# https://download.docker.com/linux/<rhel|centos>/$releasever/$basearch/<channel>, and
# the packages docker-ce, docker-ce-cli, containerd.io. RHEL rebuilds use the centos
# repository. Amazon Linux 2023 ships docker and containerd itself, and Docker
# publishes no repository for it.
DOCKER_CE_DISTRO = {'Ubuntu': 'ubuntu', 'Debian': 'debian', 'RedHat': 'rhel', 'Rocky': 'centos', 'AlmaLinux': 'centos'}


@_cases('docker')
def test_docker(facts):
    t = render('docker', facts)
    packages = value(t, '__docker_packages')
    if facts['distribution'] == 'Amazon':
        assert packages == {'distro': {'docker': ['docker'], 'containerd': ['containerd']}, 'docker_ce': {}}
        return
    assert packages['docker_ce'] == {'docker': ['docker-ce', 'docker-ce-cli', 'containerd.io'], 'containerd': ['containerd.io']}
    repo = render('docker', facts, docker_install_source='docker_ce').template(
        trust_as_template('{{ __docker_settings | accel.nodes.docker_plan }}'))['repo']
    assert repo['url'] == 'https://download.docker.com/linux/' + DOCKER_CE_DISTRO[facts['distribution']]
    # The key of the node's own tree, and the fingerprint Docker's install guide gives for it: the deb and rpm
    # trees are signed with different keys (docker/docs content/manuals/engine/install/{debian,rhel}.md).
    assert repo['key_url'] == repo['url'] + '/gpg'
    assert repo['key_fingerprints'] == (
        ['9DC858229FC7DD38854AE2D88D81803C0EBFCD88'] if facts['os_family'] == 'Debian'
        else ['060A61C51B558A7F742B77AAC52FEB6B621E9F35'])
    if facts['distribution'] == 'Debian' and int(facts['distribution_major_version']) >= 13:
        # docker.io only recommends docker-cli, the docker command, from Debian 13 on (trixie's docker.io 26.1.5).
        assert packages['distro'] == {'docker': ['docker.io', 'docker-cli'], 'containerd': ['containerd']}
    elif facts['os_family'] == 'Debian':  # Debian's and Ubuntu's own packages
        assert packages['distro'] == {'docker': ['docker.io'], 'containerd': ['containerd']}
    else:  # RHEL ships Podman, not Docker
        assert packages['distro'] == {}


# nvidia_container_toolkit. NVIDIA's install guide (docs.nvidia.com/datacenter/cloud-native/
# container-toolkit/latest/install-guide.html): apt source
# https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /, dnf repository
# https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch, and the packages
# nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools,
# libnvidia-container1 at one version.
@_cases('nvidia_container_toolkit')
def test_nvidia_container_toolkit(facts):
    t = render('nvidia_container_toolkit', facts)
    url = value(t, "nvidia_container_toolkit_repo_url ~ '/' ~ nvidia_container_toolkit_repo_channel ~ '/' ~ __nvidia_container_toolkit_repo_path")
    apt = facts['os_family'] == 'Debian'
    assert url == 'https://nvidia.github.io/libnvidia-container/stable/' + ('deb/$(ARCH)' if apt else 'rpm/$basearch')
    version = value(t, 'nvidia_container_toolkit_version')
    plan = value(t, "__nvidia_container_toolkit_settings | accel.nodes.nvidia_container_toolkit_plan({}, "
                    "{'version_separator': __nvidia_container_toolkit_version_separator})")
    assert plan['packages']['pinned'] == [
        '%s%s%s' % (p, '=' if apt else '-', version)
        for p in ['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools', 'libnvidia-container1']]


# neuron_driver. AWS's Neuron setup guides: apt source
# "deb https://apt.repos.neuron.amazonaws.com ${VERSION_CODENAME} main", dnf baseurl
# https://yum.repos.neuron.amazonaws.com, both signed by GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB.
def _neuron_driver(facts, kernel=None, **extra):
    """The role's plan as tasks/main.yml sets it, from the role's own settings, on a node where the probe found
    none of the files the role writes."""
    facts = dict(facts, kernel=kernel or facts['kernel'])
    request = neuron.neuron_driver_probe_request({})
    variables = {'neuron_driver_probe': {'packages': {}, 'paths': dict((p, {'exists': False}) for p in request['paths'])},
                 'ansible_search_path': [os.path.join(ROLES, 'neuron_driver')]}
    variables.update(extra)
    t = render('neuron_driver', facts, **variables)
    task = next(task for task in load('neuron_driver', 'tasks', 'main.yml') if task['name'] == 'Decide what the role does on this node')
    return t, t.template(task['ansible.builtin.set_fact']['neuron_driver_plan'])


@_cases('neuron_driver')
def test_neuron_driver_repository(facts):
    _t, plan = _neuron_driver(facts)
    apt = facts['os_family'] == 'Debian'
    repo = plan['repository']['url']
    assert repo == ('https://apt.repos.neuron.amazonaws.com' if apt else 'https://yum.repos.neuron.amazonaws.com')
    assert plan['repository']['key_url'] == repo + '/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB'
    if apt:
        assert plan['repository']['suite'] == facts['distribution_release']


# The headers package of the running kernel: linux-headers-<kernel> on Debian and Ubuntu,
# kernel-devel-<kernel> on EL, and on AL2023 the package of the kernel's series, as the
# EKS AMI's install-neuron-driver.sh does (KERNEL_PACKAGE=kernel6.12 on a 6.12 kernel).
@pytest.mark.parametrize('facts, kernel, headers', [
    (host('Ubuntu', '22.04', 'Debian', 'jammy'), '6.8.0-1024-aws', 'linux-headers-6.8.0-1024-aws'),
    (host('Debian', '12.8', 'Debian', 'bookworm'), '6.1.0-28-cloud-amd64', 'linux-headers-6.1.0-28-cloud-amd64'),
    (host('Rocky', '9.4', 'RedHat'), '5.14.0-427.13.1.el9_4.x86_64', 'kernel-devel-5.14.0-427.13.1.el9_4.x86_64'),
    (host('Amazon', '2023', 'RedHat'), '6.1.102-108.177.amzn2023.x86_64', 'kernel-devel-6.1.102-108.177.amzn2023.x86_64'),
    (host('Amazon', '2023', 'RedHat'), '6.12.40-63.114.amzn2023.x86_64', 'kernel6.12-devel-6.12.40-63.114.amzn2023.x86_64'),
    (host('Amazon', '2023', 'RedHat'), '6.18.2-10.45.amzn2023.x86_64', 'kernel6.18-devel-6.18.2-10.45.amzn2023.x86_64'),
], ids=['ubuntu', 'debian', 'rocky', 'al2023-6.1', 'al2023-6.12', 'al2023-6.18'])
def test_neuron_driver_headers(facts, kernel, headers):
    # Named in Python (accel.nodes.dkms_kernels), installed as the role lists them.
    assert _kernels.headers_package(facts['distribution'], kernel) == headers
    report = {'headers_packages': [headers], 'headers_metapackages': ['linux-headers-aws']}

    def listed(**extra):
        _t, plan = _neuron_driver(facts, kernel, **extra)
        return neuron.neuron_driver_packages({}, plan, kernels_report=report)['headers']
    assert listed() == [headers, 'linux-headers-aws']
    assert listed(neuron_driver_kernels='target') == [headers]
    assert listed(neuron_driver_kernel_headers_package='none') == []


# apt matches a pin against the whole Debian version, and the Neuron apt repository
# versions aws-neuronx-runtime-lib and aws-neuronx-collectives with a build hash
# (aws-neuronx-runtime-lib_2.31.24.0-0b044f4ce_amd64.deb in Neuron SDK 2.29.0). AWS's own
# Neuron containers pin them as name=2.21.41.0*. dnf keeps the hash in the release, outside
# name-version. The hash of SDK 2.33.0's package was not found; 2.35.30.0-000000000 is the
# version of the repository double (tests/doubles/README.md).
# (The specs themselves: tests/unit/plugins/filter/test_neuron_filters.py.)
@_cases('neuron_driver')
def test_neuron_driver_pins_match_hashed_versions(facts):
    _t, plan = _neuron_driver(facts, neuron_driver_install_runtime_lib=True,
                              ansible_facts=dict(facts, accelerators={'ec2': {'instance_type': 'inf1.xlarge'}}))
    specs = plan['package_specs']
    if facts['os_family'] == 'Debian':
        assert specs == ['aws-neuronx-dkms=2.24.*', 'aws-neuronx-tools=2.33.38.0*', 'aws-neuronx-runtime-lib=2.35.30.0*']
        assert fnmatch.fnmatchcase('2.35.30.0-000000000', specs[2].split('=')[1])
    else:
        assert specs == ['aws-neuronx-dkms-2.24.*', 'aws-neuronx-tools-2.33.38.0', 'aws-neuronx-runtime-lib-2.35.30.0']


def test_neuron_driver_leaves_the_inf1_hook_package_alone():
    """AWS's OCI hook tutorial installs aws-neuron-runtime-base on Inf1; the container
    runtime role owns it, so the driver role must not remove it as legacy."""
    legacy = _load('neuron_driver', 'defaults', 'main.yml')['neuron_driver_legacy_packages']
    assert 'aws-neuron-runtime-base' not in legacy
    assert neuron_runtime_plan.INF1_HOOK_PACKAGE not in legacy
    assert {'aws-neuron-dkms', 'aws-neuron-tools', 'aws-neuron-runtime'} <= set(legacy)


# neuron_container_runtime. AWS's "Tutorial Docker Neuron OCI Hook Setup": Inf1 installs
# aws-neuron-runtime-base, Inf2 and Trn1 aws-neuronx-oci-hook. The plan is fed as tasks/main.yml feeds it.
def _hook(facts, instance_type='', pci_ids=(), **extra):
    accelerators = {'ec2': {'instance_type': instance_type},
                    'neuron': {'devices': [{'pci_device_id': p} for p in pci_ids]}}
    t = render('neuron_container_runtime', dict(facts, accelerators=accelerators),
               neuron_container_runtime_mode='oci_hook', **extra)
    node = {'os_family': facts['os_family'], 'accelerators': accelerators,
            'version_separator': value(t, '__neuron_container_runtime_version_separator'),
            'version_glob': value(t, '__neuron_container_runtime_version_glob')}
    hook = neuron_runtime_plan.neuron_container_runtime_plan(value(t, '__neuron_container_runtime_settings'),
                                                             {'packages': {}}, node)['hook']
    return {'neuron_container_runtime_hook_package': hook['package'],
            'neuron_container_runtime_hook_version': hook['version']}, hook['spec']


@_cases('neuron_container_runtime')
@pytest.mark.parametrize('instance_type, pci_ids, package, version', [
    ('inf1.6xlarge', (), 'aws-neuron-runtime-base', '1.*'),
    ('', ('0x7064',), 'aws-neuron-runtime-base', '1.*'),  # Inferentia by PCI id, no instance type
    ('inf2.xlarge', ('0x7264',), 'aws-neuronx-oci-hook', '2.19.65.0'),
    ('trn1.32xlarge', (), 'aws-neuronx-oci-hook', '2.19.65.0'),
])
def test_neuron_container_runtime_hook_package(facts, instance_type, pci_ids, package, version):
    decided, spec = _hook(facts, instance_type, pci_ids)
    assert decided['neuron_container_runtime_hook_package'] == package
    assert decided['neuron_container_runtime_hook_version'] == version
    apt = facts['os_family'] == 'Debian'
    glob_ = '' if version.endswith('*') or not apt else '*'
    assert spec == package + ('=' if apt else '-') + version + glob_


def test_neuron_container_runtime_hook_package_override():
    decided, _spec = _hook(host('Ubuntu', '22.04', 'Debian', 'jammy'), 'inf1.xlarge',
                           neuron_container_runtime_oci_hook_package='aws-neuronx-oci-hook')
    assert decided['neuron_container_runtime_hook_package'] == 'aws-neuronx-oci-hook'
    assert decided['neuron_container_runtime_hook_version'] == '2.19.65.0'


# oci_add_hooks: only Amazon Linux ships an oci-add-hooks package; elsewhere it is built.
@_cases('oci_add_hooks')
def test_oci_add_hooks_method(facts):
    t = render('oci_add_hooks', facts)
    method = value(t, '(__oci_add_hooks_settings | accel.nodes.oci_add_hooks_plan(ansible_facts)).method')
    assert method == ('package' if facts['distribution'] == 'Amazon' else 'source')


# Holds on dnf. community.general.dnf_versionlock drives dnf's versionlock plugin, its
# documented requirement, which no minimal EL9 or AL2023 install carries: the package
# python3-dnf-plugin-versionlock of dnf-plugins-core.
def _tasks(role):
    for path in sorted(glob.glob(os.path.join(ROLES, role, 'tasks', '*.yml'))):
        with open(path) as f:
            yield os.path.basename(path), f.read()


@pytest.mark.parametrize('role', ALL_ROLES)
def test_dnf_holds_install_the_versionlock_plugin(role):
    locking = [name for name, text in _tasks(role) if 'community.general.dnf_versionlock:' in text]
    if not locking:
        return
    var = '__%s_versionlock_package' % role
    assert _load(role, 'vars', 'RedHat.yml').get(var) == 'python3-dnf-plugin-versionlock', role
    installs = [name for name, text in _tasks(role)
                if re.search(r'ansible\.builtin\.dnf:\n\s+name: "\{\{ %s \}\}"' % var, text)]
    assert installs, '%s locks packages with dnf but never installs %s' % (role, var)
    for name, text in _tasks(role):
        # every lock that may run before the plugin is installed is guarded by it
        for block in re.split(r'\n(?=- name:|    - name:)', text):
            if 'community.general.dnf_versionlock:' in block and "state: absent" in block and name not in installs:
                # ... in the per-OS variable, or in the role's plan (which a test holds to the same name)
                assert var in block or '%s_plan.versionlock_installed' % role in block, \
                    '%s %s releases locks without checking for the plugin' % (role, name)


def test_offline_example_keeps_the_neuron_driver_off_the_internet():
    """aws-neuronx-dkms's preinstall runs update-pciids (aws-neuron/aws-neuron-driver, file
    preinstall), which needs the internet: the air-gap example turns it off, with an
    option the role declares."""
    path = os.path.join(ROLES, '..', 'examples', 'group_vars', 'offline_mirror.yml')
    with open(path) as f:
        offline = yaml.safe_load(f)
    assert offline['neuron_driver_update_pciids'] is False
    options = {}
    for role in ALL_ROLES:
        options.update(_load(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options'])
    assert not [k for k in offline if k not in options]
    assert options['neuron_driver_update_pciids']['default'] is True


# apt runs maintainer scripts with PATH = DPkg::Path ("/usr/sbin:/usr/bin:/sbin:/bin" by
# default, apt.conf(5)); rpm runs scriptlets with PATH = %_install_script_path
# ("/sbin:/bin:/usr/sbin:/usr/bin"). The no-op update-pciids in /usr/local/sbin is found
# by the driver's preinstall only when the role puts /usr/local/sbin first there.
@_cases('neuron_driver')
def test_neuron_driver_offline_package_scripts_find_the_no_op_first(facts):
    _t, plan = _neuron_driver(facts, neuron_driver_update_pciids=False)
    shim, script, profile = plan['files']
    assert 'exit 0' in shim['content'] and shim['mode'] == '0755'
    if facts['os_family'] == 'Debian':
        assert script['path'].startswith('/etc/apt/apt.conf.d/')
        path = re.search(r'^DPkg::Path "([^"]+)";$', script['content'], re.M).group(1)
    else:
        assert script['path'].startswith('/etc/rpm/macros.')
        path = re.search(r'^%_install_script_path (\S+)$', script['content'], re.M).group(1)
    dirs = path.split(':')
    assert dirs[0] == os.path.dirname(shim['path']) == '/usr/local/sbin'
    assert '/opt/aws/neuron/bin' in profile['content']  # the role's template, rendered
    # The role's probe reads every file it writes, or paths_to_write would leave it to the module.
    assert {shim['path'], script['path'], profile['path']} <= set(neuron.neuron_driver_probe_request({})['paths'])
    assert {'/usr/sbin', '/usr/bin', '/sbin', '/bin'} <= set(dirs)


# accel.nodes.interrupted_run finishes an interrupted dpkg run only where every package in it is one the
# collection installs (module_utils/_interrupted.py, MANAGED). Every package a role can install on the Debian
# family must match that list, or a run killed while installing it would be left for a person to finish.
def _debian_packages():
    facts = host('Debian', '12.8', 'Debian', 'bookworm')
    decision = {'branch': '580', 'version': '580.95.05'}
    names = []
    for docker_host in (facts, host('Debian', '13.2', 'Debian', 'trixie')):
        t = render('docker', docker_host)
        names += [n for source in value(t, '__docker_packages').values() for engine in source.values() for n in engine]
    names += value(t, 'docker_python_packages')
    t = render('nvidia_container_toolkit', facts)
    names += toolkit_plan.PACKAGES + toolkit_plan.LEGACY_PACKAGES
    t = render('nvidia_driver', facts, nvidia_driver_decision=decision)
    names += [n for flavour in value(t, '__nvidia_driver_cuda_repo_packages').values() for n in flavour]
    names += [n for flavour in value(t, '__nvidia_driver_distro_packages').values() for n in flavour]
    names += value(t, '__nvidia_driver_persistenced_packages') + value(t, '__nvidia_driver_nvlsm_packages')
    names += list(value(t, '__nvidia_driver_fabric_manager_names').values())
    names.append(value(t, '__nvidia_driver_cuda_repo_pin_package'))
    _t, plan = _neuron_driver(facts)
    names += plan['remove']
    names += neuron_runtime_plan.HOOK_PACKAGES
    t = render('oci_add_hooks', facts)
    names += [value(t, 'oci_add_hooks_package_name')] + value(t, 'oci_add_hooks_build_packages')
    # The headers and kernel packages accel.nodes.dkms_kernels names, and DKMS itself.
    names += ['linux-headers-6.1.0-28-cloud-amd64', 'linux-headers-cloud-amd64', 'linux-image-6.1.0-28-cloud-amd64',
              'linux-kbuild-6.1', 'dkms']
    return sorted(set(names))


@pytest.mark.parametrize('name', _debian_packages())
def test_every_package_a_role_installs_counts_as_the_collections_own(name):
    from ansible_collections.accel.nodes.plugins.module_utils import _interrupted  # pylint: disable=import-outside-toplevel
    assert _interrupted.ours(name), '%s is installed by a role but missing from _interrupted.MANAGED' % name


def test_what_the_collection_counts_as_its_own_is_not_everything():
    from ansible_collections.accel.nodes.plugins.module_utils import _interrupted  # pylint: disable=import-outside-toplevel
    for other in ('libc6', 'openssh-server', 'unattended-upgrades', 'postgresql-15', 'docker-compose', 'linux-base'):
        assert not _interrupted.ours(other), other
