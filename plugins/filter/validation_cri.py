# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The CRI layer of the accel.nodes.accelerator_validation role: the runtime
as kubelet sees it through the container runtime interface (engine), which
pods prove the paths a Kubernetes pod takes to the accelerators (plan), and
the checks of the runtime's own state. What each pod's container saw is
judged as the container layer's are (validation_containers.py). Documented in
validation_cri_engine.yml, validation_cri_plan.yml and validation_cri_checks.yml
next to this file."""

from __future__ import annotations

import tomllib
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_containers import (
    _case, _release, runtime_mode, toolkit_mode, validation_container_checks)
from ansible_collections.accel.nodes.plugins.module_utils._cri import parse_info, parse_version

# CDI devices in a CRI container request (the CDIDevices field) came with
# containerd 1.7 (containerd/containerd#8252; enable_cdi, #6654); the device
# plugin's CDI strategies say "containerd 1.7 and newer" (k8s-device-plugin
# v0.20.0 docs/cdi.md, Prerequisites). containerd 2.0 turns CDI on by default.
_CRI_CDI_FROM = (1, 7)
# The toolkit's settings for unprivileged containers (nvidia-container-toolkit
# v1.20.0 api/config/v1/config.go and toml.go): by default NVIDIA_VISIBLE_DEVICES
# is honoured in any container; hardened, only as volume mounts under
# /var/run/nvidia-container-devices, as the device plugin's volume-mounts
# strategy sends them (k8s-device-plugin v0.20.0 internal/plugin/server.go).
_ENVVAR_KEY = 'accept-nvidia-visible-devices-envvar-when-unprivileged'
_MOUNTS_KEY = 'accept-nvidia-visible-devices-as-volume-mounts'
_DEVICE_LIST_DIR = '/var/run/nvidia-container-devices'
# Why the crictl answer means "no CRI here" rather than "the CRI is broken":
# nothing listens at the socket, or containerd runs with its CRI plugin
# disabled (Docker's containerd.io ships disabled_plugins = ["cri"]).
_NO_ENDPOINT = ('no such file or directory',)
_NO_CRI = ('unknown service runtime.v1.RuntimeService',)


def _dict(value: t.Any) -> dict[str, t.Any]:
    return value if isinstance(value, dict) else {}


def _said(result: dict[str, t.Any]) -> str:
    return str(result.get('stderr') or result.get('stdout') or result.get('msg') or '').strip()


def validation_cri_engine(version: dict[str, t.Any] | None, info: dict[str, t.Any] | None = None,
                          endpoint: str = '') -> dict[str, t.Any]:
    """The runtime as kubelet sees it, from node_probe's answers to `crictl version` and `crictl info`."""
    version, info = _dict(version), _dict(info)
    missing = not version or bool(version.get('skipped')) or version.get('rc') == 127
    answers = not missing and version.get('rc') == 0
    said = '' if missing or answers else _said(version)
    skip = ''
    if missing:
        skip = ('no crictl on the node: the CRI layer runs where crictl is (EKS and kubeadm nodes have it; '
                'install cri-tools) or where accelerator_validation_crictl names it')
    elif not answers and any(text in said for text in _NO_ENDPOINT):
        skip = 'no CRI runtime listens at %s: %s' % (endpoint or 'the endpoint', said)
    elif not answers and any(text in said for text in _NO_CRI):
        skip = ('the runtime at %s has no CRI (containerd with disabled_plugins = ["cri"], as Docker\'s containerd.io '
                'ships it)' % (endpoint or 'the endpoint'))
    names = parse_version(version.get('stdout')) if answers else {}
    state = parse_info(info.get('stdout')) if answers and info.get('rc') == 0 else parse_info('')
    return dict(state, present=not missing, answers=answers, skip=skip, error=said, endpoint=endpoint,
                runtime_name=names.get('RuntimeName'), version=names.get('RuntimeVersion'))


def _systemd(runtimes: dict[str, t.Any], handler: t.Any) -> bool:
    """Whether the handler's runtime uses the systemd cgroup driver (runc's SystemdCgroup option)."""
    return _dict(_dict(runtimes.get(handler)).get('options')).get('SystemdCgroup') is True


def _hardened(toolkit_config: str | None) -> bool:
    """Whether the toolkit takes NVIDIA_VISIBLE_DEVICES from unprivileged containers only as volume mounts."""
    try:
        data = tomllib.loads(toolkit_config or '')
    except tomllib.TOMLDecodeError:
        return False
    return data.get(_ENVVAR_KEY, True) is False and data.get(_MOUNTS_KEY, False) is True


