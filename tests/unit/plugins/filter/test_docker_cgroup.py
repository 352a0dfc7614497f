# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.docker_cgroup import FilterModule, docker_cgroup_driver


@pytest.mark.parametrize('answer', ['systemd\n', 'cgroupfs'])
def test_what_docker_answers_wins(answer):
    assert docker_cgroup_driver(answer, '{"exec-opts": ["native.cgroupdriver=other"]}', True) == answer.strip()


@pytest.mark.parametrize('cgroup_v2', [True, 'true', 'True'])
def test_exec_opts_decide_when_docker_does_not_answer(cgroup_v2):
    daemon = '{"exec-opts": ["foo=bar", "native.cgroupdriver=cgroupfs", "native.cgroupdriver=systemd"]}'
    assert docker_cgroup_driver('', daemon, cgroup_v2) == 'cgroupfs'


@pytest.mark.parametrize('cgroup_v2, driver', [(True, 'systemd'), ('True', 'systemd'), (False, 'cgroupfs'),
                                               ('False', 'cgroupfs'), (None, 'cgroupfs')])
def test_docker_default_follows_the_cgroup_hierarchy(cgroup_v2, driver):
    assert docker_cgroup_driver('', '{"storage-driver": "vfs", "exec-opts": []}', cgroup_v2) == driver
    assert docker_cgroup_driver(None, '', cgroup_v2) == driver
    assert docker_cgroup_driver(' \n', ' \n', cgroup_v2) == driver


def test_invalid_daemon_json_fails_with_the_fix():
    with pytest.raises(AnsibleFilterError, match='not valid JSON'):
        docker_cgroup_driver('', '{"exec-opts": [', True)


def test_filter_is_registered():
    assert FilterModule().filters()['docker_cgroup_driver'] is docker_cgroup_driver
