# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The Kubernetes batch hooks (extras/hooks/kubernetes-drain.yml, kubernetes-uncordon.yml), run by a real
ansible-playbook with the real kubernetes.core.k8s_drain and Python client, against a loopback stand-in of the
API server that records every call (kube_api_standin.py; no cluster can run here).

The hooks are included by the two tasks of site.yml's rolling play that include accel_nodes_pre_batch_tasks and
accel_nodes_post_batch_tasks, copied from playbooks/site.yml as they are, with the play's serial and
max_fail_percentage: a change to that interface shows here.

kubernetes.core comes from the ansible package of the main venv (.venv, ansible==12.3.0: kubernetes.core 6.2.0).
The ansible-core 2.18 venv has no ansible package, so under --core-2.18 the same kubernetes.core is put beside
build/collections, on its own."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import kube_api_standin as standin  # noqa: E402  pylint: disable=wrong-import-position
from hook_play import HOOKS, TOP, hooks, site_play  # noqa: E402  pylint: disable=wrong-import-position
import hook_play  # noqa: E402  pylint: disable=wrong-import-position


def kubernetes_core(tmp_path: Path) -> str:
    """A collections path that holds kubernetes.core: '' where this Python has it, else the main venv's."""
    try:
        import ansible_collections.kubernetes.core  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        return ''
    except ImportError:
        pass
    found = glob.glob(str(TOP / '.venv' / 'lib' / 'python3*' / 'site-packages' / 'ansible_collections' / 'kubernetes'
                          / 'core'))
    if not found:
        pytest.skip('kubernetes.core is not installed (the ansible package of requirements/dev.txt ships it)')
    link = tmp_path / 'k8s-collection' / 'ansible_collections' / 'kubernetes' / 'core'
    link.parent.mkdir(parents=True)
    link.symlink_to(found[0])
    return str(tmp_path / 'k8s-collection')


def run(tmp_path: Path, url: str, play: List[Dict[str, Any]], hosts: Dict[str, Dict[str, Any]], *args: str):
    """The play, with a kubeconfig of its own that points at the stand-in."""
    kubeconfig = tmp_path / 'kubeconfig'
    kubeconfig.write_text(json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'standin',
        'clusters': [{'name': 'standin', 'cluster': {'server': url}}],
        'users': [{'name': 'standin', 'user': {'token': 'standin'}}],
        'contexts': [{'name': 'standin', 'context': {'cluster': 'standin', 'user': 'standin'}}],
    }))
    paths = [p for p in (os.environ.get('PYTHONPATH', ''), kubernetes_core(tmp_path)) if p]
    # Nothing of the caller's Kubernetes setup may reach the module. TMPDIR: the collection's discovery cache
    # (k8srcp-*.json) goes to the test's directory, not /tmp.
    env: Dict[str, Optional[str]] = {k: None for k in os.environ if k.startswith('K8S_AUTH_') or k == 'KUBECONFIG'}
    env.update(ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(paths), TMPDIR=str(tmp_path))
    return hook_play.run(tmp_path, play, hosts, env, '-e', 'accel_nodes_k8s_kubeconfig=%s' % kubeconfig,
                         '-e', 'accel_nodes_k8s_eviction_delay=0', *args)


def gpu_node(cluster: standin.Cluster, name: str) -> None:
    """A GPU node as a cluster has it: a training pod of a Job-like ReplicaSet, the device plugin's DaemonSet pod."""
    cluster.nodes[name] = standin.node(name)
    cluster.pods[('ml', name + '-train-0')] = standin.pod('ml', name + '-train-0', name, 'ReplicaSet')
    cluster.pods[('kube-system', name + '-device-plugin')] = standin.pod('kube-system', name + '-device-plugin', name,
                                                                         'DaemonSet')


def indexes(cluster: standin.Cluster, method: str, path: str) -> List[int]:
    return [i for i, call in enumerate(cluster.api_calls()) if call == (method, path)]


