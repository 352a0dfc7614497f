# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Which packages a package manager run would change, from what accel.nodes.node_probe read.
Documented in packages_to_change.yml next to this file."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

# dpkg's states of a package whose files are gone but whose configuration is
# kept (dpkg-query(1), "Package states"): apt's state=absent has nothing to do.
_GONE = ('config-files', 'not-installed')


def packages_to_change(seen: t.Any, names: t.Any, want: str = 'installed', version: t.Any = None,
                       selection: t.Any = None) -> list[str]:
    """The names of `names` that a package manager run would change.

    want=installed: those not installed, or (with version) not at that version,
    or (with selection, 'hold' or 'install') whose dpkg selection differs.
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
                     or (version is not None and str(package.get('version')) != str(version))
                     or (selection is not None and package.get('selection') != selection))
        if wrong:
            change.append(name)
    return change


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'packages_to_change': packages_to_change}
