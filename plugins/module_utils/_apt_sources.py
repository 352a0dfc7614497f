# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""The deb822 .sources file that accel.nodes.package_repository writes, and where.

The module writes it; the roles' plans (plugins/filter/toolkit_plan.py) compare it with what
accel.nodes.node_probe read, so that a converged node's re-run skips the module run (and its key download).
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

__all__ = ['SOURCES_DIR', 'slug', 'sources_path', 'sources_text']

SOURCES_DIR = '/etc/apt/sources.list.d'


def slug(name: str) -> str:
    """The file name ansible.builtin.deb822_repository gives a repository (its main(), ansible-core 2.19)."""
    return re.sub(r'[^a-z0-9-]+', '', re.sub(r'[_\s]+', '-', name.lower()))


def sources_path(name: str, directory: str = SOURCES_DIR) -> str:
    return os.path.join(directory, '%s.sources' % slug(name))


def sources_text(name: str, keyring: str, types: List[str], uris: List[str], suites: List[str],
                 components: Optional[List[str]] = None, architectures: Optional[List[str]] = None) -> str:
    """The deb822 stanza, with deb822_repository's field names and order (its options, sorted by name)."""
    fields = [
        ('Architectures', architectures),
        ('Components', components),
        ('X-Repolib-Name', [name]),
        ('Signed-By', [keyring]),
        ('Suites', suites),
        ('Types', types),
        ('URIs', uris),
    ]
    return ''.join('%s: %s\n' % (field, ' '.join(value)) for field, value in fields if value)
