# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The nvidia_driver role's plan (plugins/filter/driver_plan.py), fed as tasks/main.yml feeds it: the role's
defaults templated through vars/main.yml's __nvidia_driver_settings, the per-OS data of vars/, a decision of
plugins/filter/nvidia_driver.py from real captured facts, and a node_probe result."""

from __future__ import annotations

import os
import re
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter.driver_plan import nvidia_driver_fabric_manager_plan, \
    nvidia_driver_owned_packages, nvidia_driver_plan, nvidia_driver_probe_request
from ansible_collections.accel.nodes.plugins.filter.nvidia_driver import nvidia_driver_decision

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position
from test_nvidia_driver_vars import DRIVER_PACKAGE_NAMES  # noqa: E402  pylint: disable=wrong-import-position

DEFAULTS = load('nvidia_driver', 'defaults', 'main.yml')
V100_SMI = 'GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-6f1d2a4e-0b7c-3a58-9d21-1c8f0e5b7a90)\n'


def settings(**more):
    """vars/main.yml's __nvidia_driver_settings, templated from the defaults and these variables."""
    variables = dict(DEFAULTS)
    variables.update(load('nvidia_driver', 'vars', 'main.yml'))
    variables.update(trusted({'nvidia_driver_%s' % k: v for k, v in more.items()}))
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template('{{ __nvidia_driver_settings }}'))


def node(os_family='Debian', distribution='Debian', version='12'):
    """The per-OS data as tasks/main.yml hands it to the plan."""
    data = dict(load('nvidia_driver', 'vars', '%s.yml' % os_family))
    data.update(load('nvidia_driver', 'vars', '%s-%s.yml' % (distribution, version)))
    return {'package_manager': data['__nvidia_driver_package_manager'],
            'owned_packages': data['__nvidia_driver_owned_packages'].strip(),
            'foreign_packages': data['__nvidia_driver_foreign_packages'].strip(),
            'distro_packages': {}, 'distro_branches': data.get('__nvidia_driver_distro_branches', []),
            'distribution': distribution, 'distribution_version': version}


def v100(loaded='580.95.05', smi='ok'):
    """Accelerator facts of a p3.2xlarge as accel.nodes.accelerator_facts returns them."""
    nvidia = {'gpus': [{'name': 'Tesla V100-SXM2-16GB', 'compute_capability': '7.0',
                        'memory_total_mib': 16384 if smi == 'ok' else None}]}
    if loaded:
        nvidia.update(driver_version=loaded, kernel_module_flavor='proprietary')
    return {'vendors': ['nvidia'], 'nvidia': nvidia, 'sources': {'nvidia_smi': smi},
            'ec2': {'instance_type': 'p3.2xlarge'}}


def held(selection='hold', **more):
    seen = dict.fromkeys(['cuda-drivers', 'libnvidia-ml1', 'nvidia-driver-pinning-580', 'nvidia-container-toolkit'],
                         {'version': '580.95.05-1', 'selection': 'hold', 'status': 'installed'})
    seen['libnvidia-ml1'] = dict(seen['libnvidia-ml1'], selection=selection)
    seen.update(more)
    return seen


def plan(facts=None, packages=None, commands=None, where=None, **more):
    given = settings(**more)
    decision = nvidia_driver_decision(v100() if facts is None else facts, branch=given['branch'],
                                      version=given['version'])
    return nvidia_driver_plan(given, decision, {'packages': packages or {}, 'commands': commands or {}},
                              where or node())


def test_every_setting_reaches_the_plan_as_a_role_variable():
    names = set(load('nvidia_driver', 'meta', 'argument_specs.yml')['argument_specs']['main']['options'])
    assert {'nvidia_driver_' + k for k in settings()} <= names


def test_a_loaded_driver_at_the_branch_with_every_hold_in_place_runs_nothing():
    p = plan(packages=held())
    assert not p['install'] and not p['absent'] and p['input_errors'] == []
    assert p['smi'] == dict(p['smi'], check=True, ok=True, ran=False, seen=1)
    assert p['holds']['kept'] and not p['holds']['run']
    assert p['holds']['owned'] == ['cuda-drivers', 'libnvidia-ml1', 'nvidia-driver-pinning-580']
    assert 'nothing to change' in p['summary'] and 'holds already in place' in p['summary']


@pytest.mark.parametrize('case, kept', [
    ('every driver package held', True),
    ('one not held', False),
    ('kernel holds wanted', False),  # the kernel packages must be listed first (dkms_kernels)
    ('released where holds are off', False),
    ('dnf', False),  # the locks are read by package_facts in hold-dnf.yml
])
def test_the_hold_tasks_are_skipped_only_where_the_probe_shows_every_hold_in_place(case, kept):
    more = {'hold_kernel': case == 'kernel holds wanted', 'hold': case != 'released where holds are off'}
    where = dict(node('RedHat', 'RedHat', '9'), distribution='Rocky') if case == 'dnf' else node()
    p = plan(packages=held('install' if case == 'one not held' else 'hold'), where=where, **more)
    assert p['holds']['kept'] is kept
    assert p['holds']['run'] is not kept


