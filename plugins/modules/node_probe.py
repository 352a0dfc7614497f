#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_probe
short_description: Read in one run what a role decides from (facts, packages, paths, executables, commands)
version_added: 0.2.0
description:
  - Reads, without changing anything, what a role decides from, in one module run instead of one per
    question - the distribution facts, the installed packages of interest, a few paths, the first executable
    among candidates and what it answers to C(--version), and the answers of read-only commands such as
    C(nvidia-smi -L) or C(docker info). The Neuron roles, M(accel.nodes.oci_add_hooks) and
    the NVIDIA Container Toolkit role use it, so that a converged re-run asks the node once, and skips a
    package manager run that would change nothing.
  - Packages are read from the dpkg status file (C(/var/lib/dpkg/status)) where there is one, which gives
    their selection (C(hold)) too, and otherwise from C(rpm -qa).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
  - accel.nodes.attributes.facts
  - accel.nodes.attributes.info_module
attributes:
  facts:
    support: full
options:
  facts:
    description:
      - Return the distribution, platform and package manager facts (C(os_family), C(distribution),
        C(distribution_major_version), C(distribution_release), C(kernel), C(architecture), C(pkg_mgr), ...) as
        M(ansible.builtin.setup) with C(gather_subset=min) names them, in RV(ansible_facts).
    type: bool
    default: false
  packages:
    description:
      - Regular expressions (Python, searched) for the names of the installed packages to report in RV(packages).
    type: list
    elements: str
    default: []
  paths:
    description: Paths to describe in RV(paths). Links are followed.
    type: list
    elements: path
    default: []
  executables:
    description:
      - For each name, candidate paths in order; RV(executables) gives the first that is an executable regular
        file (links followed), or an empty string.
    type: dict
    default: {}
  versions:
    description:
      - Names of O(executables) to run with C(--version) (with C(LANG=C)), when one was found; their answers
        are in RV(versions). This runs the program, which must only print its version.
    type: list
    elements: str
    default: []
  commands:
    description:
      - Read-only commands to run, by name, each an argv list; RV(commands) gives what each answered. A first
        element without a slash is looked up in the C(PATH) of O(environment), or the module's own. A command
        that is not found answers exit status 127 with "command not found" on stderr, as a shell
        would, rather than failing the module. They run in check mode too, so they must change nothing.
    type: dict
    default: {}
  environment:
    description: Variables to set for O(commands) and O(versions), on top of C(LANG=C) and C(LC_ALL=C).
    type: dict
    default: {}
  directories:
    description:
      - Directories to list in RV(directories), such as C(/dev/char), whose links a role compares with what a
        vendor tool would create.
    type: list
    elements: path
    default: []
  keyrings:
    description:
      - OpenPGP key files, such as an apt repository's C(Signed-By) keyring, to read the primary key fingerprints
        of in RV(keyrings), armored or binary, without gpg. A role compares them with the fingerprints it accepts,
        so that a converged re-run need not download the key again.
    type: list
    elements: path
    default: []
    version_added: 0.5.0
  accelerators:
    description:
      - Gather the accelerator facts in this run, in C(accelerators) of RV(ansible_facts), with these options of
        M(accel.nodes.accelerator_facts) (the same names, types and defaults; V({}) takes every default). A role
        that validates a node after changing it reads the fresh facts and its other answers in one run.
      - Omitted, no accelerator facts are gathered.
    type: dict
  cuda:
    description:
      - Run the NVIDIA host checks of M(accel.nodes.nvidia_cuda_check) in this run (CUDA on every GPU,
        C(/dev/nvidia-uvm), persistence mode, the NVSwitch fabric), with these options of that module, after
        O(accelerators) where both are given; RV(cuda) holds what that module returns.
      - With O(accelerators), the checks run only where those facts find NVIDIA GPUs (RV(cuda) is null
        otherwise), and without a C(nvswitch) option, they follow what the facts say of the NVSwitch fabric (the PCI
        bus, then the EC2 catalog), as a role that gathered the facts first would pass it.
      - A failed check never fails this module (that module's C(fail_on_error) is not used). Omitted, nothing is
        checked.
    type: dict
seealso:
  - module: ansible.builtin.setup
  - module: ansible.builtin.package_facts
  - module: ansible.builtin.stat
"""

EXAMPLES = r"""
- name: Read the facts, the Neuron packages and the update-pciids shim
  accel.nodes.node_probe:
    facts: true
    packages: ['^aws-neuron']
    paths: [/usr/local/sbin/update-pciids]
  register: probe

- name: Find oci-add-hooks and runc, and ask oci-add-hooks its version
  accel.nodes.node_probe:
    executables:
      oci_add_hooks: [/usr/local/bin/oci-add-hooks, /usr/bin/oci-add-hooks]
      runc: [/usr/bin/runc, /usr/sbin/runc]
    versions: [oci_add_hooks]
  register: chain

- name: Ask Docker for its configuration and read the toolkit's, in one run
  accel.nodes.node_probe:
    commands:
      docker_info: [docker, info, --format, '{{ "{{json .}}" }}']
    paths: [/etc/nvidia-container-runtime/config.toml]
  register: engine_probe
"""

RETURN = r"""
ansible_facts:
  description:
    - With O(facts), the distribution and platform facts.
    - With O(accelerators), C(accelerators), the facts M(accel.nodes.accelerator_facts) returns.
  returned: when O(facts) is true or O(accelerators) is given
  type: dict
  sample: {os_family: Debian, distribution: Debian, distribution_major_version: '12',
           distribution_release: bookworm, kernel: 6.1.0-28-cloud-amd64, architecture: x86_64}
package_manager:
  description: Where RV(packages) come from, V(dpkg), V(rpm), or V(none) when neither is there.
  returned: always
  type: str
  sample: dpkg
packages:
  description:
    - The installed packages whose name matches O(packages), by name. C(version) is the whole Debian version
      on dpkg, C(VERSION-RELEASE) on rpm (C(release) holds the release alone; the epoch is left out); C(selection)
      is the dpkg selection (V(install), V(hold)), null on rpm.
  returned: always
  type: dict
  sample: {aws-neuronx-dkms: {version: 2.24.13.0, selection: hold, status: installed}}
paths:
  description:
    - Each path of O(paths), by path, with C(exists), C(type) (V(file), V(directory), V(other) or null),
      C(mode) (4 octal digits), C(uid), C(gid), C(executable), C(sha256) of a regular file, and C(text), the
      content of a UTF-8 file of at most 64 KiB (null otherwise).
  returned: always
  type: dict
executables:
  description: For each name of O(executables), the first candidate that is an executable regular file, or V("").
  returned: always
  type: dict
  sample: {oci_add_hooks: /usr/local/bin/oci-add-hooks, runc: /usr/bin/runc}
versions:
  description: For each name of O(versions), C(rc), C(stdout) and C(stderr) of C(<path> --version); null when
    no executable was found.
  returned: always
  type: dict
  sample: {oci_add_hooks: {rc: 0, stdout: "commit: 2fdc948c9b098299b47636a49639dcad8f88ae52", stderr: ""}}
commands:
  description: For each name of O(commands), C(rc), C(stdout) and C(stderr), with surrounding white space removed.
  returned: always
  type: dict
  sample: {nvidia_smi: {rc: 0, stdout: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-f7fd6dbc-8ad6-aa8a-f328-14e34f337867)",
                        stderr: ""}}
