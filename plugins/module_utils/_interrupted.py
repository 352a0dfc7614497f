# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What an interrupted run leaves on a node, found without running dpkg or apt.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

accel.nodes.node_probe and accel.nodes.engine_state call detect() on every run,
at the cost of reading dpkg's status file (which they read anyway) and listing
a few directories; accel.nodes.interrupted_run, which the roles run only where
detect() found something, finishes it.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg

# The package families the roles of this collection install on the Debian
# family, as regular expressions matched from the start of a name. Each role's
# names are checked against this list in tests/unit/roles/test_role_os_vars.py,
# so a package a role adds cannot be left out.
MANAGED = (
    # accel.nodes.docker (vars/Debian.yml, defaults/main.yml)
    r'docker\.io$', r'docker-cli$', r'docker-ce(-cli|-rootless-extras)?$', r'containerd(\.io)?$', r'runc$',
    r'python3-requests$',
    # accel.nodes.nvidia_driver (vars/Debian*.yml, __nvidia_driver_owned_packages) and the toolkit
    r'cuda-drivers', r'nvidia-', r'libnvidia-', r'libcuda1', r'libnvcuvid', r'libnvoptix', r'libxnvctrl',
    r'xserver-xorg-video-nvidia', r'firmware-nvidia-', r'nvlsm$', r'libibumad3$', r'infiniband-diags$',
    # accel.nodes.neuron_driver, neuron_container_runtime and oci_add_hooks
    r'aws-neuron', r'oci-add-hooks$', r'git$',
    # what the DKMS drivers are built with, for each kernel (accel.nodes.dkms_kernels)
    r'dkms$', r'linux-(image|headers|modules|modules-extra|kbuild)-',
)

# dpkg as the apt module runs it: configuration files with local changes are
# kept, the package's default taken where there are none, and no prompt.
ENV = {'LANG': 'C', 'LC_ALL': 'C', 'DEBIAN_FRONTEND': 'noninteractive'}
_DPKG_OPTIONS = ['--force-confdef', '--force-confold']
CONFIGURE = ['dpkg', '--configure', '-a'] + _DPKG_OPTIONS
# The roles pin and hold versions below the newest, so a reinstall asks for the version dpkg was installing
# (reinstall_argv) and may change a held package to it, or go down to it.
REINSTALL = ['apt-get', 'install', '--reinstall', '--no-install-recommends', '--allow-change-held-packages', '--allow-downgrades',
             '-y', '-q'] + ['-o=Dpkg::Options::=%s' % o for o in _DPKG_OPTIONS]

# The temporary file of _files.write_atomic (".<name>.<random>.tmp"), and what
# dpkg leaves beside a configuration file (dpkg(1), --force-confold and the
# conffile handling: .dpkg-new while unpacking, .dpkg-dist for a new default
# not taken, .dpkg-old for an old file replaced, .dpkg-tmp while writing).
_DPKG_SUFFIXES = ('.dpkg-new', '.dpkg-old', '.dpkg-dist', '.dpkg-tmp')


# The lock every dpkg frontend (apt, apt-get, dpkg itself) takes before it
# touches the database (dpkg(1) FILES, /var/lib/dpkg/lock-frontend; apt's
# debSystem::Lock). A package manager that holds it is running, not
# interrupted: a run killed on the controller leaves apt running on the node.
FRONTEND_LOCK = '/var/lib/dpkg/lock-frontend'


def frontend_busy(path: Optional[str] = None) -> bool:
    """Whether a dpkg frontend holds the lock now (fcntl, as apt and dpkg take it)."""
    import fcntl  # pylint: disable=import-outside-toplevel
    try:
        fd = os.open(path or FRONTEND_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o640)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing the file releases a lock it took
    return False


def needs_reinstall(state: str) -> bool:
    """Whether configuring cannot finish a package in this state (its files were being unpacked or removed)."""
    return state.startswith('half-installed') or state.endswith('(reinstreq)')


def versions(text: Optional[str], journal_text: str = '') -> Dict[str, str]:
    """{name: version} of the packages a dpkg run left half-way (_dpkg.unfinished_stanzas), from the Version
    field dpkg keeps for a half-installed package (for one a run was installing, that version). A package
    without one is left out."""
    return dict((name, fields['Version']) for name, fields in _dpkg.unfinished_stanzas(text, journal_text).items()
                if fields.get('Version'))


def reinstall_argv(names: Iterable[str], known: Dict[str, str]) -> List[str]:
    """The apt-get command that reinstalls names, each at its version in known (name=version, the version dpkg
    was installing, not apt's candidate), or by its bare name where no version is known."""
    return REINSTALL + ['%s=%s' % (name, known[name]) if known.get(name) else name for name in names]


def describe(packages: Dict[str, str]) -> str:
    return ', '.join('%s (%s)' % (name, state) for name, state in sorted(packages.items())) or 'dpkg\'s journal'


def package_name(item: str) -> str:
    """The package name in a name as apt takes it: name, name=version, name:arch or name/release."""
    return re.split(r'[=:/]', item.strip(), maxsplit=1)[0]


