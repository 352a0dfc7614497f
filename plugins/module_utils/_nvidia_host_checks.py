# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA host checks of accel.nodes.nvidia_cuda_check: CUDA through the
driver API on every GPU (in a forked child, _cuda), /dev/nvidia-uvm, persistence
mode, the NVSwitch fabric and Fabric Manager. For that module and for
accel.nodes.node_probe, which runs them in the run that reads the rest of what
a validation needs.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

from ansible_collections.accel.nodes.plugins.module_utils import _cuda
from ansible_collections.accel.nodes.plugins.module_utils import _nvidia
from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

# accel.nodes.nvidia_cuda_check's options; node_probe's cuda option takes the same.
ARGUMENT_SPEC = dict(
    library=dict(type='str', default=_cuda.LIBRARY),
    search_loader=dict(type='bool', default=True),
    library_dirs=dict(type='list', elements='path', default=list(_cuda.LIBRARY_DIRS)),
    cuda_visible_devices=dict(type='str'),
    environment=dict(type='dict', default={}),
    allocation_bytes=dict(type='int', default=1048576),
    timeout=dict(type='int', default=120),
    root=dict(type='path', default='/'),
    expect_persistence=dict(type='bool'),
    nvswitch=dict(type='bool'),
    fabric_manager_service=dict(type='str', default='nvidia-fabricmanager'),
    nvidia_smi_path=dict(type='path'),
    skip=dict(type='dict', default={}),
    fail_on_error=dict(type='bool', default=True),
)

CHECKS = ['cuda', 'nvidia_uvm', 'nvidia_persistence_mode', 'nvswitch_fabric', 'nvidia_fabricmanager']
COMMAND_ENV = {'LANG': 'C', 'LC_ALL': 'C'}
UVM = '/dev/nvidia-uvm'


