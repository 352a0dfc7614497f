# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc
from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlDocument, loads

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'toml')


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding='utf-8') as f:
        return f.read()


USER_DAEMON_JSON = {
    'data-root': '/mnt/docker',
    'log-driver': 'json-file',
    'log-opts': {'max-size': '10m', 'max-file': '3'},
    'registry-mirrors': ['https://mirror.example.internal'],
    'runtimes': {'runsc': {'path': '/usr/local/bin/runsc', 'runtimeArgs': ['--platform=kvm']}},
    'default-runtime': 'runsc',
}


# Docker

def test_register_touches_only_the_runtime():
    new = rc.docker_present(USER_DAEMON_JSON, 'nvidia', '/usr/bin/nvidia-container-runtime')
    assert list(new) == list(USER_DAEMON_JSON)
    assert list(new['runtimes']) == ['runsc', 'nvidia']
    assert new['runtimes']['nvidia'] == {'path': '/usr/bin/nvidia-container-runtime'}
    assert {k: v for k, v in new.items() if k != 'runtimes'} == {k: v for k, v in USER_DAEMON_JSON.items()
                                                                 if k != 'runtimes'}
    assert USER_DAEMON_JSON['runtimes'] == {'runsc': {'path': '/usr/local/bin/runsc', 'runtimeArgs': ['--platform=kvm']}}


def test_runtime_args_only_when_given():
    assert rc.docker_present({}, 'x', '/x', ['-a'])['runtimes']['x'] == {'path': '/x', 'runtimeArgs': ['-a']}
    assert rc.docker_present({}, 'x', '/x', [])['runtimes']['x'] == {'path': '/x'}


def test_an_equivalent_entry_is_kept_as_it_is():
    data = {'runtimes': {'nvidia': {'runtimeArgs': [], 'path': '/usr/bin/nvidia-container-runtime'}}}
    assert rc.docker_present(data, 'nvidia', '/usr/bin/nvidia-container-runtime') == data
    assert list(rc.docker_present(data, 'nvidia', '/usr/bin/nvidia-container-runtime')['runtimes']['nvidia']) == [
        'runtimeArgs', 'path']


def test_a_changed_path_replaces_the_entry_in_place():
    data = {'runtimes': {'a': {'path': '/a'}, 'nvidia': {'path': '/old', 'args': []}, 'z': {'path': '/z'}}}
    new = rc.docker_present(data, 'nvidia', '/new')
    assert list(new['runtimes']) == ['a', 'nvidia', 'z']
    assert new['runtimes']['nvidia'] == {'path': '/new'}


@pytest.mark.parametrize('start,default,expected', [
    ({}, True, 'nvidia'),
    ({'default-runtime': 'runsc'}, True, 'nvidia'),
    ({'default-runtime': 'runsc'}, None, 'runsc'),
    ({'default-runtime': 'nvidia'}, None, 'nvidia'),
    ({'default-runtime': 'runsc'}, False, 'runsc'),
    ({'default-runtime': 'nvidia'}, False, None),
])
def test_default_runtime(start, default, expected):
    assert rc.docker_present(start, 'nvidia', '/n', default=default).get('default-runtime') == expected


def test_cdi_sets_features_cdi_and_keeps_other_features():
    data = {'features': {'buildkit': True}}
    assert rc.docker_present(data, 'n', '/n', cdi=True)['features'] == {'buildkit': True, 'cdi': True}
    assert rc.docker_present(data, 'n', '/n', cdi=False)['features'] == {'buildkit': True, 'cdi': False}
    assert rc.docker_present(data, 'n', '/n')['features'] == {'buildkit': True}


@pytest.mark.parametrize('data', [{'runtimes': []}, {'runtimes': 'x'}, {'features': True}])
def test_keys_of_the_wrong_type_fail(data):
    with pytest.raises(rc.ConfigError, match='not an object'):
        rc.docker_present(data, 'n', '/n', cdi=True)


def test_unregister_removes_exactly_what_register_added():
    for start in ({}, USER_DAEMON_JSON, {'runtimes': {}, 'x': 1}):
        added = rc.docker_present(start, 'nvidia', '/n', default=True)
        removed = rc.docker_absent(added, 'nvidia')
        expected = {k: v for k, v in start.items() if k != 'default-runtime'}
        if start.get('runtimes') == {}:
            del expected['runtimes']
        assert removed == expected