cuda:
  description:
    - With O(cuda), what M(accel.nodes.nvidia_cuda_check) returns - C(status) (V(pass) or V(fail)), C(checks),
      C(cuda), C(msg) and C(elapsed_ms).
  returned: when O(cuda) is given; null where the facts of O(accelerators) find no NVIDIA GPU
  type: dict
directories:
  description:
    - For each directory of O(directories), its entries by name, each with the target of a symbolic link, or null
      for an entry that is not a link; null for a directory that cannot be listed.
  returned: always
  type: dict
  sample: {/dev/char: {"195:0": ../nvidia0, "195:255": ../nvidiactl, "1:3": ../null}}
keyrings:
  description:
    - For each file of O(keyrings), C(fingerprints) (its primary keys', upper-case hex), C(armored), and C(error)
      (why the file is not a usable OpenPGP key file, else null); null for a file that does not exist.
  returned: always
  type: dict
  sample: {/etc/apt/keyrings/nvidia-container-toolkit.gpg: {fingerprints: [C95B321B61E88C1809C4F759DDCAE044F796ECB0],
                                                            armored: false, error: null}}
  version_added: 0.5.0
interrupted:
  description:
    - What an interrupted run left, one line each; empty when nothing. With O(packages) on dpkg, the packages a
      dpkg run left half-way (as C(name) and C(state)) and a journal that no run folded in; for every path of O(paths),
      the temporary files of this collection's atomic writes and dpkg's C(.dpkg-*) files beside it.
      M(accel.nodes.interrupted_run) finishes them; the roles run it only where this is not empty.
  returned: always
  type: list
  elements: str
  sample: ["docker.io: half-installed (reinstreq)", "dpkg journal: /var/lib/dpkg/updates"]
  version_added: 0.4.0
"""

import os
from typing import Any, Dict, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils import _interrupted
from ansible_collections.accel.nodes.plugins.module_utils import _node_probe

_ENV = {'LANG': 'C', 'LC_ALL': 'C'}


def read_packages(module: AnsibleModule, patterns: list) -> tuple:
    """(package manager, packages, dpkg's status text or None)."""
    if os.path.exists(_node_probe.DPKG_STATUS):
        with open(_node_probe.DPKG_STATUS, 'r', encoding='utf-8', errors='replace') as handle:
            text = handle.read()
        return 'dpkg', _node_probe.parse_dpkg_status(text, patterns), text
    rpm = module.get_bin_path('rpm')
    if not rpm:
        return 'none', {}, None
    rc, out, err = module.run_command([rpm, '-qa', '--qf', '%{NAME}\\t%{VERSION}\\t%{RELEASE}\\n'],
                                      environ_update=_ENV)
    if rc != 0:
        module.fail_json(msg='rpm -qa failed (rc %d): %s' % (rc, err.strip()), rc=rc)
    return 'rpm', _node_probe.parse_rpm_query(out, patterns), None


def _options(module: AnsibleModule, name: str, spec: Dict[str, Any], options: Dict[str, Any]) -> Dict[str, Any]:
    """options checked against another module's argument spec, as that module checks its own."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    checked = ArgumentSpecValidator(spec).validate(options)
    if checked.error_messages:
        module.fail_json(msg='%s: %s' % (name, '; '.join(checked.error_messages)))
    return checked.validated_parameters


# Imported in the functions below: the module runs from a zip, where every import is compiled on each run,
# and most probes gather no accelerator facts and check no GPU.
def accelerator_facts(module: AnsibleModule, options: Dict[str, Any]) -> Dict[str, Any]:
    """accel.nodes.accelerator_facts' facts."""
    from ansible_collections.accel.nodes.plugins.module_utils import _accelerators
    return _accelerators.gather(module, _options(module, 'accelerators', _accelerators.ARGUMENT_SPEC, options))


def cuda_checks(module: AnsibleModule, options: Dict[str, Any], facts: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """accel.nodes.nvidia_cuda_check's result; with the accelerator facts of this run, None where they find no
    NVIDIA GPU, and their NVSwitch verdict where the options give none."""
    from ansible_collections.accel.nodes.plugins.module_utils import _nvidia_host_checks
    params = _options(module, 'cuda', _nvidia_host_checks.ARGUMENT_SPEC, options)
    if facts is not None:
        if 'nvidia' not in (facts.get('vendors') or []):
            return None
        if params['nvswitch'] is None:
            params['nvswitch'] = ((facts.get('nvidia') or {}).get('nvswitch') or {}).get('present')
    return _nvidia_host_checks.run(module, params)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            facts=dict(type='bool', default=False),
            packages=dict(type='list', elements='str', default=[]),
            paths=dict(type='list', elements='path', default=[]),
            executables=dict(type='dict', default={}),
            versions=dict(type='list', elements='str', default=[]),
            commands=dict(type='dict', default={}),
            environment=dict(type='dict', default={}),
            directories=dict(type='list', elements='path', default=[]),
            keyrings=dict(type='list', elements='path', default=[], no_log=False),
            accelerators=dict(type='dict'),
            cuda=dict(type='dict'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unknown = [n for n in p['versions'] if n not in p['executables']]
    if unknown:
        module.fail_json(msg='versions names %s, which executables does not list' % ', '.join(unknown))
    bad = sorted(n for n, argv in p['commands'].items()
                 if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int)) for a in argv))
    if bad:
        module.fail_json(msg='commands must map each name to a non-empty list of arguments: %s' % ', '.join(bad))
    env = dict(_ENV, **dict((str(k), str(v)) for k, v in p['environment'].items()))
    result = dict(changed=False, package_manager='none', packages={})  # type: Dict[str, Any]
    if p['facts']:
        result['ansible_facts'] = _node_probe.distribution_facts(module)
    if p['accelerators'] is not None:
        result.setdefault('ansible_facts', {})['accelerators'] = accelerator_facts(module, p['accelerators'])
    if p['cuda'] is not None:
        result['cuda'] = cuda_checks(module, p['cuda'], (result.get('ansible_facts') or {}).get('accelerators'))
    status_text = None
    if p['packages']:
        result['package_manager'], result['packages'], status_text = read_packages(module, p['packages'])
    result['interrupted'] = _interrupted.detect(p['paths'], status_text)
    result['paths'] = dict((path, _node_probe.describe(path)) for path in p['paths'])
    result['executables'] = dict((name, _node_probe.first_executable([str(c) for c in (candidates or [])]))
                                 for name, candidates in p['executables'].items())
    result['directories'] = dict((path, _files.list_directory(path)) for path in p['directories'])
    result['keyrings'] = dict((path, _node_probe.keyring(path)) for path in p['keyrings'])
    result['versions'] = {}
    for name in p['versions']:
        path = result['executables'][name]
        if not path:
            result['versions'][name] = None
            continue
        rc, out, err = module.run_command([path, '--version'], environ_update=env)
        result['versions'][name] = _node_probe.version_result(rc, out, err)
    result['commands'] = {}
    for name, argv in p['commands'].items():
        argv = [str(a) for a in argv]
        program = _node_probe.find_program(argv[0], env.get('PATH', os.environ.get('PATH', os.defpath)))
        if not program:
            result['commands'][name] = _node_probe.version_result(127, '', '%s: command not found' % argv[0])
            continue
        rc, out, err = module.run_command([program] + argv[1:], environ_update=env)
        result['commands'][name] = _node_probe.version_result(rc, out, err)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
