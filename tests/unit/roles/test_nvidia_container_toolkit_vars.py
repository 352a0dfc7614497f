# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The toolkit role's derived variables, templated as the role templates them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

RECORD = '/var/lib/accel-nodes/nvidia-container-toolkit/cdi-driver-version'


def kept(record, driver='580.95.05', bin_dirs=()):
    variables = dict(load('nvidia_container_toolkit', 'defaults', 'main.yml'))
    variables.update(load('nvidia_container_toolkit', 'vars', 'main.yml'))
    variables.update(trusted({'nvidia_container_toolkit_driver_version': driver,
                              'nvidia_container_toolkit_driver_bin_dirs': list(bin_dirs),
                              'nvidia_container_toolkit_probe': {'paths': {RECORD: record}}}))
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template('{{ __nvidia_container_toolkit_cdi_record_kept }}'))


def probed(text, mode='0644', uid=0, gid=0, kind='file'):
    """What accel.nodes.node_probe says of the record."""
    return {'path': RECORD, 'exists': kind is not None, 'type': kind, 'mode': mode, 'uid': uid, 'gid': gid,
            'executable': False, 'sha256': 'not compared', 'text': text}


def test_a_record_of_this_driver_needs_no_write():
    assert kept(probed('580.95.05\n')) is True


@pytest.mark.parametrize('record', [
    probed('570.172.08\n'),                     # another driver
    probed('580.95.05'),                        # what the module writes ends in a newline
    probed('580.95.05\n/usr/local/nvidia/bin\n'),  # another search path
    probed('580.95.05\n', mode='0600'),
    probed('580.95.05\n', uid=1000),
    probed(None, mode=None, uid=None, gid=None, kind=None),  # none yet
])
def test_any_difference_writes_the_record(record):
    assert kept(record) is False


SPEC = '/etc/cdi/nvidia.yaml'
STATE = '/var/lib/accel-nodes/nvidia-container-toolkit'


def cdi_kept(spec=True, driver='580.95.05', live=True, record='580.95.05\n', state_mode='0755'):
    variables = dict(load('nvidia_container_toolkit', 'defaults', 'main.yml'))
    variables.update(load('nvidia_container_toolkit', 'vars', 'main.yml'))
    paths = {RECORD: probed(record), SPEC: dict(probed(None), exists=spec),
             STATE: dict(probed(None, mode=state_mode), type='directory')}
    variables.update(trusted({'nvidia_container_toolkit_driver_version': driver,
                              'nvidia_container_toolkit_driver_bin_dirs': [],
                              'nvidia_container_toolkit_cdi_spec_path': SPEC,
                              'nvidia_container_toolkit_manage_service': live, 'ansible_connection': 'ssh',
                              'nvidia_container_toolkit_probe': {'paths': paths}}))
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template('{{ __nvidia_container_toolkit_cdi_kept }}'))


def test_a_spec_generated_for_this_driver_skips_the_cdi_tasks():
    assert cdi_kept() is True


@pytest.mark.parametrize('change', [dict(spec=False), dict(driver='590.48.01'), dict(driver=''), dict(live=False),
                                    dict(record='570.172.08\n'), dict(state_mode='0700')])
def test_anything_the_cdi_tasks_would_do_or_say_includes_them(change):
    assert cdi_kept(**change) is False


RULE = '/etc/udev/rules.d/71-nvidia-dev-char.rules'


