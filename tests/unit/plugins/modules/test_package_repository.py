# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.modules import package_repository

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'openpgp'
RSA = 'CB46C553B095A24A90274F878EA7A5D5237FE158'
ED25519 = 'A5B440836C27DF444964208D607B667479FB903F'

# What ansible.builtin.deb822_repository (ansible-core 2.19) writes for these
# options: its field naming and its sorted option order, dumped by
# python-debian 1.1.1's Deb822, captured on 2026-11-24.
DEB822_TOOLKIT = (
    'X-Repolib-Name: nvidia-container-toolkit\n'
    'Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.gpg\n'
    'Suites: /\n'
    'Types: deb\n'
    'URIs: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)\n')
DEB822_NEURON = (
    'Components: main\n'
    'X-Repolib-Name: aws-neuron\n'
    'Signed-By: /etc/apt/keyrings/neuron.gpg\n'
    'Suites: jammy\n'
    'Types: deb\n'
    'URIs: https://apt.repos.neuron.amazonaws.com\n')
DEB822_DOCKER = (
    'Architectures: amd64\n'
    'Components: stable\n'
    'X-Repolib-Name: docker\n'
    'Signed-By: /etc/apt/keyrings/docker.asc\n'
    'Suites: bookworm\n'
    'Types: deb\n'
    'URIs: https://download.docker.com/linux/debian\n')


def test_writes_what_deb822_repository_writes():
    assert package_repository.sources_text(
        'nvidia-container-toolkit', '/etc/apt/keyrings/nvidia-container-toolkit.gpg', ['deb'],
        ['https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)'], ['/']) == DEB822_TOOLKIT
    assert package_repository.sources_text(
        'aws-neuron', '/etc/apt/keyrings/neuron.gpg', ['deb'], ['https://apt.repos.neuron.amazonaws.com'],
        ['jammy'], ['main']) == DEB822_NEURON
    assert package_repository.sources_text(
        'docker', '/etc/apt/keyrings/docker.asc', ['deb'], ['https://download.docker.com/linux/debian'],
        ['bookworm'], ['stable'], ['amd64']) == DEB822_DOCKER


@pytest.mark.parametrize('name, file', [
    ('aws-neuron', 'aws-neuron'),
    ('NVIDIA Container_Toolkit', 'nvidia-container-toolkit'),
    ('cuda.repo+x', 'cudarepox'),
])
def test_names_the_file_as_deb822_repository_does(name, file):
    assert package_repository.slug(name) == file


@pytest.fixture
def node(tmp_path, monkeypatch, module_in_tmp):
    """A fake /etc/apt under tmp_path; run(**args) runs the module against it."""
    sources = tmp_path / 'etc' / 'apt' / 'sources.list.d'
    sources.mkdir(parents=True)
    monkeypatch.setattr(package_repository, 'SOURCES_DIR', str(sources))
    run = module_in_tmp(package_repository.main)
    keyring = tmp_path / 'etc' / 'apt' / 'keyrings' / 'neuron.gpg'
    served = tmp_path / 'served'
    served.mkdir()
    (served / 'key.asc').write_bytes((FIXTURES / 'rsa2048.asc').read_bytes())
    (served / 'other.asc').write_bytes((FIXTURES / 'ed25519.asc').read_bytes())

    class Node:
        pass
    n = Node()
    n.sources, n.keyring, n.tmp = sources, keyring, tmp_path
    n.dest = sources / 'aws-neuron.sources'
    n.args = dict(name='aws-neuron', uris=['https://apt.repos.neuron.amazonaws.com'], suites=['jammy'],
                  components=['main'], key_url=(served / 'key.asc').as_uri(), key_fingerprint=[RSA],
                  keyring=str(keyring))
    n.other_key = (served / 'other.asc').as_uri()
    n.run = lambda **extra: run(**dict(n.args, **extra))
    return n


def test_adds_key_and_source_then_changes_nothing(node):
    first = node.run()
    assert first['changed'] is True and first['key_changed'] is True and first['source_changed'] is True
    assert node.keyring.read_bytes() == (FIXTURES / 'rsa2048.gpg').read_bytes()
    assert node.dest.read_text() == DEB822_NEURON.replace('/etc/apt/keyrings/neuron.gpg', str(node.keyring))
    assert stat.S_IMODE(os.stat(node.dest).st_mode) == 0o644
    assert first['dest'] == str(node.dest) and first['fingerprints'] == [RSA]
    second = node.run()
    assert second['changed'] is False and second['removed'] == []


def test_check_mode_reports_and_writes_nothing(node):
    result = node.run(_ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True
    assert not node.keyring.exists() and not node.dest.exists()
    assert result['diff'][1]['after'] == result['repo']
    assert result['diff'][0]['after']['fingerprints'] == [RSA]


def test_refuses_a_key_with_another_fingerprint_and_writes_nothing(node):
    result = node.run(key_url=node.other_key)
    assert result['failed'] is True
    assert ED25519 in result['msg'] and 'not accepted' in result['msg']
    assert not node.keyring.exists() and not node.dest.exists()


def test_removes_conflicting_files_and_rewrites_a_changed_source(node):
    node.run()
    legacy = node.sources / 'neuron.list'
    legacy.write_text('deb https://apt.repos.neuron.amazonaws.com jammy main\n')
    node.dest.write_text('Types: deb\nURIs: http://old.example/\n')
    missing = node.sources / 'never-there.list'
    result = node.run(remove=[str(legacy), str(missing)], _ansible_diff=True)
    assert result['changed'] is True and result['key_changed'] is False and result['source_changed'] is True
    assert result['removed'] == [str(legacy)]
    assert not legacy.exists()
    assert 'URIs: https://apt.repos.neuron.amazonaws.com' in node.dest.read_text()
    assert result['diff'][2]['before'] == '%s\n' % legacy


def test_corrects_the_mode_of_an_existing_source(node):
    node.run()
    os.chmod(node.dest, 0o600)
    assert node.run()['changed'] is True
    assert stat.S_IMODE(os.stat(node.dest).st_mode) == 0o644


def test_absent_removes_source_keyring_and_conflicts(node):
    node.run()
    legacy = node.sources / 'neuron.list'
    legacy.write_text('deb x y z\n')
    result = package_repository_absent(node, remove=[str(legacy)])
    assert result['changed'] is True
    assert result['removed'] == [str(node.keyring), str(node.dest), str(legacy)]
    assert not node.keyring.exists() and not node.dest.exists() and not legacy.exists()
    assert package_repository_absent(node)['changed'] is False


def package_repository_absent(node, **extra):
    return node.run(state='absent', key_url=None, key_fingerprint=None, uris=None, suites=None, **extra)


def test_refuses_to_remove_what_it_writes(node):
    result = node.run(remove=[str(node.keyring)])
    assert result['failed'] is True and 'remove names the keyring' in result['msg']


def test_refuses_relative_paths(node):
    result = node.run(remove=['etc/apt/sources.list.d/x.list'])
    assert result['failed'] is True and 'absolute' in result['msg']
