#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: container_runtime
short_description: Register an OCI runtime with Docker or containerd without touching the rest of their config
version_added: 0.1.0
description:
  - Registers a runtime such as C(nvidia) or C(oci-neuron) with Docker or containerd, optionally as the
    default runtime, or removes it again.
  - B(Docker.) Reads C(daemon.json) and changes only C(runtimes.<name>), C(default-runtime) and
    C(features.cdi). Every other key keeps its value and its place. When nothing changes, the file is
    not rewritten, so its formatting stays as the user left it; when something does, the file is
    written as JSON in the indent it had (2 spaces for a new file).
  - B(containerd.) Writes the runtime to a drop-in file that the module owns and that holds every runtime
    registered with the same O(config_path), and makes sure the main config imports the drop-in's directory.
  - The main config is changed only where containerd could not use the drop-in otherwise. A missing main
    config is created with C(version = 2) and the C(imports) entry. A version 1 config (no C(version) key,
    as Docker's C(containerd.io) package ships it) gets C(version = 2) and its C(disabled_plugins) and
    C(required_plugins) named by URI, as containerd 2.x migrates them. The CRI plugins leave
    C(disabled_plugins), since a CRI runtime is of no use without them. Every other key and comment stays
    as it was; RV(containerd_config_changes) says what changed.
  - B(nvidia-ctk's drop-in.) C(nvidia-ctk runtime configure) (NVIDIA Container Toolkit 1.18 and later) writes
    C(conf.d/99-nvidia.toml), a copy of the main config's CRI section plus its runtime; it sorts after this module's
    drop-in, and containerd 1.x keeps only the last CRI section it imports. Where such a file registers the same
    runtime alone and its copy holds nothing the main config does not, it is removed (with a backup), and this module's
    drop-in registers the runtime instead. Otherwise it stays, and a warning names what it holds.
  - Files are written atomically (temporary file, then rename) and only when their content changes.
    An existing file keeps its owner and mode.
  - The engine must be restarted for a change to take effect; RV(restart_required) says when.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads and computes everything, writes nothing, and reports the change it would make.
  diff_mode:
    support: full
    details:
      - Docker gives one diff of C(daemon.json). containerd gives a list, in this order. A drop-in of the old
        layout that is removed, if any; the drop-in; the main config when O(state=present).
options:
  engine:
    description:
      - The container engine to register the runtime with.
    type: str
    choices: [docker, containerd]
    required: true
  name:
    description:
      - Name of the runtime, for example C(nvidia) or C(oci-neuron). Containers select it with
        C(docker run --runtime=<name>); a Kubernetes RuntimeClass names it as its C(handler).
      - Letters, digits, C(.), C(_) and C(-), starting with a letter or digit.
      - Docker reserves C(runc), C(io.containerd.runc.v2) and C(io.containerd.runtime.v1.linux).
    type: str
    required: true
  path:
    description:
      - The runtime binary or wrapper, for example C(/usr/bin/nvidia-container-runtime).
      - For containerd it becomes the C(BinaryName) the runc shim (C(io.containerd.runc.v2)) runs
        instead of C(runc).
      - Required when O(state=present).
    type: path
  runtime_args:
    description:
      - Arguments Docker passes to the runtime (C(runtimeArgs)). An empty list writes no C(runtimeArgs).
      - containerd's runc shim has no runtime arguments; giving any with O(engine=containerd) fails.
    type: list
    elements: str
    default: []
  default:
    description:
      - V(true) makes this the default runtime (Docker C(default-runtime), containerd
        C(default_runtime_name) in the drop-in).
      - V(false) makes sure it is not. Docker's C(default-runtime) is removed if it names this runtime.
        For containerd the drop-in then sets no default, and a default set in the main config is left alone.
      - When not given, the default runtime is left as it is, so that a default set by someone else
        (for example on a Deep Learning AMI) survives.
    type: bool
  state:
    description:
      - V(present) registers the runtime. V(absent) removes only what this module adds for it.
      - For Docker, V(absent) removes C(runtimes.<name>), the C(runtimes) key if that leaves it empty,
        and C(default-runtime) if it names this runtime. C(features.cdi) stays, since other runtimes may rely on it.
      - For containerd, V(absent) removes the runtime from the drop-in, and the drop-in once no runtime is left.
        The main config is left alone, since the C(imports) entry names a directory, where other drop-ins may be.
    type: str
    choices: [present, absent]
    default: present
  config_path:
    description:
      - For Docker, the daemon config. Defaults to C(/etc/docker/daemon.json).
      - For containerd, the drop-in to write. Defaults to C(/etc/containerd/conf.d/99-accel-nodes.toml), shared
        by all runtimes. It must end in C(.toml); its directory's C(*.toml) glob is what the main config imports.
      - A drop-in C(99-<name>.toml) next to it that this module wrote for the same runtime (the layout of earlier
        releases) is removed.
    type: path
  containerd_config:
    description:
      - containerd's main config, which gives the config version and receives the C(imports) entry.
      - Created with C(version = 2) and the C(imports) entry if it does not exist; see the description for
        the other changes it may get.
    type: path
    default: /etc/containerd/config.toml
  containerd_options:
    description:
      - Extra keys for the runtime's C(options) table in the containerd drop-in, for example C(SystemdCgroup)
        set to V(true). Values are written with their YAML type.
      - C(BinaryName) comes from O(path) and cannot be set here.
    type: dict
    default: {}
  cdi:
    description:
      - Turn Container Device Interface support on or off in the engine.
      - Docker C(features.cdi); containerd C(enable_cdi) in the CRI runtime plugin's section of the drop-in.
      - When not given, the setting is left as it is.
    type: bool
  backup:
    description:
      - Copy each file to a timestamped backup next to it before changing or removing it.
      - The backup of a drop-in ends in C(~), so containerd's C(*.toml) import does not read it.
    type: bool
    default: true
notes:
  - B(containerd 1.x and config version 2.) containerd 1.x replaces a plugin's whole section with the one
    of each imported file, where containerd 2.x merges key by key. The version 2 drop-in therefore repeats
    the main config's CRI plugin section (C(io.containerd.grpc.v1.cri)) with the runtimes added, and holds
    every runtime the module registers there, so that one file sets the section. Run the module again after
    editing that section of the main config, so that the copy follows. Another file that sets the section and
    is imported after the drop-in wins on containerd 1.x; the module then warns, and RV(runtimes) leaves out
    what containerd will not see.
  - Versions 3 and 4 (containerd 2.x) get a drop-in with the runtimes alone.
  - The module does not restart the engine. Restart it when RV(restart_required) is true, for example
    through the handler of the C(accel.nodes.docker) role.
seealso:
  - name: Docker daemon configuration file
    description: The keys of daemon.json, C(runtimes) and C(default-runtime) among them.
    link: https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file
  - name: containerd CRI plugin config
    description: Runtime and CDI settings of the CRI plugin, by config version.
    link: https://github.com/containerd/containerd/blob/main/docs/cri/config.md
"""

EXAMPLES = r"""
- name: Register the NVIDIA runtime with Docker, as the default, with CDI on
  accel.nodes.container_runtime:
    engine: docker
    name: nvidia
    path: /usr/bin/nvidia-container-runtime
    default: true
    cdi: true
  register: container_runtime_nvidia
  notify: Restart docker

- name: Register the Neuron runtime with containerd, with systemd cgroups
  accel.nodes.container_runtime:
    engine: containerd
    name: oci-neuron
    path: /opt/aws/neuron/bin/oci_neuron_hook_wrapper.sh
    containerd_options:
      SystemdCgroup: true

- name: Register a runtime that takes arguments
  accel.nodes.container_runtime:
    engine: docker
    name: runsc-debug
    path: /usr/local/bin/runsc
    runtime_args: [--debug, --debug-log=/tmp/runsc/]

- name: Remove the NVIDIA runtime again (a default naming it is reset)
  accel.nodes.container_runtime:
    engine: docker
    name: nvidia
    state: absent
"""

RETURN = r"""
restart_required:
  description: Whether the engine must be restarted to pick the change up. The same as RV(ignore:changed).
  returned: always
  type: bool
  sample: true
config_path:
  description: The file holding the runtime, C(daemon.json) for Docker or the drop-in for containerd.
  returned: always
  type: str
  sample: /etc/containerd/conf.d/99-accel-nodes.toml
runtimes:
  description:
    - The runtimes registered once the task has run (or would have, in check mode), in file order.
    - For Docker, the names under C(runtimes) in C(daemon.json). For containerd, the runtimes of the
      CRI plugin in the config containerd builds from the main config and the files its C(imports) name.
      Plugin sections replace each other when C(containerd --version) says 1.x, or when it cannot be run
      and no file has a version above 2; else they merge.
  returned: always
  type: list
  elements: str
  sample: [nvidia, oci-neuron]
backup_file:
  description: Backup of O(config_path) made before it was changed or removed.
  returned: when a backup was made
  type: str
  sample: /etc/docker/daemon.json.31847.2026-11-21@10:15:42~
containerd_config:
  description: The main containerd config.
  returned: when O(engine=containerd)
  type: str
  sample: /etc/containerd/config.toml
containerd_config_version:
  description: The config version of the drop-in, from the main containerd config (2 when there is none or it had none).
  returned: when O(engine=containerd) and O(state=present)
  type: int
  sample: 2
containerd_config_changes:
  description: What was changed in the main config besides the C(imports) entry, one sentence each.
  returned: when O(engine=containerd) and O(state=present)
  type: list
  elements: str
  sample: ["/etc/containerd/config.toml disabled the CRI plugin (cri), so no CRI client could use a runtime; it is enabled now"]
containerd_config_backup_file:
  description: Backup of the main containerd config made before the C(imports) entry was added.
  returned: when a backup was made
  type: str
  sample: /etc/containerd/config.toml.31847.2026-11-21@10:15:42~
vendor_drop_in:
  description:
    - The drop-in C(conf.d/99-<name>.toml) that C(nvidia-ctk runtime configure) (toolkit 1.18 and later) writes for
      the same runtime, where there is one - C(path), C(extras) (the settings it holds that the main config does not,
      as dotted keys) and C(replaced) (removed, where it held none).
  returned: when O(engine=containerd), O(state=present) and there is such a drop-in
  type: dict
  sample: {path: /etc/containerd/conf.d/99-nvidia.toml, extras: [], replaced: true}
  version_added: 0.4.0
vendor_drop_in_backup_file:
  description: Backup of that drop-in, made before it was removed.
  returned: when it was removed and O(backup) is true
  type: str
  sample: /etc/containerd/conf.d/99-nvidia.toml.31847.2026-11-27@05:00:00~
  version_added: 0.4.0
"""

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc
from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlError, loads

NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*\Z')


def read(module, path):
    try:
        return _files.read_text(path)
    except (ValueError, OSError) as exc:
        module.fail_json(msg='Cannot read %s: %s' % (path, exc))


def docker(module):
    p = module.params
    path = p['config_path'] or rc.DOCKER_CONFIG
    before = read(module, path)
    try:
        data, after = rc.docker_runtime_text(before, p['name'], p['path'], p['runtime_args'], p['default'], p['cdi'],
                                             p['state'], path)
    except rc.ConfigError as exc:
        module.fail_json(msg=str(exc), config_path=path)
    update = _files.update_file(module, path, before, after, p['backup'])
    result = dict(changed=update['changed'], config_path=path, runtimes=rc.docker_runtimes(data))
    if update['backup_file']:
        result['backup_file'] = update['backup_file']
    if module._diff:
        result['diff'] = update['diff']
    return result


def containerd(module):
    p = module.params
    name, main_path = p['name'], p['containerd_config']
    drop_in = p['config_path'] or rc.CONTAINERD_DROP_IN
    if p['runtime_args']:
        module.fail_json(msg="containerd's runc shim takes no runtime arguments, so runtime_args must be empty with "
                             'engine=containerd. Put the arguments in a wrapper script and give that as path.')
    if not drop_in.endswith('.toml'):
        module.fail_json(msg='config_path %s must end in .toml for the import glob to read it.' % drop_in)
    if os.path.realpath(drop_in) == os.path.realpath(main_path):
        module.fail_json(msg='config_path must be a drop-in of its own, not the main config %s.' % main_path)
    result = dict(changed=False, config_path=drop_in, containerd_config=main_path)
    present = p['state'] == 'present'
    main_before = read(module, main_path)
    drop_in_before = read(module, drop_in)
    owned = rc.drop_in_runtimes(drop_in_before)
    if drop_in_before is not None and owned is None:
        module.fail_json(msg='%s exists and was not written by this module; give config_path a file of its own.'
                         % drop_in, **result)
    try:
        try:
            main_doc = rc.parse_containerd_config(main_before, main_path)
        except rc.ConfigError as exc:
            if present:
                raise
            module.warn(str(exc))  # removing a runtime does not need the main config
            main_doc = rc.parse_containerd_config(None, main_path)
        version, changes, drop_in_after = rc.containerd_runtime_change(
            main_doc, drop_in_before, name, p['path'], p['containerd_options'], p['default'], p['cdi'], present,
            drop_in, main_path)
    except (rc.ConfigError, TomlError) as exc:
        module.fail_json(msg=str(exc), **result)
    if present:
        result['containerd_config_version'] = version
        result['containerd_config_changes'] = changes
    diffs = []
    for path, before, after, key in legacy_drop_ins(module, name, drop_in, main_doc.as_dict(), result) + [
            (drop_in, drop_in_before, drop_in_after, 'backup_file')]:
        update = _files.update_file(module, path, before, after, p['backup'])
        result['changed'] = result['changed'] or update['changed']
        diffs.append(update['diff'])
        if update['backup_file'] and key:
            result[key] = update['backup_file']
    if present:
        update = _files.update_file(module, main_path, main_before, main_doc.text(), p['backup'])
        result['changed'] = result['changed'] or update['changed']
        diffs.append(update['diff'])
        if update['backup_file']:
            result['containerd_config_backup_file'] = update['backup_file']
    result['runtimes'] = containerd_runtimes(module, main_path, main_doc, drop_in, drop_in_after, present)
    if present and name not in result['runtimes']:
        module.warn('containerd will not see the %s runtime: another file it imports after %s sets the CRI plugin '
                    'section, and containerd 1.x keeps only the last such section. Register every runtime in one '
                    'config_path.' % (name, drop_in))
    if module._diff:
        result['diff'] = diffs
    return result


def legacy_drop_ins(module, name, drop_in, main, result):
    """(path, before, None, key) for conf.d/99-<name>.toml where it registers this runtime alone, to remove it: this
    module's own of the one-file-per-runtime layout, or the one `nvidia-ctk runtime configure` writes (toolkit 1.18
    and later), whose copy of the main config's CRI section would shadow this drop-in on containerd 1.x (it sorts
    after 99-accel-nodes.toml). nvidia-ctk's is removed only where that copy holds nothing the main config does not,
    and a backup is kept; otherwise it stays, and RV(vendor_drop_in) says what it holds."""
    path = os.path.join(os.path.dirname(drop_in), os.path.basename(rc.CONTAINERD_LEGACY_DROP_IN % name))
    if path == drop_in:
        return []
    text = read(module, path)
    if text is None:
        return []
    owned = rc.drop_in_runtimes(text)
    if owned is not None:
        return [(path, text, None, None)] if owned == [name] else []
    if module.params['state'] != 'present':
        return []
    try:
        extras = rc.nvidia_ctk_drop_in_extras(loads(text), main, name)
    except TomlError:
        return []
    if extras is None:
        return []
    result['vendor_drop_in'] = dict(path=path, extras=extras, replaced=not extras)
    if extras:
        module.warn('%s, as nvidia-ctk runtime configure writes it, registers the %s runtime and also sets %s, which %s '
                    'does not: it is left in place. On containerd 1.x its CRI section replaces the one of %s. Move '
                    'those settings into %s and remove it, and the role takes its place.'
                    % (path, name, ', '.join(extras), module.params['containerd_config'], drop_in,
                       module.params['containerd_config']))
        return []
    return [(path, text, None, 'vendor_drop_in_backup_file')]


def containerd_major(module):
    binary = module.get_bin_path('containerd')
    if not binary:
        return None
    rc_, out, dummy = module.run_command([binary, '--version'], environ_update={'LANG': 'C', 'LC_ALL': 'C'})
    return rc.containerd_major(out) if rc_ == 0 else None


def containerd_runtimes(module, main_path, main_doc, drop_in, drop_in_after, present):
    """Runtimes of the CRI plugin in the config containerd builds from the main config and its imports."""
    main = main_doc.as_dict()
    try:
        imports = rc.containerd_imports(main, main_path)
    except rc.ConfigError:
        imports = []
    files = []
    for entry in imports:
        pattern = entry if os.path.isabs(entry) else os.path.join(os.path.dirname(main_path), entry)
        matches = sorted(glob.glob(pattern))
        if present and drop_in not in matches and rc.import_covers(entry, drop_in, main_path):
            matches = sorted(matches + [drop_in])  # in check mode it may not exist yet
        files.extend(f for f in matches if f not in files)
    configs = [main]
    for path in files:
        text = drop_in_after if path == drop_in else read(module, path)
        if text is None:
            continue
        try:
            configs.append(loads(text))
        except TomlError as exc:
            module.warn('%s is not valid TOML, so containerd will not start with it: %s' % (path, exc))
    return rc.containerd_runtimes(rc.containerd_effective(configs, containerd_major(module)))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type='str', required=True, choices=['docker', 'containerd']),
            name=dict(type='str', required=True),
            path=dict(type='path'),
            runtime_args=dict(type='list', elements='str', default=[]),
            default=dict(type='bool'),
            state=dict(type='str', default='present', choices=['present', 'absent']),
            config_path=dict(type='path'),
            containerd_config=dict(type='path', default=rc.CONTAINERD_CONFIG),
            containerd_options=dict(type='dict', default={}),
            cdi=dict(type='bool'),
            backup=dict(type='bool', default=True),
        ),
        required_if=[('state', 'present', ('path',))],
        supports_check_mode=True,
    )
    name = module.params['name']
    if not NAME.match(name):
        module.fail_json(msg='name %r: use letters, digits, ".", "_" and "-", starting with a letter or digit.' % name)
    if module.params['engine'] == 'docker':
        if name in rc.DOCKER_RESERVED_NAMES:
            module.fail_json(msg='Docker reserves the runtime name %s; choose another name.' % name)
        result = docker(module)
    else:
        result = containerd(module)
    result['restart_required'] = result['changed']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
