# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Which files of an accel.nodes.paths_content task would change, from what accel.nodes.node_probe read.
Documented in paths_to_write.yml next to this file."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.module_utils import _files

# The names whose ids are known without asking the node.
_ROOT = ('root', '0')


def _mode(value: t.Any) -> t.Optional[str]:
    """4 octal digits, as node_probe reports a mode, or None for a symbolic mode only the module can apply."""
    if isinstance(value, int) and not isinstance(value, bool):
        return '%04o' % value
    text = str(value)
    if text and all(c in '01234567' for c in text) and len(text) <= 4:
        return '%04o' % int(text, 8)
    return None


def _kept(entry: dict[str, t.Any], info: dict[str, t.Any], text: str) -> bool:
    """Whether the file as probed is the entry's file: its text, mode, owner and group."""
    if info.get('type') != 'file' or info.get('text') != text:
        return False
    if _mode(entry.get('mode', '0644')) != info.get('mode'):
        return False
    for name, key in (('owner', 'uid'), ('group', 'gid')):
        wanted = entry.get(name)
        if wanted is not None and (str(wanted) not in _ROOT or info.get(key) != 0):
            return False
    return True


def paths_to_write(files: t.Any, seen: t.Any) -> list[dict[str, t.Any]]:
    """The entries of files (accel.nodes.paths_content's option) that the module would change or refuse,
    judged from node_probe's paths, which must have been read since anything last wrote them. A file the
    probe did not read, could not read as text, or owned by a user other than root is left to the module."""
    if not isinstance(files, list) or not isinstance(seen, dict):
        raise AnsibleFilterError('paths_to_write: needs paths_content\'s files (a list) and node_probe\'s paths '
                                 '(a dict)')
    out = []
    for entry in files:
        if not isinstance(entry, dict) or 'path' not in entry:
            raise AnsibleFilterError('paths_to_write: every file needs a path: %r' % (entry,))
        info = seen.get(entry['path'])
        present = entry.get('state', 'present') == 'present'
        if not isinstance(info, dict):
            out.append(entry)
        elif not info.get('exists'):
            if present:
                out.append(entry)
        elif info.get('text') is None:
            out.append(entry)
        else:
            decided = _files.content_plan(entry, info['text'])
            if decided['foreign']:
                if present:
                    out.append(entry)  # refused by the module, with its message
            elif decided['after'] is None or not _kept(entry, info, decided['after']):
                out.append(entry)
    return out


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'paths_to_write': paths_to_write}