def test_unregister_resets_the_default_only_if_it_was_this_runtime():
    assert rc.docker_absent(USER_DAEMON_JSON, 'nvidia') == USER_DAEMON_JSON
    assert 'default-runtime' not in rc.docker_absent(USER_DAEMON_JSON, 'runsc')


@pytest.mark.parametrize('text,where', [
    ('{"a": 1,}', 'line 1, column 9'),
    ('{\n  "a": 1\n  "b": 2\n}\n', 'line 3, column 3'),
    ('{"a": ', 'line 1, column 7'),
])
def test_malformed_json_names_the_file_and_position(text, where):
    with pytest.raises(rc.ConfigError) as caught:
        rc.read_daemon_json(text, '/etc/docker/daemon.json')
    assert '/etc/docker/daemon.json is not valid JSON' in str(caught.value)
    assert where in str(caught.value)


@pytest.mark.parametrize('text', ['[]', '"x"', '3'])
def test_json_that_is_not_an_object_fails(text):
    with pytest.raises(rc.ConfigError, match='must hold a JSON object'):
        rc.read_daemon_json(text, '/d.json')


@pytest.mark.parametrize('text', [None, '', '  \n'])
def test_missing_or_blank_daemon_json_is_empty(text):
    assert rc.read_daemon_json(text) == {}


def test_render_keeps_the_text_when_nothing_changed_and_the_indent_when_something_did():
    text = '{\n    "log-driver":"json-file",   "runtimes": {}\n}'
    data = rc.read_daemon_json(text)
    assert rc.render_daemon_json(data, text) is text
    new = rc.docker_present(data, 'n', '/n')
    assert rc.render_daemon_json(new, text) == (
        '{\n    "log-driver": "json-file",\n    "runtimes": {\n        "n": {\n            "path": "/n"\n'
        '        }\n    }\n}\n')
    assert rc.render_daemon_json(new, '{\n\t"a": 1\n}').startswith('{\n\t"log-driver"')
    assert rc.render_daemon_json(new, None).startswith('{\n  "log-driver"')


def test_render_keeps_unicode_as_it_is():
    data = {'labels': ['zone=z\u00fcrich', '\u540d\u524d=\u5024']}
    assert '"zone=z\u00fcrich"' in rc.render_daemon_json(data)
    assert json.loads(rc.render_daemon_json(data)) == data


# containerd

@pytest.mark.parametrize('name,version', [
    ('containerd-1.7.18-default.toml', 2),
    ('containerd-2.0-default.toml', 3),
    ('containerd-2.3-default.toml', 4),
])
def test_version_of_real_configs(name, version):
    assert rc.containerd_version(loads(fixture(name))) == version


def test_no_config_is_version_2():
    assert rc.containerd_version({}) == 2


@pytest.mark.parametrize('data,match', [
    ({'root': '/var/lib/containerd'}, 'no version key'),
    ({'version': 1}, 'version = 1'),
    ({'version': 5}, 'does not know'),
    ({'version': '2'}, 'does not know'),
    ({'version': True}, 'does not know'),
])
def test_unsupported_versions_fail_clearly(data, match):
    with pytest.raises(rc.ConfigError, match=match):
        rc.containerd_version(data, '/etc/containerd/config.toml')


def test_import_is_added_with_one_line_changed():
    text = fixture('containerd-1.7.18-default.toml')
    doc = TomlDocument(text)
    assert rc.containerd_with_import(doc, '/etc/containerd/conf.d/99-nvidia.toml')
    assert doc.text() == text.replace('imports = []\n', 'imports = ["/etc/containerd/conf.d/*.toml"]\n', 1)
    assert rc.containerd_with_import(doc, '/etc/containerd/conf.d/99-other.toml') is False


def test_imports_keep_existing_entries():
    doc = TomlDocument('version = 2\nimports = ["/etc/containerd/runtime_*.toml"]\n')
    assert rc.containerd_with_import(doc, '/etc/containerd/conf.d/99-nvidia.toml')
    assert doc.get('imports') == ['/etc/containerd/runtime_*.toml', '/etc/containerd/conf.d/*.toml']