def _cdi_skip(cri: dict[str, t.Any], name: str, cdi_devices: list[str] | None) -> str:
    version = cri.get('version') or 'unknown'
    found = _release(version)
    if found is not None and found < _CRI_CDI_FROM:
        return 'CDI devices through the CRI need containerd 1.7 or later (found %s)' % version
    if cri.get('enable_cdi') is False:
        return ("CDI is off in containerd's CRI plugin (enable_cdi = false): nvidia_container_toolkit_cdi: true "
                'turns it on')
    if cdi_devices is not None and name not in cdi_devices:
        return 'no CDI spec on this node names %s (nvidia-ctk cdi list)' % name
    return ''


def _nvidia_cases(gpus: list[dict[str, t.Any]], cri: dict[str, t.Any], handler: str, command: list[str],
                  toolkit_config: str | None, toolkit_version: t.Any,
                  cdi_devices: list[str] | None) -> list[dict[str, t.Any]]:
    total = len(gpus)
    if total == 0:
        return [dict(_case('cri_nvidia_visible_devices', 'nvidia', 'runtime handler %s' % handler, command, [], 0,
                           skip='the facts list no NVIDIA GPU: nothing to ask for'), runner='crictl runp')]
    uuids = [gpu.get('uuid') for gpu in gpus]
    runtimes = _dict(cri.get('runtimes'))
    mode = runtime_mode(toolkit_mode(toolkit_config), toolkit_version)
    path = 'the %s handler, the nvidia runtime in %s mode' % (handler, mode or 'its')
    last = total - 1

    def case(name: str, how: str, requested: list[int], handler: str, mounts: list[dict[str, str]] | None = None,
             cdi_devices: list[str] | None = None, **kwargs: t.Any) -> dict[str, t.Any]:
        kwargs.setdefault('path', path)
        built = _case(name, 'nvidia', how, command, requested, total, uuids, runtime=handler, **kwargs)
        return dict(built, runner='crictl runp', handler=handler, mounts=mounts or [], cdi_devices=cdi_devices or [],
                    systemd_cgroup=_systemd(runtimes, handler or cri.get('default_runtime')))

    if _hardened(toolkit_config):
        # As the device plugin's volume-mounts strategy asks: one /dev/null mount per device.
        visible = {'env': {'NVIDIA_VISIBLE_DEVICES': _DEVICE_LIST_DIR},
                   'mounts': [{'host_path': '/dev/null', 'container_path': '%s/%d' % (_DEVICE_LIST_DIR, last)}]}
        how = 'runtime handler %s, a volume mount %s/%d' % (handler, _DEVICE_LIST_DIR, last)
    else:
        visible = {'env': {'NVIDIA_VISIBLE_DEVICES': str(last)}}
        how = 'runtime handler %s, NVIDIA_VISIBLE_DEVICES=%d' % (handler, last)
    cases = [case('cri_nvidia_visible_devices', how, [last], handler, **visible)]
    cdi_name = 'nvidia.com/gpu=%d' % last
    cases.append(case('cri_nvidia_cdi', 'the default handler, CDI device %s' % cdi_name, [last], '',
                      cdi_devices=[cdi_name], skip=_cdi_skip(cri, cdi_name, cdi_devices),
                      path="containerd's CDI (the CDI spec on the node)"))
    return cases


def _neuron_cases(devices: list[dict[str, t.Any]], cri: dict[str, t.Any], handler: str,
                  command: list[str]) -> list[dict[str, t.Any]]:
    runtimes = _dict(cri.get('runtimes'))
    if handler in runtimes:
        built = _case('cri_neuron_oci_hook', 'neuron', 'runtime handler %s, AWS_NEURON_VISIBLE_DEVICES=0' % handler,
                      command, [0], len(devices), runtime=handler, env={'AWS_NEURON_VISIBLE_DEVICES': '0'})
        return [dict(built, runner='crictl runp', handler=handler, systemd_cgroup=_systemd(runtimes, handler))]
    built = _case('cri_neuron_device', 'neuron', 'the default handler, device /dev/neuron0', command, [0],
                  len(devices), devices=['/dev/neuron0'])
    return [dict(built, runner='crictl runp', handler='',
                 systemd_cgroup=_systemd(runtimes, cri.get('default_runtime')))]


