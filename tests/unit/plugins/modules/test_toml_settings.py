# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.modules import toml_settings

tomllib = pytest.importorskip('tomllib')

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'toml'

# What the nvidia_container_toolkit role manages, set away from the defaults.
ROLE_SETTINGS = {
    'nvidia-container-runtime.mode': 'cdi',
    'nvidia-container-runtime.debug': '/var/log/nvidia-container-runtime.log',
    'nvidia-container-cli.debug': '/var/log/nvidia-container-toolkit.log',
    'nvidia-container-cli.no-cgroups': True,
    'nvidia-container-cli.ldconfig': '@/sbin/ldconfig',
    'nvidia-container-cli.load-kmods': False,
    'accept-nvidia-visible-devices-as-volume-mounts': True,
    'accept-nvidia-visible-devices-envvar-when-unprivileged': False,
}


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def expected_data(text, settings):
    data = copy.deepcopy(tomllib.loads(text))
    for key, value in settings.items():
        *tables, last = key.split('.')
        node = data
        for part in tables:
            node = node.setdefault(part, {})
        node[last] = value
    return data


@pytest.fixture
def run(module_in_tmp):
    return module_in_tmp(toml_settings.main)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / 'etc' / 'nvidia-container-runtime' / 'config.toml'
    path.parent.mkdir(parents=True)
    return path


def install(path, name):
    text = (FIXTURES / name).read_text(encoding='utf-8')
    path.write_text(text, encoding='utf-8')
    return text


def settle(path):
    os.utime(path, (1000000000, 1000000000))
    return path.read_bytes()


@pytest.mark.parametrize('name', ['nvidia-container-toolkit-1.17.6.toml', 'nvidia-container-toolkit-1.18-rpm.toml'])
def test_role_settings_on_the_real_config(run, config, name):
    text = install(config, name)
    result = run(path=str(config), settings=ROLE_SETTINGS)
    assert result['changed'] is True
    after = config.read_text(encoding='utf-8')
    # Unmanaged keys and tables are still there, values and all.
    assert tomllib.loads(after) == expected_data(text, ROLE_SETTINGS)
    # Every comment line of the original is still there, in the same order.
    comments = [line for line in text.splitlines() if line.startswith('#') or line.startswith('[')]
    assert [line for line in after.splitlines() if line.startswith('#') or line.startswith('[')] == comments
    assert 'ldconfig = "@/sbin/ldconfig"\n' in after
    lines = after.splitlines()
    assert lines[lines.index('#no-cgroups = false') + 1] == 'no-cgroups = true'
    assert lines[lines.index('#debug = "/var/log/nvidia-container-toolkit.log"') + 1] == (
        'debug = "/var/log/nvidia-container-toolkit.log"')


def test_exact_lines_changed_on_the_1_17_config(run, config, changed_lines):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    result = run(path=str(config), settings=ROLE_SETTINGS)
    assert changed_lines(text, config.read_text()) == [
        '+accept-nvidia-visible-devices-as-volume-mounts = true\n',
        '+accept-nvidia-visible-devices-envvar-when-unprivileged = false\n',
        '+debug = "/var/log/nvidia-container-toolkit.log"\n',
        '-ldconfig = "@/sbin/ldconfig.real"\n',
        '-load-kmods = true\n',
        '+ldconfig = "@/sbin/ldconfig"\n',
        '+load-kmods = false\n',
        '+no-cgroups = true\n',
        '+debug = "/var/log/nvidia-container-runtime.log"\n',
        '-mode = "legacy"\n',
        '+mode = "cdi"\n',
    ]
    assert result['changed_keys'] == list(ROLE_SETTINGS)


