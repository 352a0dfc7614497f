# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

USER = {'storage-driver': 'vfs', 'log-driver': 'json-file'}
# dpkg status files of the Molecule scenario neuron's node (tests/fixtures/neuron/README.md): docker.io is not
# installed yet after prepare.yml, and is after converge.yml; runc is in neither.
FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'neuron'
# A node whose docker.io unpack was killed, as dpkg left it (tests/fixtures/interrupted/README.md).
INTERRUPTED = Path(__file__).parents[3] / 'fixtures' / 'interrupted' / 'docker-io-unpack'
NVIDIA = {'nvidia': {'path': '/usr/bin/nvidia-container-runtime'}}


def test_a_fresh_install_is_enabled_started_and_its_configuration_kept(node):
    node.units['docker.service'].enabled = 'disabled'
    node.touch(node.daemon_json, json.dumps(USER))
    first = node.run()
    assert first['changed'] is True
    assert first['enabled'] == ['docker.service']
    assert first['started'] == ['containerd.service', 'docker.service']
    assert first['last_good'] == ['containerd', 'docker']
    assert first['messages'] == [] and first['restart'] == []
    assert (node.state_dir / 'daemon.json.last-good').read_bytes() == node.daemon_json.read_bytes()
    assert (node.state_dir / 'containerd.last-good.tar').exists()
    node.calls.clear()
    second = node.run()
    assert second['changed'] is False
    # Converged: one systemctl show and one docker info, and containerd's files are only looked at.
    assert node.verbs() == ['systemctl show', 'docker info']
    assert second['cgroup_driver'] == 'cgroupfs'


def test_a_file_changed_since_docker_started_is_not_kept_and_runtimes_it_lacks_ask_for_a_restart(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service', 'docker.service')
    node.run()
    # A run registered nvidia, then failed before its handlers.
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=NVIDIA, **{'default-runtime': 'nvidia'})))
    result = node.run()
    assert result['changed'] is False
    assert result['pending_runtimes'] == ['nvidia=/usr/bin/nvidia-container-runtime', 'default-runtime=nvidia']
    assert result['restart'] == ['docker']
    assert result['messages'] == [
        '%s registers nvidia=/usr/bin/nvidia-container-runtime, default-runtime=nvidia, which Docker does not run '
        'with: it changed after Docker started and no restart followed. The checked restart handler applies it, and '
        'puts the last known good daemon.json back if Docker does not start.' % node.daemon_json]
    assert json.loads((node.state_dir / 'daemon.json.last-good').read_text()) == USER
    # The handler's restart applies it, and the file becomes the last good one.
    assert not node.run('restart', engine='docker').get('failed')
    again = node.run()
    assert again['restart'] == [] and again['messages'] == []
    assert json.loads((node.state_dir / 'daemon.json.last-good').read_text())['runtimes'] == NVIDIA


def test_other_changes_since_docker_started_are_left_to_the_user(node):
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=NVIDIA)))
    node.boot('containerd.service', 'docker.service')
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=NVIDIA, debug=True)))
    result = node.run(engines=['docker'])
    assert result['restart'] == [] and result['pending_runtimes'] == []
    assert result['messages'] == [
        '%s changed after Docker started. The change touches no key this collection manages, so it does not restart '
        'Docker for it (a restart stops running containers). Restart Docker when it suits you. Until then it is not '
        'kept as the last known good daemon.json.' % node.daemon_json]
    assert not (node.state_dir / 'daemon.json.last-good').exists()


def test_a_changed_file_docker_could_not_read_is_reported_not_restarted(node):
    node.boot('docker.service')
    node.touch(node.daemon_json, '{"runtimes": ')
    result = node.run(engines=['docker'])
    assert result['restart'] == []
    assert result['messages'][0].startswith('%s changed after Docker started and could not be compared with what '
                                            'Docker runs (%s is not valid JSON' % (node.daemon_json, node.daemon_json))
    assert result['messages'][0].endswith('Docker is not restarted; it would not start with a file it cannot read either.')


