# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os
import stat

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def update_main():
    """A module whose whole job is one _files.update_file call."""
    module = AnsibleModule(
        argument_spec=dict(path=dict(type='path'), before=dict(type='raw'), after=dict(type='raw'),
                           backup=dict(type='bool', default=False), mode=dict(type='raw', default=0o644)),
        supports_check_mode=True)
    p = module.params
    module.exit_json(**_files.update_file(module, p['path'], p['before'], p['after'], p['backup'], p['mode']))


@pytest.fixture
def update(run_module, tmp_path):
    moduletmp = tmp_path / 'moduletmp'
    moduletmp.mkdir()

    def _update(path, **args):
        args.update(path=str(path), _ansible_tmpdir=str(moduletmp))
        if 'before' not in args:
            args['before'] = path.read_text(encoding='utf-8') if path.exists() else None
        return run_module(update_main, args)
    return _update


def test_read_text(tmp_path):
    assert _files.read_text(str(tmp_path / 'missing')) is None
    (tmp_path / 'u').write_bytes('z\u00fcrich\n'.encode('utf-8'))
    assert _files.read_text(str(tmp_path / 'u')) == 'z\u00fcrich\n'
    (tmp_path / 'latin1').write_bytes(b'z\xfcrich')
    with pytest.raises(ValueError, match='latin1 is not UTF-8'):
        _files.read_text(str(tmp_path / 'latin1'))
    with pytest.raises(ValueError, match='is a directory'):
        _files.read_text(str(tmp_path))


def test_make_parents(tmp_path):
    target = tmp_path / 'a' / 'b' / 'file'
    assert _files.make_parents(str(target)) == [str(tmp_path / 'a'), str(tmp_path / 'a' / 'b')]
    assert mode_of(tmp_path / 'a') == 0o755 and mode_of(tmp_path / 'a' / 'b') == 0o755
    assert _files.make_parents(str(target)) == []


def test_file_diff_headers_say_when_a_side_does_not_exist():
    assert _files.file_diff('/f', None, 'x') == {
        'before': '', 'after': 'x', 'before_header': '/f (absent)', 'after_header': '/f'}
    assert _files.file_diff('/f', 'x', None)['after_header'] == '/f (absent)'


def test_new_file_gets_the_mode_and_its_directories(update, tmp_path):
    path = tmp_path / 'etc' / 'conf.d' / 'new.toml'
    result = update(path, after='a = 1\n')
    assert result['changed'] is True and result['backup_file'] is None
    assert path.read_text() == 'a = 1\n'
    assert mode_of(path) == 0o644
    assert os.listdir(path.parent) == ['new.toml']  # no temporary file left behind
    update(tmp_path / 'other', after='x', mode='0600')
    assert mode_of(tmp_path / 'other') == 0o600


def test_existing_file_keeps_its_mode(update, tmp_path):
    path = tmp_path / 'secret.json'
    path.write_text('{}')
    os.chmod(path, 0o600)
    update(path, after='{"a": 1}\n')
    assert path.read_text() == '{"a": 1}\n'
    assert mode_of(path) == 0o600


def test_same_content_is_not_written(update, tmp_path):
    path = tmp_path / 'f'
    path.write_text('same\n')
    os.utime(path, (1000000000, 1000000000))
    result = update(path, after='same\n', backup=True)
    assert result['changed'] is False and result['backup_file'] is None
    assert os.stat(path).st_mtime == 1000000000
    assert sorted(os.listdir(tmp_path)) == ['f', 'moduletmp']


def test_backup_only_on_change(update, tmp_path):
    path = tmp_path / 'f'
    path.write_text('old\n')
    result = update(path, after='new\n', backup=True)
    assert result['changed'] is True
    assert result['backup_file'].startswith(str(path) + '.') and result['backup_file'].endswith('~')
    with open(result['backup_file']) as f:
        assert f.read() == 'old\n'
    assert path.read_text() == 'new\n'


def test_check_mode_writes_nothing(update, tmp_path):
    path = tmp_path / 'f'
    path.write_text('old\n')
    result = update(path, after='new\n', backup=True, _ansible_check_mode=True)
    assert result['changed'] is True and result['backup_file'] is None
    assert result['diff'] == {'before': 'old\n', 'after': 'new\n', 'before_header': str(path),
                              'after_header': str(path)}
    assert path.read_text() == 'old\n'
    assert sorted(os.listdir(tmp_path)) == ['f', 'moduletmp']
    result = update(tmp_path / 'd' / 'new', after='x', _ansible_check_mode=True)
    assert result['changed'] is True and not (tmp_path / 'd').exists()


def test_none_removes_the_file_after_a_backup(update, tmp_path):
    path = tmp_path / 'f'
    path.write_text('old\n')
    result = update(path, after=None, backup=True)
    assert result['changed'] is True and not path.exists()
    with open(result['backup_file']) as f:
        assert f.read() == 'old\n'
    assert update(path, after=None)['changed'] is False


def test_a_symlink_is_followed_and_stays_a_link(update, tmp_path):
    real = tmp_path / 'real.toml'
    real.write_text('a = 1\n')
    link = tmp_path / 'link.toml'
    link.symlink_to(real)
    update(link, after='a = 2\n')
    assert link.is_symlink()
    assert real.read_text() == 'a = 2\n'
