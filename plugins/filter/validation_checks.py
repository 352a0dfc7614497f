# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The judgement of the accel.nodes.accelerator_validation role: what its one
accel.nodes.node_probe run asks, the engine it found, the checks of every
layer, the report and its messages, from the accelerator facts and the probes'
answers. Documented in validation_probe.yml, validation_engine.yml,
validation_checks.yml, validation_report.yml, validation_summary.yml and
validation_failure.yml next to this file."""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_containers import validation_container_checks
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _diagnose_runtime
from ansible_collections.accel.nodes.plugins.filter.validation_cri import validation_cri_checks, validation_cri_engine

LAYERS = ('host', 'runtime', 'container', 'cri')

# The version in a `dkms status` line: "aws-neuronx/2.27.4.0, ..." (DKMS 3) or
# "aws-neuronx, 2.27.4.0, ..." (DKMS 2); tests/fixtures/dkms/README.md.
_DKMS_VERSION = re.compile(r'/([0-9][^,:]*)')
_DKMS_TROUBLE = re.compile(r'(?i)error|warning|broken')
# DKMS 3 warns about a dkms.conf variable it no longer honours each time it
# reads the file, status included: safe_source() calls deprecated(), which
# prints "Deprecated feature: REMAKE_INITRD (/var/lib/dkms/<module>/<version>/source/dkms.conf)"
# (https://github.com/dell/dkms/blob/001a6c420449ddf13eec3044d422918b51ef5621/dkms.in,
# deprecated() and safe_source(); the same in Debian 12's dkms 3.0.10). It
# writes to stderr, but output captured with 2>&1 has it among the module lines
# (tests/fixtures/dkms/status-dkms3-two-modules.txt). It says nothing about a
# module's state, yet names the module's path: it is no module line, and no
# trouble, on either stream.
_DKMS_DEPRECATED = re.compile(r'^Deprecated feature: ')

# What the role's accel.nodes.node_probe run asks, by name. node_probe answers
# exit status 127 for a program it does not find, as sh did.
DOCKER_INFO = ['docker', 'info', '--format', '{{json .}}']
DKMS_STATUS = ['dkms', 'status']

Check = t.Dict[str, t.Any]


def _check(name: str, layer: str, status: str, detail: str, measured: dict[str, t.Any] | None = None) -> Check:
    return {'name': name, 'layer': layer, 'status': status, 'detail': detail, 'measured': measured or {}}


def _dict(value: t.Any) -> dict[str, t.Any]:
    return value if isinstance(value, dict) else {}


def _int(value: t.Any) -> int | None:
    return None if value is None else int(value)


def _expected(facts: dict[str, t.Any], vendor: str, key: str) -> int | None:
    """How many devices the EC2 catalog promises for this instance type, when it promises this vendor's."""
    expected = _dict(_dict(facts.get('ec2')).get('expected'))
    return _int(expected.get(key)) if expected.get('vendor') == vendor else None


def skipped_layer_checks(layers: list[str], skip: dict[str, str]) -> list[Check]:
    """One skipped check per layer that does not run, with the reason."""
    return [_check(layer, layer, 'skip',
                   'skipped: ' + ('not in accelerator_validation_layers' if layer not in layers else str(skip[layer])))
            for layer in LAYERS if layer not in layers or layer in skip]


