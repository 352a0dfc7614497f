# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The docker role's plan (plugins/filter/docker_plan.py), fed as tasks/main.yml feeds it: the role's defaults
templated through vars/main.yml's __docker_settings, with the distribution's vars file loaded as the role loads it."""

from __future__ import annotations

import os
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.accel.nodes.plugins.filter.docker_plan import docker_plan

sys.path.insert(0, os.path.dirname(__file__))
from role_files import load, trust_as_template, trusted  # noqa: E402  pylint: disable=wrong-import-position

DEBIAN_12 = {'os_family': 'Debian', 'distribution': 'Debian', 'distribution_major_version': '12'}
DEBIAN_13 = dict(DEBIAN_12, distribution_major_version='13')
ROCKY_9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_major_version': '9'}
AMAZON = {'os_family': 'RedHat', 'distribution': 'Amazon', 'distribution_major_version': '2023'}
VARS_FILE = {'Debian': 'Debian.yml', 'Rocky': 'RedHat.yml', 'Amazon': 'Amazon.yml'}


def plan(facts=None, connection='ssh', **more):
    """The plan as the role sets it: defaults, vars/main.yml and the distribution's vars file, templated."""
    facts = facts or DEBIAN_12
    variables = dict(load('docker', 'defaults', 'main.yml'))
    variables.update(load('docker', 'vars', 'main.yml'))
    variables.update(load('docker', 'vars', VARS_FILE[facts['distribution']]))
    variables.update(trusted({'docker_%s' % k: v for k, v in more.items()}))
    variables.update(ansible_facts=facts, ansible_connection=connection)
    return Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template('{{ __docker_settings | accel.nodes.docker_plan }}'))


def test_defaults_on_debian_12():
    p = plan()
    assert p['errors'] == []
    assert p['live'] is True
    # Debian's own engines, and the Python library community.docker needs (defaults/main.yml).
    assert p['packages'] == ['docker.io', 'python3-requests']
    assert p['repo'] is None
    assert p['units'] == ['docker.service']
    assert plan(engines=['docker', 'containerd'])['units'] == ['docker.service', 'containerd.service']
    assert p['config_paths'] == ['/etc/docker/daemon.json', '/etc/containerd/config.toml',
                                 '/etc/containerd/conf.d/99-accel-nodes.toml']
    assert p['missing_hint'] == ''
    assert p['merge_options'] is False
    assert p['summary'].startswith('docker: docker from distro; enabled and started')


def test_debian_13_brings_the_docker_command():
    # trixie's docker.io 26.1.5 only recommends docker-cli (vars/Debian.yml).
    assert plan(DEBIAN_13, engines=['docker'])['packages'][:2] == ['docker.io', 'docker-cli']


def test_packages_are_listed_once():
    p = plan(install_source='docker_ce', engines=['docker', 'containerd'], extra_packages=['containerd.io', 'jq'])
    assert p['packages'].count('containerd.io') == 1
    assert 'jq' in p['packages']


@pytest.mark.parametrize('facts, url, fingerprint', [
    (DEBIAN_12, 'https://download.docker.com/linux/debian', '9DC858229FC7DD38854AE2D88D81803C0EBFCD88'),
    (ROCKY_9, 'https://download.docker.com/linux/centos', '060A61C51B558A7F742B77AAC52FEB6B621E9F35'),
])
def test_docker_ce_repository(facts, url, fingerprint):
    repo = plan(facts, install_source='docker_ce')['repo']
    assert repo['url'] == url and repo['key_url'] == url + '/gpg'
    assert repo['key_fingerprints'] == [fingerprint]
    assert repo['channel'] == 'stable'


def test_own_mirror_key_and_fingerprint():
    repo = plan(install_source='docker_ce', repo_url='file:///srv/docker//', repo_key_url='file:///srv/key.asc',
                repo_key_fingerprint=['AAAA'])['repo']
    assert repo == {'url': 'file:///srv/docker/debian', 'distro': 'debian', 'key_url': 'file:///srv/key.asc',
                    'key_fingerprints': ['AAAA'], 'channel': 'stable'}


def test_chroot_is_not_live():
    p = plan(connection='community.general.chroot')
    assert p['live'] is False and 'not started' in p['summary']
    assert plan(manage_service=False)['live'] is False


def test_install_source_none_installs_nothing_and_says_why():
    p = plan(install_source='none')
    assert p['packages'] == []
    assert 'docker_install_source is none' in p['missing_hint']


def test_daemon_options_are_merged_only_with_docker():
    assert plan(daemon_options={'log-driver': 'journald'})['merge_options'] is True
    p = plan(engines=['containerd'], daemon_options={'log-driver': 'journald'})
    assert p['merge_options'] is False
    assert any('has no docker' in e for e in p['errors'])


def test_errors_come_from_the_input_checks():
    p = plan(AMAZON, install_source='docker_ce')
    assert any('Docker publishes no repository for Amazon Linux' in e for e in p['errors'])
    assert p['repo'] is None and p['packages'] == []
    assert plan(daemon_options={'runtimes': {}})['errors']


def test_settings_must_be_a_dict():
    with pytest.raises(AnsibleFilterError):
        docker_plan(['docker'])
