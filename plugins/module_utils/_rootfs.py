# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Read files of a host tree that may be mounted somewhere other than /.

Every reader takes the root first and an absolute path second, so that the
same code inspects the running host (root '/'), a fake tree in the tests or a
mounted image. A missing or unreadable file is None, never an exception.
"""

from __future__ import annotations

import os


def join(root, path):
    """The path under root; path is absolute, as it is on the host."""
    if not root or root == '/':
        return path
    return root.rstrip('/') + path


def read_text(root, path):
    """Whole file as text, or None when it cannot be read."""
    try:
        with open(join(root, path), 'rb') as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    return data.decode('utf-8', errors='replace')


def read_value(root, path):
    """A one-value file (sysfs style) stripped of white space, or None."""
    text = read_text(root, path)
    if text is None:
        return None
    return text.strip()


def list_dir(root, path):
    """Names in a directory, sorted; None when it is missing or unreadable."""
    try:
        return sorted(os.listdir(join(root, path)))
    except OSError:
        return None


def link_name(root, path):
    """Last component of a symbolic link's target (a sysfs 'driver' link), or None."""
    try:
        target = os.readlink(join(root, path))
    except OSError:
        return None
    return os.path.basename(target.rstrip('/')) or None


def exists(root, path):
    return os.path.lexists(join(root, path))
