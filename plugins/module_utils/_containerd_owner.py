# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Who writes containerd's config on a node, and so where a CRI runtime can be
registered so that the next boot keeps it.

Pure functions over what accel.nodes.node_probe reads (paths, with the text of
small files, and command answers): nothing here touches the node, and the
tests feed the vendors' own templates (tests/fixtures/containerd-owners/).

The owners, and what they do with /etc/containerd or their own config:

- containerd (a distribution package, Docker's containerd.io): the config is
  the user's. accel.nodes.container_runtime writes its drop-in under
  /etc/containerd/conf.d and makes config.toml import that directory.
- eks: nodeadm renders /etc/containerd/config.toml at every boot from an
  embedded template, config.template.toml (config version 2) or
  config2.template.toml (version 3), neither of which has `imports`
  (awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go @ed5cea81,
  templates @e48b98ad and @6c7e6739). A drop-in is never read and an edit of
  config.toml is lost. What the user adds goes into the NodeConfig's
  spec.containerd.config, which nodeadm merges over the template itself
  (nodeadm/doc/examples.md "Configuring containerd", @0f342ac3).
- k3s, rke2: the agent renders <data-dir>/agent/etc/containerd/config.toml at
  every start, from config-v3.toml.tmpl or config.toml.tmpl where the user
  has one, else from the base template (k3s-io/k3s pkg/agent/containerd/
  config.go @9e06189a; rke2 vendors the same package). Releases with
  k3s-io/k3s#13680 put `imports = ["<dir>/config-v3.toml.d/*.toml"]` (v2:
  config.toml.d) in the base template, and a drop-in there survives; older
  ones have no imports (k3s-vip/k3s@703786e7 pkg/agent/templates/templates.go,
  a mirror of k3s-io/k3s), and there only a template of the user's survives.
  The agent runs containerd itself, so the agent's service is what restarts
  it: k3s or k3s-agent (k3s-io/k3s install.sh @0efe2af1, setup_env:
  SYSTEM_NAME=k3s for a server, k3s-<command> otherwise), rke2-server or
  rke2-agent (docs.rke2.io install quickstart).
"""

from __future__ import annotations

import json
import os
import re
import typing as t

from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc
from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlError, loads

OWNERS = ('containerd', 'eks', 'k3s', 'rke2')

# nodeadm's binary (AL2023 EKS AMIs) and the directory of EKS's bootstrap files
# (/etc/eks/bootstrap.sh on AL2, /etc/eks/image-credential-provider and friends on AL2023).
EKS_MARKERS = ('/usr/bin/nodeadm', '/etc/eks')

# The directory each Rancher distribution renders containerd's config into, at its default data-dir.
RANCHER_DIRS = {
    'k3s': '/var/lib/rancher/k3s/agent/etc/containerd',
    'rke2': '/var/lib/rancher/rke2/agent/etc/containerd',
}
# Their systemd units, server first.
RANCHER_SERVICES = {
    'k3s': ('k3s', 'k3s-agent'),
    'rke2': ('rke2-server', 'rke2-agent'),
}
# The user's template and the directory #13680 imports, by the config version rendered.
RANCHER_TEMPLATES = {2: 'config.toml.tmpl', 3: 'config-v3.toml.tmpl'}
RANCHER_DROP_IN_DIRS = {2: 'config.toml.d', 3: 'config-v3.toml.d'}

KUBELET_CONFIG = '/var/lib/kubelet/config.yaml'
_CGROUP_DRIVER_RE = re.compile(r'^cgroupDriver:\s*["\']?(systemd|cgroupfs)', re.MULTILINE)


def probe_paths() -> list[str]:
    """The paths node_probe must describe (with their text) for owner() and target()."""
    paths = list(EKS_MARKERS) + [rc.CONTAINERD_CONFIG, KUBELET_CONFIG]
    for directory in RANCHER_DIRS.values():
        paths += [directory, directory + '/config.toml']
    return paths


def probe_services() -> list[str]:
    """The argv that tells which Rancher unit runs: `systemctl is-active` answers one line per unit, in order."""
    return ['systemctl', 'is-active'] + [unit for units in RANCHER_SERVICES.values() for unit in units]


def _info(paths: t.Mapping[str, t.Any], path: str) -> dict[str, t.Any]:
    info = paths.get(path)
    return info if isinstance(info, dict) else {}


def owner(paths: t.Mapping[str, t.Any]) -> str:
    """containerd, eks, k3s or rke2, from node_probe's paths. EKS wins: nodeadm rewrites /etc/containerd at boot
    whatever else is installed; then the Rancher distribution whose containerd directory exists."""
    if any(_info(paths, marker).get('exists') for marker in EKS_MARKERS):
        return 'eks'
    for name, directory in RANCHER_DIRS.items():
        if _info(paths, directory).get('type') == 'directory':
            return name
    return 'containerd'


def active_service(name: str, is_active_stdout: str) -> str | None:
    """The unit of distribution name that systemctl reports active, from probe_services()'s stdout; None if none."""
    units = [unit for units in RANCHER_SERVICES.values() for unit in units]
    states = dict(zip(units, (line.strip() for line in str(is_active_stdout or '').splitlines())))
    for unit in RANCHER_SERVICES.get(name, ()):
        if states.get(unit) == 'active':
            return unit
    return None


