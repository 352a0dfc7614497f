# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What holds an accelerator driver, and taking its kernel modules out and back in.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Why it exists: a driver upgrade on a live node must not pull the driver from under
running GPU work, and where nothing holds the GPUs the new kernel modules can be
loaded without a reboot. No vendor tool answers "what holds the GPUs" as data:
`nvidia-smi` lists only the processes that hold a CUDA context, and `fuser` or
`lsof` print text for people. This reads what they read: each process's open
files in /proc/<pid>/fd, and the Docker Engine API's container records.

The unload and load follow NVIDIA's own driver container (NVIDIA/gpu-driver-container,
ubuntu22.04/nvidia-driver at 7796e735, _unload_driver and _load_driver): stop
nvidia-persistenced and Fabric Manager first; read /sys/module/<module>/refcnt,
and call the driver in use when nvidia's count exceeds the number of its loaded
dependents (nvidia_modeset, nvidia_uvm, nvidia_peermem) or any dependent's count
is above 0; remove the dependents before nvidia; load nvidia, then nvidia_uvm and
nvidia_modeset. nvidia_drm, which that container never loads (--no-drm), uses
nvidia_modeset (one of its references) and goes first.
"""

from __future__ import annotations

import json
import os
import re
import typing as t

from ansible_collections.accel.nodes.plugins.module_utils import _rootfs
from ansible_collections.accel.nodes.plugins.module_utils._engine import parse_show

# The device nodes each driver creates: /dev/nvidia0.., nvidiactl, nvidia-uvm,
# nvidia-uvm-tools, nvidia-modeset and /dev/nvidia-caps/* (NVIDIA driver README,
# "Installing the NVIDIA Driver: device files"); /dev/neuron0.. (aws-neuron-driver's
# udev rule, KERNEL=="neuron*").
DEVICE_PREFIXES = {'nvidia': ('/dev/nvidia',), 'neuron': ('/dev/neuron',)}

# Daemons that hold the devices to serve the node, not to run work: stopped before
# the modules go out and started again after (the NVIDIA driver container stops
# the first two; nvidia-dcgm.service runs DCGM's nv-hostengine, per DCGM's
# "Customizing the systemd Service").
SERVICES = {'nvidia': ('nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-dcgm'), 'neuron': ()}

# Unload order, dependents first; load order (NVIDIA driver container's _load_driver).
UNLOAD = {'nvidia': ('nvidia_drm', 'nvidia_modeset', 'nvidia_uvm', 'nvidia_peermem', 'nvidia'),
          'neuron': ('neuron',)}
LOAD = {'nvidia': ('nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm', 'nvidia_peermem'),
        'neuron': ('neuron',)}
# Always loaded again, whether or not they were loaded before: the driver and what
# CUDA needs (nvidia_uvm backs every CUDA context).
ALWAYS_LOAD = {'nvidia': ('nvidia', 'nvidia_uvm'), 'neuron': ('neuron',)}
CORE = {'nvidia': 'nvidia', 'neuron': 'neuron'}
# Which of the vendor's modules hold a reference to each (lsmod's "Used by"): nvidia is
# used by nvidia_modeset, nvidia_uvm and nvidia_peermem, nvidia_modeset by nvidia_drm.
USERS = {'nvidia': ('nvidia_modeset', 'nvidia_uvm', 'nvidia_peermem'), 'nvidia_modeset': ('nvidia_drm',)}

_CONTAINER_ID = re.compile(r'(?:docker-|/docker/|cri-containerd-|/containerd/|crio-)([0-9a-f]{64})')


def container_of(pid: int, proc: str = '/proc') -> t.Optional[str]:
    """The 64-hex id of the container a process runs in, from its cgroup path (Docker's
    docker-<id>.scope under the systemd driver, /docker/<id> under cgroupfs; containerd's
    and CRI-O's likewise), or None."""
    text = _rootfs.read_text('/', os.path.join(proc, str(pid), 'cgroup')) or ''
    match = _CONTAINER_ID.search(text)
    return match.group(1) if match else None


def device_processes(vendor: str, proc: str = '/proc', skip: t.Iterable[int] = ()) -> list[dict[str, t.Any]]:
    """Every process with a file descriptor open on one of the vendor's device nodes:
    pid, comm, cmdline, the devices (sorted) and the container it runs in, if any."""
    prefixes = DEVICE_PREFIXES[vendor]
    skip = set(skip)
    found = []
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    except OSError:
        return []
    for pid in pids:
        if pid in skip:
            continue
        fd_dir = os.path.join(proc, str(pid), 'fd')
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        devices = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith(prefixes):
                devices.add(target)
        if not devices:
            continue
        cmdline = (_rootfs.read_text('/', os.path.join(proc, str(pid), 'cmdline')) or '').replace('\0', ' ').strip()
        found.append({'pid': pid, 'comm': (_rootfs.read_text('/', os.path.join(proc, str(pid), 'comm')) or '').strip(),
                      'cmdline': cmdline, 'devices': sorted(devices), 'container': container_of(pid, proc)})
    return found


def docker_gpu_reasons(vendor: str, inspect: t.Mapping[str, t.Any]) -> list[str]:
    """Why a container (the Engine API's GET /containers/{id}/json) uses the vendor's
    devices: its runtime, its device requests (Docker's --gpus, or CDI names), its
    device nodes. Empty when it uses none of them."""
    host = inspect.get('HostConfig') or {}
    reasons = []
    runtime = str(host.get('Runtime') or '')
    runtimes = ('nvidia',) if vendor == 'nvidia' else ('oci-neuron', 'neuron')
    if runtime in runtimes or (vendor == 'nvidia' and runtime.startswith('nvidia')):
        reasons.append('runtime %s' % runtime)
    for request in host.get('DeviceRequests') or []:
        capabilities = [c for group in request.get('Capabilities') or [] for c in group or []]
        ids = [str(i) for i in request.get('DeviceIDs') or []]
        if vendor == 'nvidia' and ('gpu' in capabilities or request.get('Driver') == 'nvidia'
                                   or any(i.startswith('nvidia.com/') for i in ids)):
            reasons.append('device request %s' % (','.join(ids) or 'count=%s' % request.get('Count')))
        elif vendor == 'neuron' and any(i.startswith('aws.amazon.com/neuron') for i in ids):
            reasons.append('device request %s' % ','.join(ids))
    for device in host.get('Devices') or []:
        path = str(device.get('PathOnHost') or '')
        if path.startswith(DEVICE_PREFIXES[vendor]):
            reasons.append('device %s' % path)
    return reasons


def docker_containers(vendor: str, api: t.Any) -> list[dict[str, t.Any]]:
    """The running containers that use the vendor's devices, by the Engine API
    (GET /containers/json lists the running ones; each is inspected, as the list
    does not carry HostConfig.Runtime or DeviceRequests)."""
    status, body = api.call('GET', '/containers/json')
    if status != 200:
        raise RuntimeError('GET /containers/json answered %s' % status)
    found = []
    for summary in json.loads(body or b'[]'):
        status, body = api.call('GET', '/containers/%s/json' % summary['Id'])
        if status != 200:
            continue  # gone since the list
        inspect = json.loads(body)
        reasons = docker_gpu_reasons(vendor, inspect)
        if reasons:
            found.append({'engine': 'docker', 'id': inspect['Id'], 'name': str(inspect.get('Name', '')).lstrip('/'),
                          'image': (inspect.get('Config') or {}).get('Image', ''), 'why': reasons})
    return found


def active_services(module: t.Any, vendor: str) -> list[dict[str, t.Any]]:
    """The vendor's services (SERVICES) that are running, by one `systemctl show`: unit (its Id)
    and pid (its main process). None without systemd."""
    names = SERVICES[vendor]
    systemctl = module.get_bin_path('systemctl')
    if not names or not systemctl:
        return []
    rc, out, err = module.run_command([systemctl, 'show', '--property=Id,ActiveState,MainPID']
                                      + ['%s.service' % n for n in names])
    if rc != 0:
        return []
    return [{'unit': unit.get('Id', ''), 'pid': int(unit.get('MainPID') or 0)}
            for unit in parse_show(out) if unit.get('ActiveState') in ('active', 'activating', 'reloading')]


def loaded_modules(vendor: str, sys_module: str = '/sys/module',
                   proc_modules: str = '/proc/modules') -> dict[str, t.Optional[int]]:
    """The vendor's loaded kernel modules and their reference counts: /sys/module/<m>/refcnt,
    else the third column of /proc/modules. None where neither gives a number: the kernel
    prints '-' there when it cannot count (a kernel without module unloading, or a sandbox,
    as on the lent H100: tests/fixtures/hardware/h100-2026-11-27-issue27-holders/host.txt)."""
    listed = {}
    for line in (_rootfs.read_text('/', proc_modules) or '').splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] in UNLOAD[vendor]:
            listed[fields[0]] = int(fields[2]) if fields[2].isdigit() else None
    loaded = {}
    for name in UNLOAD[vendor]:
        text = _rootfs.read_text('/', os.path.join(sys_module, name, 'refcnt'))
        if text is not None and text.strip().isdigit():
            loaded[name] = int(text.strip())
        elif name in listed:
            loaded[name] = listed[name]
    return loaded


