#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_containers
short_description: Run short-lived Docker containers side by side and return what each printed
version_added: 0.2.0
description:
  - Runs each container of O(containers) from O(image) through the Docker Engine API, all at the same time,
    waits for them to exit, reads their output and removes them.
  - Made for checks such as M(accel.nodes.accelerator_validation)'s containers, which ask for devices
    (C(--gpus), C(--device), a runtime, environment) and judge what the container saw. Each container's
    result has the shape of a M(community.docker.docker_container) loop result (RV(results[].item),
    RV(results[].status), RV(results[].container)), so the same filters judge it.
  - One module run instead of one per container, and the containers run concurrently.
  - A container that cannot be created or started, or that fails, does not fail the task; its result
    says why, with the daemon's own message.
  - Talks to the daemon over its Unix socket with Python's standard library; the node needs no Docker SDK.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: none
    details:
      - The containers change nothing on the node. Set C(check_mode=false) on the task to run them in check
        mode too, with O(pull=never).
  diff_mode:
    support: none
options:
  containers:
    description:
      - The containers to run, each a dict with C(name) (after O(name_prefix); underscores become dashes) and
        C(command) (a list), and optionally C(runtime) (as for C(docker run --runtime); empty for Docker's
        default), C(env) (added to O(env)), C(devices) (as for C(docker run --device),
        C(HOST[:CONTAINER[:PERMISSIONS]])), C(device_requests) (as M(community.docker.docker_container)'s
        option, with C(driver), C(count), C(device_ids), C(capabilities), C(options); C(docker run --gpus) makes
        them) and C(skip) (a reason not to run it; its result is then skipped).
      - Other keys are kept in RV(results[].item) and ignored, so the cases of the
        C(accel.nodes.validation_container_plan) filter can be passed as they are.
    type: list
    elements: dict
    required: true
  image:
    description: The image every container runs.
    type: str
    required: true
  pull:
    description:
      - V(missing) pulls the image when it is not on the node, V(always) every time, V(never) not at all
        (a missing image then fails each container).
    type: str
    choices: [missing, always, never]
    default: missing
  env:
    description: Environment variables for every container.
    type: dict
    default: {}
  name_prefix:
    description: Prefix of the container names.
    type: str
    default: accel-nodes-
  network_mode:
    description: The containers' network, as for C(docker run --network).
    type: str
    default: none
  timeout:
    description: Seconds to wait for a container to exit, and for a pull.
    type: int
    default: 300
  socket:
    description: Path of the Docker daemon's Unix socket.
    type: path
    default: /var/run/docker.sock
seealso:
  - module: community.docker.docker_container
  - name: Docker Engine API
    description: The create, start, wait, logs and delete calls the module makes.
    link: https://docs.docker.com/reference/api/engine/
"""

EXAMPLES = r"""
- name: See the GPUs from two containers at once
  accel.nodes.run_containers:
    image: nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04
    containers:
      - name: all-gpus
        command: [nvidia-smi, -L]
        device_requests: [{count: -1, capabilities: [[gpu]]}]
      - name: gpu-0
        command: [nvidia-smi, -L]
        device_requests: [{device_ids: ['0'], capabilities: [[gpu]]}]
  register: gpu_runs
  check_mode: false
"""

RETURN = r"""
results:
  description: One result per container, in the order of O(containers).
  returned: always
  type: list
  elements: dict
  contains:
    item:
      description: The container as given in O(containers).
      type: dict
    status:
      description: The container's exit status. Absent where it did not run.
      type: int
    container:
      description: C(Output), what the container wrote to stdout and stderr, in order.
      type: dict
    failed:
      description: True where the container could not be run or exited non-zero.
      type: bool
    msg:
      description: Why it could not be run, in the daemon's words, or its exit status.
      type: str
    skipped:
      description: True where the container has a C(skip) reason.
      type: bool
  sample:
    - item: {name: all-gpus, command: [nvidia-smi, -L]}
      status: 0
      container: {Output: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)\n"}
      failed: false
"""

import concurrent.futures
import socket
from typing import Any, Dict, List

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils._docker_api import DockerAPI, DockerAPIError

# docker_container's device_requests option names, and the Engine API's.
_REQUEST_KEYS = {'driver': 'Driver', 'count': 'Count', 'device_ids': 'DeviceIDs',
                 'capabilities': 'Capabilities', 'options': 'Options'}


def device(spec: str) -> Dict[str, str]:
    """docker run --device HOST[:CONTAINER[:PERMISSIONS]] as the API's HostConfig.Devices entry."""
    parts = spec.split(':')
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise ValueError('device %r is not HOST[:CONTAINER[:PERMISSIONS]]' % spec)
    return {'PathOnHost': parts[0], 'PathInContainer': parts[1] if len(parts) > 1 and parts[1] else parts[0],
            'CgroupPermissions': parts[2] if len(parts) > 2 else 'rwm'}