def test_docker_that_does_not_answer_keeps_nothing(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('docker.service')
    node.docker_answers = False
    result = node.run(engines=['docker'])
    assert result['last_good'] == [] and result['messages'] == []
    assert not node.state_dir.exists()


def test_containerd_files_changed_since_it_started_ask_for_a_restart_and_are_not_kept(node):
    # A run wrote a drop-in and was killed before its handler: containerd config dump would read the new file,
    # but the running containerd does not have it.
    node.boot('containerd.service')
    node.run(engines=['containerd'])
    kept = (node.state_dir / 'containerd.last-good.tar.sha256').read_text()
    node.touch(node.containerd_dir / 'conf.d' / '99-accel-nodes.toml', 'version = 2\n')
    result = node.run(engines=['containerd'])
    assert result['last_good'] == [] and result['restart'] == ['containerd']
    assert result['messages'] == [
        '%s changed after containerd started and differs from the configuration containerd was last seen running '
        'with (or none was recorded): no restart followed the change. The checked restart handler applies it, and '
        'puts the last known good configuration back if containerd does not start. Running containers keep '
        'running.' % node.containerd_dir]
    assert (node.state_dir / 'containerd.last-good.tar.sha256').read_text() == kept
    # The handler's restart applies it; the next run has nothing to say.
    assert not node.run('restart', engine='containerd').get('failed')
    again = node.run(engines=['containerd'])
    assert again['restart'] == [] and again['messages'] == []


def test_containerd_files_touched_but_unchanged_since_it_started_need_nothing(node):
    node.touch(node.containerd_dir / 'conf.d' / '99-accel-nodes.toml', 'version = 2\n')
    node.boot('containerd.service')
    node.run(engines=['containerd'])
    node.touch(node.containerd_dir / 'conf.d' / '99-accel-nodes.toml', 'version = 2\n')
    result = node.run(engines=['containerd'])
    assert result['restart'] == [] and result['messages'] == []


def test_a_managed_key_written_after_docker_started_asks_for_a_restart(node):
    # X2 of issue 24: docker_daemon_options changed, the merge wrote daemon.json, and the run was killed before
    # its handler. The key is not one docker info shows; the last known good daemon.json tells.
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=NVIDIA)))
    node.boot('containerd.service', 'docker.service')
    node.run(managed_keys=['log-opts'])
    node.touch(node.daemon_json, json.dumps(dict(USER, runtimes=NVIDIA, **{'log-opts': {'max-size': '10m'}})))
    result = node.run(managed_keys=['log-opts'])
    assert result['pending_keys'] == ['log-opts'] and result['pending_runtimes'] == []
    assert result['restart'] == ['docker']
    assert result['messages'] == [
        '%s sets log-opts other than the daemon.json Docker was last seen running with: it changed after Docker '
        'started and no restart followed. The checked restart handler applies it, and puts the last known good '
        'daemon.json back if Docker does not start.' % node.daemon_json]
    # Unmanaged, the same edit is the user's to apply.
    assert node.run()['restart'] == []
    assert not node.run('restart', engine='docker').get('failed')
    assert node.run(managed_keys=['log-opts'])['restart'] == []


