# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg
from ansible_collections.accel.nodes.plugins.modules import dpkg_holds

# `dpkg --get-selections` as dpkg 1.21 (Debian 12) prints it: tabs, and the
# architecture on Multi-Arch: same packages.
SELECTIONS = (
    'adduser\t\t\t\t\t\tinstall\n'
    'libnvidia-container-tools\t\t\thold\n'
    'libnvidia-container1:amd64\t\t\thold\n'
    'nvidia-container-toolkit\t\t\tinstall\n'
    'nvidia-container-toolkit-base\t\t\tinstall\n'
    'oldpkg\t\t\t\t\t\tdeinstall\n'
)
PACKAGES = ['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
            'libnvidia-container1']


def test_parse_selections_drops_the_architecture():
    assert dpkg_holds.parse_selections(SELECTIONS) == {
        'adduser': 'install', 'libnvidia-container-tools': 'hold', 'libnvidia-container1': 'hold',
        'nvidia-container-toolkit': 'install', 'nvidia-container-toolkit-base': 'install', 'oldpkg': 'deinstall'}


def test_plan_names_only_what_differs_and_what_dpkg_does_not_know():
    current = dpkg_holds.parse_selections(SELECTIONS)
    assert _dpkg.selection_plan(PACKAGES + ['absent'], 'hold', current) == (PACKAGES[:2], ['absent'])
    assert _dpkg.selection_plan(PACKAGES, 'install', current) == (PACKAGES[2:], [])


def test_release_never_turns_a_package_selected_for_removal_into_one_to_install():
    current = dpkg_holds.parse_selections(SELECTIONS)
    assert _dpkg.selection_plan(['oldpkg', 'adduser'], 'install', current) == ([], [])
    assert _dpkg.selection_plan(['oldpkg'], 'hold', current) == (['oldpkg'], [])


class FakeDpkg:
    """Stands in for run_command: a dpkg selection database in memory."""

    def __init__(self, text=SELECTIONS):
        self.selections = dpkg_holds.parse_selections(text)
        self.calls = []

    def __call__(self, argv, data=None, environ_update=None, **kwargs):
        self.calls.append(argv[1:])
        assert environ_update == {'LANG': 'C', 'LC_ALL': 'C'}
        if argv[1] == '--get-selections':
            return 0, ''.join('%s\t%s\n' % kv for kv in self.selections.items()), ''
        for line in data.splitlines():
            name, selection = line.split()
            self.selections[name] = selection
        return 0, '', ''


@pytest.fixture
def run(run_module):
    def _run(dpkg, **args):
        with mock.patch.object(basic.AnsibleModule, 'run_command', dpkg), \
                mock.patch.object(basic.AnsibleModule, 'get_bin_path', return_value='/usr/bin/dpkg'):
            return run_module(dpkg_holds.main, args)
    return _run


def test_hold_sets_what_differs_then_is_not_changed(run):
    dpkg = FakeDpkg()
    first = run(dpkg, names=PACKAGES, selection='hold')
    assert first['changed'] is True
    assert first['changed_names'] == PACKAGES[:2]
    assert all(dpkg.selections[n] == 'hold' for n in PACKAGES)
    second = run(dpkg, names=PACKAGES, selection='hold')
    assert second['changed'] is False
    assert dpkg.calls.count(['--set-selections']) == 1


def test_check_mode_reports_and_writes_nothing(run):
    dpkg = FakeDpkg()
    result = run(dpkg, names=PACKAGES, selection='hold', _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True
    assert result['diff']['after'] == 'nvidia-container-toolkit hold\nnvidia-container-toolkit-base hold\n'
    assert ['--set-selections'] not in dpkg.calls


def test_release_skips_packages_dpkg_does_not_know(run):
    dpkg = FakeDpkg()
    result = run(dpkg, names=PACKAGES + ['absent'], selection='install')
    assert result['changed'] is True
    assert result['unknown'] == ['absent']
    assert 'absent' not in dpkg.selections
    assert dpkg.selections['libnvidia-container1'] == 'install'


def test_holding_a_package_dpkg_does_not_know_fails_with_the_fix(run):
    result = run(FakeDpkg(), names=['absent'], selection='hold')
    assert result['failed'] is True
    assert 'install it first' in result['msg']


STATUS = ('Package: nvidia-driver\nStatus: install ok installed\n\n'
          'Package: libnvidia-compute-580\nStatus: install ok installed\n\n'
          'Package: libnvidia-container1\nStatus: hold ok installed\n\n'
          'Package: nvidia-kernel-dkms\nStatus: deinstall ok config-files\n\n'
          'Package: adduser\nStatus: install ok installed\n')


@pytest.fixture
def status_file(tmp_path, monkeypatch):
    path = tmp_path / 'status'
    path.write_text(STATUS)
    monkeypatch.setattr(dpkg_holds._dpkg, 'STATUS_FILE', str(path))
    return path


def test_patterns_hold_the_installed_packages_they_match_but_not_the_excluded(run, status_file):
    dpkg = FakeDpkg('nvidia-driver\tinstall\nlibnvidia-compute-580\tinstall\nlibnvidia-container1\thold\n'
                    'nvidia-kernel-dkms\tdeinstall\nadduser\tinstall\n')
    args = dict(patterns=['^nvidia-.*$', '^libnvidia-.*$'], exclude=['^libnvidia-container.*$'], selection='hold')
    first = run(dpkg, **args)
    # nvidia-kernel-dkms is removed (config files only): not installed, not held.
    assert first['names'] == ['libnvidia-compute-580', 'nvidia-driver']
    assert first['changed'] and first['changed_names'] == ['libnvidia-compute-580', 'nvidia-driver']
    assert dpkg.selections['nvidia-kernel-dkms'] == 'deinstall'
    assert run(dpkg, **args)['changed'] is False
    released = run(dpkg, patterns=['^nvidia-.*$', '^libnvidia-.*$'], exclude=['^libnvidia-container.*$'],
                   selection='install')
    assert released['changed_names'] == ['libnvidia-compute-580', 'nvidia-driver']
    assert dpkg.selections['libnvidia-container1'] == 'hold'


def test_names_and_patterns_together(run, status_file):
    dpkg = FakeDpkg()
    result = run(dpkg, names=['nvidia-container-toolkit'], patterns=['^nothing-matches$'], selection='hold')
    assert result['names'] == ['nvidia-container-toolkit'] and result['changed_names'] == ['nvidia-container-toolkit']


def test_a_pattern_that_is_no_regular_expression_fails(run, status_file):
    result = run(FakeDpkg(), patterns=['^nvidia-(.*$'])
    assert result['failed'] and 'regular expressions' in result['msg']
