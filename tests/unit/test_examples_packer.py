# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

"""The Packer templates in examples/ run the bake playbook the way their builder needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((TOP / 'examples').glob('packer-*.pkr.hcl'))


def _setting(text: str, name: str) -> str:
    match = re.search(r'^\s*%s\s*=\s*"([^"]*)"' % re.escape(name), text, re.MULTILINE)
    assert match, name
    return match.group(1)


@pytest.mark.parametrize('template', TEMPLATES, ids=lambda p: p.name)
def test_the_playbook_exists_and_gets_the_instance_type(template: Path) -> None:
    text = template.read_text()
    assert (TOP / _setting(text, 'playbook_file')).is_file()
    assert '"accel_nodes_bake_instance_type=${var.target_instance_type}"' in text


def test_the_chroot_template_provisions_the_mounted_volume() -> None:
    text = (TOP / 'examples' / 'packer-gpu-ami-chroot.pkr.hcl').read_text()
    assert re.search(r'^source "amazon-chroot"', text, re.MULTILINE)
    assert '"--connection=chroot"' in text
    # The only inventory host is the volume the builder mounts.
    assert re.search(r'^\s*mount_path\s*=\s*var\.mount_path$', text, re.MULTILINE)
    assert _setting(text, 'inventory_file_template') == r'default ansible_host=${var.mount_path}\n'
    code = [line for line in text.splitlines() if not line.lstrip().startswith('#')]
    assert not [line for line in code if '--inventory-file' in line or '"-i"' in line]
