# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.chroot import FilterModule, chroot_connection


@pytest.mark.parametrize('connection', ['chroot', 'community.general.chroot', ' chroot '])
def test_the_chroot_plugin_by_either_name(connection):
    assert chroot_connection(connection) is True


@pytest.mark.parametrize('connection', ['ssh', 'local', 'community.docker.docker', 'docker', 'paramiko', '', None,
                                        'community.general.chroot2', 'chrooted'])
def test_other_connections(connection):
    assert chroot_connection(connection) is False


@pytest.mark.parametrize('switch', [True, 'true', 'yes', 1, 'on'])
def test_the_switch_marks_any_connection_a_chroot(switch):
    assert chroot_connection('local', switch) is True
    assert chroot_connection('ssh', switch) is True


@pytest.mark.parametrize('switch', [False, 'false', 'no', 0, 'off'])
def test_the_switch_turns_the_detection_off(switch):
    assert chroot_connection('chroot', switch) is False
    assert chroot_connection('community.general.chroot', switch) is False


@pytest.mark.parametrize('switch', [None, ''])
def test_an_unset_switch_follows_the_connection(switch):
    assert chroot_connection('chroot', switch) is True
    assert chroot_connection('ssh', switch) is False


def test_a_switch_that_is_no_boolean_says_what_it_must_be():
    with pytest.raises(AnsibleFilterError, match='accel_nodes_chroot must be true or false'):
        chroot_connection('ssh', 'sometimes')


def test_the_filter_is_registered_under_its_documented_name():
    assert FilterModule().filters() == {'chroot_connection': chroot_connection}
