# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os

import pytest

from ansible_collections.accel.nodes.plugins.modules import paths_absent


@pytest.fixture
def tree(tmp_path):
    (tmp_path / 'file.list').write_text('deb http://example.invalid /\n')
    (tmp_path / 'dir' / 'sub').mkdir(parents=True)
    (tmp_path / 'dir' / 'sub' / 'f').write_text('x')
    (tmp_path / 'target').write_text('kept')
    os.symlink(tmp_path / 'target', tmp_path / 'link')
    os.symlink(tmp_path / 'nowhere', tmp_path / 'dangling')
    return tmp_path


def test_existing_keeps_the_order_given_and_drops_duplicates():
    present = {'/b', '/a'}
    assert paths_absent.existing(['/a', '/c', '/b', '/a'], lexists=present.__contains__) == ['/a', '/b']


def test_removes_files_directories_and_links_but_not_link_targets(run_module, tree):
    paths = [str(tree / n) for n in ('file.list', 'dir', 'link', 'dangling', 'missing')]
    result = run_module(paths_absent.main, dict(paths=paths))
    assert result['changed'] is True
    assert result['removed'] == paths[:4]
    assert sorted(os.listdir(tree)) == ['target']
    assert (tree / 'target').read_text() == 'kept'


def test_second_run_is_not_changed(run_module, tree):
    paths = [str(tree / 'file.list'), str(tree / 'dir')]
    assert run_module(paths_absent.main, dict(paths=paths))['changed'] is True
    result = run_module(paths_absent.main, dict(paths=paths))
    assert result['changed'] is False
    assert result['removed'] == []


def test_check_mode_reports_and_removes_nothing(run_module, tree):
    paths = [str(tree / 'file.list'), str(tree / 'missing')]
    result = run_module(paths_absent.main, dict(paths=paths, _ansible_check_mode=True, _ansible_diff=True))
    assert result['changed'] is True
    assert result['removed'] == [paths[0]]
    assert result['diff']['before'] == paths[0] + '\n'
    assert (tree / 'file.list').exists()


def test_relative_paths_fail(run_module, tree):
    result = run_module(paths_absent.main, dict(paths=['etc/foo']))
    assert result['failed'] is True
    assert 'absolute' in result['msg']


def test_two_names_of_one_file_are_both_removed_without_error(run_module, tmp_path):
    # A merged /usr: /lib is a link to /usr/lib, so /lib/x and /usr/lib/x are one file.
    (tmp_path / 'usr' / 'lib').mkdir(parents=True)
    (tmp_path / 'lib').symlink_to('usr/lib')
    (tmp_path / 'usr' / 'lib' / 'rule').write_text('x\n')
    paths = [str(tmp_path / 'lib' / 'rule'), str(tmp_path / 'usr' / 'lib' / 'rule')]
    result = run_module(paths_absent.main, dict(paths=paths))
    assert 'failed' not in result and result['changed'] is True
    assert not (tmp_path / 'usr' / 'lib' / 'rule').exists()