def _check(name: str, status: str, detail: str, measured: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {'name': name, 'layer': 'host', 'status': status, 'detail': detail, 'measured': measured or {}}


def _error_text(error: Dict[str, Any]) -> str:
    text = error['name'] + (' (%s)' % error['string'] if error.get('string') and error['string'] != error['name'] else '')
    return '%s: %s' % (error['call'], text) if error['call'] not in ('dlopen', 'dlsym', 'probe') else error['string']


def judge_cuda(result: Dict[str, Any], size: int, environment: Dict[str, str]) -> Dict[str, Any]:
    """The cuda check from what the probe returned."""
    measured = {'elapsed_ms': result.get('elapsed_ms'), 'library': result.get('library'),
                'driver_version': result.get('driver_version'), 'device_count': result.get('device_count'),
                'environment': environment,
                'failed': [{'index': d['index'], 'pci_bus_id': d['pci_bus_id'], 'error': d['error']}
                           for d in result.get('devices') or [] if d['status'] != 'pass']}
    where = ''.join(', with %s=%s' % item for item in sorted(environment.items()))
    took = ', in %s ms' % result.get('elapsed_ms')
    error = result.get('error')
    if error:
        if error['call'] == 'cuInit':
            detail = 'cuInit failed: %s' % _error_text(error).split(': ', 1)[1]
        else:
            detail = _error_text(error)
        return _check('cuda', 'fail', '%s%s%s: %s' % (detail, where, took, error['hint']), measured)
    devices = result.get('devices') or []
    if not devices:
        return _check('cuda', 'fail', 'CUDA initialised but sees no GPU%s%s: %s' % (where, took, _cuda.HINTS['CUDA_ERROR_NO_DEVICE']),
                      measured)
    failed = [d for d in devices if d['status'] != 'pass']
    if failed:
        parts = ['GPU %d%s %s' % (d['index'], ' (%s)' % ', '.join(filter(None, [d['name'], d['pci_bus_id']])) if d['name'] or d['pci_bus_id'] else '',
                                  _error_text(d['error'])) for d in failed]
        hints = sorted(set(d['error']['hint'] for d in failed))
        return _check('cuda', 'fail', '%d of %d GPU(s) fail%s%s: %s: %s' % (len(failed), len(devices), where, took, '; '.join(parts), '; '.join(hints)),
                      measured)
    return _check('cuda', 'pass', 'CUDA %s (%s): %d of %d GPU(s) allocate %d bytes and copy them host->device->host intact%s%s'
                  % (result.get('driver_version') or '?', result.get('library'), len(devices), len(devices), size, where, took), measured)


def judge_uvm(before: bool, after: bool, probed: bool) -> Dict[str, Any]:
    measured = {'before_cuda': before, 'after_cuda': after}
    if after and not before and probed:
        return _check('nvidia_uvm', 'pass', '%s exists; it did not before this check initialised CUDA, so containers started earlier '
                      'after boot had none' % UVM, measured)
    if after:
        return _check('nvidia_uvm', 'pass', '%s exists' % UVM, measured)
    # nvidia-modprobe(1): the driver's user-space components run it to load the
    # modules and create their device files; -u (--unified-memory) is nvidia-uvm.
    return _check('nvidia_uvm', 'fail', '%s is missing, so CUDA in containers fails: load the nvidia-uvm kernel module and create its '
                  'device file: nvidia-modprobe -u -c=0' % UVM, measured)


def judge_persistence(gpus: Optional[List[Dict[str, Any]]], smi_error: Optional[str], expected: bool) -> Dict[str, Any]:
    word = 'on' if expected else 'off'
    if gpus is None:
        return _check('nvidia_persistence_mode', 'fail', 'cannot read persistence mode: %s: install or load the driver '
                      '(accel.nodes.nvidia_driver)' % smi_error, {'expected': expected})
    modes = dict((g['pci_bus_id'], g['persistence_mode']) for g in gpus)
    wrong = sorted(bus for bus, mode in modes.items() if mode is not expected)
    measured = {'expected': expected, 'gpus': modes}
    if not gpus:
        return _check('nvidia_persistence_mode', 'fail', 'nvidia-smi lists no GPU to read persistence mode from', measured)
    if wrong:
        fix = ('enable nvidia-persistenced (accel.nodes.nvidia_driver, nvidia_driver_persistence_mode: true; systemctl enable --now '
               'nvidia-persistenced)' if expected else 'stop nvidia-persistenced, or expect persistence mode on')
        return _check('nvidia_persistence_mode', 'fail', 'persistence mode is not %s on %s: %s' % (word, ', '.join(wrong), fix), measured)
    return _check('nvidia_persistence_mode', 'pass', 'persistence mode is %s on %d GPU(s)' % (word, len(gpus)), measured)


def judge_fabric(gpus: Optional[List[Dict[str, Any]]], smi_error: Optional[str], service: str) -> Dict[str, Any]:
    if gpus is None:
        return _check('nvswitch_fabric', 'fail', 'cannot read the fabric state: %s: install or load the driver (accel.nodes.nvidia_driver)'
                      % smi_error, {})
    states = dict((g['pci_bus_id'], {'state': g['fabric_state'], 'status': g['fabric_status']}) for g in gpus)
    measured = {'gpus': states}
    reported = dict((bus, s) for bus, s in states.items() if s['state'] is not None)
    if not reported:
        return _check('nvswitch_fabric', 'skip', 'skipped: the driver reports no fabric state for %s (GPUs before Hopper have none); '
                      'the %s check stands for it' % (', '.join(sorted(states)) or 'any GPU', service), measured)
    bad = []
    for bus in sorted(reported):
        state, status = reported[bus]['state'], reported[bus]['status']
        if state == _cuda.FABRIC_DONE and status == _cuda.FABRIC_OK_STATUS:
            continue
        if state == _cuda.FABRIC_DONE:
            bad.append('%s completed with status %s: the GPU failed to register with the fabric; read journalctl -u %s, '
                       'then reset the GPU or reboot' % (bus, status, service))
        elif state == 'In Progress':
            bad.append('%s is still In Progress: Fabric Manager has not finished training the fabric; wait, then read journalctl -u %s'
                       % (bus, service))
        elif state == 'Not Started':
            bad.append('%s is Not Started: Fabric Manager did not configure it; start %s at the driver\'s version' % (bus, service))
        else:
            bad.append('%s is %s (status %s): read journalctl -u %s' % (bus, state, status, service))
    if bad:
        return _check('nvswitch_fabric', 'fail', 'fabric state: ' + '; '.join(bad), measured)
    return _check('nvswitch_fabric', 'pass', 'fabric state Completed, status Success on %d GPU(s)' % len(reported), measured)


def judge_service(rc: Optional[int], state: str, service: str) -> Dict[str, Any]:
    measured = {'unit': service, 'active_state': state}
    if state == 'active':
        return _check('nvidia_fabricmanager', 'pass', '%s is active' % service, measured)
    if rc is None:
        return _check('nvidia_fabricmanager', 'fail', 'cannot ask systemd about %s: %s' % (service, state), measured)
    return _check('nvidia_fabricmanager', 'fail', '%s is %s, so CUDA cannot start on this NVSwitch system: install nvidia-fabricmanager '
                  'at exactly the driver\'s version and run systemctl enable --now %s (journalctl -u %s says why it stopped)'
                  % (service, state or 'unknown', service, service), measured)


def _find_smi(explicit: Optional[str]) -> Optional[str]:
    if explicit:
        return explicit
    for directory in os.environ.get('PATH', '').split(os.pathsep) + _nvidia.SMI_SEARCH_DIRS:
        path = os.path.join(directory, 'nvidia-smi')
        if directory and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def run_smi(module: Any, explicit: Optional[str]):
    """(gpus, None) from nvidia-smi -q -x, or (None, why not)."""
    path = _find_smi(explicit)
    if path is None:
        return None, 'nvidia-smi not found'
    try:
        rc, out, err = module.run_command([path, '-q', '-x'], environ_update=COMMAND_ENV, handle_exceptions=False)
    except OSError as e:
        return None, '%s: %s' % (path, e)
    gpus = _cuda.gpu_health(out)
    if gpus is None:
        return None, '%s -q -x exited %d without XML: %s' % (path, rc, ' '.join((err or out or '').split())[:300])
    return gpus, None


def run_systemctl(module: Any, service: str):
    """(rc, ActiveState word); rc None when systemctl could not run."""
    path = module.get_bin_path('systemctl')
    if path is None:
        return None, 'systemctl not found'
    try:
        rc, out, _err = module.run_command([path, 'is-active', service], environ_update=COMMAND_ENV, handle_exceptions=False)
    except OSError as e:
        return None, str(e)
    return rc, (out.strip().splitlines() or [''])[0]


def run(module: Any, p: Dict[str, Any]) -> Dict[str, Any]:
    """The module's result (changed, status, checks, cuda, msg, elapsed_ms) for params p; fails the module on bad
    params, never on a failed check."""
    start = time.monotonic()
    root = p['root'] or '/'
    unknown = sorted(set(p['skip']) - set(CHECKS))
    if unknown:
        module.fail_json(msg='skip: unknown check(s) %s; the checks are %s' % (', '.join(unknown), ', '.join(CHECKS)))
    if p['allocation_bytes'] < 1 or p['timeout'] < 1:
        module.fail_json(msg='allocation_bytes and timeout must be positive, not %d and %d' % (p['allocation_bytes'], p['timeout']))
    environment = dict((str(k), str(v)) for k, v in p['environment'].items())
    if p['cuda_visible_devices'] is not None:
        environment['CUDA_VISIBLE_DEVICES'] = p['cuda_visible_devices']
    skip = p['skip']
    checks = []
    cuda = None

    uvm_before = _rootfs.exists(root, UVM)
    if 'cuda' in skip:
        checks.append(_check('cuda', 'skip', 'skipped: %s' % skip['cuda']))
    else:
        forked = time.monotonic()
        cuda, why = _cuda.run_in_child(_cuda.child_probe, dict(
            library=p['library'], library_dirs=p['library_dirs'], search_loader=p['search_loader'],
            size=p['allocation_bytes'], environment=environment), p['timeout'])
        if cuda is None:
            cuda = {'library': None, 'driver_version': None, 'device_count': None, 'devices': [],
                    'error': {'call': 'probe', 'code': None, 'name': 'PROBE_FAILED', 'string': 'the CUDA probe ' + why,
                              'hint': _cuda.DEFAULT_HINT}}
        cuda.setdefault('devices', [])
        cuda['environment'] = environment
        cuda['elapsed_ms'] = round((time.monotonic() - forked) * 1000, 1)
        checks.append(judge_cuda(cuda, p['allocation_bytes'], environment))
    if 'nvidia_uvm' in skip:
        checks.append(_check('nvidia_uvm', 'skip', 'skipped: %s' % skip['nvidia_uvm']))
    else:
        checks.append(judge_uvm(uvm_before, _rootfs.exists(root, UVM), 'cuda' not in skip))

    nvswitch = p['nvswitch']
    switches = None
    if nvswitch is None:
        switches = _cuda.nvswitches(root)
        nvswitch = bool(switches)
    want_persistence = p['expect_persistence'] is not None and 'nvidia_persistence_mode' not in skip
    want_fabric = nvswitch and 'nvswitch_fabric' not in skip
    gpus, smi_error = run_smi(module, p['nvidia_smi_path']) if want_persistence or want_fabric else (None, None)
    if 'nvidia_persistence_mode' in skip:
        checks.append(_check('nvidia_persistence_mode', 'skip', 'skipped: %s' % skip['nvidia_persistence_mode']))
    elif want_persistence:
        checks.append(judge_persistence(gpus, smi_error, p['expect_persistence']))
    if nvswitch:
        if 'nvswitch_fabric' in skip:
            checks.append(_check('nvswitch_fabric', 'skip', 'skipped: %s' % skip['nvswitch_fabric']))
        else:
            checks.append(judge_fabric(gpus, smi_error, p['fabric_manager_service']))
        if 'nvidia_fabricmanager' in skip:
            checks.append(_check('nvidia_fabricmanager', 'skip', 'skipped: %s' % skip['nvidia_fabricmanager']))
        else:
            rc, state = run_systemctl(module, p['fabric_manager_service'])
            checks.append(judge_service(rc, state, p['fabric_manager_service']))
        if switches:
            for check in checks[-2:]:
                check['measured']['nvswitches'] = switches

    failed = [c for c in checks if c['status'] == 'fail']
    return dict(
        changed=False,
        status='fail' if failed else 'pass',
        checks=checks,
        cuda=cuda,
        msg='; '.join('%s: %s' % (c['name'], c['detail']) for c in failed) or
            'NVIDIA host checks pass: ' + ', '.join('%s %s' % (c['name'], c['status']) for c in checks),
        elapsed_ms=round((time.monotonic() - start) * 1000, 1),
    )