def validation_probe(facts: dict[str, t.Any] | None, layers: list[str] | None = None, skip: dict[str, str] | None = None,
                     nvidia_config_path: str = '/etc/nvidia-container-runtime/config.toml', image: str = '',
                     check_mode: bool = False, refresh: dict[str, t.Any] | None = None,
                     cuda: dict[str, t.Any] | None = None, crictl: str = 'crictl',
                     cri_endpoint: str = 'unix:///run/containerd/containerd.sock') -> dict[str, t.Any]:
    """The commands and paths of the role's one accel.nodes.node_probe run, for the layers that run: docker info for
    the runtime and container layers, dkms status for Neuron's host layer, the toolkit's config.toml for NVIDIA's
    container layer, and in check mode, which pulls nothing, whether the image is on the node. With refresh (the
    options of accel.nodes.accelerator_facts, whose empty values are left out), the same run gathers the facts anew.
    Provisioning does not change a node's vendors, which its PCI bus names, so the facts gathered before say which
    questions to ask; without them, every vendor's are asked. With cuda (the options of accel.nodes.nvidia_cuda_check,
    likewise), the same run checks CUDA on every GPU of an NVIDIA node for the host layer. For the cri layer, crictl
    (kubernetes-sigs/cri-tools) says which runtime answers at cri_endpoint (version) and its config (info)."""
    if refresh is None and not isinstance(facts, dict):
        raise AnsibleFilterError('validation_probe: needs the accelerator facts (ansible_facts.accelerators) as a dict')
    skip = _dict(skip)
    run = [layer for layer in (LAYERS if layers is None else layers) if layer not in skip]
    vendors = list(facts.get('vendors') or []) if isinstance(facts, dict) else ['nvidia', 'neuron']
    commands: dict[str, list[str]] = {}
    if 'runtime' in run or 'container' in run:
        commands['docker_info'] = list(DOCKER_INFO)
    if 'container' in run and check_mode and image:
        commands['image'] = ['docker', 'image', 'inspect', '--format', '{{.Id}}', image]
    if 'host' in run and 'neuron' in vendors and 'neuron_dkms' not in skip:
        commands['dkms'] = list(DKMS_STATUS)
    if 'cri' in run:
        cri = [crictl, '--runtime-endpoint', cri_endpoint]
        commands['cri_version'] = cri + ['version']
        commands['cri_info'] = cri + ['info']
        if check_mode and image:
            commands['cri_image'] = cri + ['inspecti', '-q', image]
    containers = 'container' in run or 'cri' in run
    paths = [nvidia_config_path] if containers and 'nvidia' in vendors else []
    if containers and 'nvidia' in vendors:
        # The toolkit's version decides what its "auto" mode resolves to, and the CDI devices whether the
        # --device nvidia.com/gpu=all path can run (validation_container_plan).
        commands['toolkit_version'] = ['nvidia-ctk', '--version']
        commands['cdi_devices'] = ['nvidia-ctk', 'cdi', 'list']
    questions: dict[str, t.Any] = {'commands': commands, 'paths': paths}
    if refresh is not None:
        questions['accelerators'] = _given(refresh)
    if cuda is not None and 'host' in run and 'nvidia' in vendors:
        questions['cuda'] = _given(cuda)
    questions['ask'] = bool(commands or paths or 'accelerators' in questions or 'cuda' in questions)
    return questions


def _given(options: t.Any) -> dict[str, t.Any]:
    """A module's options without those left empty (None, or '' as ansible-core 2.18 templates None)."""
    return dict((k, v) for k, v in _dict(options).items() if v is not None and v != '')


def _docker_info(result: dict[str, t.Any] | None) -> tuple[bool, dict[str, t.Any]]:
    """(missing, info) from node_probe's answer to `docker info --format "{{json .}}"`: missing when it was not asked
    (None, or a skipped result) or found no docker (127), info {} when the daemon did not answer."""
    result = _dict(result)
    missing = not result or bool(result.get('skipped')) or result.get('rc') == 127
    return missing, {} if missing else _diagnose_runtime.docker_info(result) or {}


def _runtimes(info: dict[str, t.Any]) -> list[str]:
    return list(_dict(info.get('Runtimes')))


def _neuron_mode(mode: str, runtime: str, runtimes: list[str]) -> str:
    if mode != 'auto':
        return mode
    return 'oci_hook' if runtime in runtimes else 'device'


def validation_engine(docker_info: dict[str, t.Any], neuron_mode: str = 'auto',
                      neuron_runtime: str = 'oci-neuron') -> dict[str, t.Any]:
    """The container engine as the role saw it, for validation_container_plan and the report."""
    missing, info = _docker_info(docker_info)
    runtimes = _runtimes(info)
    return {
        'present': not missing,
        'answers': len(info) > 0,
        'version': info.get('ServerVersion'),
        'runtimes': runtimes,
        'default_runtime': info.get('DefaultRuntime'),
        'neuron_mode': _neuron_mode(neuron_mode, neuron_runtime, runtimes),
        # Docker with CDI on lists the directories it reads specs from (25.0 and later, with features.cdi; on by
        # default from 28.2: moby cmd/dockerd/daemon.go); Docker 20.10 has no such key.
        'cdi_spec_dirs': list(info.get('CDISpecDirs') or []),
    }


