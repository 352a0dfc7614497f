# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.cri_containers against a fake crictl: a script that keeps its pods
and containers in a JSON file and answers the subcommands the module runs, with
the output shapes of cri-tools v1.36.0 (runp, create print the id; inspect -o json
prints {"status": {"state", "exitCode"}}; logs prints the output) and
containerd's error for a handler it does not have (tests/fixtures/cri). The real
crictl against real containerd 1.6, 1.7 and 2.1 runs in the Molecule scenario
nvidia_container_toolkit_containerd."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from ansible_collections.accel.nodes.plugins.modules import cri_containers

FAKE = textwrap.dedent('''\
    #!{python}
    import fcntl, json, sys
    STATE = {state!r}
    lock = open(STATE + '.lock', 'w')
    fcntl.flock(lock, fcntl.LOCK_EX)  # the module runs the pods side by side
    args = sys.argv[1:]
    assert args[:2] == ['--runtime-endpoint', 'unix:///run/containerd/containerd.sock'], args
    args = args[2:]
    try:
        state = json.load(open(STATE))
    except OSError:
        state = {{'pods': {{}}, 'containers': {{}}, 'images': ['docker.io/accel-test/busybox:1'], 'calls': []}}
    state['calls'].append(args)
    def save():
        json.dump(state, open(STATE, 'w'))
    cmd = args[0]
    if cmd == 'inspecti':
        save()
        sys.exit(0 if args[-1] in state['images'] else 1)
    if cmd == 'pull':
        state['images'].append(args[-1]); save(); sys.exit(0)
    if cmd == 'runp':
        handler = args[2]
        if handler not in ('', 'runc', 'nvidia'):
            save()
            sys.stderr.write('time="x" level=fatal msg="run pod sandbox: rpc error: code = Unknown desc = failed to get '
                             'sandbox runtime: no runtime for \\\\"%s\\\\" is configured"\\n' % handler)
            sys.exit(1)
        pod = json.load(open(args[3]))
        pid = 'pod%d' % len(state['pods'])
        state['pods'][pid] = dict(pod, handler=handler)
        save(); print(pid); sys.exit(0)
    if cmd == 'create':
        container = json.load(open(args[3]))
        cid = 'ctr%d' % len(state['containers'])
        state['containers'][cid] = {{'pod': args[2], 'config': container, 'state': 'CONTAINER_CREATED'}}
        save(); print(cid); sys.exit(0)
    if cmd == 'start':
        state['containers'][args[1]]['state'] = 'CONTAINER_EXITED'; save(); sys.exit(0)
    if cmd == 'inspect':
        c = state['containers'][args[-1]]
        env = dict((e['key'], e['value']) for e in c['config']['envs'])
        print(json.dumps({{'status': {{'state': c['state'], 'exitCode': 0 if env.get('GPUS') else 6}}}})); save(); sys.exit(0)
    if cmd == 'logs':
        c = state['containers'][args[-1]]
        env = dict((e['key'], e['value']) for e in c['config']['envs'])
        if env.get('GPUS'):
            print('GPU 0: NVIDIA H100 80GB HBM3 (UUID: %s)' % env['GPUS'])
        else:
            sys.stderr.write('No devices were found\\n')
        save(); sys.exit(0)
    if cmd == 'rmp':
        state['pods'].pop(args[-1]); save(); sys.exit(0)
    sys.exit(2)
    ''')


@pytest.fixture
def crictl(tmp_path):
    path = tmp_path / 'crictl'
    state = tmp_path / 'state.json'
    path.write_text(FAKE.format(python=sys.executable, state=str(state)))
    path.chmod(0o755)

    def read():
        return json.loads(state.read_text())
    return str(path), read


def run(run_module, crictl, containers, **args):
    return run_module(cri_containers.main, dict(dict(image='docker.io/accel-test/busybox:1', crictl=crictl[0],
                                                     containers=containers), **args))


GPU = {'name': 'cri_nvidia_visible_devices', 'handler': 'nvidia', 'command': ['nvidia-smi', '-L'],
       'env': {'GPUS': 'GPU-1'}, 'systemd_cgroup': True}


def test_runs_each_pod_with_its_handler_and_removes_it(run_module, crictl):
    result = run(run_module, crictl, [GPU, dict(GPU, name='none', env={}, handler=''), dict(GPU, name='x', skip='no')],
                 env={'LD_LIBRARY_PATH': '/usr/lib'})
    assert result['changed'] is False
    ok, none, skipped = result['results']
    assert (ok['status'], ok['failed'], ok['container']['Output']) == (0, False, 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n')
    assert (none['status'], none['failed'], none['msg'], none['container']['Output']) == (6, True, 'exit 6', 'No devices were found\n')
    assert skipped == {'item': dict(GPU, name='x', skip='no'), 'skipped': True, 'skip_reason': 'no'}
    state = crictl[1]()
    assert state['pods'] == {}
    handlers = [call[2] for call in state['calls'] if call[0] == 'runp']
    assert sorted(handlers) == ['', 'nvidia']
    config = [c['config'] for c in state['containers'].values() if c['config']['metadata']['name'] == 'cri-nvidia-visible-devices'][0]
    assert config['envs'] == [{'key': 'LD_LIBRARY_PATH', 'value': '/usr/lib'}, {'key': 'GPUS', 'value': 'GPU-1'}]
    assert config['image'] == {'image': 'docker.io/accel-test/busybox:1'}
    assert all(call[1] == '--no-pull' for call in state['calls'] if call[0] == 'create')


def test_a_missing_handler_fails_its_pod_with_containerds_words(run_module, crictl):
    result = run(run_module, crictl, [dict(GPU, handler='nvidia-missing'), GPU])
    missing, ok = result['results']
    assert missing['failed'] is True and 'status' not in missing
    assert 'no runtime for "nvidia-missing" is configured' in missing['msg']
    assert missing['msg'] == ('crictl runp: run pod sandbox: rpc error: code = Unknown desc = failed to get sandbox '
                              'runtime: no runtime for "nvidia-missing" is configured')
    assert ok['status'] == 0


def test_a_missing_image_is_pulled_or_fails_every_pod_with_the_fix(run_module, crictl):
    never = run(run_module, crictl, [GPU], image='docker.io/other:1', pull='never')
    assert never['results'][0]['failed'] is True
    assert never['results'][0]['msg'].startswith("the image docker.io/other:1 is not in the runtime's image store")
    assert not any(call[0] == 'runp' for call in crictl[1]()['calls'])
    pulled = run(run_module, crictl, [GPU], image='docker.io/other:1')
    assert pulled['results'][0]['status'] == 0
    assert ['pull', 'docker.io/other:1'] in crictl[1]()['calls']


def test_bad_cases_fail_before_anything_runs(run_module, crictl):
    result = run(run_module, crictl, [{'name': 'x'}])
    assert result['failed'] is True
    assert 'needs a name and a command list' in result['msg']
