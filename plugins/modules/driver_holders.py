#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: driver_holders
short_description: Find what holds the NVIDIA or Neuron devices before their driver changes, and stop it on request
version_added: 0.2.0
description:
  - Lists what holds the vendor's devices, so that a driver upgrade does not go in under running work
    (after which every new GPU process fails with "Driver/library version mismatch" until a reboot).
  - B(Containers.) Running Docker containers whose runtime is the vendor's (C(nvidia); C(oci-neuron) or C(neuron)),
    that asked for GPUs (C(--gpus), a CDI device request) or that were given the device nodes
    (C(--device=/dev/nvidia0), C(--device=/dev/neuron0)), from the Docker Engine API. Docker not running, or not installed, lists none.
  - B(Processes.) Every process with a device node open (C(/dev/nvidia*), C(/dev/neuron*)), read from
    C(/proc/<pid>/fd), with the container it runs in where its cgroup names one; this also finds the processes of
    containerd's and Kubernetes' containers, and a C(neuron-monitor).
  - B(Services.) C(nvidia-persistenced), C(nvidia-fabricmanager) and C(nvidia-dcgm) (DCGM's C(nv-hostengine)),
    where active. They hold the devices to serve the node, not to run work; RV(held) does not count them, and
    M(accel.nodes.driver_reload) stops and starts them around the reload.
  - With O(stop), stops the containers (C(docker stop)) and sends the other processes SIGTERM, waits up to
    O(stop_timeout) seconds, reads again, and fails naming what still holds the devices.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads everything; with O(stop) reports what it would stop, and stops nothing.
  diff_mode:
    support: none
options:
  vendor:
    description: Whose devices.
    type: str
    choices: [nvidia, neuron]
    required: true
  stop:
    description:
      - Stop the containers and processes that hold the devices. V(false) only reads.
    type: bool
    default: false
  stop_timeout:
    description: Seconds a container or process has to stop before the module gives up.
    type: int
    default: 30
  docker_socket:
    description: The Docker Engine API's socket.
    type: path
    default: /var/run/docker.sock
notes:
  - Processes are found only in the PID namespace the module runs in; run it on the host.
seealso:
  - module: accel.nodes.driver_reload
"""

EXAMPLES = r"""
- name: Find what holds the GPUs
  accel.nodes.driver_holders:
    vendor: nvidia
  register: holders

- name: Refuse to change the driver under running work
  ansible.builtin.assert:
    that: not holders.held
    fail_msg: "{{ holders.summary }}"

- name: Stop the GPU work first
  accel.nodes.driver_holders:
    vendor: nvidia
    stop: true
"""

RETURN = r"""
held:
  description: Whether a container or a process other than the services holds the devices.
  returned: always
  type: bool
containers:
  description: The running Docker containers that use the devices, and why.
  returned: always
  type: list
  elements: dict
  sample: [{engine: docker, id: 3f6c..., name: trainer, image: "nvcr.io/nvidia/pytorch:25.01-py3",
            why: ["runtime nvidia", "device request count=-1"], pids: [4242]}]
processes:
  description:
    - The processes, outside those containers and the services, with a device node open.
    - C(container) is the id of the container it runs in (containerd, CRI-O, Kubernetes), or null.
  returned: always
  type: list
  elements: dict
  sample: [{pid: 977, comm: python3, cmdline: "python3 train.py", devices: [/dev/nvidia0, /dev/nvidiactl], container: null}]
services:
  description: The active services that hold the devices to serve the node, with their main process.
  returned: always
  type: list
  elements: dict
  sample: [{name: nvidia-persistenced, pid: 1180}]
stopped:
  description: What was stopped (or, in check mode, would be).
  returned: always
  type: dict
  sample: {containers: [trainer], processes: [977]}
summary:
  description: One line naming what holds the devices, for a message.
  returned: always
  type: str
  sample: "containers: trainer (runtime nvidia); processes: 977 python3 (/dev/nvidia0, /dev/nvidiactl)"
"""

import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _holders
from ansible_collections.accel.nodes.plugins.module_utils._docker_api import DockerAPI


def read(module, vendor, socket):
    found_services = [{'name': s['unit'].replace('.service', ''), 'pid': s['pid']}
                      for s in _holders.active_services(module, vendor)]
    containers = []
    if os.path.exists(socket):
        try:
            containers = _holders.docker_containers(vendor, DockerAPI(socket, timeout=30))
        except (OSError, RuntimeError, ValueError) as error:
            module.warn('Docker did not list its containers (%s): only processes are read' % error)
    by_id = dict((c['id'], c) for c in containers)
    for c in containers:
        c['pids'] = []
    service_pids = set(s['pid'] for s in found_services if s['pid'])
    processes = []
    for process in _holders.device_processes(vendor, skip=[os.getpid()]):
        if process['pid'] in service_pids:
            continue
        if process['container'] in by_id:
            by_id[process['container']]['pids'].append(process['pid'])
        else:
            processes.append(process)
    return containers, processes, found_services


def summary(containers, processes):
    parts = []
    if containers:
        parts.append('containers: ' + ', '.join('%s (%s)' % (c['name'], ', '.join(c['why'])) for c in containers))
    if processes:
        parts.append('processes: ' + ', '.join(
            '%d %s (%s%s)' % (p['pid'], p['comm'], ', '.join(p['devices']),
                              '; container %s' % p['container'][:12] if p['container'] else '')
            for p in processes))
    return '; '.join(parts)


def stop(module, containers, processes, timeout, socket):
    api = DockerAPI(socket, timeout=timeout + 30)
    for c in containers:
        status, body = api.call('POST', '/containers/%s/stop' % c['id'], query={'t': timeout}, timeout=timeout + 30)
        if status not in (204, 304, 404):
            module.fail_json(msg='docker stop %s answered %s: %s' % (c['name'], status, body.decode('utf-8', 'replace')))
    for p in processes:
        try:
            os.kill(p['pid'], signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + timeout
    while processes and time.time() < deadline:
        processes = [p for p in processes if os.path.exists('/proc/%d' % p['pid'])]
        if processes:
            time.sleep(0.5)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vendor=dict(type='str', required=True, choices=['nvidia', 'neuron']),
            stop=dict(type='bool', default=False),
            stop_timeout=dict(type='int', default=30),
            docker_socket=dict(type='path', default='/var/run/docker.sock'),
        ),
        supports_check_mode=True,
    )
    vendor, socket = module.params['vendor'], module.params['docker_socket']
    containers, processes, found_services = read(module, vendor, socket)
    result = dict(changed=False, held=bool(containers or processes), containers=containers, processes=processes,
                  services=found_services, summary=summary(containers, processes),
                  stopped=dict(containers=[], processes=[]))
    if module.params['stop'] and result['held']:
        result['changed'] = True
        result['stopped'] = dict(containers=[c['name'] for c in containers], processes=[p['pid'] for p in processes])
        if not module.check_mode:
            stop(module, containers, processes, module.params['stop_timeout'], socket)
            containers, processes, found_services = read(module, vendor, socket)
            result.update(held=bool(containers or processes), containers=containers, processes=processes,
                          services=found_services, summary=summary(containers, processes))
            if result['held']:
                module.fail_json(msg='Still holding the %s devices after stopping them: %s' % (vendor, result['summary']),
                                 **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
