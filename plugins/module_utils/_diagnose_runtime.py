# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Findings of issue 28 about the container engines: runtime registration (daemon.json against the running
Docker, containerd's merged configuration) and the /dev/char links the systemd cgroup driver needs.

An area of accel.nodes.diagnose, as module_utils/_diagnose_neuron.py and _diagnose_host.py are: PROBE is what it
reads in the diagnose's one accel.nodes.node_probe run (merged with the other areas' by the filter
accel.nodes.diagnose_probe), findings() turns that run's result into findings (_diagnose.finding).

This file is private to the accel.nodes collection: its interface may change without notice, and code outside the
collection must not import it."""

from __future__ import annotations

import json
import os
import shlex
import typing as t

from ansible_collections.accel.nodes.plugins.module_utils import _dev_char, _runtime_config, _toml
from ansible_collections.accel.nodes.plugins.module_utils._diagnose import BROKEN, WILL_BREAK, finding

DAEMON_JSON = _runtime_config.DOCKER_CONFIG
CONTAINERD_CONFIG = _runtime_config.CONTAINERD_CONFIG  # named in the fix
# The drop-ins that register the nvidia handler: nvidia-ctk's default (nct-1.20.0 cmd/nvidia-ctk/runtime/configure
# --drop-in-config, /etc/containerd/conf.d/99-nvidia.toml), and accel.nodes.container_runtime's own.
CONTAINERD_DROP_INS = ('/etc/containerd/conf.d/99-nvidia.toml', _runtime_config.CONTAINERD_DROP_IN)
DEV_CHAR = '/dev/char'
# Bounds on the engines' answers: docker info asks the daemon over its socket, config dump reads files only.
DOCKER_TIMEOUT_S = 30
CONTAINERD_TIMEOUT_S = 20

# One shell run, no engine asked: for each runtime binary daemon.json or containerd's merged config names, where
# it resolves (an absolute path that is an executable file, or a name found on PATH as dockerd and containerd look
# it up), and the arguments of docker.service's dockerd (its --config-file and --default-runtime beat daemon.json).
# Lines: "binary<TAB>name<TAB>resolved or empty", "dockerd<TAB>argv". Paths with white space are not split
# correctly; the findings then judge nothing about them.
_NODE_SCRIPT = r'''
for p in $(grep -o '"path"[[:space:]]*:[[:space:]]*"[^"]*"' %(daemon_json)s 2>/dev/null | sed 's/.*"\([^"]*\)"$/\1/') \
         $(command -v containerd >/dev/null && timeout %(timeout)d containerd config dump 2>/dev/null \
           | sed -n 's/^[[:space:]]*BinaryName[[:space:]]*=[[:space:]]*["'"'"']\([^"'"'"']*\)["'"'"'].*/\1/p'); do
  case $p in
    /*) if [ -f "$p" ] && [ -x "$p" ]; then r=$p; else r=; fi ;;
    *) r=$(command -v "$p" 2>/dev/null || true) ;;
  esac
  printf 'binary\t%%s\t%%s\n' "$p" "$r"
done
pid=$(systemctl show --property=MainPID --value docker.service 2>/dev/null || true)
[ -n "$pid" ] && [ "$pid" != 0 ] && printf 'dockerd\t%%s\n' "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
exit 0
''' % {'daemon_json': DAEMON_JSON, 'timeout': CONTAINERD_TIMEOUT_S}

# The NVIDIA device nodes nvidia-ctk links (nct-1.20.0 cmd/nvidia-ctk/system/create-dev-char-symlinks/existing.go:
# /dev/nvidia* and /dev/nvidia-caps/nvidia-*, without the nvidia-fs, nvidia-nvswitch and nvidia-nvlink ones), with
# their major and minor numbers in hex (coreutils stat %t %T).
_NODES_SCRIPT = ('for f in /dev/nvidia* /dev/nvidia-caps/nvidia-*; do [ -c "$f" ] && stat -c "%n %t %T" "$f"; '
                 'done; exit 0')
_NOT_LINKED = ('nvidia-fs', 'nvidia-nvswitch', 'nvidia-nvlink')

# The package that ships the NVIDIA runtime, on deb and rpm alike (nct-1.20.0
# packaging/debian/nvidia-container-toolkit-base.install; packaging/rpm/SPECS/nvidia-container-toolkit.spec, %files base).
PACKAGE_OF = {'nvidia-container-runtime': 'nvidia-container-toolkit-base'}

PROBE: dict = {
    'paths': [DAEMON_JSON] + list(CONTAINERD_DROP_INS),
    'directories': [DEV_CHAR],
    'packages': [],
    'commands': {
        # What validation's accel.nodes.validation_checks reads too (_docker_info): the whole `docker info`.
        'runtime_docker_info': ['timeout', str(DOCKER_TIMEOUT_S), 'docker', 'info', '--format', '{{json .}}'],
        # The config containerd would run with, imports merged (nct-1.20.0 pkg/config/engine/containerd reads the
        # same, CommandLineSource).
        'runtime_containerd_dump': ['timeout', str(CONTAINERD_TIMEOUT_S), 'containerd', 'config', 'dump'],
        'runtime_node': ['/bin/sh', '-c', _NODE_SCRIPT],
        'runtime_nvidia_nodes': ['/bin/sh', '-c', _NODES_SCRIPT],
    },
}

SOURCES = {
    'docker_loaded': ('moby/moby api/types/system/info.go (docker info: Runtimes, DefaultRuntime, the daemon\'s '
                      'loaded configuration); daemon/reload_unix.go reloadPlatform: a reload (SIGHUP) takes runtimes '
                      'and a non-empty default-runtime from daemon.json; daemon/runtime_unix.go: "unknown or invalid '
                      'runtime name"'),
    'docker_default': ('moby/moby daemon/runtime_unix.go configureRuntimes: an empty DefaultRuntime becomes '
                       'config.StockRuntimeName ("runc"); '
                       'daemon/reload_unix.go reloadPlatform sets DefaultRuntime only when daemon.json names one, so '
                       'removing the key takes a restart'),
    'binary': ('Docker Engine API, definition Runtime: path is the "Name and, optional, path, of the OCI executable '
               'binary. If the path is omitted, the daemon searches the host\'s $PATH"; containerd docs/cri/config.md: '
               'runc options BinaryName; nvidia-container-toolkit packaging/debian/'
               'nvidia-container-toolkit-base.install: nvidia-container-runtime in /usr/bin'),
    'containerd_handler': ('containerd docs/cri/config.md (runtimes under plugins."io.containerd.grpc.v1.cri" for '
                           'config version 2, plugins."io.containerd.cri.v1.runtime" for 3; imports); containerd '
                           'internal/cri/config/config.go: "no runtime for %q is configured"; nvidia-ctk runtime '
                           'configure writes the handler to a drop-in that config.toml must import'),
    'dev_char': ('NVIDIA/nvidia-container-toolkit#48 (NVIDIA: with the systemd cgroup driver a daemon-reload takes '
                 'the GPUs from containers, "Failed to initialize NVML: Unknown Error"; runc needs /dev/char '
                 'links to injected device nodes; workaround nvidia-ctk system create-dev-char-symlinks '
                 '--create-all); moby daemon/daemon_unix.go UsingSystemd; containerd docs/cri/config.md SystemdCgroup'),
}


def _result(probe: t.Mapping, name: str) -> dict:
    result = (probe.get('commands') or {}).get(name)
    return result if isinstance(result, dict) else {}


def _text(probe: t.Mapping, path: str) -> t.Optional[str]:
    value = ((probe.get('paths') or {}).get(path) or {})
    return value.get('text') if value.get('exists', True) else None


def docker_info(result: t.Mapping) -> t.Optional[dict]:
    """`docker info --format '{{json .}}'`, parsed; None where Docker is not installed (127), did not answer, or
    answered something else. The validation (filter validation_checks) reads Docker's answer with it too."""
    stdout = str((result or {}).get('stdout') or '').strip()
    if (result or {}).get('rc') != 0 or not stdout.startswith('{'):
        return None
    try:
        info = json.loads(stdout)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def node_lines(stdout: str) -> dict:
    """The runtime_node script's answer: {'binaries': {name: resolved path or ''}, 'dockerd': [argv, ...]}."""
    binaries: dict[str, str] = {}
    dockerd: list[list[str]] = []
    for line in (stdout or '').splitlines():
        parts = line.split('\t')
        if parts[0] == 'binary' and len(parts) >= 2 and parts[1]:
            binaries[parts[1]] = parts[2] if len(parts) > 2 else ''
        elif parts[0] == 'dockerd' and len(parts) == 2:
            try:
                dockerd.append(shlex.split(parts[1]))
            except ValueError:
                dockerd.append(parts[1].split())
    return {'binaries': binaries, 'dockerd': dockerd}


