#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cri_containers
short_description: Run short-lived pods through the CRI, as kubelet does, and return what each container printed
version_added: 0.3.0
description:
  - Runs each case of O(containers) as kubelet runs a pod, through the container runtime interface (CRI) with the
    vendor's client C(crictl) (kubernetes-sigs/cri-tools), all at the same time, and removes the pods.
  - "For each case: C(crictl runp --runtime HANDLER) starts a pod sandbox with the runtime handler that a
    Kubernetes RuntimeClass names (empty for the runtime's default), in the host's network namespace so that no
    CNI is needed; C(crictl create --no-pull) and C(crictl start) run one container of O(image) in it; the
    module waits for it to exit, reads C(crictl logs) and removes the pod with C(crictl rmp -f)."
  - A pod that cannot be started, or a container that fails, does not fail the task; its result says why, in the
    runtime's own words (for example containerd's C(no runtime for "nvidia" is configured)).
  - Each result has the shape of M(accel.nodes.run_containers)'s (RV(results[].item), RV(results[].status),
    RV(results[].container)), so the same filters judge it.
  - The pod sandbox runs the sandbox (pause) image of the runtime's config. Nothing here pulls it; on a node
    without a registry, import it first (C(ctr -n k8s.io images import)).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: none
    details:
      - The pods change nothing on the node and are removed. Set C(check_mode=false) on the task to run them in
        check mode too, with O(pull=never).
  diff_mode:
    support: none
