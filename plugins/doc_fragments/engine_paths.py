# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations


class ModuleDocFragment(object):

    # The paths accel.nodes.engine_state and accel.nodes.engine_restart share
    # (module_utils/_engine.py, PATH_OPTIONS).
    DOCUMENTATION = r"""
options:
  config_path:
    description:
      - The C(daemon.json) that dockerd reads.
    type: path
    default: /etc/docker/daemon.json
  containerd_dir:
    description:
      - containerd's configuration tree, C(config.toml) and its drop-ins.
    type: path
    default: /etc/containerd
  state_dir:
    description:
      - Where the last known good configurations are kept, and the rejected ones a failed restart moves
        aside, mode C(0700).
    type: path
    default: /var/lib/accel-nodes/docker
"""
