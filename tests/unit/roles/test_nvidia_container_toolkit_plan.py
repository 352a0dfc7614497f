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
    # Read by tasks themselves: the key's URL, the backup, the live switch.
    by_tasks = {'nvidia_container_toolkit_' + k for k in ('repo_key_url', 'config_backup', 'manage_service',
                                                          'instance_type')}
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
    # Without the apt repository's layout (as on dnf), the repository tasks run.
    assert got['summary'] == ('packages kept at %s; repository applied; holds kept; config.toml written; docker '
                              'registered; containerd not used; /dev/char absent kept; CDI off' % PINNED)


def test_the_state_record_watches_the_roles_state_directory():
    import yaml
    state = yaml.safe_load((Path(__file__).parents[3] / 'playbooks' / 'vars' / 'state.yml').read_text())
    assert STATE in state['accel_nodes_state_paths_nvidia']
    assert nvidia_container_toolkit_plan.__module__ and STATE == plan()['cdi']['state_dir']


# NVIDIA's repository on apt (vars/Debian.yml), as vars/main.yml's __nvidia_container_toolkit_repository gives it.
DEBIAN = load('nvidia_container_toolkit', 'vars', 'Debian.yml')
REPOSITORY = {'family': 'Debian', 'name': DEBIAN['__nvidia_container_toolkit_repo_name'],
              'path': DEBIAN['__nvidia_container_toolkit_repo_path'],
              'keyring': DEBIAN['__nvidia_container_toolkit_keyring'],
              'keyring_format': DEBIAN['__nvidia_container_toolkit_keyring_format'],
              'legacy_files': DEBIAN['__nvidia_container_toolkit_legacy_repo_files']}
KEYRING = REPOSITORY['keyring']
SOURCES = '/etc/apt/sources.list.d/nvidia-container-toolkit.sources'
NVIDIA_KEY = DEFAULTS['nvidia_container_toolkit_repo_key_fingerprint'][0]
# What package_repository writes for the role's defaults; the same as ansible.builtin.deb822_repository
# (tests/unit/plugins/modules/test_package_repository.py, DEB822_TOOLKIT).
SOURCES_TEXT = ('X-Repolib-Name: nvidia-container-toolkit\n'
                'Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.gpg\n'
                'Suites: /\n'
                'Types: deb\n'
                'URIs: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)\n')


def apt_plan(more=None, paths=None, keyrings=None, packages=None):
    """The plan on apt with the repository's layout; the probe answers the repository files as given."""
    given = settings(**(more or {}))
    request = nvidia_container_toolkit_probe_request(given, True, REPOSITORY)
    seen = dict((path, probed(None, mode=None, uid=None, gid=None, kind=None)) for path in request['paths'])
    seen.update(paths or {})
    node = dict(NODE, repository=REPOSITORY)
    return nvidia_container_toolkit_plan(given, {
        'paths': seen, 'keyrings': keyrings or {}, 'packages': at_pin() if packages is None else packages,
        'commands': {}, 'directories': {}}, node)


def in_place(**change):
    """The probe of a node whose repository is as the role leaves it, with these changes."""
    paths = {SOURCES: probed(change.pop('text', SOURCES_TEXT), mode=change.pop('sources_mode', '0644')),
             KEYRING: probed(None, mode=change.pop('keyring_mode', '0644'))}
    paths.update(change.pop('paths', {}))
    keyrings = {KEYRING: dict({'fingerprints': [NVIDIA_KEY], 'armored': False, 'error': None}, **change)}
    return {'paths': paths, 'keyrings': keyrings}


def test_the_probe_request_reads_the_repository_files_on_apt_where_the_role_installs():
    request = nvidia_container_toolkit_probe_request(settings(), True, REPOSITORY)
    assert {SOURCES, KEYRING} | set(REPOSITORY['legacy_files']) <= set(request['paths'])
    assert request['keyrings'] == [KEYRING]
    for more, repository in (({'install': False}, REPOSITORY), ({'state': 'absent'}, REPOSITORY),
                             ({}, dict(REPOSITORY, family='RedHat')), ({}, None)):
        request = nvidia_container_toolkit_probe_request(settings(**more), True, repository)
        assert request['keyrings'] == [] and SOURCES not in request['paths']
    assert not set(REPOSITORY['legacy_files']) & set(
        nvidia_container_toolkit_probe_request(settings(remove_legacy=False), True, REPOSITORY)['paths'])


def test_a_repository_in_place_costs_no_module_run_and_nothing_of_setup_runs():
    got = apt_plan(**in_place())
    assert got['repository'] == {'uris': 'https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)',
                                 'kept': True, 'run': False}
    assert not got['packages']['setup']
    assert 'repository kept' in got['summary']