def test_a_driver_that_does_not_satisfy_is_installed_and_its_holds_follow_the_install():
    p = plan(facts=v100(loaded='570.172.08'), packages=held())
    assert p['install'] and not p['holds']['run'] and not p['holds']['kept'] and not p['smi']['check']
    assert 'install, hold and load it' in p['summary']


@pytest.mark.parametrize('smi_source, asks', [('ok', False), ('rc 9', True), (None, True)])
def test_the_probe_asks_nvidia_smi_only_where_the_facts_lack_its_answer(smi_source, asks):
    facts = v100(smi=smi_source) if smi_source else None
    request = nvidia_driver_probe_request(settings(), facts, False)
    assert ('nvidia_smi' in request['commands']) is asks
    if asks:
        assert request['commands']['nvidia_smi'] == ['nvidia-smi', '-L']
    p = plan(facts=v100(smi=smi_source or 'missing'),
             commands={'nvidia_smi': {'rc': 0, 'stdout': V100_SMI, 'stderr': ''}} if asks else {})
    assert p['smi']['ran'] is asks and p['smi']['seen'] == 1 and p['smi']['ok']


def test_nothing_is_asked_of_nvidia_smi_in_a_chroot_or_with_state_absent():
    assert nvidia_driver_probe_request(settings(), None, True)['commands'] == {}
    request = nvidia_driver_probe_request(settings(state='absent'), None, False)
    assert request['commands'] == {} and request['packages'] == []


def test_nvidia_smi_that_fails_or_misses_a_gpu_stops_the_role_with_its_answer():
    facts = v100(smi='rc 9')
    failed = plan(facts=facts, commands={'nvidia_smi': {'rc': 9, 'stdout': '', 'stderr': 'NVIDIA-SMI has failed'}})
    assert not failed['smi']['ok'] and '(exit code 9)' in failed['smi']['message']
    assert 'NVIDIA-SMI has failed' in failed['smi']['message'] and 'does not see every GPU' in failed['summary']
    two = dict(facts, nvidia=dict(facts['nvidia'], gpus=facts['nvidia']['gpus'] * 2))
    short = plan(facts=two, commands={'nvidia_smi': {'rc': 0, 'stdout': V100_SMI, 'stderr': ''}})
    assert not short['smi']['ok'] and 'lists 1 GPU(s) of the 2 on the PCI bus' in short['smi']['message']


def test_inputs_the_hardware_refuses_stop_the_role():
    p = plan(branch='595', packages=held())
    assert p['input_errors'] and 'Volta' in ' '.join(p['input_errors'])
    assert 'stop:' in p['summary']


def test_state_absent_removes_and_decides_nothing_else():
    p = nvidia_driver_plan(settings(state='absent'), None, {'packages': {}}, node())
    assert p['absent'] and not p['install'] and not p['holds']['run'] and not p['fabric_manager']
    assert p['input_errors'] == [] and not p['smi']['check']


def test_no_gpu_no_driver():
    p = plan(facts={'vendors': [], 'nvidia': {}})
    assert not p['install'] and not p['holds']['run'] and not p['smi']['check']
    assert 'no NVIDIA GPU' in p['summary']


def test_bad_input_is_a_clear_error():
    with pytest.raises(AnsibleFilterError, match="role's settings"):
        nvidia_driver_plan('580', None, {}, node())
    with pytest.raises(AnsibleFilterError, match='decision'):
        nvidia_driver_plan(settings(), None, {}, node())
    with pytest.raises(AnsibleFilterError, match='owned_packages'):
        nvidia_driver_plan(settings(), nvidia_driver_decision(v100()), {}, {})


@pytest.mark.parametrize('family, distribution, version', [('Debian', 'Debian', '12'), ('RedHat', 'RedHat', '9')])
def test_the_probe_reads_every_package_the_owned_patterns_match(family, distribution, version):
    """The probe's package patterns must cover the per-OS owned patterns, or a driver package left unheld
    would go unseen and dpkg_holds would be skipped."""
    owned = node(family, distribution, version)['owned_packages']
    probe = nvidia_driver_probe_request(settings(), None, False)['packages']
    matched = [n for n in DRIVER_PACKAGE_NAMES if re.match(owned, n)]
    assert len(matched) >= 10
    assert [n for n in matched if not any(re.search(p, n) for p in probe)] == []


