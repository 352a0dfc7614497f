# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import copy
import difflib
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

def changed_lines(before, after):
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
    return [line for line in diff if line[:1] in '+-' and line[:3] not in ('+++', '---')]


MAIN = '/etc/containerd/config.toml'
DROP_IN = '/etc/containerd/conf.d/99-accel-nodes.toml'
NVIDIA = rc.runtime_entry('/usr/bin/nvidia-container-runtime')
NEURON = rc.runtime_entry('/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh')


def containerd_1_merge(texts):
    """What containerd 1.x builds from these files: each imported file's plugin sections replace the earlier ones.

    The oracle for the tests, written from containerd 1.x's mergeConfig
    ("Replace entire sections instead of merging map's values") and checked
    against `containerd config dump` of Debian 12's containerd 1.6.20.
    """
    merged = {}
    for text in texts:
        data = loads(text)
        for key, value in data.items():
            if key == 'plugins':
                merged.setdefault('plugins', {}).update(value)
            else:
                merged[key] = value
    return merged


@pytest.mark.parametrize('name,version', [
    ('containerd.io-docker.toml', 1),
    ('containerd-1.6.20-debian12.toml', 2),
    ('containerd-1.7.18-default.toml', 2),
    ('containerd-2.0-default.toml', 3),
    ('containerd-2.3-default.toml', 4),
])
def test_version_of_real_configs(name, version):
    assert rc.containerd_version(loads(fixture(name))) == version


def test_no_config_is_version_2():
    assert rc.containerd_version({}) == 2


@pytest.mark.parametrize('data', [{'version': 5}, {'version': '2'}, {'version': True}, {'version': 0}])
def test_unknown_versions_fail_clearly(data):
    with pytest.raises(rc.ConfigError, match='does not know'):
        rc.containerd_version(data, MAIN)


def test_docker_containerd_io_config_becomes_version_2_with_cri_enabled():
    text = fixture('containerd.io-docker.toml')
    doc = TomlDocument(text)
    version, changes = rc.containerd_main(doc, DROP_IN, MAIN)
    assert version == 2
    assert changed_lines(text, doc.text()) == [
        '-disabled_plugins = ["cri"]\n',
        '+disabled_plugins = []\n',
        '+version = 2\n',
        '+imports = ["/etc/containerd/conf.d/*.toml"]\n',
    ]
    assert len(changes) == 2 and 'version 1' in changes[0] and 'CRI' in changes[1]
    # containerd 1.x, with the drop-in merged over it, must load it (version 2, no short names).
    merged = containerd_1_merge([doc.text(), '%s\nversion = 2\n' % rc._MANAGED])
    assert merged['version'] == 2 and merged['disabled_plugins'] == []


def test_v1_plugin_lists_are_named_by_uri_and_only_cri_is_enabled():
    doc = TomlDocument('disabled_plugins = ["cri", "aufs", "restart", "io.containerd.snapshotter.v1.zfs"]\n'
                       'required_plugins = ["scheduler", "foo"]\n')
    rc.containerd_main(doc, DROP_IN, MAIN)
    assert doc.get('disabled_plugins') == ['io.containerd.snapshotter.v1.aufs', 'io.containerd.internal.v1.restart',
                                           'io.containerd.snapshotter.v1.zfs']
    assert doc.get('required_plugins') == ['io.containerd.gc.v1.scheduler', 'io.containerd.grpc.v1.foo']


@pytest.mark.parametrize('disabled', [['io.containerd.grpc.v1.cri'], ['io.containerd.cri.v1.runtime',
                                                                      'io.containerd.cri.v1.images']])
def test_cri_is_enabled_in_later_versions_too(disabled):
    doc = TomlDocument('version = 3\ndisabled_plugins = %s\n' % json.dumps(disabled))
    rc.containerd_main(doc, DROP_IN, MAIN)
    assert doc.get('disabled_plugins') == []


def test_v1_config_with_plugin_tables_fails_and_says_what_to_do():
    doc = TomlDocument('[plugins.cri]\n  sandbox_image = "x"\n')
    with pytest.raises(rc.ConfigError, match=r'short names \(cri\).*rename'):
        rc.containerd_main(doc, DROP_IN, MAIN)
    assert doc.text() == '[plugins.cri]\n  sandbox_image = "x"\n'


@pytest.mark.parametrize('name', ['containerd-1.6.20-debian12.toml', 'containerd-1.7.18-default.toml',
                                  'containerd-2.0-default.toml'])