def host_checks(facts: dict[str, t.Any], cuda: dict[str, t.Any] | None = None, dkms: dict[str, t.Any] | None = None,
                skip: dict[str, str] | None = None) -> list[Check]:
    """The host layer: any accelerator, then NVIDIA's (with the checks of accel.nodes.nvidia_cuda_check), then
    Neuron's (with node_probe's answer to `dkms status`)."""
    vendors = list(facts.get('vendors') or [])
    checks = [_check(
        'accelerators_present', 'host', 'pass' if vendors else 'fail',
        'found ' + ', '.join(vendors) if vendors
        else 'no NVIDIA GPU or Neuron device on the PCI bus: check the instance type, or run on an accelerator instance',
        {'vendors': vendors, 'instance_type': _dict(facts.get('ec2')).get('instance_type'),
         'problems': facts.get('problems') or []})]
    if 'nvidia' in vendors:
        checks += _nvidia_checks(facts) + list(_dict(cuda).get('checks') or [])
    if 'neuron' in vendors:
        checks += _neuron_checks(facts, _dict(dkms), skip or {})
    return checks


def _present(name: str, unit: str, what: str, count: int, expected: int | None, facts: dict[str, t.Any]) -> Check:
    short = expected is not None and count < expected
    detail = '%d %s on the PCI bus' % (count, unit)
    if expected is not None:
        detail += ', %s promises %d' % (_dict(facts.get('ec2')).get('instance_type'), expected)
    if short:
        detail += ': %s; stop and start the instance to move it to other hardware' % what
    return _check(name, 'host', 'fail' if short else 'pass', detail,
                  {'pci' if unit == 'GPU(s)' else 'devices': count, 'expected': expected})


def _nvidia_checks(facts: dict[str, t.Any]) -> list[Check]:
    nvidia = _dict(facts.get('nvidia'))
    gpus = list(nvidia.get('gpus') or [])
    pci = len(gpus)
    seen = len([gpu for gpu in gpus if gpu.get('uuid')])
    smi = _dict(facts.get('sources')).get('nvidia_smi', 'not gathered')
    kmod = nvidia.get('driver_version')
    user = nvidia.get('userspace_driver_version')
    if kmod and kmod == user:
        versions = 'kernel module and userspace are both %s' % kmod
    elif not kmod:
        versions = 'no NVIDIA kernel module is loaded: run accel.nodes.nvidia_driver, reboot when it says so'
    else:
        versions = ('kernel module %s but userspace %s: reboot to load the installed driver, and hold the driver packages'
                    % (kmod, user or 'unknown'))
    return [
        _present('nvidia_gpus_present', 'GPU(s)', 'a GPU is missing or fell off the bus', pci,
                 _expected(facts, 'nvidia', 'count'), facts),
        _check('nvidia_smi', 'host', 'pass' if smi == 'ok' and seen == pci else 'fail',
               'nvidia-smi sees %d of %d GPU(s)' % (seen, pci) if smi == 'ok'
               else 'nvidia-smi: %s: install or load the driver (accel.nodes.nvidia_driver), then reboot' % smi,
               {'seen': seen, 'source': smi, 'gpus': [gpu.get('name') for gpu in gpus]}),
        _check('nvidia_driver_versions', 'host', 'pass' if kmod and kmod == user else 'fail', versions,
               {'kernel_module': kmod, 'userspace': user}),
    ]


def _dkms_lines(text: t.Any) -> list[str]:
    """The lines of `dkms status` output, without DKMS's deprecation warnings."""
    return [line for line in str(text or '').splitlines() if not _DKMS_DEPRECATED.match(line)]


def _neuron_checks(facts: dict[str, t.Any], dkms: dict[str, t.Any], skip: dict[str, str]) -> list[Check]:
    neuron = _dict(facts.get('neuron'))
    count = len(neuron.get('devices') or [])
    ls = _dict(facts.get('sources')).get('neuron_ls', 'not gathered')
    driver = neuron.get('driver_version')
    checks = [
        _present('neuron_devices_present', 'Neuron device(s)', 'a device is missing', count,
                 _expected(facts, 'neuron', 'devices'), facts),
        _check('neuron_ls', 'host', 'pass' if ls == 'ok' else 'fail',
               'neuron-ls lists %d device(s)' % count if ls == 'ok'
               else 'neuron-ls: %s: install aws-neuronx-tools and load the neuron module (accel.nodes.neuron_driver)' % ls,
               {'source': ls, 'driver_version': driver}),
    ]
    if dkms.get('skipped') or not dkms:
        checks.append(_check('neuron_dkms', 'host', 'skip', 'skipped: %s' % skip.get('neuron_dkms', '')))
        return checks
    rc = dkms.get('rc', 127)
    lines = [line for line in _dkms_lines(dkms.get('stdout')) if 'neuron' in line]
    bad = ([line for line in lines if ': installed' not in line]
           + [line for line in _dkms_lines(dkms.get('stderr')) if _DKMS_TROUBLE.search(line)])
    versions = _DKMS_VERSION.findall(' '.join(lines))
    version = versions[0] if versions else None
    stale = bool(driver and version and driver != version)
    if rc == 127:
        detail = 'dkms is not installed: install aws-neuronx-dkms (accel.nodes.neuron_driver)'
    elif not lines:
        detail = 'dkms status lists no neuron module: install aws-neuronx-dkms (accel.nodes.neuron_driver)'
    elif bad:
        detail = 'dkms status is not clean: %s: install the headers of the running kernel and rebuild' % '; '.join(bad)
    elif stale:
        detail = 'the loaded neuron module is %s but DKMS built %s: reboot to load it' % (driver, version)
    else:
        detail = 'dkms status is clean: ' + '; '.join(lines)
    checks.append(_check('neuron_dkms', 'host', 'fail' if rc != 0 or not lines or bad or stale else 'pass', detail,
                         {'dkms': lines, 'dkms_version': version}))
    return checks