options:
  containers:
    description:
      - The cases, each a dict with C(name) and C(command) (a list), and optionally C(handler) (the runtime
        handler; empty for the default), C(env) (a dict), C(devices) (device nodes, C(HOST[:CONTAINER[:PERMISSIONS]])),
        C(cdi_devices) (fully qualified CDI device names), C(mounts) (CRI mounts, C(host_path) and
        C(container_path)), C(annotations), C(systemd_cgroup) (whether the handler uses the systemd cgroup
        driver, which decides the pod's cgroup parent) and C(skip) (a reason not to run it).
      - Other keys are kept in RV(results[].item) and ignored.
    type: list
    elements: dict
    required: true
  image:
    description: The image every container runs, by the name the CRI knows it by.
    type: str
    required: true
  pull:
    description:
      - V(missing) pulls the image through the CRI when it is not there, V(always) every time, V(never) not at
        all (a missing image then fails each case).
    type: str
    choices: [missing, always, never]
    default: missing
  env:
    description: Environment variables for every container, under each case's C(env).
    type: dict
    default: {}
  crictl:
    description: The crictl program, a name on the PATH or a path.
    type: str
    default: crictl
  endpoint:
    description: The CRI socket, as for C(crictl --runtime-endpoint).
    type: str
    default: unix:///run/containerd/containerd.sock
  timeout:
    description: Seconds to wait for a container to exit, and for a pull.
    type: int
    default: 120
seealso:
  - module: accel.nodes.run_containers
  - name: crictl
    description: The CRI client of kubernetes-sigs/cri-tools.
    link: https://github.com/kubernetes-sigs/cri-tools/blob/master/docs/crictl.md
"""

EXAMPLES = r"""
- name: Run nvidia-smi in a pod of the nvidia RuntimeClass's handler
  accel.nodes.cri_containers:
    image: nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04
    containers:
      - name: nvidia-visible-devices
        handler: nvidia
        command: [nvidia-smi, -L]
        env: {NVIDIA_VISIBLE_DEVICES: all}
      - name: cdi
        command: [nvidia-smi, -L]
        cdi_devices: [nvidia.com/gpu=0]
  register: cri_runs
  check_mode: false
"""

RETURN = r"""
results:
  description: One result per case, in the order of O(containers).
  returned: always
  type: list
  elements: dict
  contains:
    item:
      description: The case as given in O(containers).
      type: dict
    status:
      description: The container's exit status. Absent where it did not run.
      type: int
    container:
      description: C(Output), what the container wrote to stdout, then to stderr.
      type: dict
    failed:
      description: True where the pod or container could not be run, or exited non-zero.
      type: bool
    msg:
      description: Why it could not be run, in crictl's and the runtime's words, or its exit status.
      type: str
    skipped:
      description: True where the case has a C(skip) reason.
      type: bool
    seconds:
      description: How long the case took, pod start to removal.
      type: float
  sample:
    - item: {name: nvidia-visible-devices, handler: nvidia, command: [nvidia-smi, -L]}
      status: 0
      container: {Output: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)\n"}
      failed: false
      seconds: 0.61
"""

import concurrent.futures
import json
import os
import shutil
import tempfile
import time
import uuid
from typing import Any, Dict, List

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._cri import container_config, crictl_error, pod_config

# crictl inspect prints {"status": ContainerStatus, "info": ...}, the status in protobuf JSON
# (cmd/crictl/container.go, InspectContainer; util.go outputStatusData).
_EXITED = 'CONTAINER_EXITED'
_POLL = 0.05


class CrictlError(Exception):
    pass


class Crictl(object):

    def __init__(self, module: AnsibleModule, program: str, endpoint: str) -> None:
        self.module = module
        self.base = [program, '--runtime-endpoint', endpoint]

    def __call__(self, *args: str) -> str:
        rc, out, err = self.module.run_command(self.base + list(args))
        if rc != 0:
            raise CrictlError('crictl %s: %s' % (args[0], crictl_error(err or out)))
        return out


def run_case(crictl: Crictl, case: Dict[str, Any], image: str, timeout: int, logs: str,
             env: Dict[str, Any]) -> Dict[str, Any]:
    result = {'item': case}  # type: Dict[str, Any]
    if case.get('skip'):
        result.update(skipped=True, skip_reason=case['skip'])
        return result
    started = time.monotonic()
    name = 'accel-nodes-validation-' + str(case['name']).replace('_', '-')
    uid = uuid.uuid4().hex
    directory = tempfile.mkdtemp(prefix=name + '-', dir=logs)
    pod = pod_config(name + '-' + uid[:8], uid, directory, bool(case.get('systemd_cgroup')))
    container = container_config(str(case['name']).replace('_', '-'), image, case['command'],
                                 dict(env, **(case.get('env') or {})),
                                 case.get('devices'), case.get('cdi_devices'), case.get('mounts'),
                                 case.get('annotations'))
    pod_file, container_file = os.path.join(directory, 'pod.json'), os.path.join(directory, 'container.json')
    with open(pod_file, 'w') as f:
        json.dump(pod, f)
    with open(container_file, 'w') as f:
        json.dump(container, f)
    pod_id = ''
    try:
        pod_id = crictl('runp', '--runtime', str(case.get('handler') or ''), pod_file).strip()
        container_id = crictl('create', '--no-pull', pod_id, container_file, pod_file).strip()
        crictl('start', container_id)
        state, status = '', None
        deadline = started + timeout
        while True:
            inspected = json.loads(crictl('inspect', '-o', 'json', container_id) or '{}').get('status') or {}
            state, status = inspected.get('state'), inspected.get('exitCode', 0)
            if state == _EXITED or time.monotonic() > deadline:
                break
            time.sleep(_POLL)
        if state != _EXITED:
            raise CrictlError('the container did not exit within %d s (state %s)' % (timeout, state))
        rc, out, err = crictl.module.run_command(crictl.base + ['logs', container_id])
        result.update(status=int(status), container={'Output': out + err}, failed=int(status) != 0)
        if status != 0:
            result['msg'] = 'exit %d' % status
    except (CrictlError, ValueError) as exc:
        result.update(failed=True, msg=str(exc), container={'Output': ''})
    finally:
        if pod_id:
            try:
                crictl('rmp', '-f', pod_id)
            except CrictlError as exc:
                result.setdefault('warnings', []).append(str(exc))
        shutil.rmtree(directory, ignore_errors=True)
    result['seconds'] = round(time.monotonic() - started, 3)
    return result


def ensure_image(crictl: Crictl, image: str, pull: str) -> str:
    """'' when the image is there (or pull is never), else the reason it is not."""
    try:
        present = True
        try:
            crictl('inspecti', '-q', image)
        except CrictlError:
            present = False
        if pull == 'always' or (pull == 'missing' and not present):
            crictl('pull', image)
        elif not present:
            return ("the image %s is not in the runtime's image store (crictl images), and pull is never: import it "
                    "into containerd's k8s.io namespace (ctr -n k8s.io images import) or pull it" % image)
    except CrictlError as exc:
        return str(exc)
    return ''


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            containers=dict(type='list', elements='dict', required=True),
            image=dict(type='str', required=True),
            pull=dict(type='str', choices=['missing', 'always', 'never'], default='missing'),
            env=dict(type='dict', default={}),
            crictl=dict(type='str', default='crictl'),
            endpoint=dict(type='str', default='unix:///run/containerd/containerd.sock'),
            timeout=dict(type='int', default=120),
        ),
        supports_check_mode=False,
    )
    params = module.params
    cases = params['containers']  # type: List[Dict[str, Any]]
    for case in cases:
        if not case.get('name') or not isinstance(case.get('command'), list):
            module.fail_json(msg='each entry of containers needs a name and a command list; got %r' % (case,))
    program = params['crictl']
    if os.sep not in program:
        program = module.get_bin_path(program) or program
    crictl = Crictl(module, program, params['endpoint'])
    runnable = [c for c in cases if not c.get('skip')]
    problem = ensure_image(crictl, params['image'], params['pull']) if runnable else ''
    if problem:
        results = [dict(item=c, skipped=True, skip_reason=c['skip']) if c.get('skip')
                   else dict(item=c, failed=True, msg=problem, container={'Output': ''}) for c in cases]
    else:
        logs = tempfile.mkdtemp(prefix='accel-nodes-cri-')
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
                results = list(pool.map(lambda c: run_case(crictl, c, params['image'], params['timeout'], logs,
                                                           params['env']), cases))
        finally:
            shutil.rmtree(logs, ignore_errors=True)
    module.exit_json(changed=False, results=results)


if __name__ == '__main__':
    main()
