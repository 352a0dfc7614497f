# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _runtimes_probe

FIXTURES = Path(__file__).parents[3] / 'fixtures'


def write(root, path, text):
    target = root / path.lstrip('/')
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_docker_and_containerd_v2_with_the_nvidia_runtime_as_default(fact_roots):
    facts, problems = _runtimes_probe.probe(str(fact_roots / 'p3.16xlarge'))
    assert facts == {
        'docker': {'runtimes': ['nvidia'], 'default_runtime': 'nvidia'},
        'containerd': {
            'config_files': ['/etc/containerd/config.toml'],
            'runtimes': ['nvidia', 'runc'],
            'default_runtime': 'nvidia',
        },
        'cdi_specs': [],
    }
    assert problems == []


def test_containerd_v3_drop_in_overrides_the_main_file_and_cdi_spec_is_found(fact_roots):
    facts, problems = _runtimes_probe.probe(str(fact_roots / 'g5.12xlarge-one-gpu-missing'))
    assert facts['containerd'] == {
        'config_files': ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia.toml'],
        'runtimes': ['nvidia', 'runc'],
        'default_runtime': 'nvidia',
    }
    assert facts['docker'] == {'runtimes': [], 'default_runtime': None}
    assert facts['cdi_specs'] == [{'path': '/var/run/cdi/nvidia.yaml', 'kind': 'nvidia.com/gpu'}]
    assert problems == []


def test_drop_in_that_config_toml_does_not_import_is_a_problem(fact_roots):
    facts, problems = _runtimes_probe.probe(str(fact_roots / 'g4dn.xlarge-nouveau'))
    assert facts['containerd']['runtimes'] == ['runc']
    assert problems == [
        '/etc/containerd/config.toml does not import /etc/containerd/conf.d/99-nvidia.toml, '
        'so containerd ignores it']


def test_broken_daemon_json_is_a_problem_not_a_crash(tmp_path):
    write(tmp_path, '/etc/docker/daemon.json', '{"runtimes": {"nvidia": {}},}\n')
    facts, problems = _runtimes_probe.docker(str(tmp_path))
    assert facts == {'runtimes': [], 'default_runtime': None}
    assert len(problems) == 1 and problems[0].startswith('/etc/docker/daemon.json is not valid JSON')


def test_daemon_json_without_runtimes(tmp_path):
    write(tmp_path, '/etc/docker/daemon.json', '{"log-driver": "journald"}\n')
    assert _runtimes_probe.docker(str(tmp_path)) == ({'runtimes': [], 'default_runtime': None}, [])


def test_commented_out_tables_and_relative_imports(tmp_path):
    write(tmp_path, '/etc/containerd/config.toml', '\n'.join([
        'version = 2',
        "imports = ['extra/*.toml']",
        '# [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]',
        '[plugins."io.containerd.grpc.v1.cri".containerd]',
        '  # default_runtime_name = "kata"',
        '  default_runtime_name = "runc"',
        "[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.'runc']",
        '',
    ]))
    write(tmp_path, '/etc/containerd/extra/10-nvidia.toml',
          '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia-cdi"]\n')
    facts, problems = _runtimes_probe.containerd(str(tmp_path))
    # What `containerd config dump` of Debian 12's containerd 1.6.20 shows for
    # these files: the drop-in's CRI section replaced the main one, runc and
    # default_runtime_name with it (containerd then falls back to runc).
    assert facts == {
        'config_files': ['/etc/containerd/config.toml', '/etc/containerd/extra/10-nvidia.toml'],
        'runtimes': ['nvidia-cdi'],
        'default_runtime': None,
    }
    assert problems == [
        'containerd 1.x keeps the CRI plugin section of the last of /etc/containerd/config.toml, '
        '/etc/containerd/extra/10-nvidia.toml that sets it, so it does not register runc (imports replace whole '
        'plugin sections there; containerd 2.x merges them): put every runtime in one file']


def test_two_runtime_drop_ins_on_containerd_1_keep_only_the_last(tmp_path):
    write(tmp_path, '/etc/containerd/config.toml', 'imports = ["/etc/containerd/conf.d/*.toml"]\n'
          + (FIXTURES / 'toml' / 'containerd-1.6.20-debian12.toml').read_text())
    for name in ('nvidia', 'oci-neuron'):
        write(tmp_path, '/etc/containerd/conf.d/99-%s.toml' % name,
              'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s]\n' % name)
    facts, problems = _runtimes_probe.containerd(str(tmp_path))
    assert facts['runtimes'] == ['oci-neuron']
    assert len(problems) == 1 and 'does not register nvidia' in problems[0]


def test_version_3_drop_ins_merge(tmp_path):
    write(tmp_path, '/etc/containerd/config.toml', (FIXTURES / 'toml' / 'containerd-2.0-default.toml').read_text()
          .replace('imports = []', 'imports = ["/etc/containerd/conf.d/*.toml"]'))
    for name in ('nvidia', 'oci-neuron'):
        write(tmp_path, '/etc/containerd/conf.d/99-%s.toml' % name,
              "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%s]\n" % name)
    assert _runtimes_probe.containerd(str(tmp_path))[0]['runtimes'] == ['nvidia', 'oci-neuron', 'runc']


def test_real_default_configs_of_containerd_1_7_and_2_0(tmp_path):
    for name in ('containerd-1.7.18-default.toml', 'containerd-2.0-default.toml', 'containerd-2.3-default.toml'):
        write(tmp_path, '/etc/containerd/config.toml', (FIXTURES / 'toml' / name).read_text())
        assert _runtimes_probe.containerd(str(tmp_path)) == ({
            'config_files': ['/etc/containerd/config.toml'],
            'runtimes': ['runc'],
            'default_runtime': 'runc',
        }, []), name


def test_broken_containerd_config_is_a_problem_not_a_crash(tmp_path):
    write(tmp_path, '/etc/containerd/config.toml', 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    write(tmp_path, '/etc/containerd/conf.d/99-nvidia.toml', '[plugins."io.containerd.grpc.v1.cri"\n')
    facts, problems = _runtimes_probe.containerd(str(tmp_path))
    assert facts['config_files'] == ['/etc/containerd/config.toml', '/etc/containerd/conf.d/99-nvidia.toml']
    assert facts['runtimes'] == []
    assert len(problems) == 1
    assert problems[0].startswith('/etc/containerd/conf.d/99-nvidia.toml is not valid TOML')


def test_cdi_specs_in_both_directories_yaml_and_json(tmp_path):
    write(tmp_path, '/etc/cdi/nvidia.yaml', 'cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: []\n')
    write(tmp_path, '/etc/cdi/README', 'not a spec\n')
    write(tmp_path, '/var/run/cdi/neuron.json', '{"cdiVersion": "0.6.0", "kind": "aws.amazon.com/neuron"}\n')
    write(tmp_path, '/var/run/cdi/broken.yaml', 'devices: []\n')
    assert _runtimes_probe.cdi_specs(str(tmp_path)) == [
        {'path': '/etc/cdi/nvidia.yaml', 'kind': 'nvidia.com/gpu'},
        {'path': '/var/run/cdi/broken.yaml', 'kind': None},
        {'path': '/var/run/cdi/neuron.json', 'kind': 'aws.amazon.com/neuron'},
    ]


def test_nothing_installed(tmp_path):
    assert _runtimes_probe.probe(str(tmp_path)) == ({
        'docker': {'runtimes': [], 'default_runtime': None},
        'containerd': {'config_files': [], 'runtimes': [], 'default_runtime': None},
        'cdi_specs': [],
    }, [])
