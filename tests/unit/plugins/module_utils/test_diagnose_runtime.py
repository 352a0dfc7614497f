"""The runtime findings of accel.nodes.diagnose (issue 28): daemon.json against the running Docker, the runtime
binaries, containerd's merged config, and the /dev/char links under the systemd cgroup driver. The inputs are
real captures; tests/fixtures/diagnose/runtime/README.md names each source, and each test says what it changed."""

import os
import sys
import copy
import json
from pathlib import Path

from ansible_collections.accel.nodes.plugins.filter import diagnose
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose_runtime as runtime

sys.path.insert(0, os.path.dirname(__file__))
from diagnose_shape import check_shape, ids  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
HERE = FIXTURES / 'diagnose' / 'runtime'
INFO_TEXT = (HERE / 'docker-20.10-info.json').read_text()
INFO = json.loads(INFO_TEXT)
INFO_SYSTEMD = (HERE / 'docker-20.10-info-systemd.json').read_text()
DAEMON_JSON = (HERE / 'daemon.json').read_text()
NODE = (HERE / 'runtime-node.txt').read_text()
NODES_STAT = (HERE / 'nvidia-nodes-stat.txt').read_text()
DEV_CHAR = dict(line.split(' -> ') for line in (HERE / 'dev-char.txt').read_text().splitlines())
DUMP_TEXT = (HERE / 'containerd-config-dump.toml').read_text()
DUMP_IMPORTED = (HERE / 'containerd-config-dump-nvidia-imported.toml').read_text()
DEFAULT_1_7 = (FIXTURES / 'toml' / 'containerd-1.7.18-default.toml').read_text()
DROP_IN_V2 = (FIXTURES / 'containerd' / 'nvidia-ctk-1.20.0' / 'v2' / '99-nvidia.toml').read_text()
DROP_IN_V3 = (FIXTURES / 'containerd' / 'nvidia-ctk-1.20.0' / 'v3' / '99-nvidia.toml').read_text()
H100_LINKS = dict(line.split(' -> ') for line in
                  (FIXTURES / 'dev_char' / 'h100-dev-char-nvidia-links.txt').read_text().splitlines())


def ok(stdout, rc=0):
    return {'rc': rc, 'stdout': stdout, 'stderr': ''}


def probe(info=INFO_TEXT, daemon_json=DAEMON_JSON, node=NODE, stat=NODES_STAT, dev_char='captured', dump=None,
          drop_ins=None):
    paths = {runtime.DAEMON_JSON: {'exists': daemon_json is not None, 'text': daemon_json}}
    for path in runtime.CONTAINERD_DROP_INS:
        text = (drop_ins or {}).get(path)
        paths[path] = {'exists': text is not None, 'text': text}
    return {
        'paths': paths,
        'directories': {runtime.DEV_CHAR: DEV_CHAR if dev_char == 'captured' else dev_char},
        'commands': {
            'runtime_docker_info': info if isinstance(info, dict) else ok(info),
            'runtime_containerd_dump': dump if dump is not None else ok(DUMP_TEXT),
            'runtime_node': ok(node),
            'runtime_nvidia_nodes': ok(stat),
        },
    }


def info_with(**changes):
    """The real capture with keys changed (each test says which)."""
    info = copy.deepcopy(INFO)
    info.update(changes)
    return json.dumps(info)


# --- the converged node as captured --------------------------------------------------------------------------------

def test_the_converged_node_as_captured_has_no_runtime_finding():
    assert runtime.findings(probe(dev_char=None), {}) == []


def test_the_probe_commands_are_bounded_and_prefixed():
    for name, argv in runtime.PROBE['commands'].items():
        assert name.startswith('runtime_')
        assert argv[0] in ('timeout', '/bin/sh')
    merged = diagnose.diagnose_probe({})
    assert runtime.DEV_CHAR in merged['directories'] and runtime.DAEMON_JSON in merged['paths']


