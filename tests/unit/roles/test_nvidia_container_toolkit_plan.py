# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The toolkit role's plan (plugins/filter/toolkit_plan.py), fed as tasks/main.yml feeds it: the role's
defaults templated through vars/main.yml's __nvidia_container_toolkit_settings, and a node_probe result."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter.toolkit_plan import nvidia_container_toolkit_plan, \
    nvidia_container_toolkit_probe_request
from ansible_collections.accel.nodes.plugins.module_utils._dev_char import udev_rule
from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

RECORD = '/var/lib/accel-nodes/nvidia-container-toolkit/cdi-driver-version'
STATE = '/var/lib/accel-nodes/nvidia-container-toolkit'
SPEC = '/etc/cdi/nvidia.yaml'
RULE = '/etc/udev/rules.d/71-nvidia-dev-char.rules'
K3S = '/var/lib/rancher/k3s/agent/etc/containerd'
DEFAULTS = load('nvidia_container_toolkit', 'defaults', 'main.yml')
PINNED = DEFAULTS['nvidia_container_toolkit_version']
NAMES = ['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools', 'libnvidia-container1']
NODE = {'os_family': 'Debian', 'distribution': 'Debian', 'version_separator': '=', 'live': True,
        'driver_version': '580.95.05', 'docker_cgroup': 'cgroupfs', 'daemon_json': '', 'cgroup_v2': False}


def settings(**more):
    """vars/main.yml's __nvidia_container_toolkit_settings, templated from the defaults and these variables."""
    variables = dict(DEFAULTS)
    variables.update(load('nvidia_container_toolkit', 'vars', 'main.yml'))
    variables.update(trusted({'nvidia_container_toolkit_%s' % k: v for k, v in more.items()}))
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template('{{ __nvidia_container_toolkit_settings }}'))


def probed(text, mode='0644', uid=0, gid=0, kind='file'):
    """What accel.nodes.node_probe says of a file."""
    return {'exists': kind is not None, 'type': kind, 'mode': mode, 'uid': uid, 'gid': gid,
            'executable': False, 'sha256': 'not compared', 'text': text}


def plan(more=None, paths=None, packages=None, commands=None, directories=None, **node):
    """The plan, from a probe that answers every path of the probe request: those not given are missing."""
    given = settings(**(more or {}))
    request = nvidia_container_toolkit_probe_request(given, dict(NODE, **node)['live'])
    seen = dict((path, probed(None, mode=None, uid=None, gid=None, kind=None)) for path in request['paths'])
    seen.update(paths or {})
    return nvidia_container_toolkit_plan(given, {
        'paths': seen, 'packages': packages or {}, 'commands': commands or {},
        'directories': directories or {}}, dict(NODE, **node))


def at_pin(selection='hold', version=PINNED):
    return dict.fromkeys(NAMES, {'version': version, 'selection': selection, 'status': 'installed'})


def test_every_setting_of_the_role_reaches_the_plan():
    names = set(load('nvidia_container_toolkit', 'meta', 'argument_specs.yml')['argument_specs']['main']['options'])
    taken = {'nvidia_container_toolkit_' + k for k in settings()}
    # Read by tasks themselves: the repository, the backup, removing legacy packages, the live switch.
    by_tasks = {'nvidia_container_toolkit_' + k for k in ('repo_url', 'repo_channel', 'repo_key_url',
                                                          'repo_key_fingerprint', 'config_backup', 'remove_legacy',
                                                          'manage_service', 'instance_type')}
    assert names - taken - by_tasks == set()


def test_the_probe_request_reads_what_the_plan_judges():
    request = nvidia_container_toolkit_probe_request(settings(engines=['docker', 'containerd'], cdi=True), True)
    assert set(owners.probe_paths()) <= set(request['paths'])
    assert {RECORD, STATE, SPEC, RULE, '/etc/containerd/conf.d/99-nvidia.toml'} <= set(request['paths'])
    assert request['commands']['kubernetes_services'] == owners.probe_services()
    assert set(request['commands']) == {'dev_char', 'containerd_version', 'kubernetes_services', 'refresh_condition',
                                        'refresh_units'}
    assert request['directories'] == ['/dev/char']
    quiet = nvidia_container_toolkit_probe_request(settings(), False)
    assert quiet['commands'] == {} and quiet['directories'] == []


@pytest.mark.parametrize('packages, install, hold', [
    ({}, True, True),
    (at_pin(), False, False),
    (at_pin('install'), False, True),
    (at_pin(version='1.17.8-1'), True, False),  # the hold is there; apt's install keeps it (allow_change_held_packages)
])
def test_apt_and_the_holds_run_only_where_they_would_change_something(packages, install, hold):
    got = plan(packages=packages)['packages']
    assert (got['install'], got['hold']) == (install, hold)
    assert got['pinned'] == ['%s=%s' % (name, PINNED) for name in NAMES]


def test_rpm_pins_with_a_dash_and_legacy_packages_are_named():
    got = plan(packages={'nvidia-docker2': {'status': 'installed'}}, version_separator='-')['packages']
    assert got['pinned'][0] == 'nvidia-container-toolkit-%s' % PINNED and got['legacy_installed'] == ['nvidia-docker2']


def test_a_record_of_this_driver_keeps_the_spec():
    paths = {RECORD: probed('580.95.05\n/usr/local/nvidia/bin\n'), SPEC: probed('spec'),
             STATE: probed(None, mode='0755', kind='directory')}
    cdi = plan({'cdi': True, 'cdi_refresh': 'role'}, paths=paths, packages=at_pin())['cdi']
    assert cdi['kept'] and not cdi['stale'] and not cdi['run']