def parse_config(text: str | None) -> dict[str, t.Any] | None:
    """A containerd config text as a dict; None for no file or a file that is not TOML."""
    if text is None:
        return None
    try:
        return loads(text)
    except TomlError:
        return None


def runc_systemd_cgroup(config: t.Mapping[str, t.Any] | None) -> bool | None:
    """SystemdCgroup of the runc runtime in a parsed containerd config, None where it does not say."""
    for section in rc._cri_sections(dict(config or {})):  # pylint: disable=protected-access
        options = (((section.get('containerd') or {}).get('runtimes') or {}).get('runc') or {}).get('options')
        if isinstance(options, dict) and isinstance(options.get('SystemdCgroup'), bool):
            return options['SystemdCgroup']
    return None


def kubelet_systemd_cgroup(text: str | None) -> bool | None:
    """Whether kubelet's config file (KubeletConfiguration, YAML) sets cgroupDriver systemd; None if it says nothing."""
    match = _CGROUP_DRIVER_RE.search(text or '')
    return None if match is None else match.group(1) == 'systemd'


def rancher_drop_in(config: t.Mapping[str, t.Any], main_path: str, name: str) -> str | None:
    """Where a drop-in called name is read, by the imports of the rendered config at main_path; None if nowhere.
    The directory of the config's version comes first, then any other import glob that covers the name."""
    try:
        imports = rc.containerd_imports(dict(config), main_path)
    except rc.ConfigError:
        return None
    directory = os.path.dirname(main_path)
    wanted = os.path.join(directory, RANCHER_DROP_IN_DIRS.get(config.get('version'), 'config-v3.toml.d'), name)
    candidates = [wanted] + [os.path.join(os.path.dirname(entry if os.path.isabs(entry)
                                                          else os.path.join(directory, entry)), name)
                             for entry in imports]
    for path in candidates:
        if any(rc.import_covers(entry, path, main_path) for entry in imports):
            return path
    return None


def runtime_toml(version: int, name: str, path: str, options: t.Mapping[str, t.Any] | None = None,
                 cdi: bool | None = None) -> list[str]:
    """The lines of TOML that register runtime name behind the runc shim (and CDI) for config version."""
    plugin = rc.CRI_RUNTIME_PLUGIN[version if version in rc.CRI_RUNTIME_PLUGIN else 2]
    runtime = '[plugins."%s".containerd.runtimes.%s]' % (plugin, name)
    lines = []
    if cdi:
        lines += ['[plugins."%s"]' % plugin, 'enable_cdi = true', '']
    lines += [runtime, 'runtime_type = "%s"' % rc.RUNC_SHIM, '', runtime[:-1] + '.options]',
              'BinaryName = "%s"' % path]
    for key, value in (options or {}).items():
        lines.append('%s = %s' % (key, json.dumps(value)))
    return lines


