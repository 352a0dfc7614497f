# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""nvidia_container_toolkit_runtime_plan: the kubernetes profile, and where the runtime goes, fed by the role's
defaults and the vendors' templates (tests/fixtures/containerd-owners)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.toolkit_runtime import nvidia_container_toolkit_runtime_plan as plan
from ansible_collections.accel.nodes.plugins.module_utils._toml import loads

ROLE = Path(__file__).parents[4] / 'roles' / 'nvidia_container_toolkit'
DEFAULTS = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'containerd-owners'
K3S = '/var/lib/rancher/k3s/agent/etc/containerd'
MANIFEST = '/etc/accel-nodes/runtimeclass-nvidia.yaml'


def settings(**changes):
    base = {'profile': DEFAULTS['nvidia_container_toolkit_profile'], 'engines': ['containerd'],
            'owner': DEFAULTS['nvidia_container_toolkit_containerd_owner'],
            'drop_in': DEFAULTS['nvidia_container_toolkit_containerd_config_path'],
            'containerd_options': DEFAULTS['nvidia_container_toolkit_containerd_options'],
            'cdi': DEFAULTS['nvidia_container_toolkit_cdi'], 'runtime_name': 'nvidia',
            'runtime_path': DEFAULTS['nvidia_container_toolkit_runtime_path'],
            'volume_mounts': DEFAULTS['nvidia_container_toolkit_accept_visible_devices_as_volume_mounts'],
            'envvar_unprivileged': DEFAULTS['nvidia_container_toolkit_accept_visible_devices_envvar_when_unprivileged'],
            'runtimeclass_path': DEFAULTS['nvidia_container_toolkit_runtimeclass_path']}
    base.update(changes)
    return base


def probe(files=None, containerd='containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da',
          services='inactive\ninactive\ninactive\ninactive'):
    paths = {}
    for path, text in (files or {}).items():
        paths[path] = {'path': path, 'exists': True, 'type': 'directory' if text is None else 'file', 'text': text,
                       'mode': '0644', 'uid': 0, 'gid': 0}
    return {'paths': paths, 'commands': {'containerd_version': {'rc': 0, 'stdout': containerd, 'stderr': ''},
                                         'kubernetes_services': {'rc': 3, 'stdout': services, 'stderr': ''}}}


def test_the_default_profile_is_todays_role():
    got = plan(settings(), probe({'/etc/containerd/config.toml': 'version = 2\n'}))
    assert got['profile'] == 'default' and got['owner'] == 'containerd'
    assert got['containerd'] == {'config': '/etc/containerd/config.toml', 'drop_in': '/etc/containerd/conf.d/99-accel-nodes.toml',
                                 'version': 2, 'service': 'containerd', 'options': {}, 'cdi': None,
                                 'restart_topic': 'accel_nodes_restart_containerd'}
    # The toolkit's own defaults (v1.20.0 api/config/v1/toml.go:255-256).
    assert got['toolkit'] == {'accept-nvidia-visible-devices-as-volume-mounts': False,
                              'accept-nvidia-visible-devices-envvar-when-unprivileged': True}
    assert got['runtimeclass'] == [{'path': MANIFEST, 'state': 'absent', 'owner': 'root', 'group': 'root',
                                    'mode': '0644', 'marker': '# Written by accel.nodes.nvidia_container_toolkit'}]
    assert got['errors'] == [] and got['notes'] == []


def test_the_kubernetes_profile_on_plain_containerd():
    got = plan(settings(profile='kubernetes'), probe({'/etc/containerd/config.toml': 'version = 2\n'}))
    assert got['containerd']['options'] == {'SystemdCgroup': True}
    assert got['containerd']['cdi'] is True
    assert got['toolkit'] == {'accept-nvidia-visible-devices-as-volume-mounts': True,
                              'accept-nvidia-visible-devices-envvar-when-unprivileged': False}
    [manifest] = got['runtimeclass']
    assert manifest['state'] == 'present' and manifest['path'] == MANIFEST
    assert manifest['content'].startswith(manifest['marker'])
    # The shape of k8s-device-plugin v0.20.0 README.md:107-113.
    assert yaml.safe_load(manifest['content']) == {'apiVersion': 'node.k8s.io/v1', 'kind': 'RuntimeClass',
                                                   'metadata': {'name': 'nvidia'}, 'handler': 'nvidia'}
    assert got['errors'] == []


