#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: driver_reload
short_description: Load a newly installed NVIDIA or Neuron driver without a reboot, where nothing holds it
version_added: 0.2.0
description:
  - After a driver upgrade the old kernel module stays loaded under the new libraries, and every new GPU process
    fails with "Failed to initialize NVML - Driver/library version mismatch" until the new module is loaded. This
    module loads it without a reboot where it can, the way NVIDIA's driver container does
    (NVIDIA/gpu-driver-container, C(nvidia-driver), C(_unload_driver) and C(_load_driver)).
  - Stops the vendor's services that hold the devices (C(nvidia-persistenced), C(nvidia-fabricmanager),
    C(nvidia-dcgm)), where active.
  - Reads each module's reference count (C(/sys/module/<module>/refcnt), else C(/proc/modules)). Where the driver
    is in use, or a count cannot be read - a module held by more than its loaded users (C(nvidia) by
    C(nvidia_modeset), C(nvidia_uvm), C(nvidia_peermem); C(nvidia_modeset) by C(nvidia_drm)) - it starts the
    services again and changes nothing more.
  - Otherwise removes the modules, dependents first (C(nvidia_drm), C(nvidia_modeset), C(nvidia_uvm),
    C(nvidia_peermem), C(nvidia); C(neuron)), and loads them again (C(nvidia), C(nvidia_uvm), and those of the
    others that were loaded) with C(modprobe).
  - Checks the result (C(nvidia-smi) reports O(version) for every GPU; C(/sys/module/neuron/version) is
    O(version)) and starts the services again.
  - It does not fail when the driver cannot be reloaded; RV(reloaded) is false and RV(reason) says why, for the
    caller to reboot the node, or to mark it as waiting for one.
  - Nothing holding the devices is stopped here; M(accel.nodes.driver_holders) finds and stops the work first.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the loaded version and the reference counts, changes nothing, and reports RV(reloaded) false with the
        reason.
  diff_mode:
    support: none
options:
  vendor:
    description: Whose driver.
    type: str
    choices: [nvidia, neuron]
    required: true
  version:
    description: The version the newly installed module reports (C(580.95.05); C(2.31.7.0)).
    type: str
    required: true
  environment:
    description: Environment for C(nvidia-smi) (its C(PATH), for a driver installed outside it).
    type: dict
    default: {}
  in_container:
    description:
      - Reload even where the module runs in a container (C(/.dockerenv), C(/run/.containerenv), or C(container=)
        in the environment of PID 1). A container shares the host's kernel, so by default the module changes
        nothing there and says so. V(true) is for test nodes whose C(modprobe) is a double.
    type: bool
    default: false
notes:
  - Run it on the host, never in a container that shares the host's kernel with other work.
seealso:
  - module: accel.nodes.driver_holders
"""

EXAMPLES = r"""
- name: Load the new driver now, where nothing holds the old one
  accel.nodes.driver_reload:
    vendor: nvidia
    version: 580.95.05
  register: reload

- name: Reboot where it could not
  ansible.builtin.reboot:
  when: not reload.reloaded
"""

RETURN = r"""
reloaded:
  description: Whether the module at O(version) is loaded now.
  returned: always
  type: bool
reason:
  description: Why it was not reloaded, or what was done.
  returned: always
  type: str
  sample: "in use: nvidia (refcnt 3, 1 loaded dependents)"
before:
  description: The loaded modules and their reference counts, before.
  returned: always
  type: dict
  sample: {nvidia: 1, nvidia_uvm: 0}
unloaded:
  description: The modules removed, in order.
  returned: always
  type: list
  elements: str
loaded:
  description: The modules loaded, in order.
  returned: always
  type: list
  elements: str
services:
  description: The services stopped and started again.
  returned: always
  type: list
  elements: str
loaded_version:
  description: The version the loaded driver reports afterwards, or null.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _holders, _rootfs

SYS_MODULE = '/sys/module'
PROC_MODULES = '/proc/modules'


def in_a_container():
    """Whether this runs in a container: Docker's /.dockerenv, Podman's /run/.containerenv,
    or the container= variable that systemd-nspawn, LXC and the like set for PID 1."""
    if os.path.exists('/.dockerenv') or os.path.exists('/run/.containerenv'):
        return True
    try:
        with open('/proc/1/environ', 'rb') as handle:
            return any(v.startswith(b'container=') for v in handle.read().split(b'\0'))
    except OSError:
        return False


