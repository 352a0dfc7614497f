# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.modules import container_runtime

tomllib = pytest.importorskip('tomllib')

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'toml'
NVIDIA = '/usr/bin/nvidia-container-runtime'

# A daemon.json as users write it: their keys, their order, their 4-space indent.
USER_DAEMON_JSON = '''{
    "data-root": "/mnt/docker-data",
    "log-driver": "json-file",
    "log-opts": {
        "max-size": "10m",
        "max-file": "3"
    },
    "registry-mirrors": ["https://mirror.example.internal"],
    "labels": ["zone=z\u00fcrich", "\u540d\u524d=\u30ce\u30fc\u30c9"],
    "runtimes": {
        "runsc": {
            "path": "/usr/local/bin/runsc",
            "runtimeArgs": ["--platform=kvm"]
        }
    }
}
'''


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def run(module_in_tmp):
    return module_in_tmp(container_runtime.main)


@pytest.fixture
def daemon_json(tmp_path):
    path = tmp_path / 'etc' / 'docker' / 'daemon.json'
    path.parent.mkdir(parents=True)
    return path


def docker(run, path, **args):
    args.setdefault('name', 'nvidia')
    args.setdefault('path', NVIDIA)
    return run(engine='docker', config_path=str(path), **args)


def settle_mtime(path):
    os.utime(path, (1000000000, 1000000000))
    return path.read_bytes()


# Docker