def test_other_real_configs_gain_the_import_and_nothing_else(name):
    text = fixture(name)
    doc = TomlDocument(text)
    version, changes = rc.containerd_main(doc, DROP_IN, MAIN)
    assert version == loads(text)['version'] and changes == []
    assert [line for line in changed_lines(text, doc.text()) if 'imports' not in line] == []
    assert doc.get('imports') == ['/etc/containerd/conf.d/*.toml']


def test_import_is_added_with_one_line_changed():
    text = fixture('containerd-1.7.18-default.toml')
    doc = TomlDocument(text)
    rc.containerd_main(doc, DROP_IN)
    assert doc.text() == text.replace('imports = []\n', 'imports = ["/etc/containerd/conf.d/*.toml"]\n', 1)


def test_imports_keep_existing_entries():
    doc = TomlDocument('version = 2\nimports = ["/etc/containerd/runtime_*.toml"]\n')
    rc.containerd_main(doc, DROP_IN)
    assert doc.get('imports') == ['/etc/containerd/runtime_*.toml', '/etc/containerd/conf.d/*.toml']


@pytest.mark.parametrize('entry', ['/etc/containerd/conf.d/*.toml', '/etc/containerd/conf.d/99-accel-nodes.toml',
                                   '/etc/containerd/conf.d/99-*.toml', 'conf.d/*.toml'])
def test_an_import_that_covers_the_drop_in_is_enough(entry):
    text = 'version = 3\nimports = ["%s"]\n' % entry
    doc = TomlDocument(text)
    rc.containerd_main(doc, DROP_IN, MAIN)
    assert doc.text() == text


def test_a_missing_main_config_gets_a_version_and_the_import():
    doc = TomlDocument('')
    assert rc.containerd_main(doc, DROP_IN) == (2, [])
    assert doc.text() == 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


@pytest.mark.parametrize('text,match', [('version = 2\nimports = "x"\n', 'imports'),
                                        ('version = 2\ndisabled_plugins = "cri"\n', 'disabled_plugins')])
def test_lists_of_the_wrong_type_fail(text, match):
    with pytest.raises(rc.ConfigError, match=match):
        rc.containerd_main(TomlDocument(text), DROP_IN)