@pytest.mark.parametrize('entry', ['/etc/containerd/conf.d/*.toml', '/etc/containerd/conf.d/99-nvidia.toml',
                                   '/etc/containerd/conf.d/99-*.toml', 'conf.d/*.toml'])
def test_an_import_that_covers_the_drop_in_is_enough(entry):
    doc = TomlDocument('version = 3\nimports = ["%s"]\n' % entry)
    assert rc.containerd_with_import(doc, '/etc/containerd/conf.d/99-nvidia.toml', '/etc/containerd/config.toml') is False


def test_an_empty_main_config_gets_a_version_and_the_import():
    doc = TomlDocument('')
    assert rc.containerd_with_import(doc, '/etc/containerd/conf.d/99-nvidia.toml')
    assert doc.text() == 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


def test_imports_of_the_wrong_type_fail():
    with pytest.raises(rc.ConfigError, match='imports'):
        rc.containerd_with_import(TomlDocument('version = 2\nimports = "x"\n'), '/etc/containerd/conf.d/a.toml')


def test_v3_drop_in_holds_the_runtime_alone():
    data = rc.containerd_drop_in(3, 'nvidia', '/usr/bin/nvidia-container-runtime', {'SystemdCgroup': True},
                                 default=True, cdi=True, main=loads(fixture('containerd-2.0-default.toml')))
    assert data == {'version': 3, 'plugins': {'io.containerd.cri.v1.runtime': {
        'containerd': {'runtimes': {'nvidia': {'runtime_type': 'io.containerd.runc.v2', 'options': {
            'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}}},
            'default_runtime_name': 'nvidia'},
        'enable_cdi': True}}}


def test_v2_drop_in_repeats_the_main_cri_section_for_containerd_1():
    main = loads(fixture('containerd-1.7.18-default.toml'))
    data = rc.containerd_drop_in(2, 'nvidia', '/usr/bin/nvidia-container-runtime', main=main)
    section = data['plugins']['io.containerd.grpc.v1.cri']
    expected = main['plugins']['io.containerd.grpc.v1.cri']
    assert section['sandbox_image'] == expected['sandbox_image']
    assert section['containerd']['runtimes']['runc'] == expected['containerd']['runtimes']['runc']
    assert section['containerd']['runtimes']['nvidia'] == {
        'runtime_type': 'io.containerd.runc.v2', 'options': {'BinaryName': '/usr/bin/nvidia-container-runtime'}}
    assert section['containerd']['default_runtime_name'] == 'runc'
    assert 'nvidia' not in expected['containerd']['runtimes']  # the main config's data is not changed


def test_v2_drop_in_without_a_main_config_keeps_runc_as_the_default():
    data = rc.containerd_drop_in(2, 'nvidia', '/n')
    assert data['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']['runc'] == {
        'runtime_type': 'io.containerd.runc.v2'}
    data = rc.containerd_drop_in(2, 'nvidia', '/n', default=True)
    assert 'runc' not in data['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']


def test_binary_name_comes_from_path_only():
    with pytest.raises(rc.ConfigError, match='BinaryName'):
        rc.containerd_drop_in(3, 'n', '/n', {'BinaryName': '/x'})


@pytest.mark.parametrize('version,plugin', [(2, 'io.containerd.grpc.v1.cri'), (3, 'io.containerd.cri.v1.runtime'),
                                            (4, 'io.containerd.cri.v1.runtime')])
def test_rendered_drop_in_parses_and_names_the_plugin(version, plugin):
    text = rc.render_drop_in(rc.containerd_drop_in(version, 'nvidia', '/n', cdi=True), 'nvidia')
    assert text.startswith('# Managed by accel.nodes.container_runtime')
    data = loads(text)
    assert data['version'] == version
    assert data['plugins'][plugin]['enable_cdi'] is True
    assert rc.containerd_runtimes(data)[:1] == ['nvidia']
    assert '[plugins."%s".containerd.runtimes.nvidia]' % plugin in text


def test_runtimes_of_real_configs():
    assert rc.containerd_runtimes(loads(fixture('containerd-1.7.18-default.toml'))) == ['runc']
    assert rc.containerd_runtimes(loads(fixture('containerd-2.0-default.toml'))) == ['runc']
    assert rc.containerd_runtimes({}) == []
