# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What accel.nodes.accelerator_validation runs on a node, as one plan (issue 29).
Documented in accelerator_validation_plan.yml next to this file.

tasks/main.yml sets accelerator_validation_plan from this filter right after its node_probe run, prints its
summary, and the container tasks read it; the checks are judged once, after the containers ran
(validation_checks). The parts are the filters that already decided them: the engine as Docker answered
(validation_engine), the CRI (validation_cri_engine), and the cases of each container layer
(validation_container_plan, validation_cri_plan).
"""
from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.filter.validation_checks import validation_engine
from ansible_collections.accel.nodes.plugins.filter.validation_containers import validation_container_plan
from ansible_collections.accel.nodes.plugins.filter.validation_cri import validation_cri_engine, validation_cri_plan


def accelerator_validation_plan(facts: t.Any, probe: t.Any, settings: t.Any, check_mode: t.Any = False) -> dict[str, t.Any]:
    """facts: the accelerator facts (as the probe refreshed them); probe: the role's node_probe result (skipped:
    no answers); settings: the role's variables without their accelerator_validation_ prefix - layers, skip,
    image, nvidia_config_path, nvidia_runtime, nvidia_command, neuron_runtime, neuron_command, neuron_mode,
    cri_endpoint."""
    if not isinstance(facts, dict) or not isinstance(settings, dict):
        raise AnsibleFilterError('accelerator_validation_plan: needs the accelerator facts and the settings as dicts')
    probe = probe if isinstance(probe, dict) else {}
    check_mode = boolean(check_mode, strict=False)
    answers = probe.get('commands') or {}
    run_layers = [layer for layer in settings.get('layers') or [] if layer not in (settings.get('skip') or {})]
    engine = validation_engine(answers.get('docker_info'), settings.get('neuron_mode') or 'auto',
                               settings.get('neuron_runtime') or 'oci-neuron')
    cri = validation_cri_engine(answers.get('cri_version'), answers.get('cri_info'), settings.get('cri_endpoint') or '')
    # What the probe read of the NVIDIA Container Toolkit, for both container layers: its config.toml,
    # `nvidia-ctk --version`, and the CDI devices `nvidia-ctk cdi list` names ('' where it could not list them).
    toolkit = {
        'toolkit_config': ((probe.get('paths') or {}).get(settings.get('nvidia_config_path')) or {}).get('text'),
        'toolkit_version': (answers.get('toolkit_version') or {}).get('stdout'),
        'cdi_devices': (answers.get('cdi_devices') or {}).get('stdout') or ''
        if (answers.get('cdi_devices') or {}).get('rc', 1) == 0 else '',
        'nvidia_runtime': settings.get('nvidia_runtime') or 'nvidia', 'nvidia_command': settings.get('nvidia_command'),
        'neuron_runtime': settings.get('neuron_runtime') or 'oci-neuron', 'neuron_command': settings.get('neuron_command'),
    }
    image = str(settings.get('image') or '')
    containers = validation_container_plan(facts, engine, image, check_mode=check_mode,
                                           image_present=(answers.get('image') or {}).get('rc', 1) == 0, **toolkit)
    cri_containers = validation_cri_plan(facts, cri, image, check_mode=check_mode,
                                         image_present=(answers.get('cri_image') or {}).get('rc', 1) == 0, **toolkit)
    run = {
        'container': 'container' in run_layers and bool(containers['cases']),
        'cri': 'cri' in run_layers and bool(cri_containers['cases']),
    }
    summary = '; '.join([
        'layers %s' % (', '.join(run_layers) or 'none'),
        'containers: %s' % ('%d case(s)' % len(containers['cases']) if run['container']
                            else containers['skip'] or 'layer skipped'),
        'CRI pods: %s' % ('%d case(s)' % len(cri_containers['cases']) if run['cri']
                          else cri_containers.get('skip') or 'layer skipped'),
    ])
    return {'run_layers': run_layers, 'engine': engine, 'cri': cri, 'containers': containers,
            'cri_containers': cri_containers, 'run': run, 'summary': summary,
            'cuda': probe.get('cuda'), 'dkms': answers.get('dkms'), 'docker_info': answers.get('docker_info')}


class FilterModule(object):
    """accel.nodes filters: the validation role's plan."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'accelerator_validation_plan': accelerator_validation_plan}
