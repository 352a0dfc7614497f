# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What holds a driver (module_utils/_holders.py), over fake /proc and /sys trees
made from what the lent H100 and NVIDIA's driver manager showed (tests/fixtures/holders)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _holders

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'holders'
H100_BUSY = json.loads((FIXTURES / 'h100-busy.json').read_text())
CONTAINER = 'c0ffee' * 10 + 'abcd'


def fake_proc(root: Path, processes):
    """processes: {pid: (comm, [fd targets], cgroup text)}"""
    for pid, (comm, targets, cgroup) in processes.items():
        d = root / str(pid)
        (d / 'fd').mkdir(parents=True)
        (d / 'comm').write_text(comm + '\n')
        (d / 'cmdline').write_bytes(comm.encode() + b'\0--flag\0')
        (d / 'cgroup').write_text(cgroup)
        for fd, target in enumerate(targets):
            os.symlink(target, d / 'fd' / str(fd))
    (root / 'self').mkdir()  # not a pid
    return root


def test_the_h100_cuda_process_is_found_with_every_device_node_it_holds(tmp_path):
    held = H100_BUSY['processes'][0]
    proc = fake_proc(tmp_path, {
        held['pid']: ('python3', held['devices'] + ['/usr/lib/libcuda.so.1', 'pipe:[1234]'], '0::/\n'),
        900: ('bash', ['/dev/pts/0', '/dev/null'], '0::/\n'),
        901: ('neuron-monitor', ['/dev/neuron0'], '0::/\n'),
    })
    found = _holders.device_processes('nvidia', str(proc))
    assert found == [{'pid': held['pid'], 'comm': 'python3', 'cmdline': 'python3 --flag',
                      'devices': held['devices'], 'container': None}]
    assert [p['comm'] for p in _holders.device_processes('neuron', str(proc))] == ['neuron-monitor']
    assert _holders.device_processes('nvidia', str(proc), skip=[held['pid']]) == []


def test_a_process_in_a_container_names_it_by_its_cgroup(tmp_path):
    proc = fake_proc(tmp_path, {
        10: ('trainer', ['/dev/nvidia0'], '0::/system.slice/docker-%s.scope\n' % CONTAINER),
        11: ('pod', ['/dev/nvidia1'], '12:devices:/kubepods/burstable/pod1/cri-containerd-%s.scope\n' % CONTAINER),
        12: ('old', ['/dev/nvidia2'], '4:memory:/docker/%s\n' % CONTAINER),
    })
    assert [p['container'] for p in _holders.device_processes('nvidia', str(proc))] == [CONTAINER] * 3


def inspect(runtime='runc', requests=(), devices=()):
    """The fields of the Engine API's GET /containers/{id}/json that the reasons read
    (https://docs.docker.com/reference/api/engine/: HostConfig.Runtime, DeviceRequests, Devices)."""
    return {'Id': CONTAINER, 'Name': '/trainer', 'Config': {'Image': 'busybox'},
            'HostConfig': {'Runtime': runtime, 'DeviceRequests': list(requests), 'Devices': list(devices)}}


def test_docker_reasons_name_the_runtime_the_gpus_request_and_the_device_nodes():
    # docker run --gpus all: Driver "", Count -1, Capabilities [["gpu"]] (the CLI's gpus option).
    gpus_all = {'Driver': '', 'Count': -1, 'DeviceIDs': None, 'Capabilities': [['gpu']], 'Options': {}}
    cdi = {'Driver': 'cdi', 'Count': 0, 'DeviceIDs': ['nvidia.com/gpu=0'], 'Capabilities': None}
    assert _holders.docker_gpu_reasons('nvidia', inspect('nvidia')) == ['runtime nvidia']
    assert _holders.docker_gpu_reasons('nvidia', inspect(requests=[gpus_all])) == ['device request count=-1']
    assert _holders.docker_gpu_reasons('nvidia', inspect(requests=[cdi])) == ['device request nvidia.com/gpu=0']
    assert _holders.docker_gpu_reasons('nvidia', inspect(devices=[{'PathOnHost': '/dev/nvidia0'}])) == ['device /dev/nvidia0']
    assert _holders.docker_gpu_reasons('nvidia', inspect()) == []
    assert _holders.docker_gpu_reasons('neuron', inspect('oci-neuron', devices=[{'PathOnHost': '/dev/neuron0'}])) == [
        'runtime oci-neuron', 'device /dev/neuron0']
    assert _holders.docker_gpu_reasons('neuron', inspect('nvidia', requests=[gpus_all])) == []


def modules_tree(tmp_path, proc_modules, refcnt=None):
    (tmp_path / 'proc_modules').write_text(proc_modules)
    for name, count in (refcnt or {}).items():
        (tmp_path / 'sys' / name).mkdir(parents=True)
        (tmp_path / 'sys' / name / 'refcnt').write_text('%d\n' % count)
    (tmp_path / 'sys').mkdir(exist_ok=True)
    return str(tmp_path / 'sys'), str(tmp_path / 'proc_modules')


def test_the_h100s_kernel_counts_no_references_so_the_driver_counts_as_in_use(tmp_path):
    loaded = _holders.loaded_modules('nvidia', *modules_tree(tmp_path, (FIXTURES / 'h100-proc-modules.txt').read_text()))
    assert loaded == {'nvidia_uvm': None, 'nvidia': None}
    assert _holders.in_use('nvidia', loaded) == 'the reference count of nvidia, nvidia_uvm cannot be read'


def test_the_driver_managers_refusal_is_reproduced(tmp_path):
    loaded = _holders.loaded_modules('nvidia', *modules_tree(tmp_path, (FIXTURES / 'driver-container-lsmod.txt').read_text()))
    assert loaded == {'nvidia_drm': 0, 'nvidia_modeset': 1, 'nvidia': 17}
    # nvidia_modeset's 1 is nvidia_drm, which goes first; nvidia's 17 are more than its one loaded user.
    assert _holders.in_use('nvidia', loaded) == 'in use: nvidia (refcnt 17, 1 loaded users)'


def test_sysfs_counts_win_and_a_free_driver_unloads_dependents_first(tmp_path):
    tree = modules_tree(tmp_path, 'nvidia 1 - - Live 0x0\n', {'nvidia': 2, 'nvidia_uvm': 0, 'nvidia_modeset': 0})
    loaded = _holders.loaded_modules('nvidia', *tree)
    assert loaded == {'nvidia_modeset': 0, 'nvidia_uvm': 0, 'nvidia': 2}
    assert _holders.in_use('nvidia', loaded) is None
    assert _holders.unload_order('nvidia', loaded) == ['nvidia_modeset', 'nvidia_uvm', 'nvidia']
    assert _holders.load_order('nvidia', loaded) == ['nvidia', 'nvidia_uvm', 'nvidia_modeset']
    # A driver that was not loaded at all comes up with what CUDA needs.
    assert _holders.load_order('nvidia', {}) == ['nvidia', 'nvidia_uvm']
    assert _holders.in_use('nvidia', {'nvidia': 1}) == 'in use: nvidia (refcnt 1)'
    assert _holders.in_use('nvidia', {'nvidia_modeset': 1, 'nvidia': 1}) == 'in use: nvidia_modeset (refcnt 1)'
    assert _holders.in_use('neuron', {'neuron': 0}) is None