def dockerd_flags(argv: t.Sequence[str]) -> dict:
    """What dockerd's own flags set: {'config_file', 'default_runtime', 'runtimes'} (None/[] where unset)."""
    flags: dict[str, t.Any] = {'config_file': None, 'default_runtime': None, 'runtimes': []}
    args = list(argv[1:])
    names = {'--config-file': 'config_file', '--default-runtime': 'default_runtime', '--add-runtime': 'runtimes'}
    i = 0
    while i < len(args):
        arg = args[i]
        key, _sep, value = arg.partition('=')
        if key in names:
            if not _sep:
                i += 1
                value = args[i] if i < len(args) else ''
            if names[key] == 'runtimes':
                flags['runtimes'].append(value.split('=', 1)[0])
            else:
                flags[names[key]] = value
        i += 1
    return flags


def _daemon_json(text: t.Optional[str]) -> t.Optional[dict]:
    try:
        return _runtime_config.read_daemon_json(text)
    except _runtime_config.ConfigError:
        return None


def docker_findings(daemon_text: t.Optional[str], info: t.Optional[t.Mapping],
                    dockerd_argv: t.Sequence[t.Sequence[str]] = ()) -> list[dict]:
    """runtime.docker.not_loaded and runtime.docker.default_mismatch: daemon.json against the running Docker.

    Nothing where Docker did not answer: a stopped Docker reads daemon.json when it starts, and the validation's
    docker check names an engine that does not answer. Nothing either where dockerd reads another config file,
    or daemon.json is not JSON (Docker refuses to start with it; accel.nodes.container_runtime names it)."""
    config = _daemon_json(daemon_text)
    if info is None or config is None or len(dockerd_argv) > 1:
        return []
    flags = dockerd_flags(dockerd_argv[0]) if dockerd_argv else dockerd_flags([])
    if flags['config_file'] and os.path.normpath(flags['config_file']) != DAEMON_JSON:
        return []
    running = info.get('Runtimes') if isinstance(info.get('Runtimes'), dict) else {}
    configured = config.get('runtimes') if isinstance(config.get('runtimes'), dict) else {}
    stale = ['%s: runtimes.%s (path %s); docker info Runtimes: %s' % (
        DAEMON_JSON, name, (entry or {}).get('path') if isinstance(entry, dict) else None,
        ', '.join(sorted(running)) or 'none') for name, entry in sorted(configured.items()) if name not in running]
    found = []
    if stale:
        found.append(finding(
            'runtime.docker.not_loaded', BROKEN,
            'daemon.json registers runtime(s) that the running Docker has not loaded (daemon.json changed, Docker '
            'not reloaded): containers that ask for them fail with "unknown or invalid runtime name".',
            stale,
            'Make Docker read daemon.json again: systemctl reload docker (dockerd re-reads its runtimes without '
            'stopping containers) or systemctl restart docker; accel.nodes.nvidia_container_toolkit restarts Docker '
            'whenever it changes daemon.json.',
            SOURCES['docker_loaded']))
    want_default = config.get('default-runtime') or flags['default_runtime'] or 'runc'
    have_default = info.get('DefaultRuntime')
    if have_default and have_default != want_default:
        where = ('%s: default-runtime %s' % (DAEMON_JSON, want_default) if config.get('default-runtime') else
                 '%s sets no default-runtime, so Docker\'s is %s' % (DAEMON_JSON, want_default))
        found.append(finding(
            'runtime.docker.default_mismatch', BROKEN,
            'Docker runs containers with the default runtime %s, but its configuration says %s: containers started '
            'without --runtime get the wrong one until Docker restarts.' % (have_default, want_default),
            [where, 'docker info DefaultRuntime: %s' % have_default],
            'Restart Docker (systemctl restart docker): a reload keeps the old default where daemon.json no longer '
            'names one; accel.nodes.nvidia_container_toolkit restarts Docker whenever it changes daemon.json.',
            SOURCES['docker_default']))
    return found