def test_the_users_own_settings_win_over_the_profile():
    got = plan(settings(profile='kubernetes', containerd_options={'SystemdCgroup': False}, volume_mounts=False,
                        envvar_unprivileged=True), probe())
    assert got['containerd']['options'] == {'SystemdCgroup': False}
    assert got['toolkit'] == {'accept-nvidia-visible-devices-as-volume-mounts': False,
                              'accept-nvidia-visible-devices-envvar-when-unprivileged': True}


@pytest.mark.parametrize('files, expected', [
    ({'/var/lib/kubelet/config.yaml': 'cgroupDriver: cgroupfs\n',
      '/etc/containerd/config.toml': (FIXTURES / 'k3s' / 'config.toml').read_text()}, False),  # kubelet first
    ({'/etc/containerd/config.toml': (FIXTURES / 'k3s' / 'config-v3-imports.synthetic.toml').read_text()}, False),
    ({'/etc/containerd/config.toml': 'version = 2\n'}, True),  # kubeadm's default
])
def test_systemd_cgroup_follows_kubelet_then_runc(files, expected):
    assert plan(settings(profile='kubernetes'), probe(files))['containerd']['options'] == {'SystemdCgroup': expected}


def test_no_enable_cdi_on_containerd_before_1_7():
    got = plan(settings(profile='kubernetes'), probe(containerd='containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1'))
    assert got['containerd']['cdi'] is None
    assert 'containerd 1.6 has no CDI in its CRI plugin' in got['notes'][0]


def test_k3s_with_imports_gets_the_drop_in_and_the_k3s_restart():
    text = (FIXTURES / 'k3s' / 'config-v3-imports.synthetic.toml').read_text()
    files = {K3S: None, K3S + '/config.toml': text}
    got = plan(settings(profile='kubernetes'), probe(files, services='active\ninactive\ninactive\ninactive'))
    assert got['owner'] == 'k3s' and got['errors'] == []
    assert got['containerd']['drop_in'] == K3S + '/config-v3.toml.d/99-accel-nodes.toml'
    assert got['containerd']['config'] == K3S + '/config.toml'
    assert got['containerd']['service'] == 'k3s'
    assert got['containerd']['restart_topic'] == 'nvidia_container_toolkit_restart_containerd_owner'
    assert got['containerd']['options'] == {'SystemdCgroup': False}  # k3s's runc entry says cgroupfs


@pytest.mark.parametrize('profile', ['default', 'kubernetes'])
def test_k3s_without_imports_is_refused_in_any_profile(profile):
    text = (FIXTURES / 'k3s' / 'config.toml').read_text()
    got = plan(settings(profile=profile), probe({K3S: None, K3S + '/config.toml': text}))
    [error] = got['errors']
    assert 'create %s/config.toml.tmpl' % K3S in error


def test_eks_is_refused_unless_containerd_is_left_to_nodeadm():
    files = {'/usr/bin/nodeadm': '', '/etc/containerd/config.toml': 'version = 3\n'}
    [error] = plan(settings(profile='kubernetes'), probe(files))['errors']
    assert "plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]" in error
    toml = '\n'.join(line[6:] for line in error[error.index('apiVersion'):].splitlines()[5:])
    assert loads(toml)['plugins']['io.containerd.cri.v1.runtime']['enable_cdi'] is True
    got = plan(settings(profile='kubernetes', engines=[]), probe(files))
    assert got['errors'] == [] and 'left to nodeadm' in got['notes'][0]
    assert got['runtimeclass'][0]['state'] == 'present'


def test_the_owner_can_be_named():
    files = {'/usr/bin/nodeadm': ''}
    assert plan(settings(owner='containerd'), probe(files))['errors'] == []
    with pytest.raises(AnsibleFilterError, match='owner is auto or containerd, eks, k3s, rke2'):
        plan(settings(owner='docker'), probe(files))


def test_bad_inputs():
    with pytest.raises(AnsibleFilterError, match='profile is default or kubernetes'):
        plan(settings(profile='k8s'), probe())
    with pytest.raises(AnsibleFilterError):
        plan([], probe())
