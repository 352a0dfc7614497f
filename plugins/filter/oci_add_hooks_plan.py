# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What accel.nodes.oci_add_hooks decides before it reads the node, as one plan (issue 29).
Documented in oci_add_hooks_plan.yml next to this file.

tasks/main.yml sets oci_add_hooks_plan from this filter and prints it; the probe reads the binary the plan
names, and accel.nodes.oci_add_hooks_check (plugins/filter/neuron.py) judges what it found against the plan's
`check` settings, right after each probe.
"""
from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

# Go's name for each CPU architecture Ansible reports (the GOARCH values of go.dev/dl's tarballs).
GOARCH = {'x86_64': 'amd64', 'aarch64': 'arm64'}
# Distributions whose repositories ship an oci-add-hooks package: no vendor repository ships it outside
# Amazon Linux (roles/oci_add_hooks/README.md).
PACKAGE_DISTRIBUTIONS = ['Amazon']


def oci_add_hooks_plan(settings: t.Any, facts: t.Any) -> dict[str, t.Any]:
    """The oci_add_hooks role's plan from its settings (its variables without their prefix) and the host's facts
    (distribution, architecture)."""
    if not isinstance(settings, dict) or not isinstance(facts, dict):
        raise AnsibleFilterError('oci_add_hooks_plan: settings and facts must be dicts')
    s = dict(settings)
    method = s.get('method') or 'auto'
    if method == 'auto':
        method = 'package' if facts.get('distribution') in PACKAGE_DISTRIBUTIONS else 'source'
    installed_path = s.get('package_binary_path') if method == 'package' else s.get('install_path')
    check = {'method': method, 'installed_path': installed_path, 'install_path': s.get('install_path'),
             'version': s.get('version'), 'sha256': s.get('binary_sha256'), 'package_name': s.get('package_name'),
             'package_version': s.get('package_version')}
    goarch = GOARCH.get(str(facts.get('architecture') or ''), '')
    return {
        'method': method,
        'installed_path': installed_path,
        'goarch': goarch,
        'check': check,
        'summary': 'oci-add-hooks: %s, %s at %s' % (
            s.get('state') or 'present', 'from the package %s' % s.get('package_name') if method == 'package'
            else 'built from source' if method == 'source' else 'downloaded', installed_path),
    }


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'oci_add_hooks_plan': oci_add_hooks_plan}
