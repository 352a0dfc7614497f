# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Who keeps the CDI spec: the role, or the nvidia-cdi-refresh units of toolkit 1.18 and later
(v1.20.0 deployments/systemd/nvidia-cdi-refresh.service: ExecCondition on modules.dep)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.toolkit_cdi import (
    VENDOR_SPEC, nvidia_container_toolkit_cdi_plan as plan, toolkit_release)

SPEC = '/etc/cdi/nvidia.yaml'
RECORD = '/var/lib/accel-nodes/nvidia-container-toolkit/cdi-driver-version'
ENV = '/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env'
DEFAULT_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']


def settings(**extra):
    base = {'cdi': True, 'refresh': 'auto', 'version': '1.20.0-1', 'installing': False, 'live': True,
            'os_family': 'Debian', 'spec_path': SPEC, 'record_path': RECORD,
            'driver_bin_dirs': ['/usr/local/nvidia/bin'], 'default_path': DEFAULT_PATH}
    base.update(extra)
    return base


def probe(condition=True, units=('enabled', 'enabled'), exists=(), env_text=None):
    paths = dict((p, {'exists': p in exists, 'text': env_text if p == ENV else None})
                 for p in (SPEC, RECORD, VENDOR_SPEC, ENV, '/usr/local/nvidia/bin'))
    return {'commands': {'refresh_condition': {'rc': 0 if condition else 1, 'stdout': '', 'stderr': ''},
                         'refresh_units': {'rc': 0, 'stdout': '\n'.join(units), 'stderr': ''}},
            'paths': paths}


def test_toolkit_1_17_has_no_refresh_units_and_the_role_keeps_the_spec():
    p = plan(settings(version='1.17.8-1'), probe(units=()))
    assert p['owner'] == 'role' and p['generate'] and p['spec'] == SPEC
    assert p['units'] == 'untouched' and p['remove'] == []
    assert p['reason'] == 'the role keeps the CDI spec: toolkit 1.17.8-1 has no nvidia-cdi-refresh units'


def test_where_the_units_can_run_they_keep_the_spec_and_the_roles_old_one_goes():
    p = plan(settings(), probe(units=('enabled', 'enabled'), exists=(SPEC, RECORD, VENDOR_SPEC)))
    assert p['owner'] == 'vendor' and not p['generate'] and p['spec'] == VENDOR_SPEC
    assert p['units'] == 'kept' and p['remove'] == [SPEC, RECORD] and not p['refresh_now']


def test_a_spec_the_role_did_not_write_is_not_removed():
    p = plan(settings(), probe(exists=(SPEC, VENDOR_SPEC)))
    assert p['owner'] == 'vendor' and p['remove'] == []


def test_vendor_units_disabled_by_hand_are_turned_on_and_run_where_there_is_no_spec():
    p = plan(settings(), probe(units=('disabled', 'disabled')))
    assert p['units'] == 'enabled' and p['refresh_now']
    assert p['unit_states'] == {'nvidia-cdi-refresh.path': 'started', 'nvidia-cdi-refresh.service': None}
    # Nothing runs off a live host (a chroot bake): the units start at the image's first boot.
    assert not plan(settings(live=False), probe(units=('disabled', 'disabled')))['refresh_now']


def test_where_the_condition_fails_the_role_keeps_the_spec_and_turns_the_units_off():
    # A driver outside /lib/modules (the lent H100's), or none yet: the service would never write a spec.
    p = plan(settings(), probe(condition=False, exists=(VENDOR_SPEC,)))
    assert p['owner'] == 'role' and p['generate'] and p['units'] == 'disabled'
    assert p['remove'] == [VENDOR_SPEC] and p['unit_states']['nvidia-cdi-refresh.service'] == 'stopped'
    assert not p['mask']
    assert 'modules.dep' in p['reason']
    # dnf's %posttrans starts the units whether enabled or not: masked there.
    assert plan(settings(os_family='RedHat'), probe(condition=False))['mask']


def test_an_install_in_this_run_turns_the_units_off_that_its_scripts_turn_on():
    p = plan(settings(installing=True), probe(condition=False, units=()))
    assert p['units'] == 'disabled' and p['remove'] == [VENDOR_SPEC]
    assert plan(settings(), probe(condition=False, units=('disabled', 'disabled')))['units'] == 'kept'