def test_second_run_is_not_changed_and_does_not_touch_the_file(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    run(path=str(config), settings=ROLE_SETTINGS)
    settled = settle(config)
    files = sorted(os.listdir(config.parent))
    result = run(path=str(config), settings=ROLE_SETTINGS)
    assert result['changed'] is False and result['changed_keys'] == []
    assert config.read_bytes() == settled and os.stat(config).st_mtime == 1000000000
    assert sorted(os.listdir(config.parent)) == files


def test_a_value_equal_to_the_current_one_is_no_change(run, config):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    settle(config)
    result = run(path=str(config), settings={
        'nvidia-container-runtime.mode': 'legacy', 'nvidia-container-cli.load-kmods': True,
        'nvidia-container-cli.ldconfig': '@/sbin/ldconfig.real', 'disable-require': False,
        'nvidia-container-runtime.runtimes': ['docker-runc', 'runc', 'crun']})
    assert result['changed'] is False
    assert config.read_text() == text and os.stat(config).st_mtime == 1000000000
    assert 'backup_file' not in result


def test_a_string_is_not_a_boolean(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    result = run(path=str(config), settings={'nvidia-container-cli.load-kmods': 'true'})
    assert result['changed'] is True
    assert tomllib.loads(config.read_text())['nvidia-container-cli']['load-kmods'] == 'true'


def test_check_mode_writes_nothing_and_shows_the_diff(run, config, changed_lines):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    settle(config)
    result = run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'},
                 _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True and result['changed_keys'] == ['nvidia-container-runtime.mode']
    assert changed_lines(result['diff']['before'], result['diff']['after']) == ['-mode = "legacy"\n',
                                                                                '+mode = "cdi"\n']
    assert result['diff']['before_header'] == str(config)
    assert config.read_text() == text and os.stat(config).st_mtime == 1000000000
    assert os.listdir(config.parent) == ['config.toml']


def test_backup_is_made_only_on_change(run, config):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    result = run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'})
    with open(result['backup_file'], encoding='utf-8') as f:
        assert f.read() == text
    assert 'backup_file' not in run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'})
    assert len(os.listdir(config.parent)) == 2
    run(path=str(config), settings={'nvidia-container-runtime.mode': 'auto'}, backup=False)
    assert len(os.listdir(config.parent)) == 2


def test_absent_removes_the_keys_and_nothing_else(run, config, changed_lines):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    run(path=str(config), settings=ROLE_SETTINGS)
    added = [key for key in ROLE_SETTINGS if key not in ('nvidia-container-runtime.mode',
                                                         'nvidia-container-cli.ldconfig',
                                                         'nvidia-container-cli.load-kmods')]
    result = run(path=str(config), state='absent', settings=dict.fromkeys(added))
    assert result['changed'] is True and result['changed_keys'] == added
    after = config.read_text()
    assert changed_lines(text, after) == [
        '-ldconfig = "@/sbin/ldconfig.real"\n', '-load-kmods = true\n',
        '+ldconfig = "@/sbin/ldconfig"\n', '+load-kmods = false\n',
        '-mode = "legacy"\n', '+mode = "cdi"\n']
    assert run(path=str(config), state='absent', settings=dict.fromkeys(added))['changed'] is False


def test_absent_can_remove_a_table(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    run(path=str(config), state='absent', settings={'nvidia-container-runtime.modes.csv': None})
    assert 'csv' not in tomllib.loads(config.read_text())['nvidia-container-runtime']['modes']


def test_quoted_key_parts_and_new_tables(run, tmp_path):
    path = tmp_path / 'config.toml'
    path.write_text('version = 2\n')
    run(path=str(path), settings={'plugins."io.containerd.grpc.v1.cri".enable_cdi': True})
    assert path.read_text() == 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'


def test_missing_file_fails_unless_create(run, tmp_path):
    path = tmp_path / 'etc' / 'config.toml'
    result = run(path=str(path), settings={'a': 1})
    assert result['failed'] is True and 'does not exist' in result['msg'] and 'create' in result['msg']
    assert not path.exists()
    result = run(path=str(path), settings={'a': 1, 't.k': 'v'}, create=True)
    assert result['changed'] is True
    assert path.read_text() == 'a = 1\n\n[t]\nk = "v"\n'
    assert mode_of(path) == 0o644


def test_missing_file_in_check_mode_warns_instead_of_failing(run, tmp_path, monkeypatch):
    path = tmp_path / 'config.toml'
    # Capture the module's own warnings: ansible-core 2.19 keeps the global
    # warning list per process and de-duplicates it, so it depends on test order.
    warnings = []
    monkeypatch.setattr(AnsibleModule, 'warn', lambda self, msg: warnings.append(msg))
    result = run(path=str(path), settings={'a': 1}, _ansible_check_mode=True)
    assert 'failed' not in result and result['changed'] is True
    assert [str(path) in w and 'does not exist' in w for w in warnings] == [True]
    assert not path.exists()


def test_absent_on_a_missing_file_is_no_change(run, tmp_path):
    result = run(path=str(tmp_path / 'nope.toml'), settings={'a': None}, state='absent')
    assert result['changed'] is False and not (tmp_path / 'nope.toml').exists()


def test_mode_is_kept_unless_given(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    os.chmod(config, 0o600)
    run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'})
    assert mode_of(config) == 0o600
    result = run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'}, mode='0644')
    assert result['changed'] is True and mode_of(config) == 0o644
    assert run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'}, mode='0644')['changed'] is False


def test_a_symlinked_config_is_edited_through_the_link(run, tmp_path):
    real = tmp_path / 'real.toml'
    install(real, 'nvidia-container-toolkit-1.17.6.toml')
    link = tmp_path / 'config.toml'
    link.symlink_to(real)
    run(path=str(link), settings={'nvidia-container-runtime.mode': 'cdi'})
    assert link.is_symlink()
    assert tomllib.loads(real.read_text())['nvidia-container-runtime']['mode'] == 'cdi'


def test_unicode_and_crlf_survive(run, tmp_path):
    path = tmp_path / 'config.toml'
    text = '# r\u00e9glages\r\nname = "caf\u00e9"\r\n\r\n[t]\r\nx = 1\r\n'
    path.write_bytes(text.encode('utf-8'))
    run(path=str(path), settings={'t.y': '\u4e2d\u6587'})
    assert path.read_bytes().decode('utf-8') == text + 'y = "\u4e2d\u6587"\r\n'


@pytest.mark.parametrize('settings,match', [
    ({'a..b': 1}, 'not a TOML dotted key'),
    ({'nvidia-container-runtime.mode': None}, 'null'),
    ({'nvidia-container-runtime': {'mode': 'cdi'}}, 'one by one'),
    ({'nvidia-container-runtime.mode.sub': 1}, 'not a table'),
    ({'nvidia-container-runtime.modes': 'x'}, 'is a table'),
])
def test_bad_settings_fail_and_leave_the_file_alone(run, config, settings, match):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    result = run(path=str(config), settings=dict(settings, **{'disable-require': True}))
    assert result['failed'] is True and match in result['msg']
    assert config.read_text() == text
    if match != 'not a TOML dotted key':  # the key is not in the file, so its path is not said
        assert result['msg'].startswith('Cannot set ') and ' in %s: ' % config in result['msg']


def test_malformed_file_fails_untouched(run, config):
    config.write_text('[nvidia-container-runtime\nmode = "auto"\n')
    result = run(path=str(config), settings={'nvidia-container-runtime.mode': 'cdi'})
    assert result['failed'] is True
    assert str(config) in result['msg'] and 'line 1' in result['msg']
    assert config.read_text() == '[nvidia-container-runtime\nmode = "auto"\n'


def test_remove_takes_keys_out_in_the_same_write_and_one_backup(run, config):
    text = install(config, 'nvidia-container-toolkit-1.17.6.toml')
    run(path=str(config), settings=ROLE_SETTINGS, backup=False)
    settle(config)
    files = sorted(os.listdir(config.parent))
    remove = ['nvidia-container-runtime.debug', 'nvidia-container-cli.debug', 'not-there']
    result = run(path=str(config), settings={'nvidia-container-runtime.mode': 'legacy'}, remove=remove)
    assert result['changed'] is True
    assert result['changed_keys'] == ['nvidia-container-runtime.mode'] + remove[:2]
    data = tomllib.loads(config.read_text())
    assert 'debug' not in data['nvidia-container-runtime'] and 'debug' not in data['nvidia-container-cli']
    assert data['nvidia-container-runtime']['mode'] == 'legacy'
    assert data['supported-driver-capabilities'] == tomllib.loads(text)['supported-driver-capabilities']
    assert len(os.listdir(config.parent)) == len(files) + 1  # one backup
    settled = settle(config)
    again = run(path=str(config), settings={'nvidia-container-runtime.mode': 'legacy'}, remove=remove)
    assert again['changed'] is False and again['changed_keys'] == []
    assert config.read_bytes() == settled and os.stat(config).st_mtime == 1000000000


def test_remove_in_check_mode_writes_nothing(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    run(path=str(config), settings=ROLE_SETTINGS)
    settled = settle(config)
    result = run(path=str(config), settings={}, remove=['nvidia-container-cli.debug'], _ansible_check_mode=True)
    assert result['changed'] is True and result['changed_keys'] == ['nvidia-container-cli.debug']
    assert config.read_bytes() == settled


def test_a_key_both_set_and_removed_fails(run, config):
    install(config, 'nvidia-container-toolkit-1.17.6.toml')
    result = run(path=str(config), settings={'nvidia-container-cli.debug': '/x'}, remove=['nvidia-container-cli.debug'])
    assert result['failed'] is True and 'name each key once' in result['msg']