@pytest.mark.parametrize('install, packages, in_place', [
    (False, {}, True),  # the toolkit is not the role's to install: the probe's dry run is the tool's
    (True, {}, False),  # the install below may bring another nvidia-ctk: the module runs
    (True, dict.fromkeys(['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
                          'libnvidia-container1'],  # already at the pinned version
                         {'version': load('nvidia_container_toolkit', 'defaults', 'main.yml')['nvidia_container_toolkit_version'],
                          'selection': 'hold', 'status': 'installed'}), True),
])
def test_the_dev_char_links_are_judged_from_the_probe_only_where_no_install_follows(install, packages, in_place):
    from ansible_collections.accel.nodes.plugins.module_utils._dev_char import udev_rule
    variables = dict(load('nvidia_container_toolkit', 'defaults', 'main.yml'))
    variables.update(load('nvidia_container_toolkit', 'vars', 'main.yml'))
    dry_run = 'time="x" level=info msg="Creating link /dev/char/195:0 => /dev/nvidia0"'
    variables.update(trusted({
        'nvidia_container_toolkit_install': install,
        '__nvidia_container_toolkit_dev_char_state': 'present',
        '__nvidia_container_toolkit_dev_char_links': True,
        'nvidia_container_toolkit_probe': {
            'packages': packages,
            'paths': {RULE: {'exists': True, 'type': 'file', 'text': udev_rule('/usr/bin/nvidia-ctk')}},
            'directories': {'/dev/char': {'195:0': '../nvidia0'}},
            'commands': {'dev_char': {'rc': 0, 'stdout': '', 'stderr': dry_run}}}}))
    templar = Templar(loader=DataLoader(), variables=variables)
    assert templar.template(trust_as_template('{{ __nvidia_container_toolkit_dev_char_in_place }}')) is in_place


K3S = '/var/lib/rancher/k3s/agent/etc/containerd'


def runtime_plan(profile='default', engines=('containerd',), files=None, **more):
    """The runtime plan and the config.toml settings as the role templates them, from its defaults and a probe."""
    variables = dict(load('nvidia_container_toolkit', 'defaults', 'main.yml'))
    variables.update(load('nvidia_container_toolkit', 'vars', 'main.yml'))
    paths = {path: {'path': path, 'exists': True, 'type': 'directory' if text is None else 'file', 'text': text}
             for path, text in (files or {}).items()}
    variables.update(trusted(dict({'nvidia_container_toolkit_profile': profile,
                                   'nvidia_container_toolkit_engines': list(engines),
                                   'nvidia_container_toolkit_probe': {'paths': paths, 'commands': {}}}, **more)))
    templar = Templar(loader=DataLoader(), variables=variables)
    plan = templar.template(trust_as_template('{{ __nvidia_container_toolkit_runtime_plan }}'))
    templar.available_variables = dict(variables, **trusted({'nvidia_container_toolkit_runtime_plan': plan}))
    return plan, templar.template(trust_as_template('{{ __nvidia_container_toolkit_settings }}'))


def test_the_default_profile_writes_the_toolkits_own_defaults():
    plan, settings = runtime_plan()
    assert plan['containerd']['cdi'] is None and plan['containerd']['options'] == {}
    assert settings['accept-nvidia-visible-devices-as-volume-mounts'] is False
    assert settings['accept-nvidia-visible-devices-envvar-when-unprivileged'] is True


def test_the_kubernetes_profile_hardens_config_toml_and_a_variable_still_wins():
    plan, settings = runtime_plan('kubernetes')
    assert plan['containerd'] == dict(plan['containerd'], options={'SystemdCgroup': True}, cdi=True,
                                      restart_topic='accel_nodes_restart_containerd')
    assert settings['accept-nvidia-visible-devices-as-volume-mounts'] is True
    assert settings['accept-nvidia-visible-devices-envvar-when-unprivileged'] is False
    dummy, settings = runtime_plan('kubernetes', nvidia_container_toolkit_accept_visible_devices_envvar_when_unprivileged=True)
    assert settings['accept-nvidia-visible-devices-envvar-when-unprivileged'] is True


def test_a_k3s_node_without_imports_is_refused_through_the_role():
    text = (Path(__file__).parents[2] / 'fixtures' / 'containerd-owners' / 'k3s' / 'config.toml').read_text()
    plan, dummy = runtime_plan('kubernetes', files={K3S: None, K3S + '/config.toml': text})
    assert plan['owner'] == 'k3s' and len(plan['errors']) == 1
    plan, dummy = runtime_plan('kubernetes', engines=['docker'], files={K3S: None, K3S + '/config.toml': text})
    assert plan['errors'] == []