def runtime_checks(facts: dict[str, t.Any], docker_info: dict[str, t.Any], nvidia_runtime: str = 'nvidia',
                   neuron_runtime: str = 'oci-neuron', neuron_mode: str = 'auto') -> list[Check]:
    """The runtime layer: Docker answers, and lists the runtime of each vendor on the node."""
    vendors = list(facts.get('vendors') or [])
    missing, info = _docker_info(docker_info)
    runtimes = _runtimes(info)
    mode = _neuron_mode(neuron_mode, neuron_runtime, runtimes)
    if missing:
        status, detail = 'skip', 'skipped: no container engine'
    elif info:
        status, detail = 'pass', 'Docker %s answers, default runtime %s' % (info.get('ServerVersion'), info.get('DefaultRuntime'))
    else:
        said = _dict(docker_info).get('stderr', _dict(docker_info).get('msg', ''))
        status, detail = 'fail', ('docker is installed but the daemon does not answer: %s (systemctl status docker; '
                                  'journalctl -u docker)' % str(said or '').strip())
    checks = [_check('docker', 'runtime', status, detail, {'version': info.get('ServerVersion'), 'runtimes': runtimes})]
    wanted = (([nvidia_runtime] if 'nvidia' in vendors else [])
              + ([neuron_runtime] if 'neuron' in vendors and mode == 'oci_hook' else []))
    for name in wanted:
        registered = name in runtimes
        if not info:
            status, detail = 'skip', 'skipped: no container engine' if missing else 'skipped: Docker does not answer'
        elif registered:
            status, detail = 'pass', 'Docker lists the %s runtime' % name
        else:
            status, detail = 'fail', ('Docker does not list the %s runtime (it has %s): run the vendor container runtime '
                                      'role, then restart Docker' % (name, ', '.join(runtimes)))
        checks.append(_check('runtime_' + name, 'runtime', status, detail, {'registered': registered}))
    if 'neuron' in vendors and mode == 'device':
        checks.append(_check('runtime_neuron_device_mode', 'runtime', 'skip',
                             'skipped: Neuron device mode passes /dev/neuronN to the default runtime, no runtime to register'))
    return checks


def container_checks(plan: dict[str, t.Any], runs: dict[str, t.Any] | None = None) -> list[Check]:
    """The container layer: why it ran no container, or what each container proved."""
    plan = _dict(plan)
    if plan.get('skip'):
        return [_check('container', 'container', 'skip', 'skipped: ' + str(plan['skip']))]
    return validation_container_checks(list(_dict(runs).get('results') or []))


