# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Which accelerator kernel modules are loaded and which device nodes exist."""

from __future__ import annotations

from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

PROC_MODULES = '/proc/modules'

ACCELERATOR_MODULES = frozenset([
    'nvidia', 'nvidia_uvm', 'nvidia_drm', 'nvidia_modeset', 'nvidia_peermem',
    'nouveau', 'neuron',
])
_NODE_PREFIXES = ('nvidia', 'neuron')


def loaded_modules(root):
    """Sorted names of the accelerator modules in /proc/modules, or None when
    it cannot be read."""
    text = _rootfs.read_text(root, PROC_MODULES)
    if text is None:
        return None
    names = set(line.split(' ', 1)[0] for line in text.splitlines())
    return sorted(names & ACCELERATOR_MODULES)


def device_nodes(root):
    """Paths of /dev/nvidia* and /dev/neuron*, or None when /dev is unreadable."""
    names = _rootfs.list_dir(root, '/dev')
    if names is None:
        return None
    return ['/dev/' + n for n in names if n.startswith(_NODE_PREFIXES)]