def test_v3_drop_in_holds_the_runtime_alone():
    data, names = rc.containerd_drop_in(3, 'nvidia', rc.runtime_entry('/usr/bin/nvidia-container-runtime',
                                                                      {'SystemdCgroup': True}),
                                        default=True, cdi=True, main=loads(fixture('containerd-2.0-default.toml')))
    assert names == ['nvidia']
    assert data == {'version': 3, 'plugins': {'io.containerd.cri.v1.runtime': {
        'containerd': {'runtimes': {'nvidia': {'runtime_type': 'io.containerd.runc.v2', 'options': {
            'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}}},
            'default_runtime_name': 'nvidia'},
        'enable_cdi': True}}}


def test_v2_drop_in_repeats_the_main_cri_section_for_containerd_1():
    main = loads(fixture('containerd-1.7.18-default.toml'))
    data, dummy = rc.containerd_drop_in(2, 'nvidia', NVIDIA, main=main)
    section = data['plugins']['io.containerd.grpc.v1.cri']
    expected = main['plugins']['io.containerd.grpc.v1.cri']
    assert section['sandbox_image'] == expected['sandbox_image']
    assert section['containerd']['runtimes']['runc'] == expected['containerd']['runtimes']['runc']
    assert section['containerd']['runtimes']['nvidia'] == NVIDIA
    assert section['containerd']['default_runtime_name'] == 'runc'
    assert 'nvidia' not in expected['containerd']['runtimes']  # the main config's data is not changed


def test_v2_drop_in_without_a_main_config_keeps_runc_as_the_default():
    data, dummy = rc.containerd_drop_in(2, 'nvidia', NVIDIA)
    assert data['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']['runc'] == {
        'runtime_type': 'io.containerd.runc.v2'}
    data, dummy = rc.containerd_drop_in(2, 'nvidia', NVIDIA, default=True)
    assert 'runc' not in data['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']


def register(version, main_text, steps):
    """Run (name, entry, default, cdi) steps through containerd_drop_in as the module would; the last text."""
    main = loads(main_text) if main_text else None
    text = None
    for name, entry, default, cdi in steps:
        data, names = rc.containerd_drop_in(version, name, entry, default, cdi, main,
                                            loads(text) if text else None, rc.drop_in_runtimes(text) or ())
        text = rc.render_drop_in(data, names) if data else None
    return text


def test_two_runtimes_on_debian_containerd_1_6_both_survive_the_merge():
    main = fixture('containerd-1.6.20-debian12.toml')
    text = register(2, main, [('nvidia', NVIDIA, None, True), ('oci-neuron', NEURON, None, None)])
    assert rc.drop_in_runtimes(text) == ['nvidia', 'oci-neuron']
    cri = containerd_1_merge([main, text])['plugins']['io.containerd.grpc.v1.cri']
    assert cri['containerd']['runtimes'] == {'nvidia': NVIDIA, 'oci-neuron': NEURON,
                                             'runc': {'runtime_type': 'io.containerd.runc.v2'}}
    assert cri['cni'] == {'bin_dir': '/usr/lib/cni', 'conf_dir': '/etc/cni/net.d'}
    assert cri['enable_cdi'] is True


def test_two_nvidia_variants_and_the_default_moves_between_them():
    main = fixture('containerd-1.7.18-default.toml')
    cdi = rc.runtime_entry('/usr/bin/nvidia-container-runtime.cdi')
    text = register(2, main, [('nvidia', NVIDIA, True, None), ('nvidia-cdi', cdi, None, None)])
    cri = loads(text)['plugins']['io.containerd.grpc.v1.cri']['containerd']
    assert cri['default_runtime_name'] == 'nvidia' and set(cri['runtimes']) == {'runc', 'nvidia', 'nvidia-cdi'}
    text = register(2, main, [('nvidia', NVIDIA, True, None), ('nvidia-cdi', cdi, True, None)])
    assert loads(text)['plugins']['io.containerd.grpc.v1.cri']['containerd']['default_runtime_name'] == 'nvidia-cdi'
    text = register(2, main, [('nvidia', NVIDIA, True, None), ('nvidia-cdi', cdi, None, None), ('nvidia', None, None, None)])
    cri = loads(text)['plugins']['io.containerd.grpc.v1.cri']['containerd']
    assert cri['default_runtime_name'] == 'runc' and set(cri['runtimes']) == {'runc', 'nvidia-cdi'}
    assert rc.drop_in_runtimes(text) == ['nvidia-cdi']


def test_removing_the_last_runtime_leaves_no_drop_in():
    assert register(3, None, [('nvidia', NVIDIA, True, True), ('nvidia', None, None, None)]) is None


def test_the_copy_of_the_main_cri_section_follows_the_main_config():
    main = fixture('containerd-1.7.18-default.toml')
    text = register(2, main, [('nvidia', NVIDIA, None, None)])
    edited = main.replace('SystemdCgroup = false', 'SystemdCgroup = true')
    data, names = rc.containerd_drop_in(2, 'oci-neuron', NEURON, main=loads(edited), current=loads(text),
                                        owned=rc.drop_in_runtimes(text))
    runtimes = data['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']
    assert runtimes['runc']['options']['SystemdCgroup'] is True
    assert names == ['nvidia', 'oci-neuron'] and runtimes['nvidia'] == NVIDIA


def test_runtimes_of_a_drop_in_for_an_older_version_are_kept():
    text = register(2, None, [('nvidia', NVIDIA, True, None)])
    data, names = rc.containerd_drop_in(3, 'oci-neuron', NEURON, main=loads(fixture('containerd-2.0-default.toml')),
                                        current=loads(text), owned=rc.drop_in_runtimes(text))
    cri = data['plugins']['io.containerd.cri.v1.runtime']['containerd']
    assert names == ['nvidia', 'oci-neuron'] and set(cri['runtimes']) == {'nvidia', 'oci-neuron'}
    assert cri['default_runtime_name'] == 'nvidia' and list(data['plugins']) == ['io.containerd.cri.v1.runtime']


def test_binary_name_comes_from_path_only():
    with pytest.raises(rc.ConfigError, match='BinaryName'):
        rc.runtime_entry('/n', {'BinaryName': '/x'})


@pytest.mark.parametrize('version,plugin', [(2, 'io.containerd.grpc.v1.cri'), (3, 'io.containerd.cri.v1.runtime'),
                                            (4, 'io.containerd.cri.v1.runtime')])
def test_rendered_drop_in_parses_and_names_the_plugin(version, plugin):
    text = rc.render_drop_in(rc.containerd_drop_in(version, 'nvidia', NVIDIA, cdi=True)[0], ['nvidia'])
    assert text.startswith('# Managed by accel.nodes.container_runtime')
    assert rc.drop_in_runtimes(text) == ['nvidia']
    data = loads(text)
    assert data['version'] == version
    assert data['plugins'][plugin]['enable_cdi'] is True
    assert rc.containerd_runtimes(data)[:1] == ['nvidia']
    assert '[plugins."%s".containerd.runtimes.nvidia]' % plugin in text


@pytest.mark.parametrize('text,names', [
    ('# Managed by accel.nodes.container_runtime: the nvidia runtime. Changes made here are overwritten.\n', ['nvidia']),
    ('# Managed by accel.nodes.container_runtime: runtimes nvidia, oci-neuron. Changes made here are overwritten.\n',
     ['nvidia', 'oci-neuron']),
    ('# Managed by accel.nodes.container_runtime: runtime nvidia.cdi. Changes made here are overwritten.\n',
     ['nvidia.cdi']),
    ('version = 2\n', None),
    (None, None),
])
def test_drop_in_runtimes_reads_the_first_line(text, names):
    assert rc.drop_in_runtimes(text) == names


def test_runtimes_of_real_configs():
    assert rc.containerd_runtimes(loads(fixture('containerd-1.7.18-default.toml'))) == ['runc']
    assert rc.containerd_runtimes(loads(fixture('containerd-2.0-default.toml'))) == ['runc']
    assert rc.containerd_runtimes(loads(fixture('containerd-1.6.20-debian12.toml'))) == []
    assert rc.containerd_runtimes({}) == []


def two_drop_ins(version):
    section = 'plugins."%s".containerd.runtimes' % rc.CRI_RUNTIME_PLUGIN[version]
    return [loads('version = %d\n[%s.a]\nruntime_type = "x"\n' % (version, section)),
            loads('version = %d\n[%s.b]\nruntime_type = "x"\n' % (version, section))]


@pytest.mark.parametrize('version,major,expected', [
    (2, 1, ['b']), (2, None, ['b']), (2, 2, ['a', 'b']), (3, None, ['a', 'b']), (3, 1, ['a', 'b']),
])
def test_effective_runtimes_follow_containerds_merge(version, major, expected):
    assert rc.containerd_runtimes(rc.containerd_effective([{}] + two_drop_ins(version), major)) == expected


@pytest.mark.parametrize('output,major', [
    ('containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n', 1),
    ('containerd containerd.io v1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da\n', 1),
    ('containerd github.com/containerd/containerd/v2 v2.1.0 061792f0ecf3684fb30a3a0eb006799b8c6638a7\n', 2),
    ('', None),
])
def test_containerd_major(output, major):
    assert rc.containerd_major(output) == major


def test_daemon_options_merged_sets_keys_in_place_and_features_one_level_deep():
    data = {'storage-driver': 'vfs', 'features': {'buildkit': True}, 'runtimes': {'x': {'path': 'x'}}}
    merged = rc.daemon_options_merged(data, {'features': {'cdi': True}, 'storage-driver': 'overlay2', 'debug': True})
    assert list(merged) == ['storage-driver', 'features', 'runtimes', 'debug']
    assert merged['features'] == {'buildkit': True, 'cdi': True}
    assert merged['storage-driver'] == 'overlay2'
    assert data['features'] == {'buildkit': True}
    assert rc.daemon_options_merged({'features': None}, {'features': {'cdi': True}}) == {'features': {'cdi': True}}
    with pytest.raises(rc.ConfigError, match='"features" in /etc/docker/daemon.json is a JSON str'):
        rc.daemon_options_merged({'features': 'on'}, {'features': {'cdi': True}})


# nvidia-ctk's own drop-in (toolkit 1.18 and later). The inputs follow what nvidia-ctk 1.20.0 does, per
# tests/fixtures/containerd/nvidia-ctk-1.20.0: a copy of the main config's whole CRI section plus its runtime,
# which is taken from the real 99-nvidia.toml of that capture.

CTK = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'containerd', 'nvidia-ctk-1.20.0')
CTK_MAINS = {2: 'containerd-1.7.18-default.toml', 3: 'containerd-2.0-default.toml'}  # both register runc


def ctk_fixture(version, name):
    with open(os.path.join(CTK, 'v%d' % version, name), encoding='utf-8') as f:
        return f.read()


def ctk_drop_in(main, nvidia_first=False):
    """The drop-in nvidia-ctk writes for main (parsed): its CRI section with the real nvidia runtime added."""
    version = main['version']
    plugin = rc.CRI_RUNTIME_PLUGIN[version]
    nvidia = loads(ctk_fixture(version, '99-nvidia.toml'))['plugins'][plugin]['containerd']['runtimes']['nvidia']
    section = copy.deepcopy(main['plugins'][plugin])
    cri = section['containerd']
    runtimes = {'nvidia': nvidia} if nvidia_first else {}
    runtimes.update(cri['runtimes'])
    runtimes['nvidia'] = nvidia
    cri['runtimes'] = runtimes
    return {'version': version, 'plugins': {plugin: section}}


def runtimes_path(version, name):
    return '.'.join(rc.cri_runtime_path(version, name))


@pytest.mark.parametrize('nvidia_first', [False, True])
@pytest.mark.parametrize('version', [2, 3])
def test_ctk_drop_in_that_repeats_the_main_runtimes_is_recognised_and_holds_nothing_else(version, nvidia_first):
    main = loads(fixture(CTK_MAINS[version]))
    drop_in = ctk_drop_in(main, nvidia_first)
    registered = rc.containerd_runtimes(drop_in)
    assert sorted(registered) == ['nvidia', 'runc'] and (registered[0] == 'nvidia') == nvidia_first
    assert rc.nvidia_ctk_drop_in_extras(drop_in, main, 'nvidia') == []


def test_ctk_drop_in_whose_runc_differs_from_the_main_config_names_the_difference():
    original = fixture(CTK_MAINS[2])
    drop_in = ctk_drop_in(loads(original))
    # The user turned on the systemd cgroup driver in config.toml after nvidia-ctk copied its CRI section.
    main = loads(original.replace('SystemdCgroup = false', 'SystemdCgroup = true'))
    assert rc.nvidia_ctk_drop_in_extras(drop_in, main, 'nvidia') == [
        runtimes_path(2, 'runc') + '.options.SystemdCgroup']


@pytest.mark.parametrize('version', [2, 3])
def test_ctk_drop_in_with_a_runtime_the_main_config_lacks_names_it(version):
    main = loads(fixture(CTK_MAINS[version]))
    drop_in = ctk_drop_in(main)
    # The user removed runc from config.toml after nvidia-ctk copied its CRI section.
    del main['plugins'][rc.CRI_RUNTIME_PLUGIN[version]]['containerd']['runtimes']['runc']
    extras = rc.nvidia_ctk_drop_in_extras(drop_in, main, 'nvidia')
    runc = runtimes_path(version, 'runc')
    assert runc + '.runtime_type' in extras and all(e.startswith(runc + '.') for e in extras)
    # A runtime table with no settings is still a runtime the main config does not register.
    drop_in['plugins'][rc.CRI_RUNTIME_PLUGIN[version]]['containerd']['runtimes']['kata'] = {}
    assert runtimes_path(version, 'kata') in rc.nvidia_ctk_drop_in_extras(drop_in, main, 'nvidia')


@pytest.mark.parametrize('version', [2, 3])
def test_ctk_drop_in_of_the_runtime_alone_as_captured(version):
    main = loads(ctk_fixture(version, 'config.toml'))
    drop_in = loads(ctk_fixture(version, '99-nvidia.toml'))
    assert rc.containerd_runtimes(drop_in) == ['nvidia']
    assert rc.nvidia_ctk_drop_in_extras(drop_in, main, 'nvidia') == []
    if version == 2:
        changed = loads(ctk_fixture(2, 'config.toml').replace('pause:3.10', 'pause:3.11'))
        assert rc.nvidia_ctk_drop_in_extras(drop_in, changed, 'nvidia') == ['plugins.io.containerd.grpc.v1.cri.sandbox_image']


@pytest.mark.parametrize('version', [2, 3])
def test_a_drop_in_without_the_runtime_is_not_ctks_for_it(version):
    main = loads(fixture(CTK_MAINS[version]))
    assert rc.nvidia_ctk_drop_in_extras(ctk_drop_in(main), main, 'nvidia-cdi') is None
    assert rc.nvidia_ctk_drop_in_extras(main, main, 'nvidia') is None  # runc alone
    assert rc.nvidia_ctk_drop_in_extras({'version': version}, main, 'nvidia') is None
