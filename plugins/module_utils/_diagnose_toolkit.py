# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Findings of issue 28 about the NVIDIA Container Toolkit's own configuration: a config.toml the runtime cannot
load, a runtime mode it cannot serve on this node, and CDI mode without a CDI spec of the GPUs.

An area of accel.nodes.diagnose, as module_utils/_diagnose_runtime.py is: PROBE is what it reads in the diagnose's
one accel.nodes.node_probe run (merged with the other areas' by the filter accel.nodes.diagnose_probe), findings()
turns that run's result into findings (_diagnose.finding).

Every finding here needs the toolkit installed (its nvidia-container-toolkit-base or nvidia-container-toolkit
package) and NVIDIA GPUs (nvidia_gpus()): the runtime reads config.toml each time it starts a container, and a node
without either runs none of it.

This file is private to the accel.nodes collection: its interface may change without notice, and code outside the
collection must not import it."""

from __future__ import annotations

import re
import typing as t

from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _diagnose_runtime, _toml
from ansible_collections.accel.nodes.plugins.module_utils._diagnose import BROKEN, finding

# The file the runtime and its hook read (nct-1.20.0 api/config/v1/config.go: /etc + RelativeFilePath
# "nvidia-container-runtime/config.toml"; also 1.17.8's).
CONFIG = '/etc/nvidia-container-runtime/config.toml'
# Where csv mode reads its CSV files unless config.toml says otherwise (config.go GetDefault,
# nvidia-container-runtime.modes.csv.mount-spec-path).
CSV_DIR = '/etc/nvidia-container-runtime/host-files-for-container.d'
CDI_KIND = 'nvidia.com/gpu'
# The modes the runtime accepts: 1.17.8 internal/runtime/runtime_factory.go newModeModifier ("legacy", "csv",
# "cdi", else "invalid runtime mode"); 1.20.0 internal/modifier/factory.go validate adds "jit-cdi"
# (internal/info/auto.go: JitCDIRuntimeMode, the default "auto" resolves to from 1.18). "auto" is resolved first
# (auto.go ResolveRuntimeMode).
MODES = ('auto', 'legacy', 'csv', 'cdi')
JIT_CDI_FROM = (1, 18)
# The binary that runs the runtime in cdi mode whatever config.toml says (1.20.0 cmd/nvidia-container-runtime.cdi:
# runtime.WithModeOverride("cdi")), which the GPU Operator's installer registers as the runtime "nvidia-cdi"
# (cmd/nvidia-ctk-installer/container/operator/operator.go modeRuntime) and the RPM installs in /usr/bin.
CDI_BINARY = 'nvidia-container-runtime.cdi'

PROBE: dict = {
    'paths': [CONFIG],
    'directories': [CSV_DIR],
    'packages': [],
    'commands': {
        # The vendor's own view of the CDI devices on the node, from every spec in /etc/cdi and /var/run/cdi
        # whatever its file name (nct cmd/nvidia-ctk/cdi/list): the same devices the runtime resolves in cdi mode.
        'toolkit_cdi_devices': ['nvidia-ctk', 'cdi', 'list'],
    },
}

SOURCES = {
    'config': ('NVIDIA/nvidia-container-toolkit api/config/v1/toml.go loadConfigToml: a config.toml that exists but '
               'cannot be opened or parsed fails with "failed to load specified config file" (a missing one gives '
               'the defaults); internal/runtime/runtime.go Run: "error loading config", so no container of the '
               'nvidia runtime starts'),
    'mode': ('NVIDIA/nvidia-container-toolkit internal/modifier/factory.go validate (1.20.0: legacy, csv, jit-cdi, '
             'cdi; else "invalid mode"); internal/runtime/runtime_factory.go newModeModifier (1.17.8: legacy, csv, '
             'cdi; else "invalid runtime mode")'),
    'csv': ('NVIDIA/nvidia-container-toolkit internal/info/auto.go: csv is the mode of Tegra-based systems ("auto" '
            'picks it only on PlatformTegra); internal/platform-support/tegra/csv/csv.go GetFileList: the mode '
            'injects what the CSV files of nvidia-container-runtime.modes.csv.mount-spec-path list, none where the '
            'directory is missing'),
    'cdi_missing': ('NVIDIA/nvidia-container-toolkit internal/modifier/cdi.go: in cdi mode the runtime resolves the '
                    'requested nvidia.com/gpu devices from the CDI specs in /etc/cdi and /var/run/cdi, failing with '
                    '"unresolvable CDI devices"; cmd/nvidia-container-runtime.cdi forces cdi mode; NVIDIA\'s CDI '
                    'support page: generate the spec with nvidia-ctk cdi generate, again when the driver changes'),
}


def nvidia_gpus(facts: t.Mapping) -> bool:
    """Whether the node has NVIDIA GPUs: on the PCI bus (accel.nodes.accelerator_facts' nvidia.gpus), or as device
    nodes /dev/nvidia<N>, which the driver makes per GPU: a node in a container may see a PCI bus without them."""
    if (facts.get('nvidia') or {}).get('gpus'):
        return True
    nodes = (facts.get('observed') or {}).get('device_nodes') or []
    return any(re.match(r'^/dev/nvidia[0-9]+$', str(n)) for n in nodes)


def toolkit_release(packages: t.Mapping) -> t.Optional[tuple]:
    """(major, minor) of the installed toolkit, from nvidia-container-toolkit-base or nvidia-container-toolkit
    (node_probe's packages: {name: {version, status}}); None where neither is installed."""
    for name in ('nvidia-container-toolkit-base', 'nvidia-container-toolkit'):
        info = packages.get(name) or {}
        if info.get('version') and info.get('status', 'installed') == 'installed':
            try:
                return tuple(int(p) for p in _diagnose.upstream_version(str(info['version'])).split('.')[:2])
            except ValueError:
                return None
    return None


def config_findings(seen: t.Mapping) -> tuple[list[dict], t.Optional[dict]]:
    """toolkit.config.unreadable for config.toml as node_probe described it; with it, the parsed file (None where
    it is missing, as the runtime then runs on its defaults, or unreadable)."""
    if not seen.get('exists'):
        return [], None
    problem = None
    if seen.get('type') != 'file':
        problem = '%s is a %s, not a file' % (CONFIG, seen.get('type') or 'special file')
    elif seen.get('sha256') is None:
        problem = '%s exists but could not be read (mode %s, owner uid %s)' % (CONFIG, seen.get('mode'), seen.get('uid'))
    elif seen.get('text') is not None:
        try:
            return [], _toml.loads(seen['text'])
        except _toml.TomlError as exc:
            problem = '%s is not valid TOML: %s' % (CONFIG, exc)
    if problem is None:
        # Larger than node_probe reads, or not UTF-8: not judged here.
        return [], None
    return [finding(
        'toolkit.config.unreadable', BROKEN,
        'The NVIDIA Container Toolkit cannot load its config.toml: every container of the nvidia runtime fails to '
        'start (Docker: "nvidia-container-runtime did not terminate successfully"; the runtime\'s log: "error '
        'loading config").', [problem],
        'Write the toolkit\'s defaults with nvidia-ctk config default --output=%s (copy the old file first to keep '
        'your settings), then run accel.nodes.nvidia_container_toolkit, which sets the keys it manages again.' % CONFIG,
        SOURCES['config'])], None


def _table(data: t.Optional[t.Mapping], key: str) -> t.Mapping:
    """The TOML table data[key]; empty where it is missing or not a table."""
    value = (data or {}).get(key)
    return value if isinstance(value, dict) else {}


def runtime_mode(config: t.Optional[t.Mapping]) -> t.Any:
    """[nvidia-container-runtime] mode of a parsed config.toml; "auto", the default, where it is not set."""
    return _table(config, 'nvidia-container-runtime').get('mode', 'auto')


def mode_findings(config: t.Mapping, release: tuple, csv_files: t.Optional[t.Mapping]) -> list[dict]:
    """toolkit.config.mode_invalid and toolkit.config.mode_unsupported for a parsed config.toml."""
    mode = runtime_mode(config)
    valid = MODES + (('jit-cdi',) if release >= JIT_CDI_FROM else ())
    fix = ('Run accel.nodes.nvidia_container_toolkit, which sets nvidia-container-runtime.mode to '
           'nvidia_container_toolkit_mode (auto by default, or legacy or cdi).')
    evidence = '%s: [nvidia-container-runtime] mode = %r' % (CONFIG, mode)
    if mode not in valid:
        return [finding(
            'toolkit.config.mode_invalid', BROKEN,
            'config.toml sets a runtime mode the installed toolkit %s does not know: every container of the nvidia '
            'runtime fails to start ("invalid mode").' % '.'.join(str(p) for p in release),
            [evidence, 'modes toolkit %s accepts: %s' % ('.'.join(str(p) for p in release), ', '.join(valid))],
            fix, SOURCES['mode'])]
    if mode == 'csv':
        modes = _table(_table(config, 'nvidia-container-runtime'), 'modes')
        csv_dir = _table(modes, 'csv').get('mount-spec-path', CSV_DIR)
        # Only the default directory is listed by the probe: another one is not judged.
        if csv_dir == CSV_DIR and not [n for n in (csv_files or {}) if n.lower().endswith('.csv')]:
            return [finding(
                'toolkit.config.mode_unsupported', BROKEN,
                'config.toml sets csv mode, the mode of Tegra-based systems, on a node with discrete NVIDIA GPUs: '
                'the runtime injects only what its CSV files list, and there are none.',
                [evidence, '%s: %s' % (CSV_DIR, 'no CSV files' if csv_files is not None else 'missing')],
                fix, SOURCES['csv'])]
    return []


def cdi_missing(mode: t.Optional[str], cdi_binaries: t.Sequence[str], devices: t.Optional[t.Mapping]) -> list[dict]:
    """cdi.spec.missing: the runtime runs in cdi mode (config.toml, or a registered nvidia-container-runtime.cdi)
    and `nvidia-ctk cdi list` names no nvidia.com/gpu device. devices: that command's result (None: not run)."""
    if mode != 'cdi' and not cdi_binaries:
        return []
    if not devices or devices.get('rc') != 0:
        return []  # nvidia-ctk missing or failing: not judged here
    names = [line.strip() for line in str(devices.get('stdout') or '').splitlines()]
    if any(n.startswith(CDI_KIND + '=') for n in names):
        return []
    needs = (['%s: [nvidia-container-runtime] mode = "cdi"' % CONFIG] if mode == 'cdi' else [])
    needs += ['registered runtime binary %s (always cdi mode)' % b for b in cdi_binaries]
    return [finding(
        'cdi.spec.missing', BROKEN,
        'The nvidia runtime runs in cdi mode, but no CDI spec on the node defines %s devices: containers that ask '
        'for GPUs fail with "unresolvable CDI devices".' % CDI_KIND,
        needs + ['nvidia-ctk cdi list: no %s device' % CDI_KIND],
        'Generate the spec: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml (toolkit 1.18+: systemctl '
        'start nvidia-cdi-refresh.service), or run accel.nodes.nvidia_container_toolkit with '
        'nvidia_container_toolkit_cdi: true, which keeps one. Where CDI mode is not wanted, the same role with '
        'nvidia_container_toolkit_mode: auto leaves it.', SOURCES['cdi_missing'])]


def findings(probe: t.Mapping, options: t.Mapping) -> list[dict]:
    """The findings of this area in a node_probe result; options: accel_nodes_diagnose_options (none read)."""
    release = toolkit_release(probe.get('packages') or {})
    if release is None or not nvidia_gpus(_diagnose.accelerators(probe)):
        return []
    seen = (probe.get('paths') or {}).get(CONFIG) or {}
    found, config = config_findings(seen)
    if found:
        return found
    csv_files = (probe.get('directories') or {}).get(CSV_DIR)
    if config is not None:
        found = mode_findings(config, release, csv_files)
        if found:
            return found
    binaries = _diagnose_runtime.node_lines(str(((probe.get('commands') or {}).get('runtime_node') or {})
                                                .get('stdout') or ''))['binaries']
    cdi_binaries = sorted(b for b in binaries if b.rsplit('/', 1)[-1] == CDI_BINARY)
    return cdi_missing(runtime_mode(config), cdi_binaries, (probe.get('commands') or {}).get('toolkit_cdi_devices'))
