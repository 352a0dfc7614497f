# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os

USER = {'storage-driver': 'vfs', 'iptables': False, 'bridge': 'none'}
ACCEL_A = {'accel-a': {'path': '/usr/local/bin/accel-runc-a'}}


def config(node):
    return json.loads(node.daemon_json.read_text())


def test_docker_restart_applies_the_runtimes_and_keeps_daemon_json_as_last_good(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service', 'docker.service')
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=ACCEL_A, **{'default-runtime': 'accel-a'})))
    result = node.run('restart', engine='docker')
    assert not result.get('failed'), result
    assert result['changed'] is True
    assert result['default_runtime'] == 'accel-a'
    assert 'accel-a' in result['runtimes']
    assert result['msg'].startswith('Docker answers with runtimes accel-a, io.containerd.runc.v2')
    # The start limit is flushed before the restart.
    assert node.verbs()[:2] == ['systemctl reset-failed', 'systemctl restart']
    assert (node.state_dir / 'daemon.json.last-good').read_bytes() == node.daemon_json.read_bytes()
    assert oct(os.stat(node.state_dir).st_mode & 0o777) == '0o700'
    assert oct(os.stat(node.state_dir / 'daemon.json.last-good').st_mode & 0o777) == '0o600'


def test_a_daemon_json_docker_rejects_is_undone_with_dockers_own_message(node):
    good = json.dumps(dict(USER, runtimes=ACCEL_A))
    node.touch(node.daemon_json, good)
    os.chmod(node.daemon_json, 0o640)
    node.boot('docker.service')
    assert node.run('state', engines=['docker'])['last_good'] == ['docker']
    node.touch(node.daemon_json, json.dumps(dict(USER, hosts=['unix:///var/run/docker.sock'])))
    result = node.run('restart', engine='docker', timeout=10)
    assert result['failed'] is True
    assert result['restored'] is True
    assert 'specified both as a flag and in the configuration file' in result['msg']
    assert 'The last known good daemon.json was restored and Docker runs again with it.' in result['msg']
    assert 'The rejected daemon.json is kept in %s/daemon.json.rejected.' % node.state_dir in result['msg']
    assert node.daemon_json.read_text() == good
    assert oct(os.stat(node.daemon_json).st_mode & 0o777) == '0o640'
    assert json.loads((node.state_dir / 'daemon.json.rejected').read_text())['hosts'] == ['unix:///var/run/docker.sock']
    assert node.docker_info['Runtimes']['accel-a'] == {'path': '/usr/local/bin/accel-runc-a'}
    # The restart of the restore flushes the start limit of the socket too.
    assert ['systemctl', 'reset-failed', 'docker.service', 'docker.socket'] in node.calls
    # Docker answered at once after the good restart: no wait of 10 s.
    assert node.calls.count(['docker', 'info', '--format', '{{json .}}']) <= 8


def test_docker_that_ran_without_daemon_json_gets_none_back(node):
    node.boot('docker.service')
    node.run('state', engines=['docker'])
    assert (node.state_dir / 'daemon.json.last-good-was-absent').read_text() == (
        'Docker ran without %s: restoring means removing it.\n' % node.daemon_json)
    node.touch(node.daemon_json, json.dumps({'hosts': ['unix:///var/run/docker.sock']}))
    result = node.run('restart', engine='docker')
    assert 'was restored and Docker runs again' in result['msg']
    assert not node.daemon_json.exists()


def test_without_a_last_good_state_docker_stays_down_and_the_message_says_so(node):
    node.touch(node.daemon_json, json.dumps({'hosts': ['unix:///var/run/docker.sock']}))
    result = node.run('restart', engine='docker', timeout=4)
    assert result['failed'] is True and result['restored'] is False
    assert 'No last known good daemon.json was recorded, so nothing was restored and Docker is DOWN' in result['msg']
    assert node.daemon_json.exists()


def test_docker_that_answers_without_the_registered_runtimes_fails_and_keeps_nothing(node):
    node.touch(node.daemon_json, json.dumps(dict(runtimes=ACCEL_A, **{'default-runtime': 'accel-a'})))
    node.boot('docker.service')
    # As if a --add-runtime/--default-runtime flag of the unit overrode daemon.json.
    node.start = lambda unit, start=node.start: start(unit) and bool(node.docker_info.update(
        Runtimes={'runc': {'path': 'runc'}}, DefaultRuntime='runc')) is False
    result = node.run('restart', engine='docker')
    assert result['failed'] is True
    assert result['msg'].startswith('Docker restarted but does not use the runtimes in %s: missing runtimes: accel-a. '
                                    'default runtime is runc, not accel-a. Check that dockerd reads this file'
                                    % node.daemon_json)
    assert not (node.state_dir / 'daemon.json.last-good').exists()


def test_docker_that_never_answers_gets_the_timeout_twice_and_the_message_says_it_is_down(node):
    node.touch(node.daemon_json, '{}')
    node.boot('docker.service')
    node.run('state', engines=['docker'])
    node.touch(node.daemon_json, json.dumps({'debug': True}))
    node.docker_answers = False
    before = node.now
    result = node.run('restart', engine='docker', timeout=10)
    assert result['failed'] is True
    # Nothing in the journal: what the module saw is all there is to say.
    assert 'Docker said: Docker did not answer within 10s' in result['msg']
    assert 'It did not start with the last known good daemon.json either, so Docker is DOWN' in result['msg']
    assert 20 <= node.now - before <= 30
    assert node.daemon_json.read_text() == '{}'


def test_containerd_restart_keeps_the_tree_and_a_rejected_one_is_moved_aside(node):
    drop_ins = node.containerd_dir / 'conf.d'
    node.touch(drop_ins / '99-accel-nodes.toml', 'version = 2\n')
    node.boot('containerd.service')
    good = (node.containerd_dir / 'config.toml').read_text()
    result = node.run('restart', engine='containerd')
    assert result['msg'] == 'containerd answers.'
    assert (node.state_dir / 'containerd.last-good.tar').exists()
    node.touch(drop_ins / '99-accel-test.toml', 'version = 2\n')
    node.touch(node.containerd_dir / 'config.toml', good + 'this is = = not toml\n')
    result = node.run('restart', engine='containerd')
    assert result['failed'] is True
    assert 'failed to load TOML' in result['msg']
    assert 'The last known good %s was restored and containerd runs again with it.' % node.containerd_dir in result['msg']
    assert 'The rejected configuration is kept in %s/containerd.rejected.' % node.state_dir in result['msg']
    assert (node.containerd_dir / 'config.toml').read_text() == good
    assert (drop_ins / '99-accel-nodes.toml').exists()
    assert not (drop_ins / '99-accel-test.toml').exists()
    assert (node.state_dir / 'containerd.rejected' / 'conf.d' / '99-accel-test.toml').exists()
    assert node.units['containerd.service'].pid


def test_containerd_without_a_last_good_tree_is_left_as_it_is(node):
    node.touch(node.containerd_dir / 'config.toml', 'this is = = not toml\n')
    result = node.run('restart', engine='containerd', timeout=2)
    assert result['failed'] is True
    assert 'No last known good configuration was recorded, so nothing was restored and containerd is DOWN' in result['msg']
    assert 'rejected configuration is kept' not in result['msg']
    assert (node.containerd_dir / 'config.toml').exists()


def test_check_mode_restarts_nothing(node):
    result = node.run('restart', engine='docker', _ansible_check_mode=True)
    assert result['changed'] is True
    assert result['msg'] == 'Check mode: docker.service would be restarted.'
    assert node.calls == []
