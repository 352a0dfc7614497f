# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA's /dev/char workaround, for accel.nodes.dev_char_symlinks and for the
filter that judges from node_probe's answers whether that module would change
anything: the udev rule's text, nvidia-ctk's dry run, and what it says.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

# NVIDIA's workaround, as its troubleshooting guide gives the rule (dev_char_symlinks' seealso).
_RULE = (
    '# Managed by accel.nodes.nvidia_container_toolkit (nvidia_container_toolkit_dev_char_symlinks).\n'
    "# Create /dev/char symlinks for the NVIDIA device nodes, so that systemd keeps them in containers' device cgroups.\n"
    'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="%s system create-dev-char-symlinks --create-all"\n')


def udev_rule(ctk_path: str) -> str:
    """The udev rule file's text."""
    return _RULE % ctk_path


# logrus text format, as nvidia-ctk 1.17.8 logs it to stderr:
#   time="..." level=info msg="Creating link /dev/char/195:0 => /dev/nvidia0"
_LINK = re.compile(r'Creating link (\S+) => (\S+?)"?$')


def dry_run_argv(ctk_path: str, dev_char_path: str = '/dev/char', create_all: bool = True) -> List[str]:
    """nvidia-ctk's dry run of create-dev-char-symlinks; without its last element, the real run."""
    argv = [ctk_path, 'system', 'create-dev-char-symlinks', '--dev-char-path=%s' % dev_char_path]
    if create_all:
        argv.append('--create-all')
    return argv + ['--dry-run']


def parse_links(output: str) -> Dict[str, str]:
    """{link path: target} from the tool's `Creating link` lines, in order; other lines are ignored."""
    links = {}  # type: Dict[str, str]
    for line in output.splitlines():
        m = _LINK.search(line.strip())
        if m:
            links[m.group(1)] = m.group(2)
    return links


def same_target(link: str, current: str, wanted: str) -> bool:
    """Whether a link at path link whose target is current points where wanted does. The tool names absolute
    targets (/dev/nvidia0); udev writes relative ones (../nvidia0), which point at the same node
    (tests/fixtures/dev_char/README.md, the real H100's)."""
    base = os.path.dirname(link)
    return os.path.normpath(os.path.join(base, current)) == os.path.normpath(os.path.join(base, wanted))


def link_drift(links: Dict[str, str], dev_char_path: str,
               entries: Optional[Dict[str, Optional[str]]]) -> Dict[str, List[str]]:
    """{'missing', 'wrong'}: the links of the dry run that dev_char_path's entries (_files.list_directory: name ->
    link target or None; None where it could not be listed) lack, and those that point elsewhere. The module
    judges its own listing with it, the filter node_probe's. The tool names links in dev_char_path only; one
    elsewhere counts as missing."""
    entries = entries or {}
    missing, wrong = [], []  # type: List[str], List[str]
    for path, target in links.items():
        parent, name = os.path.split(path)
        if os.path.normpath(parent) != os.path.normpath(dev_char_path) or name not in entries:
            missing.append(path)
        elif entries[name] is not None and not same_target(path, entries[name], target):
            wrong.append(path)
    return {'missing': missing, 'wrong': wrong}