def module_version(name):
    return _rootfs.read_value('/', os.path.join(SYS_MODULE, name, 'version')) or None


class Reload:
    def __init__(self, module):
        self.module = module
        self.vendor = module.params['vendor']
        self.version = module.params['version']
        self.result = dict(changed=False, reloaded=False, reason='', before={}, unloaded=[], loaded=[], services=[],
                           loaded_version=None)

    def run(self, argv, environ=None):
        return self.module.run_command(argv, environ_update=environ)

    def loaded_version(self):
        if self.vendor == 'neuron':
            return module_version('neuron')
        smi = self.module.get_bin_path('nvidia-smi')
        if not smi:
            return module_version('nvidia')
        rc, out, err = self.run([smi, '--query-gpu=driver_version', '--format=csv,noheader'],
                                self.module.params['environment'])
        versions = sorted(set(line.strip() for line in out.splitlines() if line.strip()))
        if rc != 0 or len(versions) != 1:
            self.result['smi'] = (out + err).strip()
            return None
        return versions[0]

    def systemctl(self, verb, units):
        if units:
            rc, out, err = self.run([self.module.get_bin_path('systemctl', required=True), verb] + units)
            if rc != 0:
                self.module.warn('systemctl %s %s: %s' % (verb, ' '.join(units), (err or out).strip()))

    def modprobe(self, *args):
        # PATH first (get_bin_path adds /sbin and /usr/sbin after it).
        rc, out, err = self.run([self.module.get_bin_path('modprobe', required=True)] + list(args))
        return rc, (err or out).strip()

    def reload(self):
        r = self.result
        services = [s['unit'] for s in _holders.active_services(self.module, self.vendor)]
        r['services'] = services
        self.systemctl('stop', services)
        try:
            loaded = _holders.loaded_modules(self.vendor, SYS_MODULE, PROC_MODULES)
            r['before'] = loaded
            busy = _holders.in_use(self.vendor, loaded)
            if busy:
                r['reason'] = busy
                return
            for name in _holders.unload_order(self.vendor, loaded):
                rc, text = self.modprobe('-r', name)
                if rc != 0:
                    r['reason'] = 'modprobe -r %s: %s' % (name, text)
                    break
                r['unloaded'].append(name)
            # Load again even after a failed removal: what was removed must come back.
            for name in _holders.load_order(self.vendor, loaded):
                rc, text = self.modprobe(name)
                if rc == 0:
                    r['loaded'].append(name)
                elif name in _holders.ALWAYS_LOAD[self.vendor]:
                    r['reason'] = r['reason'] or 'modprobe %s: %s' % (name, text)
                else:
                    self.module.warn('modprobe %s: %s' % (name, text))
            if r['reason']:
                return
            r['loaded_version'] = self.loaded_version()
            if r['loaded_version'] != self.version:
                r['reason'] = 'after the reload the driver reports %s, not %s%s' % (
                    r['loaded_version'], self.version, (': ' + r['smi']) if r.get('smi') else '')
                return
            r['reloaded'] = True
            r['reason'] = 'reloaded: removed %s, loaded %s' % (', '.join(r['unloaded']) or 'nothing',
                                                               ', '.join(r['loaded']))
        finally:
            r['changed'] = bool(r['unloaded'] or r['loaded'] or services)
            self.systemctl('start', services)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vendor=dict(type='str', required=True, choices=['nvidia', 'neuron']),
            version=dict(type='str', required=True),
            environment=dict(type='dict', default={}),
            in_container=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    job = Reload(module)
    if module_version(_holders.CORE[job.vendor]) == job.version:
        job.result.update(reloaded=True, reason='%s %s is loaded already' % (job.vendor, job.version),
                          loaded_version=job.version)
    elif in_a_container() and not module.params['in_container']:
        job.result['reason'] = ('this runs in a container, whose kernel is the host\'s: the driver is loaded on the host, '
                                'by a reboot or a reload there')
    elif module.check_mode:
        loaded = _holders.loaded_modules(job.vendor, SYS_MODULE, PROC_MODULES)
        job.result.update(changed=True, before=loaded, reason='check mode: would reload (%s)' % (
            _holders.in_use(job.vendor, loaded) or 'nothing holds the modules beyond the services'))
    else:
        job.reload()
    module.exit_json(**job.result)


if __name__ == '__main__':
    main()