def ours(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether name is one of the collection's packages: one of the families of MANAGED (regular expressions)
    matches it, or it is one of extra (names a role installs from its user's input, such as
    docker_extra_packages), compared exactly: g++ is g++ and nothing else, and the dot of libfoo.bar is a dot."""
    return name in {package_name(e) for e in extra} or any(re.match(p, name) for p in MANAGED)


HISTORY = '/var/log/apt/history.log'
# apt's history: one entry per transaction, written as it starts and closed with
# End-Date when it ends; Install/Upgrade/... list "name:arch (version[, automatic])",
# automatic marking what apt pulled in for the packages asked for.
_HISTORY_ACTIONS = ('Install', 'Reinstall', 'Upgrade', 'Downgrade', 'Remove', 'Purge')
_HISTORY_ENTRY = re.compile(r'([^\s,:()]+)(?::[^\s,()]+)? \(([^)]*)\)')


def unfinished_transaction(history_text: Optional[str]) -> Optional[Dict[str, List[str]]]:
    """{'asked': names, 'pulled': names} of apt's last transaction where it has no End-Date (it did not end),
    else None."""
    entries = [e for e in re.split(r'\n\s*\n', (history_text or '').strip()) if e.strip()]
    if not entries or re.search(r'^End-Date:', entries[-1], re.M):
        return None
    found: Dict[str, List[str]] = {'asked': [], 'pulled': []}
    for line in entries[-1].splitlines():
        key, dummy, value = line.partition(': ')
        if key not in _HISTORY_ACTIONS:
            continue
        for name, detail in _HISTORY_ENTRY.findall(value):
            found['pulled' if 'automatic' in detail else 'asked'].append(name)
    return found


def foreign(interrupted: Dict[str, str], history_text: Optional[str], extra: Iterable[str] = ()) -> List[str]:
    """The interrupted packages that this collection cannot vouch for: not one of its own (MANAGED, extra),
    not waiting only for triggers (which finishing runs), and not part of an apt transaction that did not end
    and in which every package asked for is the collection's (what apt pulled in for them is theirs too)."""
    extra = list(extra)
    transaction = unfinished_transaction(history_text)
    ours_too: List[str] = []
    if transaction and transaction['asked'] and all(ours(n, extra) for n in transaction['asked']):
        ours_too = transaction['asked'] + transaction['pulled']
    return sorted(name for name, state in interrupted.items()
                  if not ours(name, extra) and not state.startswith('triggers-') and name not in ours_too)


def foreign_message(interrupted: Dict[str, str], others: List[str]) -> str:
    return ('dpkg was interrupted in a run that involves packages this collection does not install: %s. It does '
            'not finish another tool\'s transaction. Look at `dpkg --audit`, finish it with `dpkg --configure -a` '
            '(and `apt-get install -f` for half-installed packages), then run again. Packages left half-way: %s.'
            % (', '.join(others), describe(interrupted)))


def leftovers(paths: Iterable[str]) -> Dict[str, List[str]]:
    """{'ours': the temporary files of interrupted atomic writes beside paths, 'dpkg': dpkg's files beside
    them}, each sorted. One listing per directory."""
    found: Dict[str, List[str]] = {'ours': [], 'dpkg': []}
    listings: Dict[str, Optional[List[str]]] = {}
    for path in paths:
        directory, base = os.path.split(path)
        if directory not in listings:
            try:
                listings[directory] = os.listdir(directory)
            except OSError:
                listings[directory] = None
        for name in listings[directory] or []:
            full = os.path.join(directory, name)
            if name.startswith('.%s.' % base) and name.endswith('.tmp') and full not in found['ours']:
                found['ours'].append(full)
            elif name in [base + s for s in _DPKG_SUFFIXES] and full not in found['dpkg']:
                found['dpkg'].append(full)
    return {key: sorted(value) for key, value in found.items()}


def dpkg_leftovers_message(files: List[str]) -> str:
    return ('dpkg left %s beside the configuration this collection manages: a package\'s new default for a file '
            'with local changes (.dpkg-dist, .dpkg-new) or the file it replaced (.dpkg-old). Compare each with '
            'its file (`diff -u FILE FILE.dpkg-dist`), keep what you need, and remove it.' % ', '.join(files))


def detect(paths: Iterable[str] = (), status_text: Optional[str] = None) -> List[str]:
    """What an interrupted run left, one line each, empty when nothing: the packages dpkg left half-way (from
    status_text, dpkg's status file, with its journal), a journal not folded in, and the leftovers beside
    paths. Costs no dpkg run."""
    found = []
    journal = _dpkg.journal()
    if status_text is not None:
        found += ['%s: %s' % (name, state) for name, state in sorted(_dpkg.unfinished(status_text, journal).items())]
    if journal:
        found.append('dpkg journal: %s' % _dpkg.UPDATES_DIR)
    files = leftovers(paths)
    return found + files['ours'] + files['dpkg']