@pytest.mark.parametrize('family, distribution, version', [('Debian', 'Debian', '12'), ('RedHat', 'RedHat', '9')])
def test_the_driver_owned_packages_are_those_the_plan_names_when_the_holds_are_kept(family, distribution, version):
    """A kept hold takes the plan's owned list (dpkg_selection_plan); a hold that runs, or state absent, names
    them with nvidia_driver_owned_packages. Both must agree, over a list and over ansible_facts.packages."""
    where = dict(node(family, distribution, version), distribution=distribution, distribution_version=version)
    installed = {n: {'version': '1', 'selection': 'hold', 'status': 'installed'} for n in DRIVER_PACKAGE_NAMES}
    p = plan(packages=installed, where=where)
    owned = nvidia_driver_owned_packages(DRIVER_PACKAGE_NAMES, p)
    assert owned == p['holds']['owned'] == sorted(owned)
    assert nvidia_driver_owned_packages({n: [{}] for n in DRIVER_PACKAGE_NAMES}, p) == owned
    assert 'cuda-drivers' in owned and 'nvidia-container-toolkit' not in owned
    assert 'libnvidia-container1' not in owned and 'nvidia-fabricmanager-580' in owned
    assert nvidia_driver_owned_packages([], p) == [] and nvidia_driver_owned_packages(None, p) == []


def test_the_driver_owned_packages_need_the_plan_and_a_list():
    with pytest.raises(AnsibleFilterError, match='owned_patterns'):
        nvidia_driver_owned_packages(['cuda-drivers'], {'holds': {}})
    with pytest.raises(AnsibleFilterError, match='not a string'):
        nvidia_driver_owned_packages('cuda-drivers', plan())


def test_fabric_manager_needs_the_decision_and_the_per_os_names():
    with pytest.raises(AnsibleFilterError, match='per-OS names'):
        nvidia_driver_fabric_manager_plan({'branch': '580'}, '', {}, {}, {})


def test_the_install_builds_any_version_of_the_branch_or_exactly_the_one_asked_for():
    p = plan(facts=v100(loaded=None))
    assert p['dkms'] == {'module': 'nvidia*', 'version': '580.*'}
    assert plan(facts=v100(loaded=None), version='580.95.05')['dkms']['version'] == '580.95.05'
    assert nvidia_driver_plan(settings(state='absent'), None, {'packages': {}}, node())['dkms']['version'] == ''


def test_the_repository_is_the_distributions_under_the_mirror_with_its_key():
    where = dict(node(), architecture='x86_64', cuda_dist='debian12', repo_key_file='3bf863cc.pub')
    repo = plan(where=where, repo_url='file:///srv/cuda//')['repo']
    assert repo == {'dist': 'debian12', 'arch': 'x86_64', 'url': 'file:///srv/cuda/debian12/x86_64/',
                    'key_url': 'file:///srv/cuda/debian12/x86_64/3bf863cc.pub'}
    assert plan(where=where, repo_key_url='file:///k.asc')['repo']['key_url'] == 'file:///k.asc'
    # NVIDIA publishes arm64 server packages under "sbsa".
    assert plan(where=dict(where, architecture='aarch64'))['repo']['arch'] == 'sbsa'


@pytest.mark.parametrize('tasks', ['packages-apt.yml', 'packages-dnf.yml'])
def test_a_package_that_cannot_be_installed_stops_the_install_with_the_fix(tasks):
    """The plan's missing keys, with the packages and the kernels the install's tasks know, make the message."""
    where = dict(node(), architecture='x86_64', cuda_dist='debian12', repo_key_file='3bf863cc.pub',
                 dkms_hint="dkms is in Debian's main archive")
    p = plan(facts=v100(loaded=None), where=where, repo_url='file:///srv/cuda')
    assert p['missing'] == {'source': 'cuda_repo', 'repo_url': 'file:///srv/cuda/debian12/x86_64/', 'version': '',
                            'branch': '580', 'cuda_dist': 'debian12', 'dkms_hint': "dkms is in Debian's main archive",
                            'distro_hint': None}
    task = next(x for x in load('nvidia_driver', 'tasks', tasks)
                if x['name'] == 'Stop before installing anything when a package cannot be installed')
    report = {'headers_to_install': ['linux-headers-6.1.0-28-cloud-amd64'], 'targets': ['6.1.0-28-cloud-amd64'],
              'target': '6.1.0-28-cloud-amd64', 'kernels': []}
    variables = {'nvidia_driver_plan': p, 'nvidia_driver_kernels_report': report}
    templar = Templar(loader=DataLoader(), variables=variables)
    for missing, expected in [
            (['cuda-drivers'], "cuda-drivers cannot be installed from the configured repositories (NVIDIA's CUDA "
                               'repository at file:///srv/cuda/debian12/x86_64/). Check that NVIDIA publishes branch '
                               '580 for debian12 there'),
            (['dkms'], "dkms cannot be installed, and the driver needs it to build its kernel module: dkms is in "
                       "Debian's main archive.")]:
        templar.available_variables = dict(variables, __nvidia_driver_missing=missing)
        assert templar.template(task['ansible.builtin.fail']['msg']).startswith(expected)
