# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What the diagnose tests share (test_diagnose*.py): the ids of findings, the shape every finding has, and the
accelerator facts of a fake root, gathered by the module's own code."""

from __future__ import annotations

from ansible_collections.accel.nodes.plugins.module_utils import _accelerators, _diagnose


def ids(findings):
    return [f['id'] for f in findings]


def check_shape(findings):
    for f in findings:
        assert set(f) == {'id', 'severity', 'summary', 'evidence', 'fix', 'source'}
        assert f['severity'] in _diagnose.SEVERITIES and f['evidence'] and f['fix'] and f['source']


class FakeModule:
    """What _accelerators.gather asks of a module under a fake root: its params (no tool runs there)."""

    def __init__(self, root):
        self.params = dict(root=str(root), gather=list(_diagnose.FACTS_GATHER), nvidia_smi_path=None,
                           neuron_ls_path=None, instance_type=None, image=False, nvswitch=None, imds_timeout=0)

    def run_command(self, *args, **kwargs):
        raise AssertionError('no tool runs under a fake root')


def gather(root):
    return _accelerators.gather(FakeModule(root), None)
