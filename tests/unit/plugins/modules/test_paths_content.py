# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.accel.nodes.plugins.modules import paths_content

MARKER = 'accel.nodes.neuron_driver: update-pciids is off'
SHIM = '#!/bin/sh\n# %s\nexit 0\n' % MARKER


@pytest.fixture
def run(module_in_tmp):
    return module_in_tmp(paths_content.main)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_each_file_with_its_mode_then_changes_nothing(run, tmp_path):
    files = [dict(path=str(tmp_path / 'update-pciids'), content=SHIM, mode='0755', marker=MARKER),
             dict(path=str(tmp_path / 'aws-neuron.sh'), content='PATH=/opt/aws/neuron/bin:$PATH\n')]
    first = run(files=files, _ansible_diff=True)
    assert first['changed'] is True
    assert first['changed_paths'] == [f['path'] for f in files]
    assert (tmp_path / 'update-pciids').read_text() == SHIM
    assert _mode(tmp_path / 'update-pciids') == 0o755 and _mode(tmp_path / 'aws-neuron.sh') == 0o644
    assert first['diff'][0]['after'] == SHIM and first['diff'][0]['before_header'].endswith('(absent)')
    second = run(files=files)
    assert second['changed'] is False and second['changed_paths'] == []


def test_check_mode_reports_and_writes_nothing(run, tmp_path):
    path = tmp_path / 'conf'
    path.write_text('old\n')
    result = run(files=[dict(path=str(path), content='new\n'), dict(path=str(tmp_path / 'gone'), state='absent')],
                 _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True and result['changed_paths'] == [str(path)]
    assert path.read_text() == 'old\n'
    assert result['diff'] == [dict(before='old\n', after='new\n', before_header=str(path), after_header=str(path))]


def test_a_mode_change_alone_is_a_change(run, tmp_path):
    path = tmp_path / 'wrapper.sh'
    path.write_text('#!/bin/sh\n')
    path.chmod(0o644)
    assert run(files=[dict(path=str(path), content='#!/bin/sh\n', mode='0755')], _ansible_check_mode=True)['changed']
    assert _mode(path) == 0o644
    result = run(files=[dict(path=str(path), content='#!/bin/sh\n', mode='0755')])
    assert result['changed'] is True and _mode(path) == 0o755


def test_removes_only_files_with_the_marker(run, tmp_path):
    ours, theirs = tmp_path / 'ours', tmp_path / 'theirs'
    ours.write_text(SHIM)
    theirs.write_text('#!/bin/sh\nexec /usr/sbin/update-pciids.real "$@"\n')
    result = run(files=[dict(path=str(p), state='absent', marker=MARKER) for p in (ours, theirs, tmp_path / 'none')])
    assert result['changed_paths'] == [str(ours)] and result['foreign'] == [str(theirs)]
    assert not ours.exists() and theirs.exists()


def test_refuses_to_replace_a_file_without_the_marker_and_writes_nothing(run, tmp_path):
    theirs = tmp_path / 'theirs'
    theirs.write_text('mine\n')
    other = tmp_path / 'other'
    result = run(files=[dict(path=str(other), content='x\n'), dict(path=str(theirs), content=SHIM, marker=MARKER)])
    assert result['failed'] and str(theirs) in result['msg']
    assert theirs.read_text() == 'mine\n' and not other.exists()


def test_a_missing_directory_fails_a_real_run_and_is_reported_in_check_mode(run, tmp_path):
    files = [dict(path=str(tmp_path / 'share' / 'hook.json'), content='{}\n')]
    checked = run(files=files, _ansible_check_mode=True)
    assert checked['changed'] is True and checked['missing_directories'] == [str(tmp_path / 'share')]
    failed = run(files=files)
    assert failed['failed'] and 'do not exist' in failed['msg']
    assert not (tmp_path / 'share').exists()


def test_paths_must_be_absolute_and_present_needs_content(run):
    assert 'absolute' in run(files=[dict(path='relative', content='x')])['msg']
    assert run(files=[dict(path='/tmp/x')])['failed']


# accel.nodes.paths_to_write must agree with the module: a role skips the module where the filter, fed by
# node_probe's description of the same files, finds nothing to write.
from ansible_collections.accel.nodes.plugins.filter.paths import paths_to_write  # noqa: E402
from ansible_collections.accel.nodes.plugins.module_utils import _node_probe  # noqa: E402


def _scenarios(tmp_path):
    shim, profile = str(tmp_path / 'update-pciids'), str(tmp_path / 'aws-neuron.sh')
    want = [dict(path=shim, content=SHIM, mode='0755', marker=MARKER, owner='root', group='root'),
            dict(path=profile, content='PATH=/opt/aws/neuron/bin:$PATH\n', mode='0644', owner='root', group='root')]
    gone = [dict(w, state='absent') for w in want]
    return {
        'written': (want, lambda: None),
        'text drifted': (want, lambda: open(profile, 'a').write('# edited\n')),
        'mode drifted': (want, lambda: os.chmod(shim, 0o700)),
        'owner drifted': (want, lambda: os.chown(profile, 1000, 0)),
        'missing': (want, lambda: os.remove(shim)),
        'foreign': (want, lambda: open(shim, 'w').write('#!/bin/sh\nexec /usr/sbin/update-pciids.real "$@"\n')),
        'to remove': (gone, lambda: None),
        'removed': (gone, lambda: [os.remove(p) for p in (shim, profile)]),
        'integer mode': ([dict(want[1], mode=0o644)], lambda: None),
    }


@pytest.mark.parametrize('name', ['written', 'text drifted', 'mode drifted', 'owner drifted', 'missing', 'foreign',
                                  'to remove', 'removed', 'integer mode'])
def test_paths_to_write_agrees_with_the_module(run, tmp_path, name):
    if os.geteuid() != 0:
        pytest.skip('files owned by root need root')
    files, drift = _scenarios(tmp_path)[name]
    assert run(files=[dict(f, state='present') for f in _scenarios(tmp_path)['written'][0]])['changed'] is True
    drift()
    seen = dict((f['path'], _node_probe.describe(f['path'])) for f in files)
    to_write = paths_to_write(files, seen)
    result = run(files=files, _ansible_check_mode=True)
    assert bool(to_write) == bool(result['changed'] or result.get('failed')), (to_write, result)
    assert [f['path'] for f in to_write] == sorted(set(result['changed_paths']) | set(result['foreign']),
                                                   key=[f['path'] for f in files].index) or result.get('failed')


def test_paths_to_write_leaves_the_unknown_to_the_module():
    entry = dict(path='/etc/profile.d/aws-neuron.sh', content='x\n', owner='neuron')
    described = dict(path=entry['path'], exists=True, type='file', mode='0644', uid=0, gid=0, text='x\n')
    assert paths_to_write([entry], {}) == [entry]                                        # not probed
    assert paths_to_write([entry], {entry['path']: dict(described, text=None)}) == [entry]  # not text
    assert paths_to_write([entry], {entry['path']: described}) == [entry]                # owner not root
    assert paths_to_write([dict(entry, owner=None, mode='u=rw,go=r')], {entry['path']: described}) != []
    assert paths_to_write([dict(entry, owner=None)], {entry['path']: described}) == []