def validation_cri_plan(facts: dict[str, t.Any], cri: dict[str, t.Any], image: str, check_mode: bool = False,
                        image_present: bool | None = None, toolkit_config: str | None = None,
                        nvidia_runtime: str = 'nvidia', nvidia_command: list[str] | None = None,
                        neuron_runtime: str = 'oci-neuron', neuron_command: list[str] | None = None,
                        toolkit_version: t.Any = None, cdi_devices: t.Any = None) -> dict[str, t.Any]:
    """{skip: why the CRI layer runs no pod ('' when it does), cases: [...]}, the cases for accel.nodes.cri_containers."""
    if not isinstance(facts, dict) or not isinstance(cri, dict):
        raise AnsibleFilterError('validation_cri_plan: needs the accelerator facts and the CRI state as dicts')
    vendors = facts.get('vendors') or []
    skip = str(cri.get('skip') or '')
    if not skip and not cri.get('answers'):
        skip = 'the CRI does not answer'
    elif not skip and not image:
        skip = 'accelerator_validation_image is not set'
    elif not skip and not vendors:
        skip = 'no accelerator to test'
    elif not skip and check_mode and not image_present:
        skip = ('check mode pulls no image, and %s is not in the runtime\'s image store: run without --check to pull '
                'it, or import it on the node first' % image)
    cases: list[dict[str, t.Any]] = []
    if not skip and 'nvidia' in vendors:
        devices = None if cdi_devices is None else [line.strip() for line in str(cdi_devices).splitlines()]
        cases += _nvidia_cases((facts.get('nvidia') or {}).get('gpus') or [], cri, nvidia_runtime,
                               nvidia_command or ['nvidia-smi', '-L'], toolkit_config, toolkit_version, devices)
    if not skip and 'neuron' in vendors:
        cases += _neuron_cases((facts.get('neuron') or {}).get('devices') or [], cri, neuron_runtime,
                               neuron_command or ['neuron-ls', '-j'])
    return {'skip': skip, 'cases': cases}


def _check(name: str, status: str, detail: str, measured: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    return {'name': name, 'layer': 'cri', 'status': status, 'detail': detail, 'measured': measured or {}}


def validation_cri_checks(facts: dict[str, t.Any], cri: dict[str, t.Any], plan: dict[str, t.Any],
                          runs: dict[str, t.Any] | None = None, nvidia_runtime: str = 'nvidia',
                          neuron_runtime: str = 'oci-neuron') -> list[dict[str, t.Any]]:
    """The CRI layer: the runtime answers through the CRI, registers each vendor's handler, and each pod's
    container sees what it asked for."""
    cri, plan = _dict(cri), _dict(plan)
    if cri.get('skip'):
        return [_check('cri', 'skip', 'skipped: ' + str(cri['skip']))]
    if not cri.get('answers'):
        return [_check('cri', 'fail', 'crictl cannot reach the runtime at %s: %s (systemctl status containerd; '
                                      'journalctl -u containerd)' % (cri.get('endpoint'), cri.get('error')))]
    runtimes = sorted(_dict(cri.get('runtimes')))
    checks = [_check('cri', 'pass' if cri.get('ready') else 'fail',
                     '%s %s answers through the CRI at %s, default runtime %s%s' % (
                         cri.get('runtime_name'), cri.get('version'), cri.get('endpoint'), cri.get('default_runtime'),
                         '' if cri.get('ready') else ', but does not report RuntimeReady'),
                     {'version': cri.get('version'), 'runtimes': runtimes, 'enable_cdi': cri.get('enable_cdi'),
                      'sandbox_image': cri.get('sandbox_image')})]
    vendors = list(facts.get('vendors') or [])
    wanted = [nvidia_runtime] if 'nvidia' in vendors else []
    wanted += [neuron_runtime] if 'neuron' in vendors and neuron_runtime in runtimes else []
    for name in wanted:
        registered = name in runtimes
        checks.append(_check(
            'cri_runtime_' + name, 'pass' if registered else 'fail',
            "containerd's CRI has the runtime handler %s" % name if registered else
            "containerd's CRI has no runtime handler %s (it has %s): a pod of a RuntimeClass with handler %s fails "
            'with "no runtime for \\"%s\\" is configured"; register it with the vendor container runtime role' % (
                name, ', '.join(runtimes) or 'none', name, name),
            {'registered': registered}))
    if plan.get('skip'):
        return checks + [_check('cri_pods', 'skip', 'skipped: ' + str(plan['skip']))]
    return checks + validation_container_checks(list(_dict(runs).get('results') or []), 'cri')


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'validation_cri_engine': validation_cri_engine,
            'validation_cri_plan': validation_cri_plan,
            'validation_cri_checks': validation_cri_checks,
        }
