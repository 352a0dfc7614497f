# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Findings of a broken accelerator node (issue 28): evidence read from the node, in; what is wrong, out.

Pure functions, fed by what the node gave (file texts, command output, package versions), so that the unit tests
run them on real captures. Each finding is a dict:

- id: stable, dotted (nvidia.driver.version_mismatch);
- severity: 'broken' (fails now) or 'will_break' (fails on a known trigger: a reset, a reboot, a daemon-reload);
- summary: one line;
- evidence: lines read from the node, each naming where it was read;
- fix: one or two sentences, naming the variable, role or command that applies it;
- source: where the diagnosis comes from (vendor docs or code; docs/plans/issue-28-sources.md has the quotes).

No vendor tool gives these verdicts: nvidia-smi and the toolkit report states, not causes. Parsing stays small and
reuses _nvidia's readers of the same outputs.
"""

from __future__ import annotations

import os
import re
import typing as t
from xml.etree import ElementTree

from ansible_collections.accel.nodes.plugins.module_utils import _kernels, _nvidia

BROKEN = 'broken'
WILL_BREAK = 'will_break'
SEVERITIES = (BROKEN, WILL_BREAK)

SOURCES = {
    'mismatch': ('NVIDIA open-gpu-kernel-modules: kernel-open/nvidia/nv.c MODULE_VERSION (the loaded module\'s '
                 'version in /sys/module/nvidia/version); nvidia-container-toolkit internal/lookup/root/root.go '
                 '(the user-space version is the suffix of libnvidia-ml.so.<version>); NVML error 18, '
                 'NVML_ERROR_LIB_RM_VERSION_MISMATCH (nvml.h)'),
    'xid': 'NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (docs.nvidia.com/deploy/xid-errors); '
           'log line format: open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c',
    'remap': 'NVIDIA, "GPU Memory Error Management": row remapping (a remap pending takes effect at the next GPU '
             'reset; a remapping failure) (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt)',
    'retire': 'NVIDIA, "Dynamic Page Retirement" (docs.nvidia.com/deploy/dynamic-page-retirement): pending pages '
              'are retired when the driver is reloaded',
    'mig': 'NVML nvmlDeviceGetMigMode: the pending MIG mode is the mode after the next activation trigger; '
           '"Changing MIG modes may require device unbind or reset"',
    'persistence': 'NVIDIA, "Driver Persistence" (docs.nvidia.com/deploy/driver-persistence): nvidia-persistenced '
                   'keeps the GPUs initialised',
    'toolkit': 'nvidia-container-toolkit 1.18+ packaging: packaging/debian/control Depends '
               'libnvidia-container-tools (= @VERSION@), nvidia-container-toolkit-base (= @VERSION@); '
               'CHANGELOG v1.18.0-rc.1 "Require matching version of libnvidia-container-tools" and '
               '"Require version match between libnvidia-container-tools and libnvidia-container1"',
    'cdi_conflict': 'CDI (tags.cncf.io/container-device-interface) pkg/cdi/cache.go: a device in a spec of a later '
                    'spec directory (/var/run/cdi) wins over /etc/cdi; two specs of one directory that define it '
                    'conflict and the device is dropped ("unresolvable CDI devices")',
    'libraries': ('nvidia-container-toolkit pkg/lookup/library.go NewLibraryLocator: the driver\'s libraries are '
                  'looked up by dlopen, then in fixed directories (/usr/lib64, /usr/lib/<triplet>, ...), then in the '
                  'loader\'s cache, /etc/ld.so.cache (internal/ldcache); ld.so(8): the loader searches that cache, '
                  'then the default directories; ldconfig(8) rebuilds the cache from /etc/ld.so.conf'),
    'cdi_stale': 'nvidia-container-toolkit cdi generate: the spec mounts the driver\'s libraries by versioned path '
                 '(libcuda.so.<version>) and passes --host-driver-version; docs "Support for Container Device '
                 'Interface": regenerate the spec after a driver change',
}

# Xid: (mnemonic, meaning, severity, what to do), Ampere and newer, from NVIDIA's Xid catalog ("Immediate Action").
# Application errors (13, 31, 43, 45: RESTART_APP or IGNORE) leave the GPU healthy, as the k8s-device-plugin's
# ignoredXids also says; they are reported as will_break only where they repeat, which this table does not judge.
XID_CATALOG = {
    13: ('ROBUST_CHANNEL_GR_EXCEPTION', 'graphics engine exception, an application fault', None,
         'Restart the application; the GPU stays healthy.'),
    31: ('ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT', 'GPU memory page fault, typically an application bug', None,
         'Restart the application; the GPU stays healthy.'),
    43: ('ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR', 'GPU stopped processing; the GPU remains healthy', None,
         'Nothing to do on the node.'),
    45: ('ROBUST_CHANNEL_PREEMPTIVE_REMOVAL', 'preemptive cleanup, due to previous errors', None,
         'Look at the Xids logged before it.'),
    48: ('ROBUST_CHANNEL_GPU_ECC_DBE', 'double bit ECC error', BROKEN,
         'Drain the node and reset the GPU (nvidia-smi -r) or reboot; a GPU reset or node reboot is needed to clear '
         'this error.'),
    62: ('PMU_HALT_ERROR', 'internal micro-controller halt', BROKEN,
         'Drain the node and reset the GPU (nvidia-smi -r) or reboot.'),
    63: ('INFOROM_DRAM_RETIREMENT_EVENT', 'GPU memory remapping event (row remapper activity)', None,
         'Nothing to do for the Xid itself (catalog: IGNORE); a remap that waits for a reset is gpu.row_remap.pending.'),
    64: ('INFOROM_DRAM_RETIREMENT_FAILURE', 'GPU memory remapping failure', BROKEN,
         'Drain the node and reset the GPU (nvidia-smi -r) or reboot; if it repeats, the GPU needs service.'),
    74: ('NVLINK_ERROR', 'NVLink error', BROKEN,
         'Drain the node and reset the GPU or reboot; a GPU reset or node reboot is needed to clear this error.'),
    79: ('ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS', 'the GPU has fallen off the bus', BROKEN,
         'Drain the node and reboot it (power cycle on bare metal); if it repeats, the GPU or its slot needs service.'),
    92: ('EXCESSIVE_SBE_INTERRUPTS', 'high single-bit ECC error rate', None, 'Nothing to do now; watch for Xid 48.'),
    94: ('ROBUST_CHANNEL_CONTAINED_ERROR', 'contained memory error', WILL_BREAK,
         'Restart the affected application, and reset the GPU when convenient.'),
    95: ('ROBUST_CHANNEL_UNCONTAINED_ERROR', 'uncontained memory error', BROKEN,
         'Drain the node and reset the GPU (nvidia-smi -r): the affected GPU must be reset.'),
    119: ('GSP_RPC_TIMEOUT', 'GSP RPC timeout', BROKEN, 'Drain the node and reset the GPU (nvidia-smi -r) or reboot.'),
    120: ('GSP_ERROR', 'GSP error', BROKEN, 'Drain the node and reset the GPU (nvidia-smi -r) or reboot.'),
}

# NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, ... (kernel_rc.c; older drivers print no pid= / name=).
_XID_RE = re.compile(r'NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (\d+),?(.*)$')
# libnvidia-ml.so.580.159.04, libcuda.so.580.159.04: the toolkit's inferVersion reads the same suffix.
_LIB_VERSION_RE = re.compile(r'lib(?:nvidia-ml|cuda)\.so\.(\d+\.\d+(?:\.\d+)?)$')
# What a diagnosis reads, in one accel.nodes.node_probe run (its options of the same names). The user-space
# library directories are the toolkit's search paths (pkg/lookup/library.go); the CDI directories are CDI's
# (pkg/cdi/spec-dirs.go), whose specs are read where they have the names nvidia-ctk gives them.
SYS_VERSION = '/sys/module/nvidia/version'
PROC_VERSION = '/proc/driver/nvidia/version'
CDI_DIRS = ('/etc/cdi', '/var/run/cdi')
LIBRARY_DIRS = ('/usr/lib64', '/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu',
                '/usr/lib/x86_64-linux-gnu/nvidia/current', '/usr/lib/aarch64-linux-gnu/nvidia/current', '/lib64')
SMI_TIMEOUT_S = 60
# The accelerator facts diagnose reads in the same run (accel.nodes.accelerator_facts' gather): all but nvidia-smi,
# which the probe runs itself with a bound, and IMDS beyond what DMI says.
FACTS_GATHER = ['pci', 'nvidia_procfs', 'neuron', 'kernel_modules', 'device_nodes', 'container_runtimes', 'ec2']
PROBE = {
    'accelerators': {'gather': FACTS_GATHER},
    'paths': [SYS_VERSION, PROC_VERSION] + ['%s/nvidia.%s' % (d, e) for d in CDI_DIRS for e in ('yaml', 'json')],
    'directories': list(LIBRARY_DIRS),
    'packages': ['^nvidia-container-toolkit', '^libnvidia-container'],
    # nvidia-smi can hang on a broken GPU: coreutils' timeout bounds it.
    'commands': {'nvidia_smi_xml': ['timeout', str(SMI_TIMEOUT_S), 'nvidia-smi', '-q', '-x'],
                 'ldcache': ['ldconfig', '-p'],
                 'kernel_log': ['journalctl', '--dmesg', '--boot', '--no-pager', '--output=short-iso',
                                '--grep=NVRM: Xid']},
}
TOOLKIT_PACKAGES = ('nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
                    'libnvidia-container1')


# Which validation layers (accel.nodes.accelerator_validation: host, runtime, container, cri) a broken finding
# explains a failure of, by the start of its id, the first match winning. A fault of the host breaks the host
# checks and every container on it; one of Docker's registration breaks Docker's runtime and container checks, one of
# containerd's the CRI pods; what the toolkit injects (its packages, CDI specs, /dev/char) breaks containers of both.
EXPLAINS = (
    ('runtime.docker.', ('runtime', 'container')),
    ('runtime.containerd.', ('cri',)),
    ('runtime.', ('runtime', 'container', 'cri')),
    ('neuron.oci_hook.', ('runtime', 'container')),
    ('toolkit.', ('container', 'cri')),
    ('cdi.', ('container', 'cri')),
    ('nvidia.dev_char.', ('container', 'cri')),
    ('', ('host', 'container', 'cri')),
)


def explained_layers(finding_id: str) -> tuple:
    """The validation layers whose failures a broken finding of this id explains (EXPLAINS)."""
    return next(layers for prefix, layers in EXPLAINS if finding_id.startswith(prefix))


def explain(checks: t.Sequence[t.Mapping], findings: t.Sequence[t.Mapping]) -> list[dict]:
    """The checks, each failed one with `findings`: the ids of the broken findings that explain it (EXPLAINS).
    A will_break finding explains nothing yet: it has not broken anything."""
    broken = [f for f in findings if f.get('severity') == BROKEN]
    linked = []
    for check in checks:
        check = dict(check)
        if check.get('status') == 'fail':
            check['findings'] = [f['id'] for f in broken if check.get('layer') in explained_layers(f['id'])]
        linked.append(check)
    return linked


def accelerators(probe: t.Mapping) -> dict:
    """The accelerator facts of a node_probe result (or those the caller gave, diagnose_findings' options.facts)."""
    return (probe.get('ansible_facts') or {}).get('accelerators') or {}


def finding(id_: str, severity: str, summary: str, evidence: t.Sequence[str], fix: str, source: str) -> dict:
    if severity not in SEVERITIES:
        raise ValueError('severity is one of %s, not %r' % (', '.join(SEVERITIES), severity))
    return {'id': id_, 'severity': severity, 'summary': summary, 'evidence': list(evidence), 'fix': fix,
            'source': source}


def _version_key(version: str) -> tuple:
    """_kernels.version_key of a package or driver version, without its epoch."""
    return _kernels.version_key(version.split(':')[-1])


def upstream_version(version: str) -> str:
    """The upstream part of a dpkg or rpm version: without its epoch, revision or ~ suffix (1:1.20.0-1 -> 1.20.0)."""
    return version.split(':')[-1].split('-')[0].split('~')[0]


def active_libraries(directories: t.Mapping[str, t.Optional[t.Mapping[str, t.Optional[str]]]]) -> dict[str, str]:
    """{path: version} of the driver libraries processes load: in each directory, the targets of the
    libnvidia-ml.so.1 and libcuda.so.1 links (what the loader opens), else every versioned file, so that a
    leftover library of an older driver beside the linked one is not taken for the one in use.
    directories: node_probe's directories, {dir: {entry: link target or None}}."""
    found = {}
    for directory, entries in sorted(directories.items()):
        entries = entries or {}
        linked = [entries[n] for n in ('libnvidia-ml.so.1', 'libcuda.so.1') if entries.get(n)]
        names = [os.path.basename(str(target)) for target in linked] or list(entries)
        found.update(library_versions('%s/%s' % (directory, name) for name in names))
    return found


def library_versions(paths: t.Iterable[str]) -> dict[str, str]:
    """{path: version} for the libnvidia-ml.so.<version> and libcuda.so.<version> among paths."""
    found = {}
    for path in paths:
        match = _LIB_VERSION_RE.search(path)
        if match:
            found[path] = match.group(1)
    return found


def loaded_version(sys_version: t.Optional[str], proc_version: t.Optional[str],
                   smi_xml: t.Optional[str] = None) -> t.Optional[str]:
    """The loaded NVIDIA module's version: /sys/module/nvidia/version, else /proc/driver/nvidia/version, else the
    driver version of `nvidia-smi -q -x`, which answers only where NVML and the loaded module agree."""
    return ((sys_version or '').strip() or _nvidia.parse_proc_version(proc_version)[0]
            or (_nvidia.parse_smi(0, smi_xml or '', '')['driver_version'] if smi_xml else None))


def driver_mismatch(sys_version: t.Optional[str], proc_version: t.Optional[str],
                    libraries: t.Mapping[str, str]) -> list[dict]:
    """nvidia.driver.version_mismatch: the loaded module is not the version of the user-space libraries.

    sys_version: /sys/module/nvidia/version; proc_version: the text of /proc/driver/nvidia/version (either may be
    None); libraries: library_versions() of the driver's libraries on the node."""
    loaded = loaded_version(sys_version, proc_version)
    if not loaded or not libraries:
        return []
    other = dict((p, v) for p, v in libraries.items() if v != loaded)
    if not other:
        return []
    newest = max(set(other.values()), key=_version_key)
    source = '/sys/module/nvidia/version' if (sys_version or '').strip() else '/proc/driver/nvidia/version'
    evidence = ['loaded kernel module: %s (%s)' % (loaded, source)]
    evidence += ['user-space library: %s' % p for p in sorted(other)]
    return [finding(
        'nvidia.driver.version_mismatch', BROKEN,
        'The loaded NVIDIA kernel module is %s, but the user-space libraries are %s: every GPU process fails with '
        '"Failed to initialize NVML: Driver/library version mismatch".' % (loaded, newest),
        evidence,
        'Reboot the node, or load the new module without one where nothing holds the GPUs: run accel.nodes.site '
        '(nvidia_driver_reload, with nvidia_driver_stop_gpu_work to stop GPU work first).',
        SOURCES['mismatch'])]


# ldconfig -p: "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
_LDCACHE_RE = re.compile(r'^\s*(\S+) \(([^)]*)\) => (\S+)$')
LOADER_NAMES = ('libcuda.so.1', 'libnvidia-ml.so.1')


def ldcache_entries(ldconfig_p: str) -> dict[str, list[str]]:
    """{soname: [paths]} of `ldconfig -p`."""
    found: dict[str, list[str]] = {}
    for line in (ldconfig_p or '').splitlines():
        match = _LDCACHE_RE.match(line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(3))
    return found


def libraries_not_found(sys_version: t.Optional[str], proc_version: t.Optional[str], ldcache: t.Mapping,
                        directories: t.Mapping[str, t.Optional[t.Mapping[str, t.Optional[str]]]]) -> list[dict]:
    """nvidia.libraries.not_found: the NVIDIA module is loaded, but libcuda.so.1 or libnvidia-ml.so.1 is neither in
    the toolkit's library directories nor in the loader's cache, so no process, and no container the toolkit
    sets up, finds it. ldcache: node_probe's answer to `ldconfig -p`; directories: node_probe's listing of
    LIBRARY_DIRS."""
    loaded = loaded_version(sys_version, proc_version)
    if not loaded or (ldcache or {}).get('rc') != 0:
        return []
    cached = ldcache_entries(ldcache.get('stdout') or '')
    missing = [name for name in LOADER_NAMES if name not in cached
               and not any(name in (entries or {}) for entries in directories.values())]
    if not missing:
        return []
    return [finding(
        'nvidia.libraries.not_found', BROKEN,
        'The NVIDIA driver %s is loaded, but %s cannot be found: CUDA programs and nvidia-smi fail, and the '
        'toolkit cannot give the libraries to containers.' % (loaded, ' and '.join(missing)),
        ['ldconfig -p: no %s' % name for name in missing]
        + ['not in %s' % ', '.join(sorted(d for d in directories))],
        'Install the driver\'s user-space libraries (accel.nodes.nvidia_driver), or, where the driver lives '
        'elsewhere, name its library directory in /etc/ld.so.conf.d and run ldconfig.', SOURCES['libraries'])]


def xid_events(kernel_log: str) -> list[dict]:
    """Each NVRM Xid line of a kernel log: {pci, xid, detail, line}."""
    events = []
    for line in (kernel_log or '').splitlines():
        match = _XID_RE.search(line)
        if match:
            events.append({'pci': match.group(1).lower(), 'xid': int(match.group(2)),
                           'detail': match.group(3).strip(), 'line': line.strip()})
    return events


def xid_findings(kernel_log: str) -> list[dict]:
    """gpu.xid.<n>, one per Xid and GPU, for the Xids the catalog says need action on the node."""
    grouped: dict[tuple, list] = {}
    for event in xid_events(kernel_log):
        grouped.setdefault((event['xid'], event['pci']), []).append(event)
    found = []
    for (xid, pci), events in sorted(grouped.items()):
        entry = XID_CATALOG.get(xid)
        if entry is None or entry[2] is None:
            continue
        mnemonic, meaning, severity, fix = entry
        found.append(finding(
            'gpu.xid.%d' % xid, severity,
            'GPU %s logged Xid %d (%s) since boot: %s, %d time(s).' % (pci, xid, mnemonic, meaning, len(events)),
            ['kernel log: %s' % e['line'] for e in events[-3:]],
            fix + ' The kernel log keeps the line until the next boot: after a GPU reset, judge by newer Xids.',
            SOURCES['xid']))
    return found


def _text(elem: ElementTree.Element, path: str) -> t.Optional[str]:
    return _nvidia._text(elem, path)  # pylint: disable=protected-access


def smi_health(xml_text: str, persistence_wanted: t.Optional[bool] = None) -> list[dict]:
    """From `nvidia-smi -q -x`: pending row remaps and remap failures, pages pending retirement, a MIG mode that
    waits for a reset, and persistence mode off where it was asked for."""
    xml = _nvidia._xml_part(xml_text or '')  # pylint: disable=protected-access
    if xml is None:
        return []
    found = []
    for gpu in ElementTree.fromstring(xml).findall('gpu'):
        bus = gpu.get('id') or '?'
        where = 'nvidia-smi -q -x, GPU %s' % bus
        if _text(gpu, 'remapped_rows/remapped_row_failure') == 'Yes':
            found.append(finding(
                'gpu.row_remap.failure', BROKEN, 'GPU %s failed to remap a row of its memory.' % bus,
                ['%s: remapped_rows/remapped_row_failure Yes' % where],
                'Drain the node and reset the GPU (nvidia-smi -r); if the failure stays, the GPU needs service.',
                SOURCES['remap']))
        elif _text(gpu, 'remapped_rows/remapped_row_pending') == 'Yes':
            found.append(finding(
                'gpu.row_remap.pending', WILL_BREAK,
                'GPU %s has a row remap pending, which takes effect only at the next GPU reset.' % bus,
                ['%s: remapped_rows/remapped_row_pending Yes' % where],
                'Drain the node and reset the GPU (nvidia-smi -r) or reboot when convenient.', SOURCES['remap']))
        pending = [p for p in ('retired_pages/pending_blacklist', 'retired_pages/pending_retirement')
                   if _text(gpu, p) == 'Yes']
        if pending:
            found.append(finding(
                'gpu.page_retirement.pending', WILL_BREAK,
                'GPU %s has memory pages waiting to be retired, which happens when the driver is reloaded.' % bus,
                ['%s: %s Yes' % (where, p) for p in pending],
                'Drain the node and reload the driver (reboot, or accel.nodes.site with nvidia_driver_reload).',
                SOURCES['retire']))
        current, pending_mig = _text(gpu, 'mig_mode/current_mig'), _text(gpu, 'mig_mode/pending_mig')
        if current and pending_mig and current != pending_mig:
            found.append(finding(
                'gpu.mig.pending', WILL_BREAK,
                'GPU %s runs with MIG %s, and MIG %s waits for a GPU reset.' % (bus, current, pending_mig),
                ['%s: mig_mode current_mig %s, pending_mig %s' % (where, current, pending_mig)],
                'Drain the node and reset the GPU (nvidia-smi -r -i <index>) or reboot, or set the MIG mode back '
                '(nvidia-smi -mig %d).' % (1 if current == 'Enabled' else 0), SOURCES['mig']))
        if persistence_wanted and _text(gpu, 'persistence_mode') == 'Disabled':
            found.append(finding(
                'gpu.persistence.off', WILL_BREAK,
                'GPU %s runs without persistence mode, which this node asks for.' % bus,
                ['%s: persistence_mode Disabled' % where],
                'Start nvidia-persistenced (accel.nodes.nvidia_driver with nvidia_driver_persistence_mode: true).',
                SOURCES['persistence']))
    return found


def smi_timeout(rc: t.Optional[int], seconds: int) -> list[dict]:
    """nvidia.smi.timeout: nvidia-smi did not answer within the probe's bound (coreutils timeout exits 124)."""
    if rc != 124:
        return []
    return [finding(
        'nvidia.smi.timeout', BROKEN,
        'nvidia-smi did not answer within %d s: NVML is stuck, and so is every tool and container that asks it.'
        % seconds,
        ['timeout %d nvidia-smi -q -x: exit status 124' % seconds],
        'Look for Xid 79, 119 or 120 in the kernel log (gpu.xid.*); drain the node and reset the GPU (nvidia-smi -r) '
        'or reboot it.',
        'coreutils timeout (exit status 124 when the command timed out); NVIDIA Xid catalog: 79 (fallen off the bus), '
        '119 and 120 (GSP timeout and error) need a GPU reset or a reboot')]


def toolkit_skew(packages: t.Mapping[str, t.Optional[str]]) -> list[dict]:
    """toolkit.packages.version_skew: from toolkit 1.18 its four packages must be at one version.

    packages: {name: installed version or None} (dpkg or rpm version, epoch and revision allowed)."""
    have = dict((n, v) for n, v in packages.items() if n in TOOLKIT_PACKAGES and v)
    toolkit = have.get('nvidia-container-toolkit') or have.get('nvidia-container-toolkit-base')
    if not toolkit or _version_key(toolkit) < _version_key('1.18'):
        return []
    upstream = dict((n, upstream_version(v)) for n, v in have.items())
    if len(set(upstream.values())) <= 1:
        return []
    return [finding(
        'toolkit.packages.version_skew', BROKEN,
        'The NVIDIA Container Toolkit packages are at different versions (%s); from 1.18 they must match.' %
        ', '.join(sorted(set(upstream.values()), key=_version_key)),
        ['package %s %s' % (n, have[n]) for n in TOOLKIT_PACKAGES if n in have],
        'Install all four at one version: run accel.nodes.nvidia_container_toolkit (nvidia_container_toolkit_version '
        'pins them together).', SOURCES['toolkit'])]


def cdi_spec(path: str, data: t.Any) -> dict:
    """What a CDI spec file says that matters here: {path, kind, devices, driver_versions}."""
    data = data if isinstance(data, dict) else {}
    edits = [data.get('containerEdits') or {}] + [d.get('containerEdits') or {} for d in data.get('devices') or []
                                                  if isinstance(d, dict)]
    versions = set()
    for edit in edits:
        for mount in edit.get('mounts') or []:
            match = _LIB_VERSION_RE.search(str((mount or {}).get('hostPath', '')))
            if match:
                versions.add(match.group(1))
        for hook in edit.get('hooks') or []:
            for arg in (hook or {}).get('args') or []:
                if str(arg).startswith('--host-driver-version='):
                    versions.add(str(arg).split('=', 1)[1])
    return {'path': path, 'kind': data.get('kind'),
            'devices': sorted(str(d.get('name')) for d in data.get('devices') or [] if isinstance(d, dict)),
            'driver_versions': sorted(versions, key=_version_key)}


def cdi_findings(specs: t.Sequence[t.Mapping], loaded_version: t.Optional[str],
                 kind: str = 'nvidia.com/gpu') -> list[dict]:
    """cdi.spec.conflict, cdi.spec.shadowed and cdi.spec.stale for the specs (cdi_spec()) of one kind.

    The CDI spec directories, in priority order: /etc/cdi, then /var/run/cdi (the later wins)."""
    mine = [s for s in specs if s.get('kind') == kind]
    found = []
    by_dir: dict[str, list] = {}
    for spec in mine:
        by_dir.setdefault(spec['path'].rsplit('/', 1)[0], []).append(spec)
    for directory, group in sorted(by_dir.items()):
        seen: dict[str, str] = {}
        clashes = set()
        for spec in group:
            for device in spec['devices']:
                if device in seen and seen[device] != spec['path']:
                    clashes.add((device, seen[device], spec['path']))
                seen.setdefault(device, spec['path'])
        if clashes:
            found.append(finding(
                'cdi.spec.conflict', BROKEN,
                'Two CDI specs in %s define the same %s devices: CDI drops them, and containers that ask for them '
                'fail with "unresolvable CDI devices".' % (directory, kind),
                ['%s=%s in %s and %s' % (kind, d, a, b) for d, a, b in sorted(clashes)],
                'Remove all but one of them. accel.nodes.nvidia_container_toolkit with nvidia_container_toolkit_cdi '
                'keeps one spec (nvidia_container_toolkit_cdi_refresh says whose).', SOURCES['cdi_conflict']))
    static = [s for s in mine if s['path'].startswith('/etc/cdi/')]
    dynamic = [s for s in mine if s['path'].startswith(('/var/run/cdi/', '/run/cdi/'))]
    shared = sorted(set(d for s in static for d in s['devices']) & set(d for s in dynamic for d in s['devices']))
    if shared:
        found.append(finding(
            'cdi.spec.shadowed', WILL_BREAK,
            'Both /etc/cdi and /var/run/cdi define %s devices: the /var/run/cdi spec wins, and the /etc/cdi one is '
            'ignored until /var/run/cdi is cleared at boot.' % kind,
            ['%s defines %s' % (s['path'], ', '.join(s['devices'])) for s in static + dynamic],
            'Keep one: toolkit 1.18+ has nvidia-cdi-refresh write /var/run/cdi/nvidia.yaml, so remove the /etc/cdi '
            'copy, or run accel.nodes.nvidia_container_toolkit with nvidia_container_toolkit_cdi, which keeps one.',
            SOURCES['cdi_conflict']))
    provided = set(d for s in dynamic for d in s['devices'])
    if loaded_version:
        for spec in mine:
            stale = [v for v in spec['driver_versions'] if v != loaded_version]
            if not stale:
                continue
            # A static spec whose every device a /var/run/cdi spec defines is not used now: it breaks the
            # containers only once /var/run/cdi is cleared, at boot, and nothing writes it again.
            hidden = spec in static and bool(spec['devices']) and set(spec['devices']) <= provided
            found.append(finding(
                'cdi.spec.stale', WILL_BREAK if hidden else BROKEN,
                '%s was generated for driver %s, but driver %s is loaded: %s.' % (
                    spec['path'], ', '.join(stale), loaded_version,
                    'it is shadowed by /var/run/cdi now, and gives containers the wrong or missing libraries '
                    'once that is cleared' if hidden else 'containers get the wrong or missing libraries'),
                ['%s names driver %s' % (spec['path'], ', '.join(spec['driver_versions'])),
                 'loaded kernel module: %s' % loaded_version],
                'Generate it again: nvidia-ctk cdi generate --output=%s (accel.nodes.nvidia_container_toolkit '
                'does it when the driver changes).' % spec['path'], SOURCES['cdi_stale']))
    return found


def summary(findings: t.Sequence[t.Mapping]) -> list[str]:
    """One screen: a line per finding, then its evidence, fix and source, indented."""
    if not findings:
        return ['No findings: none of the faults accel.nodes.diagnose knows shows in what it could read on this node.']
    lines = []
    for f in findings:
        lines.append('[%s] %s: %s' % (f['severity'], f['id'], f['summary']))
        lines += ['    evidence: %s' % e for e in f['evidence']]
        lines += ['    fix: %s' % f['fix'], '    source: %s' % f['source']]
    return lines
