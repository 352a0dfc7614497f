# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Who owns containerd's config, decided from the vendors' own templates (tests/fixtures/containerd-owners)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _containerd_owner as owners
from ansible_collections.accel.nodes.plugins.module_utils._toml import loads

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'containerd-owners'
K3S = '/var/lib/rancher/k3s/agent/etc/containerd'
RKE2 = '/var/lib/rancher/rke2/agent/etc/containerd'
DROP_IN = '/etc/containerd/conf.d/99-accel-nodes.toml'


def fixture(name):
    return (FIXTURES / name).read_text()


def render_nodeadm(template, soci=False):
    """nodeadm's templates as nodeadm renders them (config.go): fields, and the SOCI blocks."""
    text = re.sub(r'\{\{-? ?if \.UseSOCISnapshotter\}\}(.*?)\{\{-? ?end\}\}',
                  lambda m: m.group(1) if soci else '', template, flags=re.S)
    pause = '602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.10'
    for field, value in (('RuntimeName', 'nvidia'), ('SandboxImage', pause), ('EnableCDI', 'true'),
                         ('RuntimeBinaryName', '/usr/bin/nvidia-container-runtime')):
        text = text.replace('{{.%s}}' % field, value)
    assert '{{' not in text
    return text


def described(**files):
    """node_probe's paths for files {path: text}; a text of None is a directory."""
    paths = {p: {'path': p, 'exists': False, 'type': None, 'text': None} for p in owners.probe_paths()}
    for path, text in files.items():
        paths[path] = {'path': path, 'exists': True, 'type': 'directory' if text is None else 'file', 'text': text,
                       'mode': '0644', 'uid': 0, 'gid': 0}
    return paths


NODEADM_V2 = render_nodeadm(fixture('eks/config.template.toml'))
NODEADM_V3 = render_nodeadm(fixture('eks/config2.template.toml'), soci=True)


def test_the_vendor_templates_import_nothing():
    # Why a drop-in is dead on EKS and on k3s before k3s-io/k3s#13680.
    for text in (NODEADM_V2, NODEADM_V3):
        assert 'imports' not in loads(text)
    assert not re.search(r'^imports\s*=', fixture('k3s/base-v2.go.tmpl'), re.M)
    assert 'imports' not in loads(fixture('k3s/config.toml'))


def test_the_k3s_render_holds_only_tables_of_the_base_template():
    template = fixture('k3s/base-v2.go.tmpl')
    for header in re.findall(r'^\[.*\]$', fixture('k3s/config.toml'), re.M):
        assert header.replace('"nvidia-experimental"', '"{{$k}}"').replace('"nvidia"', '"{{$k}}"') in template


@pytest.mark.parametrize('files, expected', [
    ({}, 'containerd'),
    ({'/etc/containerd/config.toml': 'version = 2\n'}, 'containerd'),
    ({'/usr/bin/nodeadm': '', '/etc/containerd/config.toml': NODEADM_V3}, 'eks'),
    ({'/etc/eks': None}, 'eks'),
    ({K3S: None, K3S + '/config.toml': fixture('k3s/config.toml')}, 'k3s'),
    ({RKE2: None}, 'rke2'),
    # nodeadm rewrites /etc/containerd at boot, whatever else the node has.
    ({'/usr/bin/nodeadm': '', K3S: None}, 'eks'),
])
def test_owner(files, expected):
    assert owners.owner(described(**files)) == expected


def test_plain_containerd_keeps_the_drop_in_of_today():
    where = owners.target(described(**{'/etc/containerd/config.toml': 'version = 3\n'}), 'containerd', DROP_IN)
    assert where == {'owner': 'containerd', 'config': '/etc/containerd/config.toml', 'drop_in': DROP_IN,
                     'version': 3, 'service': 'containerd', 'error': ''}


