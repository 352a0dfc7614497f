# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Fixtures shared by the module tests."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import pytest


@pytest.fixture
def module_in_tmp(run_module, tmp_path):
    """module_in_tmp(main) -> run(**args) -> result, with the module's temporary files under tmp_path."""
    moduletmp = tmp_path / 'moduletmp'
    moduletmp.mkdir()

    def bind(main):
        def _run(**args):
            args.setdefault('_ansible_tmpdir', str(moduletmp))
            return run_module(main, args)
        return _run
    return bind


def _changed_lines(before, after):
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
    return [line for line in diff if line[:1] in '+-' and line[:3] not in ('+++', '---')]


@pytest.fixture
def changed_lines():
    """changed_lines(before, after) -> the '-old' and '+new' lines between two texts, in order."""
    return _changed_lines


@pytest.fixture
def node(tmp_path, monkeypatch, module_in_tmp):
    """A fake node with Docker and containerd for the engine_* module tests (fake_engines.engine_node).
    A test module's own `node` fixture takes its place."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from fake_engines import engine_node  # pylint: disable=import-outside-toplevel
    return engine_node(tmp_path, monkeypatch, module_in_tmp)
