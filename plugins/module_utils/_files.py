# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""File helpers for modules that edit configuration files they do not own.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

A module computes the text a file should have; update_file() then writes it
only if it differs, atomically, after a backup, and never in check mode.
"""

from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ['read_text', 'make_parents', 'write_atomic', 'remove', 'file_diff', 'update_file', 'existing_paths',
           'remove_path', 'content_plan']

NEW_FILE_MODE = 0o644


def read_text(path):
    """The UTF-8 text of path, or None where it does not exist.

    Raises ValueError, with the path in its message, for a directory or a file
    that is not UTF-8.
    """
    if os.path.isdir(path):
        raise ValueError('%s is a directory, not a file' % path)
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise ValueError('%s is not UTF-8 text (byte %d): %s' % (path, exc.start, exc.reason))


def make_parents(path, mode=0o755):
    """Create the missing ancestor directories of path, each with mode. Returns those created."""
    missing = []
    parent = os.path.dirname(path)
    while parent and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(directory)
        os.chmod(directory, mode)
    return list(reversed(missing))


def write_atomic(module, path, content, mode=NEW_FILE_MODE):
    """Replace path with content (str is written as UTF-8) so that readers see the old or the new file, whole.

    The temporary file sits in the same directory, is flushed to disk, and is
    renamed over path by AnsibleModule.atomic_move, which gives it the owner,
    mode and SELinux context of the file it replaces. A new file gets mode
    (int, or a string as the file module takes it). A symlink is followed:
    the file it points to is replaced and the link stays.
    """
    path = os.path.realpath(path)
    existed = os.path.exists(path)
    make_parents(path)
    if isinstance(content, str):
        content = content.encode('utf-8')
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), suffix='.tmp', dir=os.path.dirname(path))
    module.add_cleanup_file(tmp)
    with os.fdopen(fd, 'wb') as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    module.atomic_move(tmp, path)
    if not existed and mode is not None:
        module.set_mode_if_different(path, mode, False)
    _fsync_directory(os.path.dirname(path))


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename has happened anyway
    finally:
        os.close(fd)


def remove(module, path):
    os.remove(path)
    _fsync_directory(os.path.dirname(os.path.realpath(path)))


def file_diff(path, before, after):
    """Ansible's diff for one text file; None stands for a file that does not exist."""
    return {
        'before': before or '',
        'after': after or '',
        'before_header': path if before is not None else '%s (absent)' % path,
        'after_header': path if after is not None else '%s (absent)' % path,
    }


def update_file(module, path, before, after, backup=False, mode=NEW_FILE_MODE):
    """Make path hold after (None: remove it), given that it holds before now.

    Writes nothing when before == after, and nothing in check mode. With
    backup, a file that is changed or removed is first copied next to itself
    by AnsibleModule.backup_local. Returns {'changed', 'diff', 'backup_file'},
    backup_file being None where no backup was made.
    """
    result = {'changed': before != after, 'diff': file_diff(path, before, after), 'backup_file': None}
    if not result['changed'] or module.check_mode:
        return result
    if backup and before is not None:
        result['backup_file'] = module.backup_local(path) or None
    if after is None:
        remove(module, path)
    else:
        write_atomic(module, path, after, mode)
    return result


def list_directory(path):
    """{entry name: link target, or None for an entry that is not a link}, or None where path cannot be listed."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return None
    entries = {}
    for name in names:
        try:
            entries[name] = os.readlink(os.path.join(path, name))
        except OSError:
            entries[name] = None
    return entries


def existing_paths(paths, lexists=os.path.lexists):
    """The paths that exist (a dangling link exists), once each, in the order given."""
    seen = []
    for path in paths:
        if path not in seen and lexists(path):
            seen.append(path)
    return seen


def remove_path(path):
    """Remove a file, a link (not its target) or a directory tree. A path that is gone by now is no error:
    with a merged /usr, /lib/x and /usr/lib/x are one file, and removing the one removes the other."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def content_plan(entry, before):
    """What accel.nodes.paths_content does with one of its files, given its text before (None: no file):
    {'foreign', 'after'}; after None removes it. A file without the entry's marker is foreign, and stays."""
    marker = entry.get('marker')
    foreign = bool(marker) and before is not None and marker not in before
    after = entry.get('content') if entry.get('state', 'present') == 'present' else None
    return {'foreign': foreign, 'after': before if foreign else after}