def in_use(vendor: str, loaded: t.Mapping[str, t.Optional[int]]) -> t.Optional[str]:
    """Why the modules cannot be removed, or None. The driver container's rule, with
    nvidia_drm added: a module may be held only by its loaded users among the vendor's
    modules (USERS), each of which holds one reference. A count that cannot be read is
    taken as in use: nothing proves the driver is free."""
    unknown = sorted(m for m, count in loaded.items() if count is None)
    if unknown:
        return 'the reference count of %s cannot be read' % ', '.join(unknown)
    busy = []
    for name in UNLOAD[vendor]:
        if name not in loaded:
            continue
        users = [u for u in USERS.get(name, ()) if u in loaded]
        if loaded[name] > len(users):
            busy.append('%s (refcnt %d, %d loaded users)' % (name, loaded[name], len(users)) if users
                        else '%s (refcnt %d)' % (name, loaded[name]))
    return ('in use: ' + ', '.join(busy)) if busy else None


def load_order(vendor: str, loaded: t.Iterable[str]) -> list[str]:
    """The modules to load again: those that were loaded, and the ones always needed."""
    wanted = set(loaded) | set(ALWAYS_LOAD[vendor])
    return [m for m in LOAD[vendor] if m in wanted]


def unload_order(vendor: str, loaded: t.Iterable[str]) -> list[str]:
    loaded = set(loaded)
    return [m for m in UNLOAD[vendor] if m in loaded]