def test_a_roll_drains_each_node_and_returns_only_those_that_passed(tmp_path):
    cluster = standin.Cluster()
    for name in ('gpu-a', 'gpu-kept', 'gpu-bad', 'gpu-later'):
        gpu_node(cluster, name)
    # gpu-a: a PodDisruptionBudget refuses its training pod once (the hook retries), and a cache pod with emptyDir
    # data, allowed by accel_nodes_k8s_delete_emptydir_data, takes two reads to go.
    cluster.pods[('ml', 'gpu-a-cache-0')] = standin.pod('ml', 'gpu-a-cache-0', 'gpu-a', 'ReplicaSet', emptydir=True)
    cluster.pdb_refusals[('ml', 'gpu-a-train-0')] = 1
    cluster.reads_before_gone[('ml', 'gpu-a-cache-0')] = 2
    hosts = {'gpu-a': {'accel_nodes_k8s_delete_emptydir_data': True}, 'gpu-kept': {'accel_nodes_k8s_uncordon': False},
             'gpu-bad': {}, 'gpu-later': {}}
    with standin.serve(cluster) as url:
        done, failed = run(tmp_path, url, site_play(), hosts, *hooks('kubernetes-drain.yml', 'kubernetes-uncordon.yml'),
                           '-e', 'accel_nodes_serial=1', '-e', 'accel_nodes_k8s_wait_sleep=0',
                           '-e', '{"failing_validation": ["gpu-bad"]}')
    assert done.returncode == 2, done.stdout + done.stderr
    assert failed == {'gpu-bad': 'validation failed'}, done.stdout

    calls = cluster.api_calls()
    # gpu-a: cordoned before any of its pods was evicted; the refused eviction retried; the DaemonSet pod left.
    assert [body for name, body in cluster.node_patches() if name == 'gpu-a'] == [
        {'spec': {'unschedulable': True}}, {'spec': {'unschedulable': False}}]
    cordon, uncordon = indexes(cluster, 'PATCH', '/api/v1/nodes/gpu-a')
    evictions = [i for i, (method, path) in enumerate(calls) if method == 'POST' and '/gpu-a-' in path]
    assert cordon < min(evictions) and uncordon > max(evictions)
    assert [e for e in cluster.evictions() if e[1].startswith('gpu-a-')] == [
        ('ml', 'gpu-a-train-0', 429), ('ml', 'gpu-a-train-0', 200), ('ml', 'gpu-a-cache-0', 200)]
    # The pods were gone before the node was returned: wait_timeout read them until 404.
    cache = '/api/v1/namespaces/ml/pods/gpu-a-cache-0'
    assert [c['status'] for c in cluster.calls if c['method'] == 'GET' and c['path'] == cache] == [200, 200, 404]
    assert max(indexes(cluster, 'GET', cache)) < uncordon
    assert ('kube-system', 'gpu-a-device-plugin') in cluster.pods
    assert cluster.nodes['gpu-a']['spec']['unschedulable'] is False

    # gpu-kept passed but asked to stay cordoned; gpu-bad failed validation and stays cordoned, drained.
    for name in ('gpu-kept', 'gpu-bad'):
        assert [b for n, b in cluster.node_patches() if n == name] == [{'spec': {'unschedulable': True}}]
        assert cluster.nodes[name]['spec']['unschedulable'] is True
        assert ('ml', name + '-train-0') not in cluster.pods
        assert ('kube-system', name + '-device-plugin') in cluster.pods
    # max_fail_percentage 0 stopped the roll at gpu-bad's batch: gpu-later was never asked about.
    assert not [c for c in calls if 'gpu-later' in c[1]]
    assert cluster.nodes['gpu-later']['spec'] == {}
    # One batch after the other: gpu-kept is not touched before gpu-a is back, nor gpu-bad before gpu-kept.
    first = {name: min(i for i, c in enumerate(calls) if c[1].endswith('/' + name)) for name in ('gpu-kept', 'gpu-bad')}
    assert uncordon < first['gpu-kept'] < first['gpu-bad']