@pytest.mark.parametrize('change', [
    dict(text=SOURCES_TEXT.replace('stable', 'experimental')),   # another channel
    dict(text=None),                                              # not UTF-8, or too large
    dict(sources_mode='0600'), dict(keyring_mode='0640'),
    dict(paths={SOURCES: probed(None, mode=None, kind=None)}),    # no .sources file
    dict(paths={KEYRING: probed(None, mode=None, kind=None)}),    # no keyring
    dict(fingerprints=['CB46C553B095A24A90274F878EA7A5D5237FE158']),  # another key
    dict(fingerprints=[NVIDIA_KEY, 'CB46C553B095A24A90274F878EA7A5D5237FE158']),  # one key more
    dict(fingerprints=[], error='the key file is empty'),
    dict(armored=True),                                           # the format asked for is binary
    dict(paths={'/etc/apt/sources.list.d/nvidia-docker.list': probed('deb https://nvidia.github.io/x /\n')}),
])
def test_anything_package_repository_would_change_runs_it(change):
    got = apt_plan(**in_place(**change))
    assert got['repository']['run'] and not got['repository']['kept'] and got['packages']['setup']


def test_a_changed_fingerprint_list_downloads_the_key_again():
    """The module reads the key from its URL only when it runs: a list with a new fingerprint runs it."""
    got = apt_plan({'repo_key_fingerprint': [NVIDIA_KEY, 'CB46C553B095A24A90274F878EA7A5D5237FE158']}, **in_place())
    assert got['repository']['run']
    spaced = ' '.join(NVIDIA_KEY[i:i + 4] for i in range(0, 40, 4)).lower()
    assert not apt_plan({'repo_key_fingerprint': [spaced]}, **in_place())['repository']['run']
    assert apt_plan({'repo_key_fingerprint': ['not a fingerprint']}, **in_place())['repository']['run']


def test_a_legacy_file_left_is_kept_where_the_role_does_not_remove_them():
    legacy = {'/etc/apt/sources.list.d/nvidia-docker.list': probed('deb https://nvidia.github.io/x /\n')}
    assert not apt_plan({'remove_legacy': False}, **in_place(paths=legacy))['repository']['run']


@pytest.mark.parametrize('packages, legacy', [({}, False), (at_pin('install'), False),
                                              (dict(at_pin(), **{'nvidia-docker2': {'status': 'installed'}}), True)])
def test_setup_runs_for_a_package_change_with_the_repository_in_place(packages, legacy):
    got = apt_plan(packages=packages, **in_place())
    assert got['packages']['setup'] and not got['repository']['run']
    assert bool(got['packages']['legacy_installed']) == legacy


def test_on_dnf_and_without_install_the_repository_is_the_tasks_own():
    rpm = plan(packages=at_pin(), os_family='RedHat', repository=dict(REPOSITORY, family='RedHat'))
    assert rpm['repository']['run'] and rpm['packages']['setup']
    # Without install the role leaves packages, holds and legacy packages alone, whatever the probe saw
    # (the hardware tier's node: the toolkit installed, not held).
    legacy = dict(at_pin('install'), **{'nvidia-docker2': {'status': 'installed'}})
    for packages in (at_pin(), at_pin('install'), {}, legacy):
        off = apt_plan({'install': False}, packages=packages, **in_place())
        assert not off['repository']['run'] and not off['packages']['setup']
        off = plan({'install': False}, packages=packages, os_family='RedHat')
        assert not off['repository']['run'] and not off['packages']['setup']
    assert not apt_plan({'state': 'absent'}, packages=at_pin('install'))['packages']['setup']


def test_what_package_repository_writes_is_what_the_plan_finds_in_place(run_module, tmp_path, monkeypatch):
    """The module run with the setup task's arguments, then node_probe on what it wrote: the plan finds it kept.
    The module writes under tmp_path; the probe's answers are filed under the paths on a node."""
    from ansible_collections.accel.nodes.plugins.module_utils import _node_probe
    from ansible_collections.accel.nodes.plugins.modules import package_repository
    keys = Path(__file__).parents[2] / 'fixtures' / 'openpgp'
    rsa = 'CB46C553B095A24A90274F878EA7A5D5237FE158'
    sources_dir, keyring = tmp_path / 'sources.list.d', tmp_path / 'nvidia-container-toolkit.gpg'
    sources_dir.mkdir()
    monkeypatch.setattr(package_repository, 'SOURCES_DIR', str(sources_dir))
    got = apt_plan({'repo_key_fingerprint': [rsa]})
    assert got['repository']['run']
    written = run_module(package_repository.main, {
        'name': REPOSITORY['name'], 'uris': got['repository']['uris'], 'suites': '/',
        'key_url': (keys / 'rsa2048.asc').as_uri(), 'key_fingerprint': [rsa], 'keyring': str(keyring),
        'keyring_format': REPOSITORY['keyring_format'], '_ansible_tmpdir': str(tmp_path)})
    assert written['changed']
    sources = _node_probe.describe(written['dest'])
    sources['text'] = sources['text'].replace(str(keyring), KEYRING)
    again = apt_plan({'repo_key_fingerprint': [rsa]}, paths={SOURCES: sources, KEYRING: _node_probe.describe(str(keyring))},
                     keyrings={KEYRING: _node_probe.keyring(str(keyring))})
    assert again['repository'] == dict(got['repository'], kept=True, run=False)
