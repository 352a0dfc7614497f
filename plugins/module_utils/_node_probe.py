# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Readers behind accel.nodes.node_probe: the installed packages, a few paths and
the executable chosen among candidates, each read without running a package manager.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import stat
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg

DPKG_STATUS = _dpkg.STATUS_FILE
TEXT_LIMIT = 65536  # larger files are described, not read


def _facts_package_without_init() -> None:
    """Register the package ansible.module_utils.facts without running its __init__.

    That __init__ imports compat, which imports every fact collector ansible-core has
    (default_collectors: hardware, network, virtual, ...). A module runs from AnsiballZ's
    zip, where each import is compiled on every run: 63 modules that distribution_facts
    never calls, 0.09 s of each run here and 0.25 s on the real H100
    (tests/benchmarks/README.md). The collectors it calls import their own modules, by
    name, from the package. Where the package is already imported, or cannot be found
    without importing it, nothing changes."""
    name = 'ansible.module_utils.facts'
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.submodule_search_locations is not None:
        sys.modules[name] = importlib.util.module_from_spec(spec)


def distribution_facts(module: Any) -> Dict[str, Any]:
    """The distribution, platform and package manager facts, as ansible.builtin.setup with
    gather_subset=min names them, from ansible-core's own collectors."""
    _facts_package_without_init()
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    from ansible.module_utils.facts.system.pkg_mgr import PkgMgrFactCollector
    from ansible.module_utils.facts.system.platform import PlatformFactCollector
    facts = {}  # type: Dict[str, Any]
    facts.update(PlatformFactCollector().collect(module=module))
    facts.update(DistributionFactCollector().collect(module=module))
    # The package action reads pkg_mgr, and gathers it in a run of its own where it is missing.
    facts.update(PkgMgrFactCollector().collect(module=module, collected_facts=dict(
        ('ansible_' + k, v) for k, v in facts.items())))
    return facts


def parse_dpkg_status(text: str, patterns: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """{name: {version, selection, status}} of the packages dpkg knows whose name matches a pattern
    (searched), as accel.nodes' one reader of dpkg's status file parses them (_dpkg.parse_status: the
    selection is the "want" of "Status: <want> <flag> <status>"). Packages in status not-installed are
    left out."""
    regexes = [re.compile(p) for p in patterns]
    return dict((name, entry) for name, entry in _dpkg.parse_status(text).items()
                if entry['status'] != 'not-installed' and any(r.search(name) for r in regexes))


def parse_rpm_query(text: str, patterns: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """The same shape from `rpm -qa --qf '%{NAME}\\t%{VERSION}\\t%{RELEASE}\\n'`; rpm has no selections.

    version is VERSION-RELEASE, as the roles pin on dnf (nvidia-container-toolkit-1.17.8-1: NVIDIA's install
    guide) and as dpkg's version carries the Debian revision; release alone is kept too. The epoch is left out,
    as the pins leave it out."""
    regexes = [re.compile(p) for p in patterns]
    found = {}  # type: Dict[str, Dict[str, Any]]
    for line in text.splitlines():
        fields = line.split('\t')
        if len(fields) != 3 or not any(r.search(fields[0]) for r in regexes):
            continue
        found[fields[0]] = {'version': '%s-%s' % (fields[1], fields[2]), 'release': fields[2], 'selection': None,
                            'status': 'installed'}
    return found


def describe(path: str, read_text: bool = True) -> Dict[str, Any]:
    """What ansible.builtin.stat (follow=true) would say of path, in the fields the roles use,
    with the SHA-256 of a regular file and the text of a small UTF-8 one."""
    info = {'path': path, 'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None,
            'executable': False, 'sha256': None, 'text': None}  # type: Dict[str, Any]
    try:
        st = os.stat(path)
    except OSError:
        return info
    kind = ('file' if stat.S_ISREG(st.st_mode) else 'directory' if stat.S_ISDIR(st.st_mode)
            else 'other')
    info.update(exists=True, type=kind, mode='%04o' % stat.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid,
                executable=kind == 'file' and os.access(path, os.X_OK))
    if kind == 'file':
        digest = hashlib.sha256()
        head = b''
        try:
            with open(path, 'rb') as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b''):
                    digest.update(chunk)
                    if len(head) <= TEXT_LIMIT:
                        head += chunk[:TEXT_LIMIT + 1 - len(head)]
        except OSError:
            return info
        info['sha256'] = digest.hexdigest()
        if read_text and len(head) <= TEXT_LIMIT:
            try:
                info['text'] = head.decode('utf-8')
            except UnicodeDecodeError:
                info['text'] = None
    return info


def keyring(path: str) -> Optional[Dict[str, Any]]:
    """The primary key fingerprints of an OpenPGP key file, armored or binary, as accel.nodes.repo_key and
    package_repository read a key (_openpgp.read_keys); None where the file does not exist."""
    from ansible_collections.accel.nodes.plugins.module_utils import _openpgp
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {'fingerprints': [], 'armored': False, 'error': str(exc)}
    try:
        return {'fingerprints': _openpgp.read_keys(data)[1], 'armored': _openpgp.is_armored(data), 'error': None}
    except _openpgp.OpenPGPError as exc:
        return {'fingerprints': [], 'armored': False, 'error': str(exc)}


def first_executable(candidates: List[str],
                     describe_path: Callable[[str], Dict[str, Any]] = lambda p: describe(p, False)) -> str:
    """The first candidate that is an executable regular file (links followed), or ''.

    oci-add-hooks refuses a --runtime-path that is not one, and does no PATH lookup,
    so nothing else counts.
    """
    for path in candidates:
        info = describe_path(path)
        if info['type'] == 'file' and info['executable']:
            return path
    return ''


def find_program(name: str, search_path: str) -> str:
    """name itself where it holds a slash, else the first executable regular file of that name in the
    colon-separated search_path (execvp's rule), or '' when there is none."""
    if '/' in name:
        return first_executable([name])
    return first_executable([os.path.join(d or '.', name) for d in search_path.split(os.pathsep)])


def version_result(rc: int, out: Optional[str], err: Optional[str]) -> Dict[str, Any]:
    return {'rc': rc, 'stdout': (out or '').strip(), 'stderr': (err or '').strip()}
