# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from ansible_collections.accel.nodes.plugins.module_utils import _drivers_probe


def test_loaded_modules_of_the_real_h200_host(fact_roots):
    assert _drivers_probe.loaded_modules(str(fact_roots / 'h200')) == ['nvidia', 'nvidia_uvm']


def test_loaded_modules_keeps_only_accelerator_modules(fact_roots):
    assert _drivers_probe.loaded_modules(str(fact_roots / 'g4dn.xlarge-nouveau')) == ['nouveau']
    assert _drivers_probe.loaded_modules(str(fact_roots / 'p3.16xlarge')) == [
        'nvidia', 'nvidia_drm', 'nvidia_modeset', 'nvidia_uvm']


def test_loaded_modules_without_proc_is_none(tmp_path):
    assert _drivers_probe.loaded_modules(str(tmp_path)) is None


def test_device_nodes_lists_nvidia_and_neuron_only(fact_roots):
    assert _drivers_probe.device_nodes(str(fact_roots / 'h200')) == [
        '/dev/nvidia-caps', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidia0', '/dev/nvidiactl']
    assert _drivers_probe.device_nodes(str(fact_roots / 'inf1.6xlarge')) == [
        '/dev/neuron0', '/dev/neuron1', '/dev/neuron2', '/dev/neuron3']
    assert _drivers_probe.device_nodes(str(fact_roots / 'g4dn.xlarge-nouveau')) == []


def test_device_nodes_without_dev_is_none(tmp_path):
    assert _drivers_probe.device_nodes(str(tmp_path)) is None