def device_request(request: Dict[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(request) - set(_REQUEST_KEYS))
    if unknown:
        raise ValueError('device_requests entry has unknown keys %s' % ', '.join(unknown))
    api = {'Driver': '', 'Count': 0, 'DeviceIDs': None, 'Capabilities': None, 'Options': {}}
    api.update((_REQUEST_KEYS[key], value) for key, value in request.items() if value is not None)
    if api['DeviceIDs'] is not None:
        api['DeviceIDs'] = [str(value) for value in api['DeviceIDs']]
    return api


def create_config(container: Dict[str, Any], image: str, env: Dict[str, Any], network_mode: str) -> Dict[str, Any]:
    """The body of POST /containers/create for one container."""
    merged = dict(env, **(container.get('env') or {}))
    host_config = {
        'NetworkMode': network_mode,
        'Devices': [device(spec) for spec in container.get('devices') or []],
        'DeviceRequests': [device_request(request) for request in container.get('device_requests') or []],
    }  # type: Dict[str, Any]
    if container.get('runtime'):
        host_config['Runtime'] = container['runtime']
    return {
        'Image': image,
        'Cmd': [str(arg) for arg in container['command']],
        'Env': ['%s=%s' % (key, value) for key, value in merged.items()],
        'AttachStdout': False, 'AttachStderr': False, 'Tty': False,
        'HostConfig': host_config,
    }


def run_one(api: DockerAPI, container: Dict[str, Any], params: Dict[str, Any]) -> Dict[str, Any]:
    result = {'item': container}  # type: Dict[str, Any]
    if container.get('skip'):
        result.update(skipped=True, skip_reason=container['skip'])
        return result
    name = params['name_prefix'] + str(container['name']).replace('_', '-')
    try:
        config = create_config(container, params['image'], params['env'], params['network_mode'])
        status, output = api.run(name, config, params['timeout'])
    except (DockerAPIError, ValueError) as exc:
        result.update(failed=True, msg='Error running container %s: %s' % (name, exc), container={'Output': ''})
        return result
    except (OSError, socket.timeout) as exc:
        result.update(failed=True, msg='Cannot reach the Docker daemon at %s: %s' % (api.path, exc),
                      container={'Output': ''})
        return result
    result.update(status=status, container={'Output': output}, failed=status != 0)
    if status != 0:
        result['msg'] = 'exit %d' % status
    return result


def ensure_image(api: DockerAPI, image: str, pull: str, timeout: int) -> str:
    """'' when the image is ready (or pull is never), else the reason it is not."""
    try:
        if pull == 'always' or (pull == 'missing' and not api.image_exists(image)):
            api.pull(image, timeout)
    except DockerAPIError as exc:
        return 'Error pulling image %s: %s' % (image, exc)
    except (OSError, socket.timeout) as exc:
        return 'Cannot reach the Docker daemon at %s: %s' % (api.path, exc)
    return ''


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            containers=dict(type='list', elements='dict', required=True),
            image=dict(type='str', required=True),
            pull=dict(type='str', choices=['missing', 'always', 'never'], default='missing'),
            env=dict(type='dict', default={}),
            name_prefix=dict(type='str', default='accel-nodes-'),
            network_mode=dict(type='str', default='none'),
            timeout=dict(type='int', default=300),
            socket=dict(type='path', default='/var/run/docker.sock'),
        ),
        supports_check_mode=False,
    )
    params = module.params
    containers = params['containers']  # type: List[Dict[str, Any]]
    for container in containers:
        if not container.get('name') or not isinstance(container.get('command'), list):
            module.fail_json(msg='each entry of containers needs a name and a command list; got %r' % (container,))
    api = DockerAPI(params['socket'])
    runnable = [c for c in containers if not c.get('skip')]
    problem = ensure_image(api, params['image'], params['pull'], params['timeout']) if runnable else ''
    if problem:
        results = [dict(item=c, skipped=True, skip_reason=c['skip']) if c.get('skip')
                   else dict(item=c, failed=True, msg=problem, container={'Output': ''}) for c in containers]
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
            results = list(pool.map(lambda c: run_one(api, c, params), containers))
    module.exit_json(changed=False, results=results)


if __name__ == '__main__':
    main()
