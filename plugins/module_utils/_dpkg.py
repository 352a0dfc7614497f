# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""The packages of dpkg's status file, as dpkg itself records them.

/var/lib/dpkg/status holds one stanza per package, separated by blank lines;
each has "Package: <name>" and "Status: <want> <flag> <status>", where want is
the selection (install, hold, deinstall, purge) and status says how far the
package is installed (deb-control(5), dpkg(1) "Package states"). Reading the
file costs no dpkg run, and a file under a root reads an image being baked.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ['STATUS_FILE', 'parse_status', 'read_status', 'installed', 'matching', 'selection_plan']

STATUS_FILE = '/var/lib/dpkg/status'

# Package states in which no file of the package is on disk any more.
_GONE = ('not-installed', 'config-files')


def parse_status(text: Optional[str]) -> Dict[str, Dict[str, str]]:
    """{name: {'version': version, 'selection': want, 'status': status}} for each stanza
    of the status text. A Multi-Arch package listed once per architecture counts once;
    an installed architecture wins over one that is gone."""
    packages = {}  # type: Dict[str, Dict[str, str]]
    for stanza in re.split(r'\n\s*\n', text or ''):
        name = status = None
        version = ''
        for line in stanza.splitlines():
            if line.startswith('Package:'):
                name = line[8:].strip()
            elif line.startswith('Status:'):
                status = line[7:].split()
            elif line.startswith('Version:'):
                version = line[8:].strip()
        if not name or not status or len(status) != 3:
            continue
        entry = {'version': version, 'selection': status[0], 'status': status[2]}
        if name not in packages or packages[name]['status'] in _GONE:
            packages[name] = entry
    return packages


def read_status(path: str) -> Optional[str]:
    """The text of the status file at path, or None where there is none (not a Debian system)."""
    try:
        with open(path, 'r', encoding='utf-8', errors='replace') as f:
            return f.read()
    except OSError:
        return None


def installed(packages: Dict[str, Dict[str, str]]) -> List[str]:
    """The names of the packages with files on disk, sorted: installed, and those a
    failed or interrupted run left half-way (dpkg holds, upgrades and removes them too)."""
    return sorted(n for n, p in packages.items() if p['status'] not in _GONE)


def matching(names: Iterable[str], patterns: Iterable[str], exclude: Iterable[str] = ()) -> List[str]:
    """The names that one of the patterns matches and none of exclude does, sorted.
    Patterns are Python regular expressions matched at the start of the name, as
    Jinja's match test does."""
    wanted = [re.compile(p) for p in patterns]
    unwanted = [re.compile(p) for p in exclude]
    return sorted(n for n in names
                  if any(w.match(n) for w in wanted) and not any(u.match(n) for u in unwanted))


def selection_plan(names: List[str], selection: str, current: Dict[str, str]) -> Tuple[List[str], List[str]]:
    """(the names whose selection is to be set, the names dpkg does not know), in order, from
    {name: selection} as dpkg records it.

    Holding sets every known package that is not held; releasing sets only held ones, so that a
    package selected for removal is never turned into one to install.
    """
    if selection == 'hold':
        change = [n for n in names if n in current and current[n] != 'hold']
    else:
        change = [n for n in names if current.get(n) == 'hold']
    unknown = [n for n in names if n not in current]
    return list(dict.fromkeys(change)), list(dict.fromkeys(unknown))
