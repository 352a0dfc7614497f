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

import os
import re
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ['STATUS_FILE', 'UPDATES_DIR', 'parse_status', 'read_status', 'installed', 'matching', 'selection_plan',
           'journal', 'unfinished', 'journal_pending']

STATUS_FILE = '/var/lib/dpkg/status'
# dpkg's journal: a run writes each status change here before it folds them into
# the status file, so a file left here is a run that did not end (dpkg(1), FILES).
UPDATES_DIR = '/var/lib/dpkg/updates'

# The states of a package that a dpkg run left half-way (dpkg(1) "Package states"):
# unpacking or removing (half-installed), unpacked but not configured, configuring
# (half-configured), and waiting for triggers. `dpkg --audit` lists these.
UNFINISHED = ('half-installed', 'unpacked', 'half-configured', 'triggers-awaited', 'triggers-pending')
# One scan of the whole file for any of them: the probes look on every run.
_UNFINISHED_LINE = re.compile(r'^Status: \S+ (?:reinstreq \S+|\S+ (?:%s))\s*$' % '|'.join(UNFINISHED), re.M)

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


def _stanzas(text: Optional[str]) -> Iterable[Dict[str, str]]:
    """The fields of each stanza of a status text, continuation lines joined."""
    for stanza in re.split(r'\n\s*\n', text or ''):
        fields: Dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line[:1] in (' ', '\t'):
                if key:
                    fields[key] += '\n' + line.strip()
                continue
            key, dummy, value = line.partition(':')
            fields[key] = value.strip()
        if fields.get('Package'):
            yield fields


def journal(updates_dir: Optional[str] = None) -> str:
    """The entries of dpkg's journal, in the order dpkg folds them into the status file (by number)."""
    updates_dir = updates_dir or UPDATES_DIR
    try:
        names = sorted((n for n in os.listdir(updates_dir) if n.isdigit()), key=int)
    except OSError:
        return ''
    texts = []
    for name in names:
        try:
            with open(os.path.join(updates_dir, name), 'r', encoding='utf-8', errors='replace') as handle:
                texts.append(handle.read())
        except OSError:
            continue
    return '\n\n'.join(texts)


def unfinished(text: Optional[str], journal_text: str = '') -> Dict[str, str]:
    """{name: state} of the packages a dpkg run left half-way, from the status text with the journal's
    entries over it (as dpkg reads them): in an UNFINISHED state, or flagged reinstreq ("a package marked
    reinst-required is broken and requires reinstallation", dpkg(1)), which reads "<state> (reinstreq)"."""
    found = {}
    for name, fields in unfinished_stanzas(text, journal_text).items():
        status = fields['Status'].split()
        found[name] = status[2] + (' (reinstreq)' if status[1] == 'reinstreq' else '')
    return found


def unfinished_stanzas(text: Optional[str], journal_text: str = '') -> Dict[str, Dict[str, str]]:
    """{name: the fields of its last stanza} of the packages unfinished() names, for what else their stanza
    says (the Version a run was installing)."""
    if not journal_text and not _UNFINISHED_LINE.search(text or ''):
        return {}
    records: Dict[Tuple[str, str], Dict[str, str]] = {}
    for fields in _stanzas((text or '') + '\n\n' + (journal_text or '')):
        records[(fields['Package'], fields.get('Architecture', ''))] = fields
    found = {}
    for (name, dummy), fields in sorted(records.items()):
        status = fields.get('Status', '').split()
        if len(status) == 3 and (status[2] in UNFINISHED or status[1] == 'reinstreq'):
            found[name] = fields
    return found


def journal_pending(updates_dir: Optional[str] = None) -> bool:
    """Whether dpkg's journal holds entries a run did not fold in: what makes apt refuse to run with
    "dpkg was interrupted, you must manually run 'dpkg --configure -a'" (apt's debSystem::CheckUpdates,
    apt-pkg/deb/debsystem.cc: a file in the updates directory whose name is all digits)."""
    try:
        return any(name.isdigit() for name in os.listdir(updates_dir or UPDATES_DIR))
    except OSError:
        return False
