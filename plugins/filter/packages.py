# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Which packages a package manager run would change, from what accel.nodes.node_probe read.
Documented in packages_to_change.yml and dpkg_selection_plan.yml next to this file."""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg

# dpkg's states of a package whose files are gone but whose configuration is
# kept (dpkg-query(1), "Package states"): apt's state=absent has nothing to do.
_GONE = ('config-files', 'not-installed')


def _at_version(have: t.Any, version: t.Any, upstream: bool) -> bool:
    have, version = str(have), str(version)
    return have == version or (upstream and have.startswith(version + '-'))


def packages_to_change(seen: t.Any, names: t.Any, want: str = 'installed', version: t.Any = None,
                       selection: t.Any = None, upstream: bool = False) -> list[str]:
    """The names of `names` that a package manager run would change.

    want=installed: those not installed, or (with version) not at that version,
    or (with selection, 'hold' or 'install') whose dpkg selection differs.
    upstream: version is the upstream part only, so <version>-<any revision> is at it
    (apt's name=<version>-*, as Fabric Manager is asked for at the driver's version).
    want=absent: those installed (dpkg keeps nothing else apt would remove).
    """
    if not isinstance(seen, dict) or not isinstance(names, (list, tuple)):
        raise AnsibleFilterError('packages_to_change: needs node_probe\'s packages (a dict) and a list of names')
    if want not in ('installed', 'absent'):
        raise AnsibleFilterError('packages_to_change: want is installed or absent, not %r' % (want,))
    change = []
    for name in names:
        package = seen.get(name) or {}
        present = bool(package) and package.get('status') not in _GONE
        if want == 'absent':
            wrong = present
        else:
            wrong = (not present or package.get('status') != 'installed'
                     or (version is not None and not _at_version(package.get('version'), version, upstream))
                     or (selection is not None and package.get('selection') != selection))
        if wrong:
            change.append(name)
    return change


def dpkg_selection_plan(seen: t.Any, patterns: t.Any = (), exclude: t.Any = (), names: t.Any = (),
                        selection: str = 'hold') -> dict[str, list[str]]:
    """What accel.nodes.dpkg_holds would do with these options, from the packages node_probe read
    (which must cover every name the patterns can match): the installed packages the patterns
    match and exclude does not, after names (names); those whose selection it would set (change);
    those dpkg does not know (unknown), which only the module can judge."""
    if not isinstance(seen, dict):
        raise AnsibleFilterError('dpkg_selection_plan: needs node_probe\'s packages (a dict)')
    if selection not in ('hold', 'install'):
        raise AnsibleFilterError('dpkg_selection_plan: selection is hold or install, not %r' % (selection,))
    packages = dict((n, p) for n, p in seen.items() if isinstance(p, dict) and p.get('status'))
    wanted = list(names or [])
    try:
        wanted += [n for n in _dpkg.matching(_dpkg.installed(packages), patterns or [], exclude or [])
                   if n not in wanted]
    except re.error as e:
        raise AnsibleFilterError('dpkg_selection_plan: patterns and exclude must be regular expressions: %s' % e)
    current = dict((n, p.get('selection')) for n, p in packages.items())
    change, unknown = _dpkg.selection_plan(wanted, selection, current)
    return {'names': wanted, 'change': change, 'unknown': unknown}


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'packages_to_change': packages_to_change, 'dpkg_selection_plan': dpkg_selection_plan}
