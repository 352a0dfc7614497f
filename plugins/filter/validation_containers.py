# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The container layer of the accel.nodes.accelerator_validation role: which
containers prove the paths users type on this node (plan), and what their
output proves (checks). Documented in validation_container_plan.yml and
validation_container_checks.yml next to this file."""

from __future__ import annotations

import re
import tomllib
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.module_utils._cri import hints as cri_hints

# Docker's --gpus as the CLI sends it: docker/cli opts/gpus.go sets Count -1
# for "all", DeviceIDs for "device=...", and Capabilities [["gpu"]] with no
# driver when none is given. The daemon then sets NVIDIA_VISIBLE_DEVICES to
# "all", "0,...,count-1" or the ids (moby daemon/nvidia_linux.go).
_GPU_CAPABILITIES = [['gpu']]

# NVIDIA Container Toolkit: the default mode is "auto" (internal/config/config.go).
# The hook that Docker adds for --gpus resolves it to "legacy" (v1.17.8
# internal/info/auto.go; v1.20.0 cmd/nvidia-container-runtime-hook/hook_config.go,
# WithDefaultMode(legacy)), and outside legacy mode it refuses to run, so --gpus
# then works only through the nvidia runtime. The runtime resolves "auto" to
# legacy up to 1.17 and to jit-cdi from 1.18 on ("Default to jit-cdi mode in the
# nvidia runtime", CHANGELOG v1.18.0-rc.1; v1.20.0 internal/info/auto.go): a spec
# made for each container, with no nvidia-container-cli.
_HOOK_MODES = ('auto', 'legacy')
_JIT_CDI_FROM = (1, 18)
# Docker's CDI: opt-in (features.cdi) from 25.0, on by default from 28.2 (moby
# cmd/dockerd/daemon.go, cdiEnabled); --gpus through CDI first, where a spec names
# the device, from 29.2 (moby#50228, daemon/devices_nvidia_linux.go).
_DOCKER_CDI_GPUS_FROM = (29, 2)
_CDI_ALL = 'nvidia.com/gpu=all'
_TOOLKIT_VERSION = re.compile(r'version (\d+)\.(\d+)\.(\d+)')

_GPU_LINE = re.compile(r'^GPU \d+:', re.MULTILINE)
_GPU_UUID = re.compile(r'^GPU \d+:.*\(UUID: (GPU-[^)\s]+)\)', re.MULTILINE)

# What a failed container said, and what to do about it.
_HINTS = (
    # nvidia-smi's own message when it cannot load NVML. In CDI mode the
    # update-ldcache hook of toolkit 1.17 and earlier runs "ldconfig -N" (no
    # cache) when the image has no /etc/ld.so.cache (v1.17.8
    # cmd/nvidia-cdi-hook/update-ldcache/update-ldcache.go); 1.18 and later
    # always write one ("Always update the ldcache in the container",
    # CHANGELOG v1.18.0-rc.6; v1.20.0 internal/ldconfig/ldconfig.go runs
    # "-C /etc/ld.so.cache"), as the H200 run of 2026-11-27 saw with 1.20.0.
    (re.compile(r"couldn't find libnvidia-ml\.so"),
     'the image has no ld cache: the toolkit mounts the driver libraries, but in CDI mode toolkit 1.17 and earlier '
     'update /etc/ld.so.cache only where the image has one, so nothing finds libnvidia-ml.so. Upgrade the toolkit '
     '(1.18 and later always write the cache), use an image with /etc/ld.so.cache (Debian, Ubuntu and CUDA images '
     'have one; add "RUN ldconfig", or "RUN touch /etc/ld.so.cache" where the image has no ldconfig), or set '
     'accelerator_validation_container_env: {LD_LIBRARY_PATH: <the driver library directory>}'),
    (re.compile(r'invoking the NVIDIA Container Runtime Hook directly'),
     'the toolkit is not in legacy mode, where docker run --gpus works only through the nvidia runtime: make nvidia '
     "Docker's default runtime (accel.nodes.nvidia_container_toolkit: nvidia_container_toolkit_default_runtime: true)"),
    (re.compile(r'could not select device driver'),
     'Docker has no nvidia device driver: it registers one only when nvidia-container-runtime-hook is on its PATH '
     'as it starts. Install the NVIDIA Container Toolkit, then restart Docker'),
    (re.compile(r'unresolvable CDI devices'),
     'the CDI spec does not name the device: generate it again (nvidia-ctk cdi generate, or '
     'accel.nodes.nvidia_container_toolkit) after a driver or GPU change'),
)


def toolkit_mode(config: str | None) -> str | None:
    """The [nvidia-container-runtime] mode of the toolkit's config.toml: the
    toolkit's default "auto" where the file or the key is missing, None where
    the file is not TOML."""
    if config is None or not config.strip():
        return 'auto'
    try:
        data = tomllib.loads(config)
    except tomllib.TOMLDecodeError:
        return None
    mode = data.get('nvidia-container-runtime', {}).get('mode', 'auto')
    return mode if isinstance(mode, str) else None


def _release(text: t.Any, pattern: re.Pattern[str] = re.compile(r'(\d+)\.(\d+)')) -> tuple[int, ...] | None:
    match = pattern.search(str(text or ''))
    return tuple(int(n) for n in match.groups()) if match else None


def runtime_mode(mode: str | None, toolkit_version: t.Any = None) -> str | None:
    """What the nvidia runtime runs in: config.toml's mode, "auto" resolved as the installed toolkit resolves it
    on a host with NVML (from `nvidia-ctk --version`; unknown: as 1.17 did)."""
    if mode != 'auto':
        return mode
    release = _release(toolkit_version, _TOOLKIT_VERSION)
    return 'jit-cdi' if release is not None and release[:2] >= _JIT_CDI_FROM else 'legacy'


_RUNTIME_PATHS = {
    'legacy': 'the nvidia runtime in legacy mode (its hook runs nvidia-container-cli)',
    'cdi': 'the nvidia runtime in cdi mode (the CDI spec on the node)',
    'jit-cdi': 'the nvidia runtime in jit-cdi mode (a CDI spec made for the container)',
    'csv': 'the nvidia runtime in csv mode',
}


def _case(name: str, vendor: str, how: str, command: list[str], requested: list[int], total: int,
          uuids: list[str | None] | None = None, skip: str = '', runtime: str = '', env: dict[str, str] | None = None,
          devices: list[str] | None = None, device_requests: list[dict[str, t.Any]] | None = None,
          path: str = '') -> dict[str, t.Any]:
    expected_uuids = None
    if uuids and not skip and all(uuids[i] for i in requested):
        expected_uuids = [uuids[i] for i in requested]
    return {
        'name': name, 'vendor': vendor, 'how': how, 'path': path, 'command': list(command),
        'runtime': runtime, 'env': env or {}, 'devices': devices or [], 'device_requests': device_requests or [],
        'requested': requested, 'total': total, 'expected_uuids': expected_uuids, 'skip': skip,
    }


def _cdi_skip(engine: dict[str, t.Any], cdi_devices: list[str] | None) -> str:
    """Why --device nvidia.com/gpu=all cannot work on this node, '' where it can."""
    version = engine.get('version') or 'unknown'
    if _release(version) is not None and _release(version) < (25, 0):
        return 'Docker %s has no CDI: --device nvidia.com/gpu=all needs Docker 25.0 or later' % version
    if not engine.get('cdi_spec_dirs'):
        return ('CDI is off in Docker %s: it reads CDI specs with features.cdi true in daemon.json before 28.2, and '
                'by default from 28.2 (nvidia_container_toolkit_cdi: true turns it on)' % version)
    if cdi_devices is not None and _CDI_ALL not in cdi_devices:
        return ('no CDI spec on this node names %s (nvidia-ctk cdi list): nvidia_container_toolkit_cdi: true keeps '
                'one, and toolkit 1.18 and later keep one where the driver is in modules.dep (nvidia-cdi-refresh)'
                % _CDI_ALL)
    return ''


def _nvidia_cases(gpus: list[dict[str, t.Any]], engine: dict[str, t.Any], mode: str | None, runtime: str,
                  command: list[str], toolkit_version: t.Any = None,
                  cdi_devices: list[str] | None = None) -> list[dict[str, t.Any]]:
    total = len(gpus)
    if total == 0:
        return [_case('container_nvidia_gpus_all', 'nvidia', '--gpus all', command, [], 0,
                      skip='the facts list no NVIDIA GPU: nothing to ask for')]
    uuids = [gpu.get('uuid') for gpu in gpus]
    everything = list(range(total))
    # docker run --gpus works as typed when nvidia is the default runtime, or
    # through Docker's own hook in legacy mode; otherwise name the runtime.
    default_nvidia = engine.get('default_runtime') == runtime
    plain = default_nvidia or mode in _HOOK_MODES or mode is None
    gpus_runtime = '' if plain else runtime
    prefix = '' if plain else '--runtime=%s ' % runtime
    under_runtime = _RUNTIME_PATHS.get(runtime_mode(mode, toolkit_version) or '', 'the nvidia runtime')
    if default_nvidia or not plain:
        gpus_path = under_runtime
    elif (_release(engine.get('version')) or (0,)) >= _DOCKER_CDI_GPUS_FROM:
        gpus_path = ("Docker's CDI driver where a spec names the GPUs, else nvidia-container-runtime-hook (legacy "
                     "mode: nvidia-container-cli)")
    else:
        gpus_path = "Docker's nvidia driver: nvidia-container-runtime-hook, in legacy mode (nvidia-container-cli)"

    def gpus_case(name: str, flag: str, requested: list[int], request: dict[str, t.Any], skip: str = '') -> dict[str, t.Any]:
        return _case(name, 'nvidia', prefix + '--gpus ' + flag, command, requested, total, uuids, skip=skip,
                     runtime=gpus_runtime, device_requests=[dict(request, capabilities=_GPU_CAPABILITIES)],
                     path=gpus_path)

    cases = []
    if not plain:
        cases.append(_case(
            'container_nvidia_gpus_default_runtime', 'nvidia', '--gpus all', command, [], total,
            skip='docker run --gpus without --runtime=%s fails on this node: the toolkit is in %s mode and Docker\'s '
                 'default runtime is %s, and outside legacy mode the toolkit refuses the hook that --gpus adds. The '
                 '--gpus checks name the runtime. For --gpus as users type it, make %s the default runtime '
                 '(nvidia_container_toolkit_default_runtime: true)'
                 % (runtime, mode, engine.get('default_runtime') or 'unknown', runtime)))
    cases.append(gpus_case('container_nvidia_gpus_all', 'all', everything, {'count': -1}))
    if total >= 2:
        cases.append(gpus_case('container_nvidia_gpus_2', '2', [0, 1], {'count': 2}))
    else:
        cases.append(gpus_case('container_nvidia_gpus_2', '2', [], {'count': 2},
                               skip='the host has 1 GPU: --gpus 2 asks for more than there are'))
    ids = everything[:2]
    cases.append(gpus_case('container_nvidia_gpus_device', '\'"device=%s"\'' % ','.join(map(str, ids)), ids,
                           {'device_ids': [str(i) for i in ids]}))
    # The last GPU, so that on two or more GPUs the runtime must leave some out.
    # Never "none": it fails container creation in CDI mode.
    last = [total - 1]
    cases.append(_case('container_nvidia_visible_devices', 'nvidia',
                       '--runtime=%s -e NVIDIA_VISIBLE_DEVICES=%d' % (runtime, last[0]), command, last, total, uuids,
                       runtime=runtime, env={'NVIDIA_VISIBLE_DEVICES': str(last[0])}, path=under_runtime))
    # docker run --device nvidia.com/gpu=all: the CLI sends a CDI device request (docker/cli, opts/devices
    # and cdi.IsQualifiedName), which Docker's CDI driver answers from the specs.
    cases.append(_case('container_nvidia_cdi_all', 'nvidia', '--device %s' % _CDI_ALL, command, everything, total,
                       uuids, skip=_cdi_skip(engine, cdi_devices), runtime=gpus_runtime,
                       device_requests=[{'driver': 'cdi', 'device_ids': [_CDI_ALL]}],
                       path="Docker's CDI driver (the CDI spec on the node)"))
    return cases


def _neuron_cases(devices: list[dict[str, t.Any]], engine: dict[str, t.Any], runtime: str,
                  command: list[str]) -> list[dict[str, t.Any]]:
    mode = engine.get('neuron_mode') or 'device'
    name = 'container_neuron_' + mode
    if mode == 'oci_hook':
        return [_case(name, 'neuron', '--runtime=%s -e AWS_NEURON_VISIBLE_DEVICES=0' % runtime, command, [0],
                      len(devices), runtime=runtime, env={'AWS_NEURON_VISIBLE_DEVICES': '0'})]
    return [_case(name, 'neuron', '--device=/dev/neuron0', command, [0], len(devices),
                  devices=['/dev/neuron0:/dev/neuron0'])]


def validation_container_plan(facts: dict[str, t.Any], engine: dict[str, t.Any], image: str, check_mode: bool = False,
                              image_present: bool | None = None, toolkit_config: str | None = None,
                              nvidia_runtime: str = 'nvidia', nvidia_command: list[str] | None = None,
                              neuron_runtime: str = 'oci-neuron', neuron_command: list[str] | None = None,
                              toolkit_version: t.Any = None, cdi_devices: t.Any = None) -> dict[str, t.Any]:
    """{skip: why the container layer does not run ('' when it does), cases: [...]}. toolkit_version: what
    `nvidia-ctk --version` printed; cdi_devices: what `nvidia-ctk cdi list` printed (None: not asked)."""
    if not isinstance(facts, dict) or not isinstance(engine, dict):
        raise AnsibleFilterError('validation_container_plan: needs the accelerator facts and the engine state as dicts')
    vendors = facts.get('vendors') or []
    mode = toolkit_mode(toolkit_config)
    skip = ''
    if not engine.get('present'):
        skip = 'no container engine'
    elif not engine.get('answers'):
        skip = 'Docker does not answer'
    elif not image:
        skip = 'accelerator_validation_image is not set'
    elif not vendors:
        skip = 'no accelerator to test'
    elif check_mode and not image_present:
        skip = ('check mode pulls no image, and %s is not on the node: run without --check to pull it, '
                'or load it on the node first' % image)
    cases: list[dict[str, t.Any]] = []
    if not skip and 'nvidia' in vendors:
        devices = None if cdi_devices is None else [line.strip() for line in str(cdi_devices).splitlines()]
        cases += _nvidia_cases((facts.get('nvidia') or {}).get('gpus') or [], engine, mode, nvidia_runtime,
                               nvidia_command or ['nvidia-smi', '-L'], toolkit_version, devices)
    if not skip and 'neuron' in vendors:
        cases += _neuron_cases((facts.get('neuron') or {}).get('devices') or [], engine, neuron_runtime,
                               neuron_command or ['neuron-ls', '-j'])
    return {'skip': skip, 'toolkit_mode': mode, 'runtime_mode': runtime_mode(mode, toolkit_version), 'cases': cases}


def _unit(vendor: str) -> str:
    return 'GPU(s)' if vendor == 'nvidia' else 'Neuron device(s)'


def _judge(case: dict[str, t.Any], run: dict[str, t.Any], layer: str = 'container') -> dict[str, t.Any]:
    output = str((run.get('container') or {}).get('Output') or '')
    exit_status = run.get('status')
    if case['vendor'] == 'nvidia':
        seen = len(_GPU_LINE.findall(output))
        uuids = _GPU_UUID.findall(output)
        seen_uuids = sorted(uuids) if uuids and len(uuids) == seen else None
    else:
        seen = output.count('"neuron_device"')
        seen_uuids = None
    expected = len(case['requested'])
    wrong = (seen == expected and seen_uuids is not None and case['expected_uuids'] is not None
             and seen_uuids != sorted(case['expected_uuids']))
    ok = exit_status == 0 and not run.get('failed') and seen == expected and not wrong
    said = '%s in a container (%s %s%s) sees %d of %d %s' % (
        ' '.join(case['command']), case.get('runner') or 'docker run', case['how'], ', through ' + case['path'] if case.get('path') else '', seen,
        case['total'], _unit(case['vendor']))
    if ok:
        detail = said + ', the %d asked for' % expected
    else:
        detail = said + ', expected %d' % expected
        if wrong:
            detail += ', but not the ones asked for (%s)' % ', '.join(case['expected_uuids'])
        error = str(run.get('msg') or ('exit %s' % exit_status if exit_status is not None else 'no exit status'))
        detail += ': ' + (error + ' ' + output[-300:]).strip()
        text = error + '\n' + output
        detail += ''.join(': ' + hint for hint in _hints(text, layer))
    return {
        'name': case['name'], 'layer': layer, 'status': 'pass' if ok else 'fail', 'detail': detail,
        'measured': {'seen': seen, 'expected': expected, 'total': case['total'], 'requested': case['requested'],
                     'runtime': case['runtime'] or None, 'path': case.get('path') or None, 'uuids': seen_uuids,
                     'exit_status': exit_status},
    }


def _hints(text: str, layer: str) -> list[str]:
    found = [hint for pattern, hint in _HINTS if pattern.search(text)]
    return found + (cri_hints(text) if layer == 'cri' else [])


def _restriction(vendor: str, pairs: list[tuple[dict[str, t.Any], dict[str, t.Any]]],
                 layer: str = 'container') -> dict[str, t.Any]:
    """Restriction is shown only by a container that asked for a strict subset and saw it."""
    ran = [(case, check) for case, check in pairs if check['status'] != 'skip']
    subsets = [(case, check) for case, check in ran if 0 < len(case['requested']) < case['total']]
    total = max([case['total'] for case, dummy in pairs] or [0])
    name = '%s_%s_restriction' % (layer, vendor)
    if not subsets:
        if not ran:
            reason = 'no %s container ran' % vendor
        elif total <= 1:
            reason = ('the host has %d %s: every request asks for all of them, so no container can show that '
                      'the others are kept out' % (total, _unit(vendor)))
        else:
            reason = 'no container asked for a part of the %d %s' % (total, _unit(vendor))
        return {'name': name, 'layer': layer, 'status': 'skip', 'detail': 'skipped: ' + reason,
                'measured': {'total': total}}
    failed = [case['how'] for case, check in subsets if check['status'] != 'pass']
    shown = ['%s saw %d of %d' % (case['how'], len(case['requested']), case['total'])
             for case, check in subsets if check['status'] == 'pass']
    if failed:
        detail = 'not shown: a container that asked for a part of the %d %s did not see exactly those: %s' % (
            total, _unit(vendor), '; '.join(failed))
    else:
        detail = 'containers see only the %s they ask for: %s' % (_unit(vendor), '; '.join(shown))
    return {'name': name, 'layer': layer, 'status': 'fail' if failed else 'pass', 'detail': detail,
            'measured': {'total': total, 'shown_by': [case['name'] for case, check in subsets]}}


def validation_container_checks(results: list[dict[str, t.Any]], layer: str = 'container') -> list[dict[str, t.Any]]:
    """The report's checks for the loop results of the validation containers: one per case, then one restriction
    check per vendor. layer: container (Docker's, accel.nodes.run_containers) or cri (accel.nodes.cri_containers)."""
    if not isinstance(results, list):
        raise AnsibleFilterError('validation_container_checks: needs the results list of the container loop')
    pairs = []
    for run in results:
        case = run.get('item')
        if not isinstance(case, dict) or 'requested' not in case:
            raise AnsibleFilterError('validation_container_checks: each result needs the case of '
                                     'validation_container_plan as its item')
        if case['skip'] or run.get('skipped'):
            check = {'name': case['name'], 'layer': layer, 'status': 'skip',
                     'detail': 'skipped: ' + (case['skip'] or 'not run'), 'measured': {}}
        else:
            check = _judge(case, run, layer)
        pairs.append((case, check))
    checks = [check for dummy, check in pairs]
    for vendor in dict.fromkeys(case['vendor'] for case, dummy in pairs):
        checks.append(_restriction(vendor, [pair for pair in pairs if pair[0]['vendor'] == vendor], layer))
    return checks


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'validation_container_plan': validation_container_plan,
            'validation_container_checks': validation_container_checks,
        }