def validation_checks(facts: dict[str, t.Any], layers: list[str] | None = None, skip: dict[str, str] | None = None,
                      cuda: dict[str, t.Any] | None = None, dkms: dict[str, t.Any] | None = None,
                      docker_info: dict[str, t.Any] | None = None, plan: dict[str, t.Any] | None = None,
                      runs: dict[str, t.Any] | None = None, nvidia_runtime: str = 'nvidia',
                      neuron_runtime: str = 'oci-neuron', neuron_mode: str = 'auto', cri: dict[str, t.Any] | None = None,
                      cri_plan: dict[str, t.Any] | None = None, cri_runs: dict[str, t.Any] | None = None) -> list[Check]:
    """Every check of the report, in its order: the layers that did not run, then host, runtime, container and
    cri (with validation_cri_engine's cri, validation_cri_plan's cri_plan and accel.nodes.cri_containers' cri_runs)."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError('validation_checks: needs the accelerator facts (ansible_facts.accelerators) as a dict')
    layers = list(LAYERS if layers is None else layers)
    skip = _dict(skip)
    run = [layer for layer in layers if layer not in skip]
    checks = skipped_layer_checks(layers, skip)
    if 'host' in run:
        checks += host_checks(facts, cuda, dkms, skip)
    if 'runtime' in run:
        checks += runtime_checks(facts, _dict(docker_info), nvidia_runtime, neuron_runtime, neuron_mode)
    if 'container' in run:
        checks += container_checks(_dict(plan), runs)
    if 'cri' in run:
        cri = cri if isinstance(cri, dict) and cri else validation_cri_engine(None)
        checks += validation_cri_checks(facts, cri, _dict(cri_plan), cri_runs, nvidia_runtime, neuron_runtime)
    return checks


def validation_report(checks: list[Check], facts: dict[str, t.Any], engine: dict[str, t.Any] | None = None,
                      host: str = '', timestamp: str = '', ansible_core: str = '',
                      cri: dict[str, t.Any] | None = None, findings: list[dict[str, t.Any]] | None = None) -> dict[str, t.Any]:
    """The report (schema 1) of ansible_facts.accelerator_validation and validation.json. With the findings of
    accel.nodes.diagnose_findings, the report holds them, and each failed check names those that explain it."""
    if not isinstance(checks, list) or not isinstance(facts, dict):
        raise AnsibleFilterError('validation_report: needs the checks as a list and the accelerator facts as a dict')
    if findings is not None and not isinstance(findings, list):
        raise AnsibleFilterError('validation_report: findings is the list accel.nodes.diagnose_findings returns')
    layers = {}
    for layer in LAYERS:
        statuses = [check.get('status') for check in checks if check.get('layer') == layer]
        layers[layer] = 'fail' if 'fail' in statuses else 'pass' if 'pass' in statuses else 'skip'
    nvidia = _dict(facts.get('nvidia'))
    report = {
        'schema_version': 1,
        'host': host,
        'timestamp': timestamp,
        'status': 'fail' if any(check.get('status') == 'fail' for check in checks) else 'pass',
        'vendors': list(facts.get('vendors') or []),
        'instance_type': _dict(facts.get('ec2')).get('instance_type'),
        'layers': layers,
        'versions': {
            'nvidia_kernel_module': nvidia.get('driver_version'),
            'nvidia_userspace': nvidia.get('userspace_driver_version'),
            'cuda': nvidia.get('cuda_version'),
            'neuron_driver': _dict(facts.get('neuron')).get('driver_version'),
            'docker': _dict(engine).get('version'),
            'cri_runtime': ' '.join(str(v) for v in (_dict(cri).get('runtime_name'), _dict(cri).get('version')) if v) or None,
            'ansible_core': ansible_core,
        },
        'problems': list(facts.get('problems') or []),
        'checks': checks,
    }
    if findings is not None:
        report['checks'] = _diagnose.explain(checks, findings)
        report['findings'] = findings
    return report


def validation_summary(report: dict[str, t.Any]) -> str:
    """One line: the status, the vendors, each layer, then every check that did not pass."""
    report = _dict(report)
    line = 'accelerator validation %s (%s): %s' % (
        str(report.get('status', '')).upper(), ', '.join(report.get('vendors') or []) or 'no accelerator',
        ', '.join('%s %s' % item for item in _dict(report.get('layers')).items()))
    return line + ''.join(' | %s %s: %s' % (check['name'], check['status'], check['detail'])
                          for check in report.get('checks') or [] if check.get('status') != 'pass')


def validation_failure(report: dict[str, t.Any], report_path: str = '') -> str:
    """The failure message: the host, each failed check with what to do, and where the report is."""
    report = _dict(report)
    failed = '; '.join('%s: %s%s' % (check['name'], check['detail'],
                                     ' (explained by %s)' % ', '.join(check['findings']) if check.get('findings') else '')
                       for check in report.get('checks') or [] if check.get('status') == 'fail')
    fixes = ' '.join('%s: %s' % (f['id'], f['fix']) for f in report.get('findings') or []
                     if f['id'] in set(i for c in report.get('checks') or [] for i in c.get('findings') or []))
    return 'accelerator validation failed on %s: %s.%s Report: %s' % (
        report.get('host'), failed, ' Fix: %s' % fixes if fixes else '', report_path or 'not written')


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'validation_probe': validation_probe,
            'validation_engine': validation_engine,
            'validation_checks': validation_checks,
            'validation_report': validation_report,
            'validation_summary': validation_summary,
            'validation_failure': validation_failure,
        }