@pytest.mark.parametrize('config', [NODEADM_V2, NODEADM_V3])
def test_eks_is_refused_with_the_nodeconfig_to_use(config):
    runtime = {'name': 'nvidia', 'path': '/usr/bin/nvidia-container-runtime', 'options': {'SystemdCgroup': True},
               'cdi': True}
    where = owners.target(described(**{'/usr/bin/nodeadm': '', '/etc/containerd/config.toml': config}), 'eks',
                          DROP_IN, runtime=runtime)
    version = loads(config)['version']
    assert where['service'] is None and where['version'] == version
    assert 'nodeadm renders /etc/containerd/config.toml' in where['error']
    assert 'This is an EKS node (/usr/bin/nodeadm)' in where['error']
    snippet = where['error'][where['error'].index('apiVersion: node.eks.aws/v1alpha1'):]
    assert 'kind: NodeConfig\nspec:\n  containerd:\n    config: |\n' in snippet
    assert '{{' not in where['error'] and '{%' not in where['error']
    toml = '\n'.join(line[6:] for line in snippet.splitlines()[5:])
    plugin = 'io.containerd.grpc.v1.cri' if version == 2 else 'io.containerd.cri.v1.runtime'
    # The snippet is TOML of the template's own version, which nodeadm merges over the template.
    assert loads(toml) == {'plugins': {plugin: {'enable_cdi': True, 'containerd': {'runtimes': {'nvidia': {
        'runtime_type': 'io.containerd.runc.v2',
        'options': {'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}}}}}}}


def test_k3s_before_13680_is_refused_with_the_template_to_write():
    where = owners.target(described(**{K3S: None, K3S + '/config.toml': fixture('k3s/config.toml')}), 'k3s',
                          DROP_IN, 'active\ninactive\ninactive\ninactive\n')
    assert where['config'] == K3S + '/config.toml' and where['version'] == 2 and where['service'] == 'k3s'
    assert 'this release\'s template has no imports' in where['error']
    assert 'create %s/config.toml.tmpl' % K3S in where['error']
    assert 'imports = ["%s/config.toml.d/*.toml"]' % K3S in where['error']
    assert 'template "base" . in double braces' in where['error']
    # Ansible 2.18 templates a fact's text again: a message must hold no Jinja.
    assert '{{' not in where['error'] and '{%' not in where['error']


@pytest.mark.parametrize('name, directory, fixture_name, services, service, drop_in', [
    ('k3s', K3S, 'k3s/config-imports.synthetic.toml', 'inactive\nactive\ninactive\ninactive', 'k3s-agent',
     K3S + '/config.toml.d/99-accel-nodes.toml'),
    ('k3s', K3S, 'k3s/config-v3-imports.synthetic.toml', 'active\ninactive\ninactive\ninactive', 'k3s',
     K3S + '/config-v3.toml.d/99-accel-nodes.toml'),
    ('rke2', RKE2, 'k3s/config-v3-imports.synthetic.toml', 'inactive\ninactive\ninactive\nactive', 'rke2-agent',
     RKE2 + '/config-v3.toml.d/99-accel-nodes.toml'),
    ('rke2', RKE2, 'k3s/config-v3-imports.synthetic.toml', 'inactive\ninactive\nactive\ninactive', 'rke2-server',
     RKE2 + '/config-v3.toml.d/99-accel-nodes.toml'),
    # Not running: nothing to restart; it reads the drop-in when it starts.
    ('k3s', K3S, 'k3s/config-v3-imports.synthetic.toml', 'inactive\ninactive\ninactive\ninactive', None,
     K3S + '/config-v3.toml.d/99-accel-nodes.toml'),
])
def test_rancher_with_imports_takes_the_drop_in_where_it_reads(name, directory, fixture_name, services, service,
                                                               drop_in):
    text = fixture(fixture_name).replace('/var/lib/rancher/k3s/', '/var/lib/rancher/%s/' % name)
    where = owners.target(described(**{directory: None, directory + '/config.toml': text}), name, DROP_IN, services)
    assert where['error'] == ''
    assert where['drop_in'] == drop_in and where['service'] == service
    assert where['config'] == directory + '/config.toml'


def test_an_import_of_another_directory_is_used_too():
    text = 'version = 3\nimports = ["/etc/k3s-extra/*.toml"]\n'
    where = owners.target(described(**{K3S: None, K3S + '/config.toml': text}), 'k3s', DROP_IN)
    assert where['drop_in'] == '/etc/k3s-extra/99-accel-nodes.toml' and where['error'] == ''


@pytest.mark.parametrize('text, said', [(None, 'is missing'), ('version = [', 'is not valid TOML')])
def test_rancher_without_a_rendered_config_is_refused(text, said):
    files = {K3S: None}
    if text is not None:
        files[K3S + '/config.toml'] = text
    where = owners.target(described(**files), 'k3s', DROP_IN)
    assert said in where['error'] and 'Start k3s or k3s-agent once' in where['error']


@pytest.mark.parametrize('text, expected', [
    ('apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n', True),
    ('cgroupDriver: "cgroupfs"\n', False),
    ('kind: KubeletConfiguration\n', None),
    (None, None),
])
def test_kubelet_cgroup_driver(text, expected):
    assert owners.kubelet_systemd_cgroup(text) is expected


def test_runc_systemd_cgroup_of_the_rendered_configs():
    assert owners.runc_systemd_cgroup(loads(fixture('k3s/config.toml'))) is True
    assert owners.runc_systemd_cgroup(loads(fixture('k3s/config-v3-imports.synthetic.toml'))) is False
    assert owners.runc_systemd_cgroup(loads(NODEADM_V3)) is None  # nodeadm names its runtime nvidia, not runc
    assert owners.runc_systemd_cgroup(None) is None


# The Neuron role registers oci-neuron only in /etc/containerd: everywhere else it refuses, before any change
# (plugins/filter/neuron.py neuron_containerd_owner over owners.refusal).
NEURON = ('oci-neuron', '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh')


def neuron_owner(paths, owner='auto'):
    from ansible_collections.accel.nodes.plugins.filter.neuron import neuron_containerd_owner
    return neuron_containerd_owner({'paths': paths}, owner, *NEURON)


def test_neuron_registers_where_containerd_owns_its_config():
    assert neuron_owner(described(**{'/etc/containerd/config.toml': fixture('../toml/containerd-1.6.20-debian12.toml')})) \
        == {'owner': 'containerd', 'error': ''}
    assert neuron_owner(described()) == {'owner': 'containerd', 'error': ''}


@pytest.mark.parametrize('config, version', [(NODEADM_V2, 2), (NODEADM_V3, 3)])
def test_neuron_on_eks_is_refused_with_a_nodeconfig_that_nodeadm_merges(config, version):
    said = neuron_owner(described(**{'/usr/bin/nodeadm': '', '/etc/containerd/config.toml': config}))
    assert said['owner'] == 'eks'
    assert 'Nothing was changed' in said['error'] and 'neuron_container_runtime_engines' in said['error']
    snippet = said['error'][said['error'].index('apiVersion: node.eks.aws/v1alpha1'):]
    merged = loads('\n'.join(line[6:] for line in snippet.splitlines()[5:]))
    plugin = owners.rc.CRI_RUNTIME_PLUGIN[version]
    runtime = merged['plugins'][plugin]['containerd']['runtimes']['oci-neuron']
    assert runtime == {'runtime_type': 'io.containerd.runc.v2', 'options': {'BinaryName': NEURON[1]}}


def test_neuron_on_k3s_is_refused_with_the_entry_and_where_it_is_read():
    with_imports = neuron_owner(described(**{K3S: None, K3S + '/config.toml': fixture('k3s/config-v3-imports.synthetic.toml')}))
    assert with_imports['owner'] == 'k3s'
    assert 'a file in %s/config-v3.toml.d, which' % K3S in with_imports['error']
    entry = with_imports['error'].split('with the entry\n', 1)[1].split('\nthen restart', 1)[0]
    assert loads(entry)['plugins']['io.containerd.cri.v1.runtime']['containerd']['runtimes']['oci-neuron'][
        'options'] == {'BinaryName': NEURON[1]}
    without = neuron_owner(described(**{K3S: None, K3S + '/config.toml': fixture('k3s/config.toml')}))
    assert '%s/config.toml.tmpl, which k3s renders from' % K3S in without['error']
    assert 'restart k3s or k3s-agent' in without['error']


def test_neuron_owner_can_be_named_and_must_be_known():
    assert neuron_owner(described(**{'/etc/eks': None}), 'containerd') == {'owner': 'containerd', 'error': ''}
    # No rendered config to read: which template applies is unknown, so the role says to start rke2 once.
    said = neuron_owner(described(), 'rke2')['error']
    assert said.startswith('rke2 owns containerd') and 'start rke2-server or rke2-agent once' in said
    assert '.tmpl' not in said
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match='owner is auto or'):
        neuron_owner(described(), 'nodeadm')


def test_the_neuron_role_probes_what_the_owner_needs():
    from ansible_collections.accel.nodes.plugins.filter.neuron_runtime_plan import \
        neuron_container_runtime_probe_request  # pylint: disable=import-outside-toplevel
    import yaml
    defaults = yaml.safe_load((Path(__file__).parents[4] / 'roles' / 'neuron_container_runtime' / 'defaults' / 'main.yml')
                              .read_text())
    settings = dict((k[len('neuron_container_runtime_'):], v) for k, v in defaults.items())
    settings.update(mode='oci_hook', engines=['containerd'])
    assert neuron_container_runtime_probe_request(settings)['paths'][-len(owners.probe_paths()):] == owners.probe_paths()
