# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Run a module's main() in-process and hand its result back to the test."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from ansible.plugins.loader import init_plugin_loader

# Ansible's own collection loader, on the tree tests/rig/units.sh builds (the
# PYTHONPATH it sets), before any test imports the collection: the role tests
# template the roles' expressions, which call the collection's filters
# (accel.nodes.chroot_connection).
init_plugin_loader([p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p.endswith('collections')])

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18
    import contextlib

    @contextlib.contextmanager
    def patch_module_args(args=None):
        payload = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args or {}}))
        with mock.patch.object(basic, '_ANSIBLE_ARGS', payload):
            yield


class _ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise _ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs['failed'] = True
    kwargs['msg'] = msg
    raise _ModuleExit(kwargs)


@pytest.fixture
def run_module():
    """run_module(main, args) -> the dict the module exited (or failed) with."""
    def _run(main, args):
        with patch_module_args(args), \
                mock.patch.object(basic.AnsibleModule, 'exit_json', _exit_json), \
                mock.patch.object(basic.AnsibleModule, 'fail_json', _fail_json):
            with pytest.raises(_ModuleExit) as caught:
                main()
        return caught.value.result
    return _run
