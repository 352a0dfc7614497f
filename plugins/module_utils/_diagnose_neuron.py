# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Findings of issue 28 about AWS Neuron nodes: the neuron module, the /dev/neuron* devices and their modes,
the driver line against Inf1, and oci-neuron registered without its hook.

An area of accel.nodes.diagnose, as module_utils/_diagnose_runtime.py and _diagnose_host.py are: PROBE is what it
reads in the diagnose's one accel.nodes.node_probe run (merged with the other areas' by the filter
accel.nodes.diagnose_probe), findings() turns that run's result into findings (_diagnose.finding).

Every finding here needs Neuron devices on the PCI bus (accel.nodes.accelerator_facts' neuron.devices): a node
without them has none of these faults, whatever its packages or daemon.json say.

Options (accel_nodes_diagnose_options): neuron_device_mode, the mode /dev/neuron* must have (default "0666", the
driver's own udev rule; set it to what neuron_container_runtime_device_mode gives the node)."""

from __future__ import annotations

import json
import re
import typing as t

from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _neuron_plan, _node_probe, _pci

# /sys/module/<name> exists while a module is loaded; the neuron driver's module is "neuron"
# (aws-neuron/aws-neuron-driver dkms.conf: BUILT_MODULE_NAME[0]="neuron").
SYS_MODULE = '/sys/module/neuron'
DOCKER_CONFIG = '/etc/docker/daemon.json'
# AWS's OCI hook tutorial and the aws-neuronx-oci-hook package: the wrapper docker-daemon.json registers, the hook
# config it hands oci-add-hooks, and the prestart hook (as accel.nodes.neuron_container_runtime's defaults).
WRAPPER = '/opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh'
HOOK_CONFIG = '/opt/aws/neuron/share/oci_neuron_hook_config.json'
HOOK = '/opt/aws/neuron/bin/oci_neuron_hook'
# Where oci-add-hooks and runc are looked for, in order (accel.nodes.neuron_container_runtime, vars/main.yml).
OCI_ADD_HOOKS = ['/usr/local/bin/oci-add-hooks', '/usr/bin/oci-add-hooks', '/usr/local/sbin/oci-add-hooks',
                 '/usr/sbin/oci-add-hooks']
RUNC = ['/usr/bin/runc', '/usr/sbin/runc', '/usr/local/bin/runc', '/usr/local/sbin/runc']
# The OCI hook packages of AWS's OCI hook tutorial: Inf1's, and the one of Inf2, Trn1 and newer.
HOOK_PACKAGES = ('aws-neuron-runtime-base', 'aws-neuronx-oci-hook')
DKMS_PACKAGE = _neuron_plan.DKMS_PACKAGE
# The runtime names AWS's docker-daemon.json and its tutorials register (aws-neuron-sdk#911 quotes both).
RUNTIME_NAMES = ('oci-neuron', 'neuron')
# "The last supported version is 2.24"; "Neuron driver versions above 2.24 only support non-Inf1 instances"
# (the announcement below). accel.nodes.neuron_driver keeps the same line in vars/main.yml.
INF1_LAST_LINE = (2, 24)
# The driver's udev rule (aws-neuron-driver preinstall: KERNEL=="neuron*", MODE="0666").
DEVICE_MODE = '0666'

PROBE: dict = {
    'paths': [SYS_MODULE, DOCKER_CONFIG, WRAPPER, HOOK_CONFIG, HOOK] + OCI_ADD_HOOKS + RUNC,
    'directories': [],
    'packages': ['^%s$' % re.escape(p) for p in (DKMS_PACKAGE,) + HOOK_PACKAGES],
    'commands': {
        # The device nodes with their modes; find needs no shell, and prints nothing where there are none.
        'neuron_device_nodes': ['find', '/dev', '-maxdepth', '1', '-name', 'neuron[0-9]*', '-printf', '%p %m %y\\n'],
        # What the first oci-add-hooks among the candidates answers, as accel.nodes.neuron_container_runtime asks.
        'neuron_oci_add_hooks_version': ['sh', '-c', 'for f in "$@"; do if [ -f "$f" ] && [ -x "$f" ]; then '
                                         'exec "$f" --version; fi; done; exit 127', 'sh'] + OCI_ADD_HOOKS,
    },
}

SOURCES = {
    'not_loaded': 'AWS Neuron, "Installation Troubleshooting", "No Neuron devices found": neuron-ls shows no devices '
                  'when the Neuron driver is not loaded (awsdocs-neuron.readthedocs-hosted.com/en/latest/setup/'
                  'troubleshooting.html); "Neuron Runtime troubleshooting": check with lsmod | grep neuron '
                  '(neuron-runtime/nrt-troubleshoot.html); aws-neuron-driver dkms.conf BUILT_MODULE_NAME[0]="neuron", '
                  'loaded at boot by /etc/modules-load.d/neuron.conf (postinstall)',
    'devices': 'aws-neuron-driver neuron_cdev.c ncdev_create_device_node: the driver creates /dev/neuron<N> for each '
               'device it binds; AWS Neuron, "How to Build and Run a Neuron Container": docker run '
               '--device=/dev/neuron0 (containers/tutorials/build-run-neuron-container.html)',
    'mode': 'aws-neuron-driver preinstall: the driver installs the udev rule KERNEL=="neuron*", MODE="0666" '
            '(/lib/udev/rules.d/neuron-udev.rules): the mode AWS gives the devices',
    'inf1': 'AWS Neuron, "Announcing correction of Neuron driver support for Inf1": "The last supported version is '
            '2.24", "Neuron driver versions above 2.24 only support non-Inf1 instances", pin aws-neuronx-dkms=2.24.* '
            '(awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/neuron2.x/'
            'announce-correction-neuron-driver-support-inf1.html); Inf1 devices: aws-neuron-driver neuron_device.h '
            '(PCI 1d0f:7064-7067)',
    'oci_hook': 'aws-neuron/aws-neuron-sdk#911: with oci-neuron registered and oci-add-hooks missing, '
                'oci_neuron_hook_wrapper.sh "did not terminate successfully: exit status 2" and no container starts; '
                'AWS Neuron, "Tutorial Docker Neuron OCI Hook Setup" (containers/tutorials/tutorial-oci-hook.html): '
                'the oci-neuron runtime runs oci-add-hooks with oci_neuron_hook_config.json, whose prestart hook is '
                '/opt/aws/neuron/bin/oci_neuron_hook',
}

_NODE_RE = re.compile(r'^(/dev/neuron(\d+)) ([0-7]+) (\S)$')


def pci_devices(accelerators: t.Mapping) -> list[t.Mapping]:
    """The Neuron devices the facts found on the PCI bus (those neuron-ls alone reports have no PCI device id)."""
    return [d for d in ((accelerators.get('neuron') or {}).get('devices') or [])
            if isinstance(d, t.Mapping) and d.get('pci_device_id')]


def device_nodes(command: t.Optional[t.Mapping], observed: t.Optional[t.Sequence[str]]) -> t.Optional[dict]:
    """{path: mode or None} of the character devices /dev/neuronN: from the find of PROBE, else (modes unknown) the
    facts' observed.device_nodes; None where neither could be read."""
    command = command or {}
    if command.get('rc') == 0:
        found = {}
        for line in (command.get('stdout') or '').splitlines():
            match = _NODE_RE.match(line.strip())
            if match and match.group(4) == 'c':
                found[match.group(1)] = '%04o' % int(match.group(3), 8)
        return found
    if observed is None:
        return None
    return dict((p, None) for p in observed if re.match(r'^/dev/neuron\d+$', p))


def _line(version: t.Optional[str]) -> t.Optional[tuple]:
    match = re.match(r'^(\d+)\.(\d+)', (version or '').split(':')[-1].strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def module_findings(devices: t.Sequence[t.Mapping], loaded: bool, nodes: t.Optional[t.Mapping[str, t.Optional[str]]],
                    modules: t.Optional[t.Sequence[str]], wanted_mode: str) -> list[dict]:
    """neuron.module.not_loaded, neuron.devices.missing and neuron.devices.mode."""
    if not devices:
        return []
    on_bus = ['PCI %s: %s (1d0f:%s)' % (d.get('pci_bus_id'), d.get('name') or 'Neuron device',
                                        str(d.get('pci_device_id'))[2:]) for d in devices]
    if not loaded:
        return [_diagnose.finding(
            'neuron.module.not_loaded', _diagnose.BROKEN,
            'The node has %d Neuron device(s) on the PCI bus, but the neuron kernel module is not loaded: neuron-ls '
            'shows no devices, and no Neuron application or container can use them.' % len(devices),
            on_bus + ['%s: missing' % SYS_MODULE,
                      'kernel modules (/proc/modules): %s' % ('unreadable' if modules is None
                                                              else ', '.join(modules) or 'no accelerator module')],
            'Load it: run accel.nodes.neuron_driver (it installs aws-neuronx-dkms and loads the module; '
            'neuron_driver_manage_service true, the default), or modprobe neuron. If that fails, DKMS has no module for '
            'the running kernel: read dkms status and dmesg | grep -i neuron.',
            SOURCES['not_loaded'])]
    if nodes is None:
        return []
    found = []
    if len(nodes) < len(devices):
        found.append(_diagnose.finding(
            'neuron.devices.missing', _diagnose.BROKEN,
            'The neuron module is loaded, but /dev has %d Neuron device node(s) for %d Neuron device(s) on the PCI '
            'bus: a container started with --device=/dev/neuronN for a missing one fails, and neuron-ls shows only '
            'the devices that have a node.' % (len(nodes), len(devices)),
            on_bus + ['/dev: %s' % (', '.join(sorted(nodes, key=_node_index)) or 'no /dev/neuron* device')],
            'Reload the driver, which creates a node for every device it binds: stop the Neuron work, then '
            'modprobe -r neuron && modprobe neuron (accel.nodes.neuron_driver reloads it when the driver changes). '
            'If nodes stay missing, read dmesg | grep -i neuron: a driver line that does not support the device '
            'binds none (see neuron.driver.inf1_unsupported).',
            SOURCES['devices']))
    wrong = sorted((p for p, m in nodes.items() if m is not None and m != wanted_mode), key=_node_index)
    if wrong:
        found.append(_diagnose.finding(
            'neuron.devices.mode', _diagnose.BROKEN,
            '%s %s mode %s, not %s: processes that mode leaves out, on the node and in containers given the '
            'device, cannot open it.' % (', '.join(wrong), 'has' if len(wrong) == 1 else 'have',
                                         ', '.join(sorted(set(nodes[p] for p in wrong))), wanted_mode),
            ['%s: mode %s (find /dev -name \'neuron[0-9]*\')' % (p, nodes[p]) for p in wrong],
            'Run accel.nodes.neuron_container_runtime: its udev rule and the present nodes get '
            'neuron_container_runtime_device_mode (default 0666, the driver\'s own rule), or chmod %s %s. Where the '
            'node limits the devices on purpose, set neuron_device_mode in accel_nodes_diagnose_options.'
            % (wanted_mode, ' '.join(wrong)),
            SOURCES['mode']))
    return found


def _node_index(path: str) -> int:
    return int(re.sub(r'\D', '', path) or 0)


def inf1_findings(devices: t.Sequence[t.Mapping], instance_type: t.Optional[str], loaded_version: t.Optional[str],
                  installed_version: t.Optional[str]) -> list[dict]:
    """neuron.driver.inf1_unsupported: an Inf1 node whose loaded or installed driver is a line above 2.24."""
    inferentia = [d for d in devices if _pci.NEURON_DEVICE_NAMES.get(str(d.get('pci_device_id'))) == 'Inferentia']
    if not devices or not (inferentia or (instance_type or '').startswith('inf1.')):
        return []
    loaded_line, installed_line = _line(loaded_version), _line(installed_version)
    loaded_bad = loaded_line is not None and loaded_line > INF1_LAST_LINE
    installed_bad = installed_line is not None and installed_line > INF1_LAST_LINE
    if not loaded_bad and not installed_bad:
        return []
    last = '%d.%d' % INF1_LAST_LINE
    why = ['instance type %s (EC2)' % instance_type] if (instance_type or '').startswith('inf1.') else []
    why += ['PCI %s: Inferentia (1d0f:%s)' % (d.get('pci_bus_id'), str(d.get('pci_device_id'))[2:])
            for d in inferentia]
    evidence = why
    if loaded_version:
        evidence = evidence + ['loaded neuron module: %s (/sys/module/neuron/version)' % loaded_version.strip()]
    if installed_version:
        evidence = evidence + ['installed package: %s %s' % (DKMS_PACKAGE, installed_version)]
    if loaded_bad or not loaded_version:
        severity = _diagnose.BROKEN
        summary = ('This Inf1 node runs Neuron driver %s, and driver lines after %s do not support Inf1: the '
                   'Inferentia devices are not usable.' % ((loaded_version or installed_version or '').strip(), last))
    else:
        severity = _diagnose.WILL_BREAK
        summary = ('This Inf1 node has Neuron driver %s installed, and driver lines after %s do not support Inf1: '
                   'the Inferentia devices stop working when that module is loaded (a reboot, a driver reload).'
                   % (installed_version, last))
    return [_diagnose.finding(
        'neuron.driver.inf1_unsupported', severity, summary, evidence,
        'Install the %s line and load it: run accel.nodes.neuron_driver, which pins Inf1 nodes to '
        'neuron_driver_inf1_dkms_version (default %s.*), with neuron_driver_manage_service true (or reboot); by hand, '
        'apt-get install %s=%s.* (dnf install %s-%s.*).' % (last, last, DKMS_PACKAGE, last, DKMS_PACKAGE, last),
        SOURCES['inf1'])]


def _json(text: t.Optional[str]) -> t.Any:
    try:
        return json.loads(text or '')
    except ValueError:
        return None


def neuron_runtimes(daemon_json: t.Any) -> dict[str, str]:
    """{name: path} of the runtimes of daemon.json that are the Neuron OCI hook's: named oci-neuron or neuron, or
    whose path is its wrapper."""
    runtimes = (daemon_json or {}).get('runtimes') if isinstance(daemon_json, dict) else None
    found = {}
    for name, spec in (runtimes or {}).items() if isinstance(runtimes, dict) else ():
        path = str((spec or {}).get('path') or '') if isinstance(spec, dict) else ''
        if name in RUNTIME_NAMES or path.endswith('/oci_neuron_hook_wrapper.sh'):
            found[str(name)] = path
    return found


def oci_hook_findings(devices: t.Sequence[t.Mapping], paths: t.Mapping[str, t.Mapping],
                      packages: t.Mapping[str, t.Mapping], version: t.Optional[t.Mapping]) -> list[dict]:
    """neuron.oci_hook.missing: oci-neuron registered in daemon.json, and its wrapper, the hook config, the hook, or
    oci-add-hooks (or runc, which the wrapper runs) missing (aws-neuron-sdk#911)."""
    if not devices:
        return []
    config = (paths.get(DOCKER_CONFIG) or {}).get('text')
    daemon = _json(config)
    registered = neuron_runtimes(daemon)
    if not registered:
        return []

    def there(path: str) -> bool:
        info = paths.get(path) or {}
        return bool(info.get('exists')) and info.get('type') == 'file'

    def described(path: str) -> t.Mapping:
        return paths.get(path) or {'type': None, 'executable': False}

    problems = []
    for name, path in sorted(registered.items()):
        if path in paths and not (there(path) and (paths.get(path) or {}).get('executable')):
            problems.append('the %s runtime\'s path %s is missing or not executable' % (name, path))
    if not there(HOOK_CONFIG):
        problems.append('the hook config %s that the wrapper hands oci-add-hooks is missing' % HOOK_CONFIG)
    hook_config = _json((paths.get(HOOK_CONFIG) or {}).get('text'))
    hooks = [h.get('path') for h in (((hook_config or {}).get('hooks') or {}).get('prestart') or [])
             if isinstance(h, dict)] if isinstance(hook_config, dict) else []
    installed = [p for p in HOOK_PACKAGES if (packages.get(p) or {}).get('status', 'installed') == 'installed'
                 and p in packages]
    package = installed[0] if installed else HOOK_PACKAGES[1]
    hook_found = there(HOOK) and bool((paths.get(HOOK) or {}).get('executable'))
    chain = _neuron_plan.runtime_chain(
        {'executables': {'oci_add_hooks': _node_probe.first_executable(OCI_ADD_HOOKS, described),
                         'runc': _node_probe.first_executable(RUNC, described),
                         'hook': HOOK if hook_found else ''},
         'versions': {'oci_add_hooks': version or {}}},
        {'oci_add_hooks_candidates': OCI_ADD_HOOKS, 'runc_candidates': RUNC, 'hook_path': HOOK,
         'hook_package': package})
    problems += chain['problems']
    if not problems:
        return []
    default = daemon.get('default-runtime') if isinstance(daemon, dict) else None
    evidence = ['%s: runtime %s, path %s%s' % (DOCKER_CONFIG, n, p or '(none)',
                                               ', the default runtime' if n == default else '')
                for n, p in sorted(registered.items())]
    evidence += ['%s names the prestart hook %s' % (HOOK_CONFIG, h) for h in hooks if h != HOOK]
    evidence += problems
    fixes = []
    if any(p.startswith('oci-add-hooks') or ' --version failed ' in p for p in chain['problems']):
        fixes.append('Install oci-add-hooks with accel.nodes.oci_add_hooks.')
    if not hook_found:
        fixes.append('Reinstall %s (apt-get install --reinstall %s; dnf reinstall %s).' % (package, package, package))
    fixes.append(('Then run' if fixes else 'Run') + ' accel.nodes.neuron_container_runtime: mode oci_hook checks the '
                 'chain and writes the wrapper '
                 'and its hook config; mode device (the default) removes the runtime, for containers given '
                 '--device=/dev/neuronN.')
    return [_diagnose.finding(
        'neuron.oci_hook.missing', _diagnose.BROKEN,
        'Docker has the %s runtime registered, but its chain is broken: every container it starts fails%s.'
        % (', '.join(sorted(registered)), ', and it is the default runtime, so every container does'
                                          if default in registered else ''),
        evidence, ' '.join(fixes),
        SOURCES['oci_hook'])]


def device_mode(value: t.Any) -> str:
    """The option neuron_device_mode as 4 octal digits: "0660" or "660", or the int YAML makes of an unquoted 0660."""
    if value is None or value == '':
        return DEVICE_MODE
    if isinstance(value, int) and not isinstance(value, bool):
        return '%04o' % value
    return '%04o' % int(str(value), 8)


def findings(probe: t.Mapping, options: t.Mapping) -> list[dict]:
    """The findings of this area in a node_probe result; options: the playbook's accel_nodes_diagnose_options."""
    accelerators = _diagnose.accelerators(probe)
    devices = pci_devices(accelerators)
    if not devices:
        return []
    paths = probe.get('paths') or {}
    packages = probe.get('packages') or {}
    commands = probe.get('commands') or {}
    observed = accelerators.get('observed') or {}
    modules = observed.get('kernel_modules')
    loaded = bool((paths.get(SYS_MODULE) or {}).get('exists')) or 'neuron' in (modules or [])
    nodes = device_nodes(commands.get('neuron_device_nodes'), observed.get('device_nodes'))
    wanted_mode = device_mode(options.get('neuron_device_mode'))
    dkms = packages.get(DKMS_PACKAGE) or {}
    installed = dkms.get('version') if dkms.get('status', 'installed') == 'installed' else None
    found = module_findings(devices, loaded, nodes, modules, wanted_mode)
    found += inf1_findings(devices, (accelerators.get('ec2') or {}).get('instance_type'),
                           (accelerators.get('neuron') or {}).get('driver_version') if loaded else None, installed)
    found += oci_hook_findings(devices, paths, packages, commands.get('neuron_oci_add_hooks_version'))
    return found
