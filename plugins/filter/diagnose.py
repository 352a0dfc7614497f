# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The findings of a broken accelerator node, from one accel.nodes.node_probe run (issue 28).
Documented in diagnose_findings.yml next to this file; the findings themselves are in module_utils/_diagnose.py."""

from __future__ import annotations

import json
import typing as t

import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _diagnose_host, _diagnose_neuron
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose_runtime, _diagnose_toolkit

# The areas beyond the NVIDIA driver, GPU health, CDI and toolkit findings of _diagnose: each has its PROBE and its
# findings(probe, options).
AREAS = (_diagnose_runtime, _diagnose_toolkit, _diagnose_neuron, _diagnose_host)
_ORDER = {_diagnose.BROKEN: 0, _diagnose.WILL_BREAK: 1}


def _spec_data(path: str, text: str) -> t.Any:
    """A CDI spec's content: JSON or YAML, as CDI reads them (pkg/cdi/spec.go). The node needs no YAML library:
    the text travels to the controller, which has PyYAML (ansible-core requires it)."""
    try:
        return json.loads(text) if path.endswith('.json') else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None


def diagnose_probe(options: t.Any = None) -> dict:
    """The inputs of the diagnose's one accel.nodes.node_probe run: _diagnose.PROBE and every area's, merged."""
    if options is not None and not isinstance(options, dict):
        raise AnsibleFilterError('diagnose_probe: the input is the dict accel_nodes_diagnose_options, not %s'
                                 % type(options).__name__)
    merged = dict(_diagnose.PROBE, commands=dict(_diagnose.PROBE['commands']))
    if (options or {}).get('facts') is not None:
        # The caller has the accelerator facts (the validation role; a test's simulated node): none gathered again.
        merged['accelerators'] = None
    for key in ('paths', 'directories', 'packages'):
        merged[key] = list(_diagnose.PROBE[key])
    for area in AREAS:
        for key in ('paths', 'directories', 'packages'):
            merged[key] += [v for v in area.PROBE.get(key, []) if v not in merged[key]]
        for name, argv in area.PROBE.get('commands', {}).items():
            if name in merged['commands'] and merged['commands'][name] != argv:
                raise AnsibleFilterError('diagnose_probe: two areas run different commands as %s' % name)
            merged['commands'][name] = argv
    return merged


def diagnose_findings(probe: t.Any, persistence_wanted: t.Any = False, cdi_kind: str = 'nvidia.com/gpu',
                      options: t.Any = None) -> list:
    if not isinstance(probe, dict):
        raise AnsibleFilterError('diagnose_findings: the input is the result of accel.nodes.node_probe, not %s'
                                 % type(probe).__name__)
    if options is not None and not isinstance(options, dict):
        raise AnsibleFilterError('diagnose_findings: options is the dict accel_nodes_diagnose_options, not %s'
                                 % type(options).__name__)
    paths = probe.get('paths') or {}
    directories = probe.get('directories') or {}
    commands = probe.get('commands') or {}
    packages = probe.get('packages') or {}

    def text(path: str) -> t.Optional[str]:
        return (paths.get(path) or {}).get('text')

    sys_version = text(_diagnose.SYS_VERSION)
    proc_version = text(_diagnose.PROC_VERSION)
    library_dirs = dict((d, directories.get(d)) for d in _diagnose.LIBRARY_DIRS)
    found = _diagnose.driver_mismatch(sys_version, proc_version, _diagnose.active_libraries(library_dirs))
    found += _diagnose.libraries_not_found(sys_version, proc_version, commands.get('ldcache') or {}, library_dirs)
    found += _diagnose.xid_findings((commands.get('kernel_log') or {}).get('stdout') or '')
    smi = commands.get('nvidia_smi_xml') or {}
    found += _diagnose.smi_timeout(smi.get('rc'), _diagnose.SMI_TIMEOUT_S)
    found += _diagnose.smi_health(smi.get('stdout') or '', boolean(persistence_wanted or False, strict=False))
    found += _diagnose.toolkit_skew(dict((n, (v or {}).get('version')) for n, v in packages.items()
                                         if (v or {}).get('status', 'installed') == 'installed'))
    specs = [_diagnose.cdi_spec(p, _spec_data(p, text(p) or '')) for p in sorted(paths)
             if p.startswith(tuple(d + '/' for d in _diagnose.CDI_DIRS)) and text(p)]
    found += _diagnose.cdi_findings(specs, _diagnose.loaded_version(sys_version, proc_version, smi.get('stdout')),
                                    kind=cdi_kind)
    options = options or {}
    if options.get('facts') is not None:
        probe = dict(probe, ansible_facts=dict(probe.get('ansible_facts') or {}, accelerators=options['facts']))
    for area in AREAS:
        found += area.findings(probe, options)
    return sorted(found, key=lambda f: (_ORDER[f['severity']], f['id']))


def diagnose_summary(findings: t.Any) -> list:
    if not isinstance(findings, list):
        raise AnsibleFilterError('diagnose_summary: the input is the list diagnose_findings returns, not %s'
                                 % type(findings).__name__)
    return _diagnose.summary(findings)


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'diagnose_findings': diagnose_findings, 'diagnose_probe': diagnose_probe,
                'diagnose_summary': diagnose_summary}