def test_features_written_by_the_runtime_roles_count_as_managed(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service', 'docker.service')
    node.run()
    node.touch(node.daemon_json, json.dumps(dict(USER, features={'cdi': True})))
    result = node.run()
    assert result['pending_keys'] == ['features'] and result['restart'] == ['docker']


def test_an_engine_left_stopped_with_a_config_it_rejects_gets_the_last_good_one_back(node):
    # A run killed during its checked restart: the unit is down, daemon.json is the new one, and Docker
    # refuses it. Starting it is checked as the handler's restart is.
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service', 'docker.service')
    node.run()
    node.touch(node.daemon_json, json.dumps(dict(USER, hosts=['unix:///var/run/docker.sock'])))
    node.units['docker.service'].pid = 0
    result = node.run()
    assert result['failed'] is True and result['restored'] is True
    assert result['msg'].startswith('Docker did not start with the changed %s. The last known good daemon.json was '
                                    'restored and Docker runs again with it.' % node.daemon_json)
    assert json.loads(node.daemon_json.read_text()) == USER
    assert node.units['docker.service'].pid


def test_an_engine_left_stopped_is_started_and_its_configuration_kept(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service')
    result = node.run()
    assert result['started'] == ['docker.service'] and sorted(result['last_good']) == ['containerd', 'docker']
    assert node.verbs().count('systemctl reset-failed') == 1


def test_what_an_interrupted_dpkg_run_left_comes_first(node):
    # dpkg's status and journal on a node whose docker.io unpack was killed (tests/fixtures/interrupted/).
    shutil.copytree(INTERRUPTED / 'updates', node.dpkg_status.parent / 'updates')
    shutil.copy(INTERRUPTED / 'status', node.dpkg_status)
    node.touch(node.daemon_json, json.dumps(USER))
    result = node.run(packages=['docker.io', 'python3-requests'])
    assert 'docker.io: half-installed (reinstreq)' in result['interrupted']
    assert 'containerd: unpacked' in result['interrupted']
    assert result['started'] == [] and result['changed'] is False
    assert node.calls == []


def test_a_temporary_file_of_an_interrupted_write_is_reported(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.touch(node.daemon_json.parent / '.daemon.json.k2j4hd1x.tmp', '{')
    node.boot('containerd.service', 'docker.service')
    result = node.run(packages=[])
    assert result['interrupted'] == [str(node.daemon_json.parent / '.daemon.json.k2j4hd1x.tmp')]


def test_a_temporary_file_beside_containerd_s_drop_in_is_reported(node):
    # What container_runtime's atomic write leaves when a run is killed before its rename.
    node.touch(node.daemon_json, json.dumps(USER))
    node.touch(node.containerd_dir / 'conf.d' / '.99-accel-nodes.toml.x1y2z3.tmp', 'version')
    node.boot('containerd.service', 'docker.service')
    result = node.run(packages=[])
    assert result['interrupted'] == [str(node.containerd_dir / 'conf.d' / '.99-accel-nodes.toml.x1y2z3.tmp')]


def test_dpkg_s_new_default_for_config_toml_is_named_and_the_checks_go_on(node):
    # A containerd upgrade leaves config.toml.dpkg-dist where config.toml has local changes: that
    # waits for a person, and must not stop the engines' checks on every later run.
    node.touch(node.daemon_json, json.dumps(USER))
    node.touch(node.containerd_dir / 'config.toml', 'version = 2\n')
    node.touch(node.containerd_dir / 'config.toml.dpkg-dist', 'version = 3\n')
    node.boot('containerd.service')
    result = node.run(packages=[])
    assert result['interrupted'] == []
    assert result['started'] == ['docker.service']
    assert any('config.toml.dpkg-dist' in m and 'diff -u' in m for m in result['messages'])


def test_check_mode_predicts_and_writes_nothing(node):
    node.touch(node.daemon_json, json.dumps(USER))
    node.boot('containerd.service', 'docker.service')
    node.units['docker.service'].enabled = 'disabled'
    result = node.run(_ansible_check_mode=True)
    assert result['changed'] is True
    assert result['enabled'] == ['docker.service']
    assert result['last_good'] == ['containerd', 'docker']
    assert not node.state_dir.exists()
    assert node.units['docker.service'].enabled == 'disabled'
    assert 'systemctl enable' not in node.verbs()


def test_a_missing_unit_fails_with_the_hint(node):
    node.units['containerd.service'].installed = False
    result = node.run(missing_hint='docker_install_source is none: install it first.')
    assert result['failed'] is True
    assert result['msg'] == ('containerd.service is not installed on this node: systemd knows no such unit. '
                             'docker_install_source is none: install it first.')


def test_offline_only_enables(node):
    node.units['docker.service'].enabled = 'disabled'
    node.touch(node.daemon_json, json.dumps(USER))
    result = node.run(live=False)
    assert result['enabled'] == ['docker.service'] and result['started'] == [] and result['last_good'] == []
    assert node.verbs() == ['systemctl is-enabled', 'systemctl is-enabled', 'systemctl enable']
    assert node.units['docker.service'].pid == 0 and not node.state_dir.exists()
    node.units['containerd.service'].installed = False
    assert node.run(live=False)['msg'].startswith('containerd.service is not installed on this node')


def test_a_new_file_is_only_kept_once_older_than_the_daemon(node):
    node.boot('docker.service')
    node.touch(node.daemon_json, json.dumps(USER))
    assert node.run(engines=['docker'])['last_good'] == []
    os.utime(node.daemon_json, (node.now - 100, node.now - 100))
    assert node.run(engines=['docker'])['last_good'] == ['docker']
    assert not (node.state_dir / 'daemon.json.last-good-was-absent').exists()


def test_missing_packages_are_returned_and_nothing_is_done(node):
    node.dpkg_status.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / 'dpkg-status-inf1-prepared', node.dpkg_status)
    node.units['docker.service'].installed = False
    result = node.run(engines=['docker'], packages=['docker.io', 'adduser'])
    assert result['changed'] is False and 'failed' not in result
    assert result['missing_packages'] == ['docker.io']
    assert result['enabled'] == [] and result['started'] == [] and result['cgroup_driver'] is None
    assert node.calls == []


def test_installed_packages_go_on_as_before(node):
    node.dpkg_status.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / 'dpkg-status-inf1-converged', node.dpkg_status)
    node.touch(node.daemon_json, json.dumps(USER))
    result = node.run(packages=['docker.io', 'adduser'])
    assert result['missing_packages'] == []
    assert result['started'] == ['containerd.service', 'docker.service']
    assert result['last_good'] == ['containerd', 'docker']
    assert result['cgroup_driver'] == 'cgroupfs'
    # Removed with its configuration kept: dpkg still lists it, as config-files.
    with node.dpkg_status.open('a') as status:
        status.write('\nPackage: containerd\nStatus: deinstall ok config-files\nVersion: 1.6.20~ds1-1+b1\n')
    assert node.run(packages=['docker.io', 'containerd'])['missing_packages'] == ['containerd']


def test_rpm_says_which_packages_are_missing(node):
    node.rpm = {'docker-ce': 'docker-ce-27.3.1-1.el9.x86_64', 'docker-ce-cli': 'docker-ce-cli-27.3.1-1.el9.x86_64'}
    result = node.run(packages=['docker-ce', 'docker-ce-cli', 'containerd.io'])
    assert result['missing_packages'] == ['containerd.io'] and result['started'] == []
    assert node.calls == [['/usr/bin/rpm', '-q', 'docker-ce', 'docker-ce-cli', 'containerd.io']]
    node.rpm['containerd.io'] = 'containerd.io-1.7.22-3.1.el9.x86_64'
    assert node.run(packages=['docker-ce', 'docker-ce-cli', 'containerd.io'])['started'] == [
        'containerd.service', 'docker.service']


def test_a_node_without_dpkg_or_rpm_fails_and_says_why(node):
    result = node.run(packages=['docker'])
    assert result['failed'] is True
    assert result['msg'] == ('Cannot tell which packages are installed: this node has neither %s nor rpm.'
                             % node.dpkg_status)


def test_the_cgroup_driver_is_what_docker_info_says_and_null_where_docker_does_not_answer(node):
    node.boot('containerd.service', 'docker.service')
    # Docker 20.10 and later on the unified cgroup hierarchy (cgroup v2).
    node.docker_info['CgroupDriver'] = 'systemd'
    assert node.run(engines=['docker'])['cgroup_driver'] == 'systemd'
    node.docker_answers = False
    assert node.run(engines=['docker'])['cgroup_driver'] is None
    node.calls.clear()
    assert node.run(engines=['containerd'])['cgroup_driver'] is None
    assert node.verbs() == ['systemctl show']


def test_check_mode_before_docker_starts_has_no_cgroup_driver(node):
    result = node.run(_ansible_check_mode=True)
    assert result['started'] == ['containerd.service', 'docker.service'] and result['cgroup_driver'] is None
    assert 'docker info' not in node.verbs()