def nodeadm_snippet(version: int, name: str, path: str, options: t.Mapping[str, t.Any], cdi: bool | None) -> str:
    """The NodeConfig that makes nodeadm write the runtime and CDI into the config it renders at every boot."""
    return ('apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  containerd:\n    config: |\n'
            + ''.join('      %s\n' % line if line else '\n' for line in runtime_toml(version, name, path, options, cdi)))


def _eks_version(paths: t.Mapping[str, t.Any]) -> int:
    """The config version nodeadm renders, by /etc/containerd/config.toml; 2 where it cannot tell."""
    version = (parse_config(_info(paths, rc.CONTAINERD_CONFIG).get('text')) or {}).get('version')
    return version if version in rc.CRI_RUNTIME_PLUGIN else 2


def target(paths: t.Mapping[str, t.Any], owner_name: str, drop_in: str, services_stdout: str = '',
           runtime: t.Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
    """Where accel.nodes.container_runtime writes, for this owner: {owner, config (the main config it reads),
    drop_in, version (of the main config, where known), service (to restart; None for no restart), error
    (a refusal, '' where it can write)}. drop_in: the role's drop-in path; on k3s and rke2 its file name is
    kept, in the directory their config imports. runtime: name, path, options and cdi, for EKS's message."""
    runtime = dict(runtime or {})
    result: dict[str, t.Any] = {'owner': owner_name, 'config': rc.CONTAINERD_CONFIG, 'drop_in': drop_in,
                                'version': None, 'service': 'containerd', 'error': ''}
    if owner_name == 'containerd':
        main = parse_config(_info(paths, rc.CONTAINERD_CONFIG).get('text'))
        result['version'] = (main or {}).get('version')
        return result
    if owner_name == 'eks':
        version = _eks_version(paths)
        marker = [m for m in EKS_MARKERS if _info(paths, m).get('exists')]
        result.update(version=version, service=None, error=(
            'This is an EKS node (%s): nodeadm renders %s from its own template at every boot, without imports, so '
            'a drop-in would never be read and an edit would be lost at the next boot. The role writes nothing to '
            '/etc/containerd here. nodeadm registers the %s runtime itself where %s exists; to add the settings of '
            'this role, put this in the NodeConfig of the node\'s user data, then remove containerd from '
            'nvidia_container_toolkit_engines (the role then sets the toolkit\'s config.toml and writes the '
            'RuntimeClass only):\n%s'
            % (' and '.join(marker), rc.CONTAINERD_CONFIG, runtime.get('name', 'nvidia'),
               runtime.get('path', '/usr/bin/nvidia-container-runtime'),
               nodeadm_snippet(version, runtime.get('name', 'nvidia'),
                               runtime.get('path', '/usr/bin/nvidia-container-runtime'),
                               runtime.get('options') or {}, runtime.get('cdi')))))
        return result
    directory = RANCHER_DIRS[owner_name]
    main_path = directory + '/config.toml'
    result.update(config=main_path, service=active_service(owner_name, services_stdout))
    text = _info(paths, main_path).get('text')
    main = parse_config(text)
    units = ' or '.join(RANCHER_SERVICES[owner_name])
    if main is None:
        result['error'] = (
            '%s owns containerd\'s config here (%s exists), but %s %s, so the role cannot tell where %s reads a '
            'drop-in. Start %s once, so that it renders its config, and run the role again.'
            % (owner_name, directory, main_path, 'is missing' if text is None else 'is not valid TOML',
               owner_name, units))
        return result
    version = main.get('version') if main.get('version') in RANCHER_DROP_IN_DIRS else 2
    result['version'] = version
    found = rancher_drop_in(main, main_path, os.path.basename(drop_in))
    if found:
        result['drop_in'] = found
        return result
    imports_dir = directory + '/' + RANCHER_DROP_IN_DIRS[version]
    result['error'] = (
        '%s renders %s at every start, and this release\'s template has no imports, so a drop-in would never be '
        'read and an edit would be lost when %s restarts. %s registers the %s runtime itself once %s exists and '
        '%s restarts. For the other settings of this role, upgrade to a %s release whose base template imports '
        '%s/*.toml (k3s-io/k3s#13680), or create %s/%s that starts with the line\n  imports = ["%s/*.toml"]\n'
        'followed by the line that includes k3s\'s base template, template "base" . in double braces (k3s-io/k3s#7991; '
        'the README of accel.nodes.nvidia_container_toolkit shows the file), then restart %s and run the role again; '
        'it then writes its drop-in into %s.'
        % (owner_name, main_path, owner_name, owner_name, runtime.get('name', 'nvidia'),
           runtime.get('path', '/usr/bin/nvidia-container-runtime'), units, owner_name, imports_dir, directory,
           RANCHER_TEMPLATES[version], imports_dir, units, imports_dir))
    return result


def refusal(paths: t.Mapping[str, t.Any], owner_name: str, name: str, path: str, engines_variable: str) -> str:
    """Why a role that writes only /etc/containerd (accel.nodes.neuron_container_runtime) must not register
    runtime name on a node whose containerd config owner_name renders, and what to do instead; '' for plain
    containerd. Unlike target() for the NVIDIA role, nothing here writes into a Rancher import directory."""
    if owner_name == 'containerd':
        return ''
    if owner_name == 'eks':
        marker = [m for m in EKS_MARKERS if _info(paths, m).get('exists')] or ['owner set to eks']
        return ('This is an EKS node (%s): nodeadm renders %s from its own template at every boot, without imports, '
                'so a drop-in would never be read and an edit would be lost at the next boot. Nothing was changed. '
                'To register the %s runtime, put this in the NodeConfig of the node\'s user data, then remove '
                'containerd from %s:\n%s'
                % (' and '.join(marker), rc.CONTAINERD_CONFIG, name, engines_variable,
                   nodeadm_snippet(_eks_version(paths), name, path, {}, None)))
    directory = RANCHER_DIRS[owner_name]
    main_path = directory + '/config.toml'
    main = parse_config(_info(paths, main_path).get('text'))
    units = ' or '.join(RANCHER_SERVICES[owner_name])
    if main is None:
        # Which template and plugin names apply depends on the config version it renders (as in target()).
        return ('%s owns containerd\'s config here (%s exists), so a drop-in in /etc/containerd would never be read '
                'by the containerd it runs. Nothing was changed. %s is missing or not valid TOML, so the role cannot '
                'tell where %s reads a runtime: start %s once, so that it renders its config, and run the role again '
                'for the entry and the file to put it in; then remove containerd from %s.'
                % (owner_name, directory, main_path, owner_name, units, engines_variable))
    version = main.get('version') if main.get('version') in RANCHER_DROP_IN_DIRS else 2
    found = rancher_drop_in(main, main_path, '99-%s.toml' % name)
    where = ('a file in %s, which %s imports' % (os.path.dirname(found), main_path) if found else
             '%s/%s, which %s renders from, with the line that includes its base template (k3s-io/k3s#7991)'
             % (directory, RANCHER_TEMPLATES[version], owner_name))
    return ('%s renders containerd\'s config (%s) at every start, so a drop-in in /etc/containerd would never be '
            'read by the containerd it runs. Nothing was changed. Register the %s runtime in %s, with the entry\n%s\n'
            'then restart %s and remove containerd from %s.'
            % (owner_name, main_path, name, where, '\n'.join(runtime_toml(version, name, path)), units,
               engines_variable))