def test_no_docker_and_no_containerd_is_no_finding():
    """docker and containerd not installed: node_probe answers 127; the script finds no daemon.json."""
    missing = {'rc': 127, 'stdout': '', 'stderr': 'command not found'}
    assert runtime.findings(probe(info=missing, dump=missing, daemon_json=None, node='', dev_char={}), {}) == []


def test_docker_down_is_not_a_runtime_finding():
    """The docker CLI's answer when the daemon is not running: the engine reads daemon.json when it starts."""
    down = {'rc': 1, 'stdout': '', 'stderr': 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. '
                                             'Is the docker daemon running?'}
    assert runtime.findings(probe(info=down), {}) == []


# --- runtime.docker.not_loaded, runtime.docker.default_mismatch ------------------------------------------------------

def test_a_runtime_in_daemon_json_that_docker_has_not_loaded():
    """The capture's Runtimes without nvidia: Docker as it runs before the role's restart."""
    info = info_with(Runtimes=dict((k, v) for k, v in INFO['Runtimes'].items() if k != 'nvidia'))
    found = runtime.findings(probe(info=info), {})
    check_shape(found)
    assert ids(found) == ['runtime.docker.not_loaded'] and found[0]['severity'] == 'broken'
    assert found[0]['evidence'][0].startswith('/etc/docker/daemon.json: runtimes.nvidia (path /usr/bin/nvidia-')
    assert 'systemctl reload docker' in found[0]['fix'] and 'nvidia_container_toolkit' in found[0]['fix']


def test_a_default_runtime_docker_has_not_taken():
    data = json.loads(DAEMON_JSON)
    data['default-runtime'] = 'nvidia'
    found = runtime.findings(probe(daemon_json=json.dumps(data)), {})
    check_shape(found)
    assert ids(found) == ['runtime.docker.default_mismatch']
    assert found[0]['evidence'] == ['/etc/docker/daemon.json: default-runtime nvidia',
                                    'docker info DefaultRuntime: %s' % INFO['DefaultRuntime']]
    assert 'systemctl restart docker' in found[0]['fix']


def test_a_default_runtime_removed_from_daemon_json_is_runc():
    info = info_with(DefaultRuntime='nvidia')
    found = runtime.findings(probe(info=info), {})
    assert ids(found) == ['runtime.docker.default_mismatch']
    assert "sets no default-runtime, so Docker's is runc" in found[0]['evidence'][0]


def test_dockerd_flags_beat_daemon_json():
    """The capture's dockerd line with --default-runtime, then with --config-file."""
    info = info_with(DefaultRuntime='nvidia')
    flagged = NODE.replace('/usr/sbin/dockerd -H', '/usr/sbin/dockerd --default-runtime=nvidia -H')
    assert runtime.dockerd_flags(['dockerd', '--default-runtime', 'nvidia', '--config-file=/srv/d.json']) == {
        'config_file': '/srv/d.json', 'default_runtime': 'nvidia', 'runtimes': []}
    assert runtime.findings(probe(info=info, node=flagged), {}) == []
    other = NODE.replace('/usr/sbin/dockerd -H', '/usr/sbin/dockerd --config-file /srv/docker.json -H')
    assert runtime.findings(probe(info=info, node=other), {}) == []


def test_an_invalid_daemon_json_is_left_to_the_role():
    assert runtime.findings(probe(daemon_json='{"runtimes": ', dev_char=None), {}) == []


def test_a_daemon_json_node_probe_did_not_read_is_not_taken_for_an_empty_one():
    """Over node_probe's 64 KiB: exists, no text; the running default nvidia is then not judged."""
    unread = probe(info=info_with(DefaultRuntime='nvidia'), dev_char=None)
    unread['paths'][runtime.DAEMON_JSON] = {'exists': True, 'text': None}
    assert runtime.findings(unread, {}) == []