def test_user_keys_values_and_order_survive(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    result = docker(run, daemon_json, default=True, cdi=True)
    assert result['changed'] is True and result['restart_required'] is True
    after = json.loads(daemon_json.read_text(encoding='utf-8'))
    before = json.loads(USER_DAEMON_JSON)
    assert list(after) == list(before) + ['default-runtime', 'features']
    for key in before:
        if key != 'runtimes':
            assert after[key] == before[key]
    assert list(after['runtimes']) == ['runsc', 'nvidia']
    assert after['runtimes']['runsc'] == before['runtimes']['runsc']
    assert after['runtimes']['nvidia'] == {'path': NVIDIA}
    assert after['default-runtime'] == 'nvidia'
    assert after['features'] == {'cdi': True}
    assert result['runtimes'] == ['runsc', 'nvidia']
    assert result['config_path'] == str(daemon_json)


def test_unicode_is_written_as_it_is_and_indent_is_kept(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    docker(run, daemon_json)
    text = daemon_json.read_text(encoding='utf-8')
    assert '"zone=z\u00fcrich"' in text and '\u540d\u524d' in text and '\\u' not in text
    assert '\n    "data-root": "/mnt/docker-data",\n' in text
    assert text.endswith('}\n')


def test_second_run_changes_nothing_and_leaves_the_file_alone(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    assert docker(run, daemon_json, default=True, runtime_args=['--debug'])['changed'] is True
    settled = settle_mtime(daemon_json)
    files = sorted(os.listdir(daemon_json.parent))  # daemon.json and the first run's backup
    result = docker(run, daemon_json, default=True, runtime_args=['--debug'])
    assert result['changed'] is False and result['restart_required'] is False
    assert 'backup_file' not in result
    assert daemon_json.read_bytes() == settled
    assert os.stat(daemon_json).st_mtime == 1000000000
    assert sorted(os.listdir(daemon_json.parent)) == files


def test_already_registered_runtime_is_no_cosmetic_rewrite(run, daemon_json):
    text = '{"runtimes":{"nvidia":{"runtimeArgs":[],"path":"%s"}},"log-driver":"journald"}' % NVIDIA
    daemon_json.write_text(text)
    settled = settle_mtime(daemon_json)
    assert docker(run, daemon_json)['changed'] is False
    assert daemon_json.read_bytes() == settled and os.stat(daemon_json).st_mtime == 1000000000


def test_missing_file_is_created(run, tmp_path):
    path = tmp_path / 'etc' / 'docker' / 'daemon.json'
    result = docker(run, path, _ansible_diff=True)
    assert result['changed'] is True and 'backup_file' not in result
    assert path.read_text() == '{\n  "runtimes": {\n    "nvidia": {\n      "path": "%s"\n    }\n  }\n}\n' % NVIDIA
    assert mode_of(path) == 0o644 and mode_of(path.parent) == 0o755
    assert result['diff']['before'] == '' and result['diff']['before_header'] == '%s (absent)' % path


def test_empty_file_counts_as_an_empty_object(run, daemon_json):
    daemon_json.write_text('')
    os.chmod(daemon_json, 0o600)
    assert docker(run, daemon_json)['changed'] is True
    assert json.loads(daemon_json.read_text()) == {'runtimes': {'nvidia': {'path': NVIDIA}}}
    assert mode_of(daemon_json) == 0o600


@pytest.mark.parametrize('text', ['{"log-driver": "json-file",}', '{\n  "a": 1\n  "b": 2\n}\n', '{'])
def test_malformed_json_fails_and_leaves_the_file_untouched(run, daemon_json, text):
    daemon_json.write_text(text)
    settled = settle_mtime(daemon_json)
    result = docker(run, daemon_json, default=True)
    assert result['failed'] is True
    assert str(daemon_json) in result['msg'] and 'is not valid JSON' in result['msg']
    assert 'line ' in result['msg'] and 'column ' in result['msg']
    assert daemon_json.read_bytes() == settled and os.stat(daemon_json).st_mtime == 1000000000
    assert os.listdir(daemon_json.parent) == ['daemon.json']


def test_absent_removes_exactly_what_present_added(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    docker(run, daemon_json, default=True)
    result = docker(run, daemon_json, state='absent')
    assert result['changed'] is True and result['runtimes'] == ['runsc']
    assert json.loads(daemon_json.read_text(encoding='utf-8')) == json.loads(USER_DAEMON_JSON)
    assert list(json.loads(daemon_json.read_text(encoding='utf-8'))) == list(json.loads(USER_DAEMON_JSON))
    assert docker(run, daemon_json, state='absent')['changed'] is False


def test_absent_drops_the_runtimes_key_it_emptied(run, daemon_json):
    daemon_json.write_text('{"log-driver": "journald"}\n')
    docker(run, daemon_json)
    docker(run, daemon_json, state='absent')
    assert json.loads(daemon_json.read_text()) == {'log-driver': 'journald'}


def test_absent_resets_the_default_only_when_it_was_this_runtime(run, daemon_json):
    daemon_json.write_text('{"default-runtime": "runsc", "runtimes": {"runsc": {"path": "/r"}}}')
    docker(run, daemon_json)
    docker(run, daemon_json, state='absent')
    assert json.loads(daemon_json.read_text())['default-runtime'] == 'runsc'
    docker(run, daemon_json, default=True)
    docker(run, daemon_json, state='absent')
    assert 'default-runtime' not in json.loads(daemon_json.read_text())


def test_absent_on_a_missing_file_creates_nothing(run, tmp_path):
    path = tmp_path / 'daemon.json'
    assert docker(run, path, state='absent')['changed'] is False
    assert not path.exists()


def test_default_is_left_alone_unless_given(run, daemon_json):
    daemon_json.write_text('{"default-runtime": "nvidia"}')
    docker(run, daemon_json)
    assert json.loads(daemon_json.read_text())['default-runtime'] == 'nvidia'
    docker(run, daemon_json, default=False)
    assert 'default-runtime' not in json.loads(daemon_json.read_text())


def test_cdi_is_left_alone_unless_given(run, daemon_json):
    daemon_json.write_text('{"features": {"cdi": true, "containerd-snapshotter": true}}')
    docker(run, daemon_json)
    assert json.loads(daemon_json.read_text())['features'] == {'cdi': True, 'containerd-snapshotter': True}
    docker(run, daemon_json, cdi=False)
    assert json.loads(daemon_json.read_text())['features'] == {'cdi': False, 'containerd-snapshotter': True}


def test_check_mode_writes_nothing_and_reports_the_diff(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    settled = settle_mtime(daemon_json)
    result = docker(run, daemon_json, default=True, _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True and result['restart_required'] is True
    assert result['diff']['before'] == USER_DAEMON_JSON
    assert json.loads(result['diff']['after'])['default-runtime'] == 'nvidia'
    assert result['runtimes'] == ['runsc', 'nvidia']
    assert daemon_json.read_bytes() == settled and os.stat(daemon_json).st_mtime == 1000000000
    assert os.listdir(daemon_json.parent) == ['daemon.json']


def test_check_mode_on_a_fresh_host(run, tmp_path):
    path = tmp_path / 'etc' / 'docker' / 'daemon.json'
    result = docker(run, path, _ansible_check_mode=True)
    assert result['changed'] is True
    assert not (tmp_path / 'etc').exists()


def test_backup_only_when_the_content_changes(run, daemon_json):
    daemon_json.write_text(USER_DAEMON_JSON, encoding='utf-8')
    result = docker(run, daemon_json)
    with open(result['backup_file'], encoding='utf-8') as f:
        assert f.read() == USER_DAEMON_JSON
    assert 'backup_file' not in docker(run, daemon_json)
    assert len(os.listdir(daemon_json.parent)) == 2
    daemon_json.write_text('{}')
    assert 'backup_file' not in docker(run, daemon_json, backup=False)
    assert len(os.listdir(daemon_json.parent)) == 2


@pytest.mark.parametrize('text', ['{"runtimes": ["nvidia"]}', '[]'])
def test_unexpected_shapes_fail_untouched(run, daemon_json, text):
    daemon_json.write_text(text)
    result = docker(run, daemon_json)
    assert result['failed'] is True and str(daemon_json) in result['msg']
    assert daemon_json.read_text() == text


@pytest.mark.parametrize('name', ['runc', 'io.containerd.runc.v2'])
def test_docker_reserved_names_fail(run, daemon_json, name):
    result = docker(run, daemon_json, name=name)
    assert result['failed'] is True and 'reserves' in result['msg']
    assert not daemon_json.exists()


@pytest.mark.parametrize('name', ['', '-x', 'a/b', 'a b', '../x'])
def test_bad_names_fail(run, daemon_json, name):
    assert docker(run, daemon_json, name=name)['failed'] is True


def test_path_is_required_when_present(run, daemon_json):
    result = run(engine='docker', name='nvidia', config_path=str(daemon_json))
    assert result['failed'] is True and 'path' in result['msg']


# containerd

DROP_IN = '99-accel-nodes.toml'
NEURON = '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh'


@pytest.fixture
def etc(tmp_path):
    path = tmp_path / 'etc' / 'containerd'
    path.mkdir(parents=True)
    return path


@pytest.fixture(autouse=True)
def containerd_major(monkeypatch):
    """The containerd the module finds: none by default, whatever this machine has installed."""
    major = {'value': None}
    monkeypatch.setattr(container_runtime, 'containerd_major', lambda module: major['value'])
    return major


def ctr(run, etc, main='config.toml', **args):
    args.setdefault('name', 'nvidia')
    args.setdefault('path', NVIDIA)
    args.setdefault('config_path', str(etc / 'conf.d' / DROP_IN))
    return run(engine='containerd', containerd_config=str(etc / main), **args)


def containerd_1_dump(etc):
    """The runtimes containerd 1.x would load: the CRI section of the last file that sets it (mergeConfig)."""
    main = tomllib.loads((etc / 'config.toml').read_text())
    cri = main.get('plugins', {}).get('io.containerd.grpc.v1.cri', {})
    for path in sorted((etc / 'conf.d').glob('*.toml')):
        cri = tomllib.loads(path.read_text()).get('plugins', {}).get('io.containerd.grpc.v1.cri', cri)
    return cri


def install(etc, fixture_name):
    text = (FIXTURES / fixture_name).read_text(encoding='utf-8')
    (etc / 'config.toml').write_text(text, encoding='utf-8')
    return text


@pytest.mark.parametrize('fixture_name,version,plugin', [
    ('containerd-1.7.18-default.toml', 2, 'io.containerd.grpc.v1.cri'),
    ('containerd-2.0-default.toml', 3, 'io.containerd.cri.v1.runtime'),
])
def test_main_config_gains_the_import_and_nothing_else(run, etc, fixture_name, version, plugin, changed_lines):
    text = install(etc, fixture_name)
    result = ctr(run, etc, containerd_options={'SystemdCgroup': True})
    assert result['changed'] is True and result['restart_required'] is True
    assert result['containerd_config_version'] == version
    main = (etc / 'config.toml').read_text(encoding='utf-8')
    quote = '"' if version == 2 else "'"
    assert changed_lines(text, main) == ['-imports = []\n', '+imports = [%s%s/conf.d/*.toml%s]\n' % (quote, etc, quote)]
    drop_in = tomllib.loads((etc / 'conf.d' / DROP_IN).read_text(encoding='utf-8'))
    assert drop_in['version'] == version
    runtime = drop_in['plugins'][plugin]['containerd']['runtimes']['nvidia']
    assert runtime == {'runtime_type': 'io.containerd.runc.v2',
                       'options': {'BinaryName': NVIDIA, 'SystemdCgroup': True}}
    assert result['runtimes'] == ['runc', 'nvidia']
    assert mode_of(etc / 'conf.d' / DROP_IN) == 0o644 and mode_of(etc / 'conf.d') == 0o755


def test_v2_drop_in_keeps_the_users_cri_settings_for_containerd_1(run, etc):
    text = install(etc, 'containerd-1.7.18-default.toml').replace('SystemdCgroup = false', 'SystemdCgroup = true')
    (etc / 'config.toml').write_text(text)
    ctr(run, etc)
    drop_in = tomllib.loads((etc / 'conf.d' / DROP_IN).read_text())
    cri = drop_in['plugins']['io.containerd.grpc.v1.cri']
    assert cri['sandbox_image'] == 'registry.k8s.io/pause:3.8'
    assert cri['containerd']['runtimes']['runc']['options']['SystemdCgroup'] is True
    assert cri['containerd']['default_runtime_name'] == 'runc'


def test_v3_drop_in_holds_the_runtime_alone(run, etc):
    install(etc, 'containerd-2.0-default.toml')
    ctr(run, etc, default=True, cdi=True)
    drop_in = tomllib.loads((etc / 'conf.d' / DROP_IN).read_text())
    assert drop_in == {'version': 3, 'plugins': {'io.containerd.cri.v1.runtime': {
        'enable_cdi': True,
        'containerd': {'default_runtime_name': 'nvidia', 'runtimes': {'nvidia': {
            'runtime_type': 'io.containerd.runc.v2', 'options': {'BinaryName': NVIDIA}}}}}}}


def test_v4_main_config_that_already_imports_conf_d_is_left_alone(run, tmp_path):
    etc = tmp_path / 'etc' / 'containerd'
    etc.mkdir(parents=True)
    text = (FIXTURES / 'containerd-2.3-default.toml').read_text().replace('/etc/containerd', str(etc))
    (etc / 'config.toml').write_text(text)
    settled = settle_mtime(etc / 'config.toml')
    result = ctr(run, etc)
    assert result['changed'] is True and result['containerd_config_version'] == 4
    assert (etc / 'config.toml').read_bytes() == settled and os.stat(etc / 'config.toml').st_mtime == 1000000000
    assert 'containerd_config_backup_file' not in result
    assert tomllib.loads((etc / 'conf.d' / DROP_IN).read_text())['version'] == 4


def test_missing_main_config_is_created_as_version_2(run, etc):
    result = ctr(run, etc, _ansible_diff=True)
    assert result['containerd_config_version'] == 2
    assert (etc / 'config.toml').read_text() == 'version = 2\nimports = ["%s/conf.d/*.toml"]\n' % etc
    drop_in = tomllib.loads((etc / 'conf.d' / DROP_IN).read_text())
    runtimes = drop_in['plugins']['io.containerd.grpc.v1.cri']['containerd']['runtimes']
    assert runtimes['runc'] == {'runtime_type': 'io.containerd.runc.v2'}
    assert [d['after_header'] for d in result['diff']] == [str(etc / 'conf.d' / DROP_IN),
                                                           str(etc / 'config.toml')]
    assert [d['before_header'].endswith('(absent)') for d in result['diff']] == [True, True]


def test_second_run_is_not_changed(run, etc):
    install(etc, 'containerd-1.7.18-default.toml')
    assert ctr(run, etc, default=True, cdi=True)['changed'] is True
    main = settle_mtime(etc / 'config.toml')
    drop_in = settle_mtime(etc / 'conf.d' / DROP_IN)
    result = ctr(run, etc, default=True, cdi=True)
    assert result['changed'] is False and result['restart_required'] is False
    assert (etc / 'config.toml').read_bytes() == main
    assert (etc / 'conf.d' / DROP_IN).read_bytes() == drop_in
    assert os.stat(etc / 'config.toml').st_mtime == 1000000000
    assert os.stat(etc / 'conf.d' / DROP_IN).st_mtime == 1000000000


def test_check_mode_writes_nothing(run, etc, changed_lines):
    text = install(etc, 'containerd-2.0-default.toml')
    result = ctr(run, etc, _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True
    assert (etc / 'config.toml').read_text() == text
    assert not (etc / 'conf.d').exists()
    drop_in_diff, main_diff = result['diff']
    assert 'io.containerd.cri.v1.runtime' in drop_in_diff['after']
    assert changed_lines(main_diff['before'], main_diff['after'])[0] == '-imports = []\n'
    assert result['runtimes'] == ['runc', 'nvidia']


def test_absent_removes_the_drop_in_and_leaves_the_main_config(run, etc):
    install(etc, 'containerd-2.0-default.toml')
    ctr(run, etc)
    main = settle_mtime(etc / 'config.toml')
    result = ctr(run, etc, state='absent')
    assert result['changed'] is True
    assert not (etc / 'conf.d' / DROP_IN).exists()
    assert (etc / 'config.toml').read_bytes() == main
    assert result['runtimes'] == ['runc']
    with open(result['backup_file']) as f:
        assert 'nvidia' in f.read()
    assert ctr(run, etc, state='absent')['changed'] is False


@pytest.mark.parametrize('fixture_name', ['containerd-2.0-default.toml', 'containerd-1.6.20-debian12.toml'])
def test_two_runtimes_one_drop_in(run, etc, fixture_name):
    install(etc, fixture_name)
    ctr(run, etc)
    result = ctr(run, etc, name='oci-neuron', path=NEURON)
    assert {'nvidia', 'oci-neuron'} <= set(result['runtimes'])
    assert [f for f in os.listdir(etc / 'conf.d') if f.endswith('.toml')] == [DROP_IN]
    before = settle_mtime(etc / 'conf.d' / DROP_IN)
    assert ctr(run, etc)['changed'] is False
    assert ctr(run, etc, name='oci-neuron', path=NEURON)['changed'] is False
    assert (etc / 'conf.d' / DROP_IN).read_bytes() == before


def test_two_runtimes_on_containerd_1_are_both_what_it_loads(run, etc):
    install(etc, 'containerd-1.6.20-debian12.toml')
    ctr(run, etc, cdi=True)
    result = ctr(run, etc, name='oci-neuron', path=NEURON)
    cri = containerd_1_dump(etc)
    assert sorted(cri['containerd']['runtimes']) == ['nvidia', 'oci-neuron', 'runc']
    assert cri['cni']['bin_dir'] == '/usr/lib/cni' and cri['enable_cdi'] is True
    assert sorted(result['runtimes']) == sorted(cri['containerd']['runtimes'])


def test_runtimes_in_two_config_paths_report_what_containerd_1_loads(run, etc, containerd_major, monkeypatch):
    warnings = []
    monkeypatch.setattr(container_runtime.AnsibleModule, 'warn', lambda self, msg: warnings.append(msg))
    install(etc, 'containerd-1.6.20-debian12.toml')
    containerd_major['value'] = 1
    ctr(run, etc, config_path=str(etc / 'conf.d' / '50-nvidia.toml'))
    result = ctr(run, etc, name='oci-neuron', path=NEURON, config_path=str(etc / 'conf.d' / '60-neuron.toml'))
    assert sorted(result['runtimes']) == sorted(containerd_1_dump(etc)['containerd']['runtimes']) == ['oci-neuron', 'runc']
    result = ctr(run, etc, config_path=str(etc / 'conf.d' / '50-nvidia.toml'))
    assert result['changed'] is False and 'nvidia' not in result['runtimes']
    assert any('will not see the nvidia runtime' in w for w in warnings)
    containerd_major['value'] = 2
    result = ctr(run, etc, config_path=str(etc / 'conf.d' / '50-nvidia.toml'))
    assert sorted(result['runtimes']) == ['nvidia', 'oci-neuron', 'runc']


def test_docker_containerd_io_config_is_made_usable(run, etc, changed_lines):
    text = install(etc, 'containerd.io-docker.toml')
    result = ctr(run, etc)
    assert result['changed'] is True and result['containerd_config_version'] == 2
    main = (etc / 'config.toml').read_text()
    assert changed_lines(text, main) == ['-disabled_plugins = ["cri"]\n', '+disabled_plugins = []\n', '+version = 2\n',
                                         '+imports = ["%s/conf.d/*.toml"]\n' % etc]
    changes = [c.split(' ', 1)[1][:20] for c in result['containerd_config_changes']]
    assert changes == ['had no version key, ', 'disabled the CRI plu']
    assert containerd_1_dump(etc)['containerd']['runtimes']['nvidia']['options']['BinaryName'] == NVIDIA
    assert ctr(run, etc)['changed'] is False


def test_a_drop_in_of_the_old_layout_is_moved_into_the_shared_one(run, etc):
    install(etc, 'containerd-1.6.20-debian12.toml')
    ctr(run, etc, config_path=str(etc / 'conf.d' / '99-nvidia.toml'))
    ctr(run, etc, name='oci-neuron', path=NEURON, config_path=str(etc / 'conf.d' / '99-oci-neuron.toml'))
    (etc / 'conf.d' / '99-nvidia.toml').write_text((etc / 'conf.d' / '99-nvidia.toml').read_text().replace(
        'runtime nvidia.', 'the nvidia runtime.'))  # the first line the old layout wrote
    ctr(run, etc)
    result = ctr(run, etc, name='oci-neuron', path=NEURON)
    assert result['changed'] is True and sorted(result['runtimes']) == ['nvidia', 'oci-neuron', 'runc']
    assert sorted(f for f in os.listdir(etc / 'conf.d') if f.endswith('.toml')) == [DROP_IN]


def test_absent_works_with_a_broken_main_config(run, etc):
    install(etc, 'containerd-2.0-default.toml')
    ctr(run, etc)
    (etc / 'config.toml').write_text('version = 3\n[plugins\n')
    result = ctr(run, etc, state='absent')
    assert result['changed'] is True and not (etc / 'conf.d' / DROP_IN).exists()


def test_a_foreign_file_at_config_path_is_not_overwritten(run, etc):
    (etc / 'conf.d').mkdir()
    (etc / 'conf.d' / DROP_IN).write_text('version = 2\n')
    result = ctr(run, etc)
    assert result['failed'] is True and 'not written by this module' in result['msg']
    assert (etc / 'conf.d' / DROP_IN).read_text() == 'version = 2\n'


def test_absent_of_another_runtime_leaves_the_drop_in_alone(run, etc):
    install(etc, 'containerd-1.7.18-default.toml')
    ctr(run, etc)
    before = settle_mtime(etc / 'conf.d' / DROP_IN)
    (etc / 'config.toml').write_text((etc / 'config.toml').read_text().replace('pause:3.8', 'pause:3.9'))
    assert ctr(run, etc, name='oci-neuron', state='absent')['changed'] is False
    assert (etc / 'conf.d' / DROP_IN).read_bytes() == before


def test_main_config_backup_only_when_it_changes(run, etc):
    text = install(etc, 'containerd-1.7.18-default.toml')
    result = ctr(run, etc)
    with open(result['containerd_config_backup_file']) as f:
        assert f.read() == text
    result = ctr(run, etc, name='other', path='/other')
    assert 'containerd_config_backup_file' not in result


@pytest.mark.parametrize('text,match', [
    ('[plugins.cri]\nsandbox_image = "x"\n', 'short names'),
    ('version = 1\n[plugins.cri]\nsandbox_image = "x"\n', 'short names'),
    ('version = 7\n', 'does not know'),
    ('version = 2\n[plugins\n', 'not valid TOML'),
    ('version = 2\nimports = "/etc/containerd/conf.d"\n', 'imports'),
])
def test_unusable_main_configs_fail_and_nothing_is_written(run, etc, text, match):
    (etc / 'config.toml').write_text(text)
    result = ctr(run, etc)
    assert result['failed'] is True and match in result['msg'] and str(etc / 'config.toml') in result['msg']
    assert (etc / 'config.toml').read_text() == text
    assert not (etc / 'conf.d').exists()


def test_runtime_args_are_refused_for_containerd(run, etc):
    result = ctr(run, etc, runtime_args=['--debug'])
    assert result['failed'] is True and 'runtime_args' in result['msg']
    assert os.listdir(etc) == []


@pytest.mark.parametrize('args,match', [
    ({'containerd_options': {'BinaryName': '/x'}}, 'BinaryName'),
    ({'containerd_options': {'Bad': None}}, 'null'),
    ({'config_path': '/etc/containerd/conf.d/99-nvidia.conf'}, '.toml'),
])
def test_bad_containerd_arguments_fail(run, etc, args, match):
    result = ctr(run, etc, **args)
    assert result['failed'] is True and match in result['msg']
    assert os.listdir(etc) == []


def test_config_path_cannot_be_the_main_config(run, etc):
    result = ctr(run, etc, config_path=str(etc / 'config.toml'))
    assert result['failed'] is True and 'drop-in' in result['msg']


# -- nvidia-ctk's own drop-in (toolkit 1.18 and later): real output of nvidia-ctk 1.20.0 -------------------

CTK_DROP_INS = Path(__file__).parents[3] / 'fixtures' / 'containerd' / 'nvidia-ctk-1.20.0'


@pytest.mark.parametrize('version', ['v2', 'v3'])
def test_nvidia_ctks_drop_in_for_the_same_runtime_is_replaced_with_a_backup(module_in_tmp, tmp_path, version):
    etc = tmp_path / 'containerd'
    (etc / 'conf.d').mkdir(parents=True)
    main = (CTK_DROP_INS / version / 'config.toml').read_text().replace('/tmp/ctkcfg/%s' % version, str(etc))
    (etc / 'config.toml').write_text(main)
    (etc / 'conf.d' / '99-nvidia.toml').write_text((CTK_DROP_INS / version / '99-nvidia.toml').read_text())
    run = module_in_tmp(container_runtime.main)
    result = run(engine='containerd', name='nvidia', path='/usr/bin/nvidia-container-runtime',
                 containerd_config=str(etc / 'config.toml'), config_path=str(etc / 'conf.d' / '99-accel-nodes.toml'))
    assert result['changed'] is True
    assert result['vendor_drop_in'] == {'path': str(etc / 'conf.d' / '99-nvidia.toml'), 'extras': [], 'replaced': True}
    assert not (etc / 'conf.d' / '99-nvidia.toml').exists()
    assert Path(result['vendor_drop_in_backup_file']).read_text() == (CTK_DROP_INS / version / '99-nvidia.toml').read_text()
    assert 'nvidia' in result['runtimes']
    again = run(engine='containerd', name='nvidia', path='/usr/bin/nvidia-container-runtime',
                containerd_config=str(etc / 'config.toml'), config_path=str(etc / 'conf.d' / '99-accel-nodes.toml'))
    assert again['changed'] is False and 'vendor_drop_in' not in again


def test_nvidia_ctks_drop_in_with_settings_of_its_own_stays_and_says_so(module_in_tmp, tmp_path):
    etc = tmp_path / 'containerd'
    (etc / 'conf.d').mkdir(parents=True)
    main = (CTK_DROP_INS / 'v2' / 'config.toml').read_text().replace('/tmp/ctkcfg/v2', str(etc))
    # The user changed the sandbox image in config.toml after nvidia-ctk copied the old one into its drop-in.
    (etc / 'config.toml').write_text(main.replace('pause:3.10', 'pause:3.11'))
    (etc / 'conf.d' / '99-nvidia.toml').write_text((CTK_DROP_INS / 'v2' / '99-nvidia.toml').read_text())
    result = module_in_tmp(container_runtime.main)(
        engine='containerd', name='nvidia', path='/usr/bin/nvidia-container-runtime',
        containerd_config=str(etc / 'config.toml'), config_path=str(etc / 'conf.d' / '99-accel-nodes.toml'))
    assert result['vendor_drop_in']['extras'] == ['plugins.io.containerd.grpc.v1.cri.sandbox_image']
    assert result['vendor_drop_in']['replaced'] is False
    assert (etc / 'conf.d' / '99-nvidia.toml').exists()


def test_a_drop_in_of_another_runtime_at_that_name_is_not_touched(module_in_tmp, tmp_path):
    etc = tmp_path / 'containerd'
    (etc / 'conf.d').mkdir(parents=True)
    (etc / 'config.toml').write_text('version = 2\n')
    other = (CTK_DROP_INS / 'v2' / '99-nvidia.toml').read_text().replace('runtimes.nvidia', 'runtimes.kata')
    (etc / 'conf.d' / '99-nvidia.toml').write_text(other)
    result = module_in_tmp(container_runtime.main)(
        engine='containerd', name='nvidia', path='/usr/bin/nvidia-container-runtime',
        containerd_config=str(etc / 'config.toml'), config_path=str(etc / 'conf.d' / '99-accel-nodes.toml'))
    assert 'vendor_drop_in' not in result and (etc / 'conf.d' / '99-nvidia.toml').read_text() == other