def _containerd_config(dump: t.Mapping) -> t.Optional[dict]:
    if (dump or {}).get('rc') != 0 or not str((dump or {}).get('stdout') or '').strip():
        return None
    try:
        data = _toml.loads(str(dump.get('stdout')))
    except (_toml.TomlError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def containerd_runtimes(config: t.Optional[t.Mapping]) -> dict:
    """{handler: its table} of the CRI plugin of a containerd config (the dump's, or a drop-in's)."""
    if not isinstance(config, t.Mapping):
        return {}
    plugins = config.get('plugins') or {}
    found: dict = {}
    for plugin in ('io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'cri'):
        runtimes = ((plugins.get(plugin) or {}).get('containerd') or {}).get('runtimes') or {}
        if isinstance(runtimes, dict):
            found.update((k, v) for k, v in runtimes.items() if isinstance(v, dict))
    return found


def _cri_disabled(config: t.Mapping) -> bool:
    disabled = config.get('disabled_plugins') or []
    return any(p in _runtime_config.CRI_PLUGINS for p in disabled if p != 'io.containerd.cri.v1.images')


def containerd_findings(dump: t.Mapping, drop_ins: t.Mapping[str, t.Optional[str]]) -> list[dict]:
    """runtime.containerd.handler_missing: a drop-in defines a handler that the merged config lacks."""
    config = _containerd_config(dump)
    if config is None or _cri_disabled(config):
        return []
    loaded = containerd_runtimes(config)
    evidence = []
    for path, text in sorted(drop_ins.items()):
        if not text:
            continue
        try:
            defined = containerd_runtimes(_toml.loads(text))
        except (_toml.TomlError, ValueError):
            continue
        evidence += ['%s defines runtimes.%s; containerd config dump has no such handler' % (path, name)
                     for name in sorted(defined) if name not in loaded]
    if not evidence:
        return []
    return [finding(
        'runtime.containerd.handler_missing', BROKEN,
        'A containerd drop-in defines a runtime handler that the config containerd loads lacks: pods with that '
        'RuntimeClass fail with "no runtime for ... is configured".',
        evidence + ['containerd config dump handlers: %s' % (', '.join(sorted(loaded)) or 'none')],
        'Make %s import the drop-in (imports = ["/etc/containerd/conf.d/*.toml"]) and restart containerd: '
        'accel.nodes.nvidia_container_toolkit with containerd in nvidia_container_toolkit_engines does both.'
        % CONTAINERD_CONFIG,
        SOURCES['containerd_handler'])]


def binary_findings(daemon_text: t.Optional[str], info: t.Optional[t.Mapping], dump: t.Mapping,
                    resolved: t.Mapping[str, str]) -> list[dict]:
    """runtime.binary_missing: a registered runtime whose executable is not on the node.

    resolved: the runtime_node script's {path or name: where it resolves, '' for nowhere}; a path it did not
    look up is not judged."""
    wanted: dict[str, list[str]] = {}
    config = _daemon_json(daemon_text) or {}
    for name, entry in sorted((config.get('runtimes') or {}).items()):
        if isinstance(entry, dict) and entry.get('path'):
            wanted.setdefault(str(entry['path']), []).append('%s runtimes.%s' % (DAEMON_JSON, name))
    for name, entry in sorted(((info or {}).get('Runtimes') or {}).items()):
        if isinstance(entry, dict) and entry.get('path'):
            wanted.setdefault(str(entry['path']), []).append('docker info Runtimes.%s' % name)
    for name, entry in sorted(containerd_runtimes(_containerd_config(dump)).items()):
        binary = (entry.get('options') or {}).get('BinaryName')
        if binary:
            wanted.setdefault(str(binary), []).append('containerd config dump runtimes.%s BinaryName' % name)
    missing = [(path, whose) for path, whose in sorted(wanted.items()) if path in resolved and not resolved[path]]
    if not missing:
        return []
    packages = sorted(set(PACKAGE_OF[os.path.basename(p)] for p, _w in missing if os.path.basename(p) in PACKAGE_OF))
    if packages:
        # accel.nodes.nvidia_container_toolkit installs only what the package manager lacks: a file removed from
        # an installed package takes a reinstall, and apt's reinstall drops the package's hold (seen with apt 2.6
        # on Debian 12), which the role sets again.
        fix = ('Reinstall %s, which ships it: apt-get install --reinstall %s (dnf reinstall on RPM hosts). Then run '
               'accel.nodes.nvidia_container_toolkit, which holds the toolkit at its pin again.'
               % (', '.join(packages), ' '.join(packages)))
    else:
        fix = 'Install the runtime again, or remove its registration from the engine\'s config and restart the engine.'
    return [finding(
        'runtime.binary_missing', BROKEN,
        'A registered container runtime\'s executable is missing: every container that uses it fails to start '
        '(%s).' % ', '.join(p for p, _w in missing),
        ['%s names %s, which is not an executable file on the node (nor on PATH)' % (', '.join(w), p)
         for p, w in missing],
        fix, SOURCES['binary'])]


def nvidia_nodes(stdout: str) -> dict[str, str]:
    """{device node: 'major:minor' in decimal} from `stat -c '%n %t %T'` lines (hex numbers)."""
    nodes = {}
    for line in (stdout or '').splitlines():
        parts = line.split()
        if len(parts) != 3 or os.path.basename(parts[0]).startswith(_NOT_LINKED):
            continue
        try:
            nodes[parts[0]] = '%d:%d' % (int(parts[1], 16), int(parts[2], 16))
        except ValueError:
            continue
    return nodes


def systemd_engines(info: t.Optional[t.Mapping], dump: t.Mapping) -> list[str]:
    """Evidence lines for each engine that puts containers in systemd-managed cgroups."""
    engines = []
    if info and info.get('CgroupDriver') == 'systemd':
        engines.append('docker info CgroupDriver: systemd')
    config = _containerd_config(dump)
    if config is not None and not _cri_disabled(config):
        systemd = sorted(n for n, e in containerd_runtimes(config).items()
                         if (e.get('options') or {}).get('SystemdCgroup') is True)
        if systemd:
            engines.append('containerd config dump: SystemdCgroup = true for runtimes %s' % ', '.join(systemd))
    return engines


def _number(link: str) -> tuple:
    """(major, minor) of a /dev/char/<major>:<minor> link, for the order of the evidence."""
    return tuple(int(n) for n in link.rsplit('/', 1)[1].split(':'))


def dev_char_findings(nodes: t.Mapping[str, str], entries: t.Optional[t.Mapping[str, t.Optional[str]]],
                      engines: t.Sequence[str]) -> list[dict]:
    """nvidia.dev_char.missing: an engine uses the systemd cgroup driver, and NVIDIA device nodes lack their
    /dev/char/<major>:<minor> links (or those point elsewhere)."""
    if not engines or not nodes:
        return []
    # node_probe gives None for a directory it cannot list: /dev/char that does not exist has no links either.
    entries = entries or {}
    links = dict(('%s/%s' % (DEV_CHAR, number), node) for node, number in nodes.items())
    drift = _dev_char.link_drift(links, DEV_CHAR, dict(entries))
    if not drift['missing'] and not drift['wrong']:
        return []
    evidence = list(engines)
    evidence += ['%s (%s) has no link %s' % (links[p], p.rsplit('/', 1)[1], p)
                 for p in sorted(drift['missing'], key=_number)]
    evidence += ['%s points at %s, not %s' % (p, entries.get(p.rsplit('/', 1)[1]), links[p])
                 for p in sorted(drift['wrong'], key=_number)]
    return [finding(
        'nvidia.dev_char.missing', WILL_BREAK,
        'The NVIDIA device nodes lack their /dev/char links under the systemd cgroup driver: the next systemctl '
        'daemon-reload takes the GPUs from running containers ("Failed to initialize NVML: Unknown Error").',
        evidence[:12] + (['... and %d more' % (len(evidence) - 12)] if len(evidence) > 12 else []),
        'Run accel.nodes.nvidia_container_toolkit (nvidia_container_toolkit_dev_char_symlinks: auto or always), '
        'which creates the links and a udev rule that keeps them; or run nvidia-ctk system '
        'create-dev-char-symlinks --create-all.',
        SOURCES['dev_char'])]


def findings(probe: t.Mapping, options: t.Mapping) -> list[dict]:
    """The findings of this area in a node_probe result; options: the playbook's accel_nodes_diagnose_options
    (this area reads none)."""
    info = docker_info(_result(probe, 'runtime_docker_info'))
    dump = _result(probe, 'runtime_containerd_dump')
    node = node_lines(str(_result(probe, 'runtime_node').get('stdout') or ''))
    daemon_text = _text(probe, DAEMON_JSON)
    seen = (probe.get('paths') or {}).get(DAEMON_JSON) or {}
    # A daemon.json node_probe did not read (over 64 KiB, not UTF-8) is not taken for an empty one.
    found = [] if seen.get('exists') and daemon_text is None else docker_findings(daemon_text, info, node['dockerd'])
    found += binary_findings(daemon_text, info, dump, node['binaries'])
    found += containerd_findings(dump, dict((p, _text(probe, p)) for p in CONTAINERD_DROP_INS))
    found += dev_char_findings(nvidia_nodes(str(_result(probe, 'runtime_nvidia_nodes').get('stdout') or '')),
                               (probe.get('directories') or {}).get(DEV_CHAR), systemd_engines(info, dump))
    return found