# --- runtime.binary_missing ----------------------------------------------------------------------------------------

def test_a_registered_runtime_whose_binary_is_gone():
    """The script's line for the nvidia runtime as it reads when /usr/bin/nvidia-container-runtime is removed."""
    node = '\n'.join(line if not line.startswith('binary\t/usr/bin/nvidia-container-runtime')
                     else 'binary\t/usr/bin/nvidia-container-runtime\t' for line in NODE.splitlines())
    found = runtime.findings(probe(node=node), {})
    check_shape(found)
    assert ids(found) == ['runtime.binary_missing'] and found[0]['severity'] == 'broken'
    assert found[0]['evidence'] == [
        '/etc/docker/daemon.json runtimes.nvidia, docker info Runtimes.nvidia names /usr/bin/nvidia-container-runtime, '
        'which is not an executable file on the node (nor on PATH)']
    assert 'apt-get install --reinstall nvidia-container-toolkit-base' in found[0]['fix']


def test_a_containerd_binary_name_is_checked_too():
    """containerd's real dump with the nvidia handler, and the binary gone."""
    node = 'binary\t/usr/bin/nvidia-container-runtime\t\n'
    found = runtime.binary_findings(None, None, ok(DUMP_IMPORTED), runtime.node_lines(node)['binaries'])
    assert ids(found) == ['runtime.binary_missing']
    assert found[0]['evidence'][0].startswith('containerd config dump runtimes.nvidia BinaryName names /usr/bin/')


def test_a_path_the_script_did_not_resolve_is_not_judged():
    assert runtime.binary_findings(DAEMON_JSON, INFO, {}, {}) == []


# --- runtime.containerd.handler_missing ------------------------------------------------------------------------------

def test_a_drop_in_that_config_toml_does_not_import():
    """nvidia-ctk 1.20.0's real v2 drop-in in /etc/containerd/conf.d, and containerd 1.6.20's real dump of Debian's
    config.toml, which has no imports line."""
    drop_ins = {'/etc/containerd/conf.d/99-nvidia.toml': DROP_IN_V2}
    found = runtime.findings(probe(dump=ok(DUMP_TEXT), drop_ins=drop_ins, dev_char=None), {})
    check_shape(found)
    assert ids(found) == ['runtime.containerd.handler_missing'] and found[0]['severity'] == 'broken'
    assert found[0]['evidence'] == [
        '/etc/containerd/conf.d/99-nvidia.toml defines runtimes.nvidia; containerd config dump has no such handler',
        'containerd config dump handlers: runc']
    assert 'imports' in found[0]['fix'] and 'nvidia_container_toolkit_engines' in found[0]['fix']


def test_a_drop_in_that_is_imported_is_fine():
    """The same node with config.toml's imports line: containerd 1.6.20's real dump holds the handler (and, as
    containerd 1.x merges imports, the drop-in's CRI section replaced the main one, runc's table with it)."""
    drop_ins = {'/etc/containerd/conf.d/99-nvidia.toml': DROP_IN_V2}
    assert sorted(runtime.containerd_runtimes(runtime._toml.loads(DUMP_IMPORTED))) == ['nvidia']  # pylint: disable=protected-access
    assert runtime.findings(probe(dump=ok(DUMP_IMPORTED), drop_ins=drop_ins, dev_char=None), {}) == []


def test_the_v3_drop_in_is_read_under_its_plugin():
    assert list(runtime.containerd_runtimes(runtime._toml.loads(DROP_IN_V3))) == ['nvidia']  # pylint: disable=protected-access


def test_containerd_not_installed_or_cri_disabled_is_no_finding():
    drop_ins = {'/etc/containerd/conf.d/99-nvidia.toml': DROP_IN_V2}
    assert runtime.containerd_findings({'rc': 127, 'stdout': ''}, drop_ins) == []
    assert runtime.containerd_findings(ok('disabled_plugins = ["io.containerd.grpc.v1.cri"]\nversion = 2\n'),
                                       drop_ins) == []