def test_a_drain_that_cannot_finish_fails_the_node_and_says_why(tmp_path):
    cluster = standin.Cluster()
    for name in ('gpu-pdb', 'gpu-slow', 'gpu-bare'):
        gpu_node(cluster, name)
    cluster.pdb_refusals[('ml', 'gpu-pdb-train-0')] = -1
    cluster.reads_before_gone[('ml', 'gpu-slow-train-0')] = 10 ** 6
    cluster.pods[('ml', 'gpu-bare-debug')] = standin.pod('ml', 'gpu-bare-debug', 'gpu-bare')  # no controller
    hosts = {
        'gpu-pdb': {'accel_nodes_k8s_eviction_retries': 2},
        'gpu-slow': {'accel_nodes_k8s_wait_timeout': 1, 'accel_nodes_k8s_wait_sleep': 1},
        'gpu-bare': {},
        'gpu-gone': {'accel_nodes_k8s_node_name': 'ip-10-0-0-9.ec2.internal'},
        'gpu-typo': {'accel_nodes_k8s_wait_timeout': '10m'},
        'GPU_Upper': {},
    }
    play = [{'name': 'Drain', 'hosts': 'fleet', 'gather_facts': False, 'tasks': [
        {'name': 'Drain', 'ansible.builtin.include_tasks': str(HOOKS / 'kubernetes-drain.yml')}]}]
    with standin.serve(cluster) as url:
        done, failed = run(tmp_path, url, play, hosts, '-e', 'accel_nodes_k8s_wait_sleep=0')
    assert done.returncode == 2, done.stdout + done.stderr
    assert sorted(failed) == sorted(hosts), done.stdout
    for msg in failed.values():
        assert msg.startswith('Could not drain Kubernetes node '), msg

    # Refused every time: 1 try and 2 retries, then the API server's message; the node stays cordoned.
    assert [status for _ns, pod, status in cluster.evictions() if pod == 'gpu-pdb-train-0'] == [429, 429, 429]
    assert "Cannot evict pod as it would violate the pod's disruption budget." in failed['gpu-pdb']
    assert 'kubectl uncordon gpu-pdb' in failed['gpu-pdb']
    assert cluster.nodes['gpu-pdb']['spec']['unschedulable'] is True
    # Evicted, but still terminating when the wait ended: k8s_drain only warns; the hook fails.
    assert 'still running after accel_nodes_k8s_wait_timeout (1 s)' in failed['gpu-slow']
    # A pod that no controller owns: k8s_drain refuses before evicting anything, and uncordons again.
    assert 'cannot delete Pods not managed by' in failed['gpu-bare'] and 'ml/gpu-bare-debug' in failed['gpu-bare']
    assert not [e for e in cluster.evictions() if e[1].startswith('gpu-bare-')]
    assert cluster.nodes['gpu-bare']['spec']['unschedulable'] is False
    # A node name Kubernetes does not know: said as the module says it, nothing patched.
    assert 'Node ip-10-0-0-9.ec2.internal not found.' in failed['gpu-gone']
    assert ('GET', '/api/v1/nodes/ip-10-0-0-9.ec2.internal') in cluster.api_calls()
    # Bad input is refused before any call, naming the variable.
    assert 'accel_nodes_k8s_wait_timeout' in failed['gpu-typo']
    assert '"GPU_Upper"' in failed['GPU_Upper'] and 'accel_nodes_k8s_node_name' in failed['GPU_Upper']
    assert not [c for c in cluster.api_calls() if 'gpu-typo' in c[1] or 'GPU_Upper' in c[1]]


def test_check_mode_asks_nothing_of_the_cluster(tmp_path):
    cluster = standin.Cluster()
    gpu_node(cluster, 'gpu-a')
    hosts = {'gpu-a': {}}
    with standin.serve(cluster) as url:
        done, failed = run(tmp_path, url, site_play(), hosts, '--check',
                           *hooks('kubernetes-drain.yml', 'kubernetes-uncordon.yml'))
    assert done.returncode == 0 and not failed, done.stdout + done.stderr
    # k8s_drain does not support check mode: Ansible skips it before it connects.
    assert not [c for c in cluster.calls if c['method'] != 'GET'], cluster.calls
    assert cluster.nodes['gpu-a']['spec'] == {} and len(cluster.pods) == 2