@pytest.mark.parametrize('change', [dict(spec=False), dict(driver_version='590.48.01'), dict(driver_version=''),
                                    dict(live=False), dict(record='570.172.08\n'), dict(state_mode='0700'),
                                    dict(record='580.95.05\n')])
def test_anything_the_cdi_tasks_would_do_or_say_runs_them(change):
    spec, record, mode = change.pop('spec', True), change.pop('record', '580.95.05\n/usr/local/nvidia/bin\n'), \
        change.pop('state_mode', '0755')
    paths = {RECORD: probed(record), SPEC: dict(probed('spec'), exists=spec),
             STATE: probed(None, mode=mode, kind='directory')}
    cdi = plan({'cdi': True, 'cdi_refresh': 'role'}, paths=paths, packages=at_pin(), **change)['cdi']
    assert not cdi['kept'] and cdi['run']


@pytest.mark.parametrize('packages, run', [
    ({}, True),  # the install below may bring another nvidia-ctk: the module runs
    (at_pin(), False),
])
def test_the_dev_char_links_are_judged_from_the_probe_only_where_no_install_follows(packages, run):
    dry_run = 'time="x" level=info msg="Creating link /dev/char/195:0 => /dev/nvidia0"'
    got = plan({'dev_char_symlinks': 'always'}, packages=packages,
               paths={RULE: probed(udev_rule('/usr/bin/nvidia-ctk'))},
               directories={'/dev/char': {'195:0': '../nvidia0'}},
               commands={'dev_char': {'rc': 0, 'stdout': '', 'stderr': dry_run}})['dev_char']
    assert got['state'] == 'present' and got['run'] is run


@pytest.mark.parametrize('said, daemon_json, v2, wanted', [
    ('systemd', '', False, 'present'),
    ('cgroupfs', '', True, 'absent'),
    ('', '{"exec-opts": ["native.cgroupdriver=systemd"]}', False, 'present'),
    ('', '', True, 'present'),  # Docker 20.10 and later: systemd on the unified hierarchy
])
def test_auto_wants_the_links_where_docker_uses_systemds_cgroup_driver(said, daemon_json, v2, wanted):
    got = plan(docker_cgroup=said, daemon_json=daemon_json, cgroup_v2=v2)['dev_char']
    assert got['state'] == wanted and got['systemd_cgroups'] is (wanted == 'present')


def test_the_default_profile_writes_the_toolkits_own_defaults():
    got = plan({'engines': ['containerd']})
    assert got['runtime']['containerd']['cdi'] is None and got['runtime']['containerd']['options'] == {}
    assert got['config']['settings']['accept-nvidia-visible-devices-as-volume-mounts'] is False
    assert got['config']['settings']['accept-nvidia-visible-devices-envvar-when-unprivileged'] is True
    assert got['config']['remove'] == ['nvidia-container-runtime.debug', 'nvidia-container-cli.debug']


def test_the_kubernetes_profile_hardens_config_toml_and_a_variable_still_wins():
    got = plan({'profile': 'kubernetes', 'engines': ['containerd']})
    assert got['runtime']['containerd'] == dict(got['runtime']['containerd'], options={'SystemdCgroup': True}, cdi=True,
                                                restart_topic='accel_nodes_restart_containerd')
    assert got['config']['settings']['accept-nvidia-visible-devices-as-volume-mounts'] is True
    assert got['config']['settings']['accept-nvidia-visible-devices-envvar-when-unprivileged'] is False
    assert got['dev_char']['systemd_cgroups'] is True
    got = plan({'profile': 'kubernetes', 'accept_visible_devices_envvar_when_unprivileged': True})
    assert got['config']['settings']['accept-nvidia-visible-devices-envvar-when-unprivileged'] is True


def test_a_k3s_node_without_imports_is_refused_through_the_role_and_nothing_else_is_planned_as_done():
    text = (Path(__file__).parents[2] / 'fixtures' / 'containerd-owners' / 'k3s' / 'config.toml').read_text()
    files = {K3S: {'exists': True, 'type': 'directory'}, K3S + '/config.toml': probed(text)}
    got = plan({'profile': 'kubernetes', 'engines': ['containerd']}, paths=files)
    assert got['runtime']['owner'] == 'k3s' and len(got['errors']) == 1
    assert got['summary'].startswith('refused')
    assert plan({'profile': 'kubernetes', 'engines': ['docker']}, paths=files)['errors'] == []
    # Removing the toolkit needs no containerd config that imports drop-ins.
    assert plan({'profile': 'kubernetes', 'engines': ['containerd'], 'state': 'absent'}, paths=files)['errors'] == []


def test_bad_input_is_named_before_anything_changes():
    got = plan({'ldconfig': '/sbin/ldconfig', 'config_extra': {'nvidia-container-runtime.mode': 'cdi'}})
    assert len(got['errors']) == 2


def test_a_converged_node_plans_no_module_run_and_says_so():
    got = plan(packages=at_pin(), paths={'/etc/docker/daemon.json': probed(None, kind=None),
                                         '/etc/nvidia-container-runtime/config.toml': probed(None, kind=None)})
    # Nothing to compare with: the files are written.
    assert got['config']['write'] and got['engines']['docker']
    assert got['summary'] == ('packages kept at %s; holds kept; config.toml written; docker registered; containerd not '
                              'used; /dev/char absent kept; CDI off' % PINNED)


def test_the_state_record_watches_the_roles_state_directory():
    import yaml
    state = yaml.safe_load((Path(__file__).parents[3] / 'playbooks' / 'vars' / 'state.yml').read_text())
    assert STATE in state['accel_nodes_state_paths_nvidia']
    assert nvidia_container_toolkit_plan.__module__ and STATE == plan()['cdi']['state_dir']
