# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.modules import daemon_json

# A user's daemon.json, in a 4-space indent and with a features object.
USER = ('{\n    "storage-driver": "vfs",\n    "features": {"buildkit": true},\n'
        '    "registry-mirrors": ["https://mirror.example.invalid"]\n}\n')
# The end of `dockerd --help` of docker.io 20.10.24 (Debian 12, captured), and the lines of Docker 27's
# docs/reference/dockerd.md around --validate.
HELP_20_10 = (
    '                                                loopback traffic (default\n'
    '                                                true)\n'
    '      --userland-proxy-path string              Path to the userland\n'
    '                                                proxy binary\n'
    '      --userns-remap string                     User/Group setting for\n'
    '                                                user namespaces\n'
    '  -v, --version                                 Print version information\n'
    '                                                and quit\n'
)
HELP_27 = ('      --userns-remap string                   User/Group setting for user namespaces\n'
           '      --validate                              Validate daemon configuration and exit\n'
           '  -v, --version                               Print version information and quit\n')


class Dockerd:
    """dockerd --help and --validate: rejects a config that sets an unknown key, as dockerd 23+ does."""

    def __init__(self, help_text):
        self.help_text = help_text
        self.validated = []

    def __call__(self, argv, environ_update=None, **kwargs):
        assert argv[0] == '/usr/bin/dockerd'
        if argv[1] == '--help':
            return 0, 'Usage:\tdockerd [OPTIONS]\n\n' + self.help_text, ''
        assert argv[1:3] == ['--validate', '--config-file']
        config = json.load(open(argv[3]))
        self.validated.append(config)
        if 'no-such-key' in config:
            return 1, '', 'unable to configure the Docker daemon with file %s: the following directives ' \
                          "don't match any configuration option: no-such-key\n" % argv[3]
        return 0, '', 'configuration OK\n'


@pytest.fixture
def run(tmp_path, monkeypatch, module_in_tmp):
    path = tmp_path / 'etc' / 'docker' / 'daemon.json'
    main = module_in_tmp(daemon_json.main)

    def _run(dockerd=None, **args):
        monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                            lambda self, name, *a, **kw: '/usr/bin/dockerd' if dockerd and name == 'dockerd' else None)
        monkeypatch.setattr(AnsibleModule, 'run_command', lambda self, argv, **kw: dockerd(argv, **kw))
        args.setdefault('path', str(path))
        return main(**args)
    _run.path = path
    return _run


def test_keys_are_set_in_place_features_one_level_deep_and_the_indent_kept(run):
    run.path.parent.mkdir(parents=True)
    run.path.write_text(USER)
    os.chmod(run.path, 0o600)
    result = run(options={'storage-driver': 'overlay2', 'features': {'cdi': True}, 'max-concurrent-downloads': 5},
                 _ansible_diff=True)
    assert result['changed'] is True and result['validated'] is False
    assert run.path.read_text() == (
        '{\n    "storage-driver": "overlay2",\n    "features": {\n        "buildkit": true,\n        "cdi": true\n'
        '    },\n    "registry-mirrors": [\n        "https://mirror.example.invalid"\n    ],\n'
        '    "max-concurrent-downloads": 5\n}\n')
    assert oct(os.stat(run.path).st_mode & 0o777) == '0o600'
    assert open(result['backup_file']).read() == USER
    assert result['diff']['before'] == USER
    again = run(options={'storage-driver': 'overlay2', 'features': {'cdi': True}, 'max-concurrent-downloads': 5})
    assert again['changed'] is False and 'backup_file' not in again


def test_a_value_already_set_changes_nothing_and_keeps_the_users_formatting(run):
    run.path.parent.mkdir(parents=True)
    run.path.write_text(USER)
    assert run(options={'storage-driver': 'vfs', 'features': {'buildkit': True}})['changed'] is False
    assert run.path.read_text() == USER


def test_a_new_file_gets_its_directory_indent_2_and_mode_0644(run):
    result = run(options={'log-driver': 'json-file'})
    assert result['changed'] is True
    assert run.path.read_text() == '{\n  "log-driver": "json-file"\n}\n'
    assert oct(os.stat(run.path).st_mode & 0o777) == '0o644'
    assert oct(os.stat(run.path.parent).st_mode & 0o777) == '0o755'


@pytest.mark.parametrize('text', ['{"storage-driver": "vfs", "registry-mirrors": ["https://mirror.example.invalid",\n',
                                  '["not", "an", "object"]\n'])
def test_a_file_that_is_not_a_json_object_is_refused_and_left_alone(run, text):
    run.path.parent.mkdir(parents=True)
    run.path.write_text(text)
    result = run(options={'debug': True})
    assert result['failed'] is True
    assert result['msg'] == ('%s is not a valid JSON object, so the options cannot be merged into it. It was left as it '
                             'is. Fix or remove the file and run again (dockerd would refuse to start with it too).'
                             % run.path)
    assert run.path.read_text() == text


def test_check_mode_reports_and_writes_nothing(run):
    result = run(options={'debug': True}, _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True
    assert result['diff']['after'] == '{\n  "debug": true\n}\n'
    assert not run.path.exists()


def test_dockerd_23_and_later_validate_the_merged_file_before_it_is_written(run):
    dockerd = Dockerd(HELP_27)
    result = run(dockerd, options={'debug': True})
    assert result['validated'] is True
    assert dockerd.validated == [{'debug': True}]
    rejected = run(dockerd, options={'no-such-key': 1})
    assert rejected['failed'] is True
    assert rejected['msg'].startswith('dockerd rejects %s with the merged options, so it was left as it is: unable to '
                                      'configure the Docker daemon' % run.path)
    assert json.loads(run.path.read_text()) == {'debug': True}


def test_dockerd_20_10_cannot_validate_and_is_not_asked_to(run):
    dockerd = Dockerd(HELP_20_10)
    result = run(dockerd, options={'no-such-key': 1})
    assert result['changed'] is True and result['validated'] is False
    assert dockerd.validated == []


def test_validate_false_never_runs_dockerd(run):
    def never(argv, **kwargs):
        raise AssertionError(argv)
    assert run(never, options={'debug': True}, validate=False)['validated'] is False
