# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What accel.nodes.accelerator_facts gathers, for that module and for
accel.nodes.node_probe, which gathers the same facts in a run that reads more:
the accelerators from the PCI bus, the drivers' procfs and sysfs files,
nvidia-smi and neuron-ls, the kernel modules and device nodes, the container
runtimes and the EC2 instance type.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.
"""

from __future__ import annotations

import os

from ansible_collections.accel.nodes.plugins.module_utils import _drivers_probe
from ansible_collections.accel.nodes.plugins.module_utils import _ec2
from ansible_collections.accel.nodes.plugins.module_utils import _ec2_catalog
from ansible_collections.accel.nodes.plugins.module_utils import _neuron
from ansible_collections.accel.nodes.plugins.module_utils import _nvidia
from ansible_collections.accel.nodes.plugins.module_utils import _nvswitch
from ansible_collections.accel.nodes.plugins.module_utils import _pci
from ansible_collections.accel.nodes.plugins.module_utils import _runtimes_probe

SCHEMA_VERSION = 1
GATHER_CHOICES = ['pci', 'nvidia_procfs', 'nvidia_smi', 'neuron', 'kernel_modules',
                  'device_nodes', 'container_runtimes', 'ec2', 'imds']
SOURCES = ['pci', 'nvidia_procfs', 'nvidia_smi', 'neuron', 'neuron_ls', 'kernel_modules',
           'device_nodes', 'container_runtimes', 'dmi', 'imds']
# What describes the machine the module runs on rather than its root's image.
HOST_GATHER = ['pci', 'nvidia_procfs', 'nvidia_smi', 'neuron', 'kernel_modules', 'device_nodes', 'ec2', 'imds']
HOST_SOURCES = ['pci', 'nvidia_procfs', 'nvidia_smi', 'neuron', 'neuron_ls', 'kernel_modules', 'device_nodes',
                'dmi', 'imds']
COMMAND_ENV = {'LANG': 'C', 'LC_ALL': 'C'}

# accel.nodes.accelerator_facts' options; node_probe's accelerators option takes the same.
ARGUMENT_SPEC = dict(
    root=dict(type='path', default='/'),
    gather=dict(type='list', elements='str', choices=GATHER_CHOICES,
                default=[g for g in GATHER_CHOICES if g != 'imds']),
    nvidia_smi_path=dict(type='path'),
    neuron_ls_path=dict(type='path'),
    instance_type=dict(type='str'),
    image=dict(type='bool', default=False),
    nvswitch=dict(type='bool'),
    imds_timeout=dict(type='float', default=1.0),
)


def _status(value):
    return 'missing' if value is None else 'ok'


def _find_tool(name, search_dirs):
    for directory in os.environ.get('PATH', '').split(os.pathsep) + search_dirs:
        path = os.path.join(directory, name)
        if directory and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class Probe(object):
    """One run of the module: what each source said, then the facts built from it."""

    def __init__(self, module, params=None):
        self.module = module
        self.params = params = module.params if params is None else params
        self.root = params['root'] or '/'
        self.wanted = set(params['gather'])
        self.sources = dict.fromkeys(SOURCES, 'skipped')
        self.image = bool(params['image'])
        if self.image:
            # In a chroot these are the build host's: its PCI bus, drivers,
            # modules, device nodes and instance identity.
            self.wanted -= set(HOST_GATHER)
            for source in HOST_SOURCES:
                self.sources[source] = 'image'
        self.problems = []

    # -- running the tools -------------------------------------------------

    def _run_tool(self, source, option, name, search_dirs, args, needed):
        """(rc, stdout, stderr) of the tool, or None with sources[source] saying why it did not run."""
        explicit = self.params[option]
        if explicit:
            path = explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
            if path is None:
                self.problems.append('%s %s is not an executable file' % (option, explicit))
                self.sources[source] = 'missing'
                return None
        elif self.root != '/' or not needed:
            self.sources[source] = 'skipped'
            return None
        else:
            path = _find_tool(name, search_dirs)
            if path is None:
                self.sources[source] = 'missing'
                return None
        try:
            return self.module.run_command([path] + args, environ_update=COMMAND_ENV,
                                           handle_exceptions=False)
        except OSError as e:
            self.sources[source] = 'error: %s' % e
            return None

    def nvidia_smi(self, pci_gpus, pci_scanned):
        ran = self._run_tool('nvidia_smi', 'nvidia_smi_path', 'nvidia-smi', _nvidia.SMI_SEARCH_DIRS,
                             _nvidia.SMI_ARGS, needed=bool(pci_gpus) or not pci_scanned)
        if ran is None:
            return None
        rc, out, err = ran
        smi = _nvidia.parse_smi(rc, out, err)
        if rc != 0:
            self.sources['nvidia_smi'] = 'rc %d' % rc
        elif smi['gpus'] is None:
            self.sources['nvidia_smi'] = smi['error'] or 'no XML output'
        else:
            self.sources['nvidia_smi'] = 'ok'
        return smi

    def neuron_ls(self, pci_neuron, pci_scanned):
        ran = self._run_tool('neuron_ls', 'neuron_ls_path', 'neuron-ls', _neuron.LS_SEARCH_DIRS,
                             _neuron.LS_ARGS, needed=bool(pci_neuron) or not pci_scanned)
        if ran is None:
            return None
        rc, out, err = ran
        devices = _neuron.parse_neuron_ls(out)
        if rc != 0:
            self.sources['neuron_ls'] = 'rc %d' % rc
        elif devices is None:
            # Tools older than --json-output print their table instead.
            self.sources['neuron_ls'] = 'no JSON output'
        else:
            self.sources['neuron_ls'] = 'ok'
        return devices

    # -- EC2 ---------------------------------------------------------------

    def ec2(self):
        params = self.params
        instance_type = params['instance_type'] or None
        source = 'option' if instance_type else None
        if instance_type is None and self.wanted & {'ec2', 'imds'}:
            dmi = _ec2.read_dmi(self.root)
            self.sources['dmi'] = _status(dmi)
            ask = 'imds' in self.wanted or _ec2.looks_like_ec2(dmi)
            if ask and self.root == '/' and params['imds_timeout'] > 0:
                instance_type, self.sources['imds'] = _ec2.imds_instance_type(params['imds_timeout'])
                source = 'imds' if instance_type else None
            if instance_type is None:
                instance_type = _ec2.dmi_instance_type(dmi)
                source = 'dmi' if instance_type else None
        return {
            'instance_type': instance_type,
            'source': source,
            'expected': _ec2_catalog.expected(instance_type),
        }

    # -- NVIDIA --------------------------------------------------------------

    def nvidia(self, pci_gpus, pci_scanned, modules):
        procfs = None
        if 'nvidia_procfs' in self.wanted:
            procfs = _nvidia.read_procfs(self.root)
            self.sources['nvidia_procfs'] = _status(procfs)
        smi = self.nvidia_smi(pci_gpus, pci_scanned) if 'nvidia_smi' in self.wanted else None

        on_pci = dict((d['pci_bus_id'], d) for d in pci_gpus)
        in_procfs = procfs['gpus'] if procfs else {}
        in_smi = smi['gpus'] if smi and smi['gpus'] is not None else {}
        gpus = []
        bus_ids = sorted(set(on_pci) | set(in_procfs) | set(in_smi), key=_pci.bus_id_key)
        for index, bus_id in enumerate(bus_ids):
            pci = on_pci.get(bus_id, {})
            seen = in_smi.get(bus_id, {})
            info = in_procfs.get(bus_id, {})
            device_id = pci.get('pci_device_id') or seen.get('pci_device_id')
            gpus.append({
                'index': index,
                'name': seen.get('name') or info.get('name'),
                'uuid': seen.get('uuid') or info.get('uuid'),
                'pci_bus_id': bus_id,
                'pci_device_id': device_id,
                'memory_total_mib': seen.get('memory_total_mib'),
                'compute_capability': _nvidia.COMPUTE_CAPABILITY.get(device_id),
                'mig_mode': seen.get('mig_mode'),
                'persistence_mode': seen.get('persistence_mode'),
                'numa_node': pci.get('numa_node'),
            })
        facts = {
            'driver_version': procfs['driver_version'] if procfs else None,
            'userspace_driver_version': (smi['driver_version'] or smi['nvml_version']) if smi else None,
            'cuda_version': smi['cuda_version'] if smi else None,
            'kernel_module_flavor': procfs['kernel_module_flavor'] if procfs else None,
            'gpus': gpus,
        }
        self._nvidia_problems(facts, pci_gpus, procfs, smi, modules)
        return facts

    def _nvidia_problems(self, facts, pci_gpus, procfs, smi, modules):
        add = self.problems.append
        nouveau = [d['pci_bus_id'] for d in pci_gpus if d['driver'] == 'nouveau']
        if nouveau:
            add('nouveau is bound to NVIDIA GPU(s) %s: blacklist nouveau and reboot so that '
                'the NVIDIA driver can take them' % ', '.join(nouveau))
        elif pci_gpus and modules and 'nouveau' in modules:
            add('the nouveau module is loaded: blacklist it before installing the NVIDIA driver')

        not_loaded = bool(smi and smi['driver_not_loaded']) \
            or ('nvidia_procfs' in self.wanted and procfs is None) \
            or (modules is not None and 'nvidia' not in modules)
        loaded = procfs is not None or bool(modules and 'nvidia' in modules)
        if pci_gpus and not_loaded:
            add('%d NVIDIA GPU(s) on the PCI bus but the NVIDIA kernel driver is not loaded'
                % len(pci_gpus))
        elif loaded:
            for d in pci_gpus:
                if d['driver'] is None:
                    add('NVIDIA GPU %s is bound to no driver although the nvidia module is loaded'
                        % d['pci_bus_id'])
                elif d['driver'] not in ('nvidia', 'nouveau'):
                    add('NVIDIA GPU %s is bound to %s, not to nvidia' % (d['pci_bus_id'], d['driver']))

        kernel, userspace = facts['driver_version'], facts['userspace_driver_version']
        differ = kernel and userspace and not (kernel + '.').startswith(userspace + '.')
        if (smi and smi['mismatch']) or differ:
            add('NVIDIA driver/library version mismatch: kernel module %s, user-space NVML %s; '
                'reboot, or unload and reload the nvidia modules' % (kernel or 'unknown', userspace or 'unknown'))
        if not smi:
            return
        if smi['error']:
            add(smi['error'])
        for lost in smi['lost']:
            add('nvidia-smi cannot reach GPU %s: %s' % (lost['pci_bus_id'] or '(unknown)', lost['reason']))
        if smi['gpus'] is not None and pci_gpus:
            unseen = [d['pci_bus_id'] for d in pci_gpus if d['pci_bus_id'] not in smi['gpus']]
            if unseen:
                add('nvidia-smi sees %d of the %d NVIDIA GPU(s) on the PCI bus; not seen: %s' % (
                    len(pci_gpus) - len(unseen), len(pci_gpus), ', '.join(unseen)))
        for bus_id, gpu in sorted((smi['gpus'] or {}).items()):
            if gpu['placeholder_name']:
                add("nvidia-smi calls GPU %s '%s': driver %s does not know this model, install a newer one"
                    % (bus_id, _nvidia.PLACEHOLDER_NAME, facts['userspace_driver_version'] or 'unknown'))

    # -- Neuron --------------------------------------------------------------

    def neuron(self, pci_neuron, pci_scanned, modules, nodes):
        sysfs = None
        listed = None
        if 'neuron' in self.wanted:
            sysfs = _neuron.read_sysfs(self.root)
            self.sources['neuron'] = _status(sysfs)
            listed = self.neuron_ls(pci_neuron, pci_scanned)

        on_pci = dict((d['pci_bus_id'], d) for d in pci_neuron)
        in_ls = dict((d['pci_bus_id'], d) for d in listed or [] if d['pci_bus_id'])
        bus_ids = sorted(set(on_pci) | set(in_ls), key=_pci.bus_id_key)
        # sysfs numbers devices in probe order, which is bus order; use its core
        # counts only when it has exactly one entry per device.
        sysfs_cores = sysfs['core_counts'] if sysfs else []
        if len(sysfs_cores) != len(bus_ids):
            sysfs_cores = [None] * len(bus_ids)
        devices = []
        for index, bus_id in enumerate(bus_ids):
            seen = in_ls.get(bus_id, {})
            device_id = on_pci.get(bus_id, {}).get('pci_device_id')
            cores = seen.get('core_count')
            devices.append({
                'index': index,
                'pci_bus_id': bus_id,
                'pci_device_id': device_id,
                'name': _neuron.device_name(device_id),
                'core_count': cores if cores is not None else sysfs_cores[index],
                'memory_bytes': seen.get('memory_bytes'),
            })

        add = self.problems.append
        self.problems.extend(_neuron.unknown_device_problems(devices))
        loaded = (modules is None or 'neuron' in modules) and ('neuron' not in self.wanted or sysfs)
        if pci_neuron and not loaded:
            add('%d Neuron device(s) on the PCI bus but the neuron kernel driver is not loaded'
                % len(pci_neuron))
        elif pci_neuron and nodes is not None:
            count = len([n for n in nodes if n.startswith('/dev/neuron') and n[11:].isdigit()])
            if count < len(pci_neuron):
                add('/dev has %d neuron device node(s) for %d Neuron device(s) on the PCI bus'
                    % (count, len(pci_neuron)))
        if listed is not None and pci_neuron and len(in_ls) < len(pci_neuron):
            add('neuron-ls sees %d of the %d Neuron device(s) on the PCI bus' % (len(in_ls), len(pci_neuron)))
        return {
            'driver_version': sysfs['driver_version'] if sysfs else None,
            'devices': devices,
            'core_count_total': sum(d['core_count'] or 0 for d in devices),
        }

    # -- everything ------------------------------------------------------------

    def facts(self):
        root = self.root
        pci = fabric = None
        if 'pci' in self.wanted:
            pci = _pci.scan(root)
            fabric = _pci.scan_fabric(root)
            self.sources['pci'] = _status(pci)
        pci_scanned = pci is not None
        pci_gpus = [d for d in pci or [] if d['kind'] == 'nvidia']
        pci_neuron = [d for d in pci or [] if d['kind'] == 'neuron']

        modules = nodes = None
        if 'kernel_modules' in self.wanted:
            modules = _drivers_probe.loaded_modules(root)
            self.sources['kernel_modules'] = _status(modules)
        if 'device_nodes' in self.wanted:
            nodes = _drivers_probe.device_nodes(root)
            self.sources['device_nodes'] = _status(nodes)

        nvidia = self.nvidia(pci_gpus, pci_scanned, modules)
        neuron = self.neuron(pci_neuron, pci_scanned, modules, nodes)
        ec2 = self.ec2()
        nvidia['nvswitch'], found = _nvswitch.decide(
            fabric, nvidia['gpus'], len(pci_gpus), ec2['instance_type'], self.params['nvswitch'])
        self.problems.extend(found)
        if not self.image:
            where = 'the PCI bus' if pci_scanned else 'this host'
            self.problems.extend(_ec2_catalog.compare(
                ec2['instance_type'], ec2['expected'], nvidia['gpus'], neuron['devices'], where))

        runtimes = None
        if 'container_runtimes' in self.wanted:
            runtimes, found = _runtimes_probe.probe(root)
            self.problems.extend(found)
            self.sources['container_runtimes'] = 'ok'

        vendors = []
        if nvidia['gpus']:
            vendors.append('nvidia')
        if neuron['devices']:
            vendors.append('neuron')
        return {
            'schema_version': SCHEMA_VERSION,
            'vendors': sorted(vendors),
            'nvidia': nvidia,
            'neuron': neuron,
            'ec2': ec2,
            'container_runtimes': runtimes,
            'problems': self.problems,
            'sources': self.sources,
            'observed': {'kernel_modules': modules, 'device_nodes': nodes},
        }


def gather(module, params=None):
    """The accelerator facts (ansible_facts.accelerators), from params (the module's own by default)."""
    return Probe(module, params).facts()