def test_the_setting_wins_over_the_condition():
    assert plan(settings(refresh='role'), probe())['owner'] == 'role'
    assert plan(settings(refresh='vendor'), probe(condition=False))['owner'] == 'vendor'
    with pytest.raises(AnsibleFilterError, match='auto, vendor or role'):
        plan(settings(refresh='both'), probe())


def test_a_driver_outside_the_standard_path_goes_on_the_services_path():
    p = plan(settings(), probe(exists=(VENDOR_SPEC, '/usr/local/nvidia/bin'), env_text='# comments only\n'))
    assert p['env_line'] == 'PATH=/usr/local/nvidia/bin:' + ':'.join(DEFAULT_PATH) and not p['env_in_place']
    again = plan(settings(), probe(exists=(VENDOR_SPEC, '/usr/local/nvidia/bin'), env_text='# x\n' + p['env_line'] + '\n'))
    assert again['env_in_place']
    assert plan(settings(), probe(exists=(VENDOR_SPEC,)))['env_line'] == ''


def test_a_vendor_spec_left_behind_goes_where_the_role_keeps_the_spec_whatever_the_version():
    # Pinned back to 1.17.8 after 1.20 ran: the units went with the package, their spec in /var/run/cdi did not.
    p = plan(settings(version='1.17.8-1'), probe(units=(), exists=(VENDOR_SPEC,)))
    assert p['owner'] == 'role' and p['generate'] and p['units'] == 'untouched'
    assert p['remove'] == [VENDOR_SPEC] and not p['mask'] and not p['unmask']
    # The same where the setting makes the role the keeper on a toolkit with the units.
    assert plan(settings(refresh='role'), probe(exists=(VENDOR_SPEC,)))['remove'] == [VENDOR_SPEC]
    # Outside CDI mode nothing is removed.
    assert plan(settings(cdi=False, version='1.17.8-1'), probe(units=(), exists=(VENDOR_SPEC,)))['remove'] == []


@pytest.mark.parametrize('extra, condition', [({}, True), ({'refresh': 'vendor'}, False)])
def test_units_the_role_masked_are_unmasked_when_the_vendor_takes_over(extra, condition):
    # The role masked them on dnf while it kept the spec; systemctl cannot enable a masked unit.
    p = plan(settings(os_family='RedHat', **extra), probe(condition=condition, units=('masked', 'masked')))
    assert p['owner'] == 'vendor' and p['units'] == 'enabled'
    assert not p['mask'] and p['unmask']
    # Units that are not masked are left to `enabled` alone.
    again = plan(settings(os_family='RedHat', **extra), probe(condition=condition, units=('enabled', 'enabled')))
    assert not again['mask'] and not again['unmask'] and again['units'] == 'kept'


def test_the_vendor_spec_is_written_again_when_the_services_path_changes():
    # The path unit does not watch the env file: the spec the service wrote without the driver's PATH stays wrong.
    p = plan(settings(), probe(exists=(VENDOR_SPEC, '/usr/local/nvidia/bin'), env_text='# comments only\n'))
    assert p['owner'] == 'vendor' and not p['env_in_place'] and p['refresh_now']
    again = plan(settings(), probe(exists=(VENDOR_SPEC, '/usr/local/nvidia/bin'), env_text=p['env_line'] + '\n'))
    assert again['env_in_place'] and not again['refresh_now']
    # Nothing runs off a live host.
    assert not plan(settings(live=False), probe(exists=(VENDOR_SPEC, '/usr/local/nvidia/bin')))['refresh_now']


def test_outside_cdi_mode_nobody_is_asked():
    p = plan(settings(cdi=False), probe())
    assert p['owner'] == 'none' and not p['generate'] and p['units'] == 'untouched' and p['remove'] == []


@pytest.mark.parametrize('version, release', [('1.20.0-1', (1, 20, 0)), ('1.17.8', (1, 17, 8)), ('', None), ('x', None)])
def test_toolkit_release(version, release):
    assert toolkit_release(version) == release