# --- nvidia.dev_char.missing -----------------------------------------------------------------------------------------

def test_the_nodes_stat_reads_majors_in_hex():
    assert runtime.nvidia_nodes('/dev/nvidia0 c3 0\n/dev/nvidiactl c3 ff\n/dev/nvidia-nvswitchctl c3 fe\n'
                                '/dev/nvidia-caps/nvidia-cap1 f1 1\n') == {
        '/dev/nvidia0': '195:0', '/dev/nvidiactl': '195:255', '/dev/nvidia-caps/nvidia-cap1': '241:1'}


def test_links_missing_under_the_systemd_driver():
    """Docker of the capture switched to the systemd driver (its own docker info), /dev/char without links."""
    found = runtime.findings(probe(info=INFO_SYSTEMD, dev_char=None), {})
    check_shape(found)
    assert ids(found) == ['nvidia.dev_char.missing'] and found[0]['severity'] == 'will_break'
    assert found[0]['evidence'][0] == 'docker info CgroupDriver: systemd'
    assert '/dev/nvidiactl (195:255) has no link /dev/char/195:255' in found[0]['evidence']
    assert len(found[0]['evidence']) == 6
    assert 'nvidia_container_toolkit_dev_char_symlinks' in found[0]['fix']
    one_gone = dict((k, v) for k, v in DEV_CHAR.items() if k != '195:2')
    found = runtime.findings(probe(info=INFO_SYSTEMD, dev_char=one_gone), {})
    assert found[0]['evidence'] == ['docker info CgroupDriver: systemd', '/dev/nvidia2 (195:2) has no link /dev/char/195:2']


def test_the_links_nvidia_ctk_made_under_the_systemd_driver_are_in_place():
    assert runtime.findings(probe(info=INFO_SYSTEMD), {}) == []


def test_links_missing_under_cgroupfs_are_no_risk():
    """The converged node as captured: cgroupfs, and no /dev/char at all."""
    assert runtime.findings(probe(dev_char=None), {}) == []


def test_the_h100_links_udev_and_nvidia_ctk_made_are_in_place():
    """The real H100's /dev/char: relative links from udev, absolute ones from nvidia-ctk."""
    nodes = {'/dev/nvidia0': '195:0', '/dev/nvidiactl': '195:255', '/dev/nvidia-uvm': '238:0',
             '/dev/nvidia-uvm-tools': '238:1', '/dev/nvidia-modeset': '195:254',
             '/dev/nvidia-caps/nvidia-cap1': '241:1', '/dev/nvidia-caps/nvidia-cap2': '241:2'}
    assert runtime.dev_char_findings(nodes, H100_LINKS, ['docker info CgroupDriver: systemd']) == []
    gone = dict((k, v) for k, v in H100_LINKS.items() if k != '238:0')
    found = runtime.dev_char_findings(nodes, gone, ['docker info CgroupDriver: systemd'])
    assert found[0]['evidence'][1:] == ['/dev/nvidia-uvm (238:0) has no link /dev/char/238:0']


def test_a_link_to_another_node_is_named():
    nodes = {'/dev/nvidia0': '195:0'}
    found = runtime.dev_char_findings(nodes, {'195:0': '../nvidia1'}, ['docker info CgroupDriver: systemd'])
    assert found[0]['evidence'][1:] == ['/dev/char/195:0 points at ../nvidia1, not /dev/nvidia0']


def test_containerd_with_systemd_cgroup_counts():
    dump = ok(DEFAULT_1_7.replace('SystemdCgroup = false', 'SystemdCgroup = true'))
    assert runtime.systemd_engines(None, dump) == ['containerd config dump: SystemdCgroup = true for runtimes runc']
    assert runtime.systemd_engines(None, ok(DEFAULT_1_7)) == []
