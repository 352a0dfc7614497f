# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""docker_input_errors, fed by the docker role's own per-distribution package tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.docker_inputs import docker_input_errors

VARS = Path(__file__).parents[4] / 'roles' / 'docker' / 'vars'


def offered(name):
    return yaml.safe_load((VARS / ('%s.yml' % name)).read_text())['__docker_packages']


def test_debian_with_both_engines_from_either_source_is_fine():
    for source in ('distro', 'docker_ce', 'none'):
        assert docker_input_errors(['docker', 'containerd'], source, offered('Debian'), 'Debian', 'Debian') == []


def test_each_problem_is_named():
    assert docker_input_errors([], 'distro', offered('Debian'), 'Debian', 'Ubuntu') == [
        'docker_engines is empty. Ask for docker, containerd or both.']
    assert 'Amazon Linux and RHEL-like' in docker_input_errors(['docker'], 'distro', {}, 'Suse', 'SLES')[0]
    [amazon] = docker_input_errors(['docker'], 'docker_ce', offered('Amazon'), 'RedHat', 'Amazon')
    assert amazon.startswith('docker_install_source=docker_ce offers no docker on Amazon.') and 'use docker_install_source=distro' in amazon
    [rocky] = docker_input_errors(['docker', 'containerd'], 'distro', offered('RedHat'), 'RedHat', 'Rocky')
    assert 'offers no docker or containerd on Rocky' in rocky and 'ships Podman' in rocky
    [runtimes] = docker_input_errors(['docker'], 'distro', offered('Debian'), 'Debian', 'Debian',
                                     {'runtimes': {}, 'default-runtime': 'nvidia', 'log-driver': 'json-file'})
    assert 'sets runtimes and default-runtime' in runtimes
    [no_docker] = docker_input_errors(['containerd'], 'distro', offered('Debian'), 'Debian', 'Debian',
                                      {'log-driver': 'json-file'})
    assert 'docker_engines (containerd) has no docker' in no_docker


def test_a_non_list_is_refused():
    with pytest.raises(AnsibleFilterError):
        docker_input_errors('docker')
