# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.validation_checks import (
    FilterModule, validation_checks, validation_engine, validation_failure, validation_probe, validation_report,
    validation_summary)
from ansible_collections.accel.nodes.plugins.filter.validation_containers import validation_container_plan

FIXTURES = Path(__file__).parents[3] / 'fixtures'
# Real captures from the same H200 host: its accelerator facts, and the report validate.yml wrote there (no Docker).
H200 = json.loads((FIXTURES / 'facts' / 'h200-real-run.json').read_text())['ansible_facts']['accelerators']
H200_REPORT = json.loads((FIXTURES / 'validation' / 'h200-validate.json').read_text())
# The report of validate.yml on a real H100 with Docker 20.10.24 and the toolkit (every layer passes).
H100_REPORT = json.loads((FIXTURES / 'hardware' / 'h100-2026-11-24' / 'validation.json').read_text())
# `dkms status` of Debian 12's DKMS 3.0.10 (tests/fixtures/dkms/README.md): DKMS's deprecation warning about the
# module's dkms.conf, then the modules.
DKMS_STATUS = (FIXTURES / 'dkms' / 'status-dkms3-two-modules.txt').read_text()
DKMS_DEPRECATED = DKMS_STATUS.splitlines()[0]
DKMS_NEURON_INSTALLED = DKMS_STATUS.splitlines()[1] + '\n'

# What accel.nodes.node_probe answers (commands) when there is no docker binary, and when the daemon is down.
NO_DOCKER = {'rc': 127, 'stdout': '', 'stderr': 'docker: command not found'}
NOT_ANSWERING = {'rc': 1, 'stdout': '',
                 'stderr': 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?'}
# A registered result of a skipped task (accel.nodes.nvidia_cuda_check on a node without NVIDIA).
SKIPPED = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}
# A question the role's node_probe run did not ask has no answer.
NOT_ASKED = None


def docker_info(version='20.10.24+dfsg1', default='runc', runtimes=('io.containerd.runc.v2', 'nvidia', 'runc')):
    """node_probe's answer to `docker info --format '{{json .}}'`, with the keys the role reads."""
    info = {'ServerVersion': version, 'DefaultRuntime': default, 'CgroupDriver': 'systemd',
            'Runtimes': {name: {'path': name} for name in runtimes}}
    return {'rc': 0, 'stdout': json.dumps(info), 'stderr': ''}


def h100_facts():
    """The H100 host of H100_REPORT: the H200's facts with its GPU."""
    facts = copy.deepcopy(H200)
    facts['nvidia']['gpus'][0].update(name='NVIDIA H100 80GB HBM3', uuid='GPU-0ec488ee-9fd9-c8b4-37bf-cbec8848f721')
    return facts


# The simulated P3 and inf1 of the Molecule site scenario (molecule/site/vars/hardware.yml).
def p3_facts(count=4):
    gpus = [{'index': i, 'name': 'Tesla V100-SXM2-16GB', 'pci_bus_id': '0000:00:1%s.0' % 'bcde'[i],
             'uuid': 'GPU-1a5e2b3c-0000-4000-8000-00000000000%d' % i} for i in range(count)]
    return {'schema_version': 1, 'vendors': ['nvidia'],
            'nvidia': {'driver_version': '580.95.05', 'userspace_driver_version': '580.95.05', 'cuda_version': '13.0',
                       'kernel_module_flavor': 'proprietary', 'gpus': gpus},
            'neuron': {'driver_version': None, 'devices': [], 'core_count_total': 0},
            'ec2': {'instance_type': 'p3.8xlarge', 'source': 'option',
                    'expected': {'vendor': 'nvidia', 'model': 'V100', 'count': 4, 'memory_mib_each': 16384}},
            'container_runtimes': {}, 'problems': [] if count == 4 else ['PCI shows 3 NVIDIA GPU(s), p3.8xlarge promises 4'],
            'sources': {'pci': 'ok', 'nvidia_procfs': 'ok', 'nvidia_smi': 'ok'}}


def inf1_facts(driver=None):
    return {'schema_version': 1, 'vendors': ['neuron'],
            'nvidia': {'driver_version': None, 'userspace_driver_version': None, 'cuda_version': None, 'gpus': []},
            'neuron': {'driver_version': driver, 'core_count_total': 16,
                       'devices': [{'index': i, 'name': 'Inferentia', 'pci_bus_id': '0000:00:1%s.0' % 'cdef'[i]}
                                   for i in range(4)]},
            'ec2': {'instance_type': 'inf1.6xlarge', 'source': 'option', 'expected': {'vendor': 'neuron', 'devices': 4, 'cores': 16}},
            'container_runtimes': {}, 'problems': [], 'sources': {'pci': 'ok', 'neuron_ls': 'ok'}}


def dkms(stdout='', rc=0, stderr=''):
    """node_probe's answer to `dkms status`, which strips surrounding white space."""
    return {'rc': rc, 'stdout': stdout.strip(), 'stderr': stderr.strip()}


def by_name(checks):
    return {check['name']: check for check in checks}


def judge(facts, info=None, **kwargs):
    """validation_checks as the role calls it, with the container plan the role makes."""
    info = NO_DOCKER if info is None else info
    engine = validation_engine(info, kwargs.get('neuron_mode', 'auto'))
    plan = validation_container_plan(facts, engine=engine, image=kwargs.pop('image', ''))
    return validation_checks(facts, docker_info=info, plan=plan, **kwargs)


# The CRI layer came after these captures: where it does not run, the report says so, and nothing else changes.
CRI_LEFT_OUT = {'name': 'cri', 'layer': 'cri', 'status': 'skip', 'detail': 'skipped: not in accelerator_validation_layers',
                'measured': {}}


def with_cri_skipped(report):
    report = copy.deepcopy(report)
    report['layers']['cri'] = 'skip'
    report['versions']['cri_runtime'] = None
    return report


def test_the_h200_without_docker_gets_its_real_report_back():
    checks = judge(H200, layers=['host', 'runtime', 'container'], skip={}, cuda=SKIPPED, dkms=NOT_ASKED)
    assert checks == [CRI_LEFT_OUT] + H200_REPORT['checks']
    report = validation_report(checks[1:], H200, validation_engine(NO_DOCKER), host='localhost',
                               timestamp=H200_REPORT['timestamp'], ansible_core='2.19.14')
    assert report == with_cri_skipped(H200_REPORT)


def test_the_h100_with_docker_passes_the_host_and_runtime_layers_as_it_did():
    cuda = {'changed': False, 'checks': [c for c in H100_REPORT['checks'] if c['name'] in ('cuda', 'nvidia_uvm')]}
    info = docker_info(default='nvidia', runtimes=('io.containerd.runc.v2', 'io.containerd.runtime.v1.linux', 'nvidia', 'runc'))
    checks = judge(h100_facts(), info, layers=['host', 'runtime'], cuda=cuda, dkms=NOT_ASKED)
    real = [c for c in H100_REPORT['checks'] if c['layer'] != 'container']
    assert checks == [{'name': 'container', 'layer': 'container', 'status': 'skip',
                       'detail': 'skipped: not in accelerator_validation_layers', 'measured': {}}, CRI_LEFT_OUT] + real
    report = validation_report(H100_REPORT['checks'], h100_facts(), validation_engine(info), host='accel-gpu-node',
                               timestamp=H100_REPORT['timestamp'], ansible_core='2.19.14')
    assert report == with_cri_skipped(H100_REPORT)


DOCKER_INFO = ['docker', 'info', '--format', '{{json .}}']
CONFIG = '/etc/nvidia-container-runtime/config.toml'
# NVIDIA's container layer also asks the toolkit its version (what "auto" resolves to) and its CDI devices.
TOOLKIT = {'toolkit_version': ['nvidia-ctk', '--version'], 'cdi_devices': ['nvidia-ctk', 'cdi', 'list']}
# The CRI layer asks crictl which runtime answers and its config; NVIDIA's also the toolkit's, as above.
CRICTL = ['crictl', '--runtime-endpoint', 'unix:///run/containerd/containerd.sock']
CRI = {'cri_version': CRICTL + ['version'], 'cri_info': CRICTL + ['info']}
UNCHANGED = {'container': 'unchanged', 'cri': 'unchanged', 'neuron_dkms': 'unchanged'}


@pytest.mark.parametrize('facts, kwargs, commands, paths', [
    # The P3 and the inf1 of the site scenario, every layer.
    (p3_facts(), {}, dict(TOOLKIT, docker_info=DOCKER_INFO, **CRI), [CONFIG]),
    (inf1_facts(), {}, dict(CRI, docker_info=DOCKER_INFO, dkms=['dkms', 'status']), []),
    # An unchanged node (playbooks/site.yml): no container or CRI layer, no dkms.
    (inf1_facts(), {'skip': UNCHANGED}, {'docker_info': DOCKER_INFO}, []),
    (p3_facts(), {'skip': UNCHANGED}, {'docker_info': DOCKER_INFO}, []),
    # The container layer skipped, the CRI layer still asks the toolkit's mode and devices.
    (p3_facts(), {'skip': {'container': 'asked to'}}, dict(TOOLKIT, docker_info=DOCKER_INFO, **CRI), [CONFIG]),
    (p3_facts(), {'layers': ['cri'], 'crictl': '/usr/local/bin/crictl', 'cri_endpoint': 'unix:///run/k3s/containerd/containerd.sock'},
     dict(TOOLKIT, cri_version=['/usr/local/bin/crictl', '--runtime-endpoint', 'unix:///run/k3s/containerd/containerd.sock', 'version'],
          cri_info=['/usr/local/bin/crictl', '--runtime-endpoint', 'unix:///run/k3s/containerd/containerd.sock', 'info']), [CONFIG]),
    # The host layer alone asks nothing for NVIDIA (accel.nodes.nvidia_cuda_check covers it), dkms for Neuron.
    (p3_facts(), {'layers': ['host']}, {}, []),
    (inf1_facts(), {'layers': ['host']}, {'dkms': ['dkms', 'status']}, []),
    (p3_facts(), {'layers': ['runtime']}, {'docker_info': DOCKER_INFO}, []),
    # No accelerator: Docker still answers for the runtime layer.
    ({'vendors': []}, {}, dict(CRI, docker_info=DOCKER_INFO), []),
    # Check mode pulls nothing: it asks whether the image is on the node, when there is one to run.
    (p3_facts(), {'check_mode': True, 'image': 'accel-test/busybox:1', 'nvidia_config_path': '/opt/toolkit.toml'},
     dict(TOOLKIT, docker_info=DOCKER_INFO, image=['docker', 'image', 'inspect', '--format', '{{.Id}}', 'accel-test/busybox:1'],
          cri_image=CRICTL + ['inspecti', '-q', 'accel-test/busybox:1'], **CRI),
     ['/opt/toolkit.toml']),
    (p3_facts(), {'check_mode': True, 'image': ''}, dict(TOOLKIT, docker_info=DOCKER_INFO, **CRI), [CONFIG]),
    (p3_facts(), {'check_mode': False, 'image': 'accel-test/busybox:1'}, dict(TOOLKIT, docker_info=DOCKER_INFO, **CRI), [CONFIG]),
    (p3_facts(), {'check_mode': True, 'image': 'accel-test/busybox:1', 'layers': ['host', 'runtime']},
     {'docker_info': DOCKER_INFO}, []),
])
def test_what_the_one_probe_asks(facts, kwargs, commands, paths):
    assert validation_probe(facts, **kwargs) == {'commands': commands, 'paths': paths, 'ask': bool(commands or paths)}


def test_a_refresh_gathers_the_facts_in_the_same_run_and_asks_for_the_vendors_the_facts_named():
    options = {'root': '/', 'instance_type': '', 'nvidia_smi_path': None, 'neuron_ls_path': '/opt/neuron-ls'}
    # After provisioning (site.yml): the vendors of the facts gathered before; empty options left out.
    asked = validation_probe(p3_facts(), refresh=options)
    assert asked == {'commands': dict(TOOLKIT, docker_info=DOCKER_INFO, **CRI), 'paths': [CONFIG],
                     'accelerators': {'root': '/', 'neuron_ls_path': '/opt/neuron-ls'}, 'ask': True}
    # No facts yet (validate.yml on a fresh host): every vendor's questions.
    assert validation_probe(None, refresh={})['commands'] == dict(TOOLKIT, docker_info=DOCKER_INFO, dkms=['dkms', 'status'], **CRI)
    assert validation_probe(None, refresh={})['paths'] == [CONFIG]
    # Nothing else to ask: the run still gathers the facts.
    assert validation_probe(None, ['host'], refresh={}, skip={'neuron_dkms': 'no'}) == {
        'commands': {}, 'paths': [], 'accelerators': {}, 'ask': True}


def test_the_host_checks_run_in_the_same_run_on_nvidia_nodes_only():
    options = {'root': '/', 'nvidia_smi_path': '', 'expect_persistence': None, 'nvswitch': False,
               'skip': {'cuda': 'simulated'}}
    kept = {'root': '/', 'nvswitch': False, 'skip': {'cuda': 'simulated'}}
    assert validation_probe(p3_facts(), cuda=options)['cuda'] == kept
    assert validation_probe(p3_facts(), ['host'], cuda=options) == {'commands': {}, 'paths': [], 'cuda': kept, 'ask': True}
    assert 'cuda' not in validation_probe(inf1_facts(), cuda=options)
    assert 'cuda' not in validation_probe(p3_facts(), ['runtime', 'container'], cuda=options)
    assert 'cuda' not in validation_probe(p3_facts(), skip={'host': 'unchanged'}, cuda=options)
    # No facts yet: checked, and judged only if the fresh facts name NVIDIA.
    assert validation_probe(None, refresh={}, cuda=options)['cuda'] == kept


def test_a_probe_that_asks_nothing_does_not_run():
    assert validation_probe(p3_facts(), ['host', 'runtime'], {'runtime': 'asked to'})['ask'] is False
    with pytest.raises(AnsibleFilterError, match='validation_probe: needs the accelerator facts'):
        validation_probe(None)


def test_engine_state_for_the_container_plan():
    assert validation_engine(docker_info(default='nvidia')) == {
        'present': True, 'answers': True, 'version': '20.10.24+dfsg1', 'runtimes': ['io.containerd.runc.v2', 'nvidia', 'runc'],
        'default_runtime': 'nvidia', 'neuron_mode': 'device', 'cdi_spec_dirs': []}
    assert validation_engine(NO_DOCKER) == {'present': False, 'answers': False, 'version': None, 'runtimes': [],
                                            'default_runtime': None, 'neuron_mode': 'device', 'cdi_spec_dirs': []}
    # Docker with CDI on lists its spec directories (28.2 and later by default).
    info = docker_info(default='nvidia')
    info['stdout'] = info['stdout'].replace('{', '{"CDISpecDirs": ["/etc/cdi", "/var/run/cdi"], ', 1)
    assert validation_engine(info)['cdi_spec_dirs'] == ['/etc/cdi', '/var/run/cdi']
    assert validation_engine(NOT_ASKED)['present'] is False
    assert validation_engine({})['present'] is False
    assert validation_engine(SKIPPED)['present'] is False
    assert validation_engine(NOT_ANSWERING)['present'] is True
    assert validation_engine(NOT_ANSWERING)['answers'] is False
    # A daemon that printed a warning rather than JSON does not answer.
    assert validation_engine(dict(docker_info(), stdout='WARNING: bridge-nf-call-iptables is disabled'))['answers'] is False


@pytest.mark.parametrize('mode, runtimes, resolved', [
    ('auto', ('runc', 'oci-neuron'), 'oci_hook'),
    ('auto', ('runc',), 'device'),
    ('device', ('runc', 'oci-neuron'), 'device'),
    ('oci_hook', ('runc',), 'oci_hook'),
])
def test_neuron_mode(mode, runtimes, resolved):
    assert validation_engine(docker_info(runtimes=runtimes), mode)['neuron_mode'] == resolved


def test_the_p3_passes_every_host_and_runtime_check():
    checks = by_name(judge(p3_facts(), docker_info(), layers=['host', 'runtime'], cuda=SKIPPED, dkms=NOT_ASKED))
    assert checks['accelerators_present']['detail'] == 'found nvidia'
    assert checks['accelerators_present']['measured'] == {'vendors': ['nvidia'], 'instance_type': 'p3.8xlarge', 'problems': []}
    assert checks['nvidia_gpus_present'] == {'name': 'nvidia_gpus_present', 'layer': 'host', 'status': 'pass',
                                             'detail': '4 GPU(s) on the PCI bus, p3.8xlarge promises 4',
                                             'measured': {'pci': 4, 'expected': 4}}
    assert checks['nvidia_smi']['detail'] == 'nvidia-smi sees 4 of 4 GPU(s)'
    assert checks['nvidia_smi']['measured'] == {'seen': 4, 'source': 'ok', 'gpus': ['Tesla V100-SXM2-16GB'] * 4}
    assert checks['docker']['detail'] == 'Docker 20.10.24+dfsg1 answers, default runtime runc'
    assert checks['runtime_nvidia'] == {'name': 'runtime_nvidia', 'layer': 'runtime', 'status': 'pass',
                                        'detail': 'Docker lists the nvidia runtime', 'measured': {'registered': True}}
    assert [c['status'] for c in checks.values() if c['layer'] not in ('container', 'cri')] == ['pass'] * 6


def test_a_gpu_off_the_bus_fails_with_the_fix():
    check = by_name(judge(p3_facts(3), layers=['host']))['nvidia_gpus_present']
    assert check['status'] == 'fail'
    assert check['detail'] == ('3 GPU(s) on the PCI bus, p3.8xlarge promises 4: a GPU is missing or fell off the bus; '
                               'stop and start the instance to move it to other hardware')
    assert check['measured'] == {'pci': 3, 'expected': 4}


def test_nvidia_smi_and_driver_failures_say_what_to_do():
    facts = copy.deepcopy(H200)
    facts['sources']['nvidia_smi'] = 'failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'
    facts['nvidia']['gpus'][0]['uuid'] = None
    facts['nvidia']['userspace_driver_version'] = '580.95.05'
    checks = by_name(judge(facts, layers=['host']))
    assert checks['nvidia_smi']['status'] == 'fail'
    assert checks['nvidia_smi']['detail'] == (
        'nvidia-smi: failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver: install or '
        'load the driver (accel.nodes.nvidia_driver), then reboot')
    assert checks['nvidia_smi']['measured']['seen'] == 0
    assert checks['nvidia_driver_versions']['detail'] == (
        'kernel module 580.159.04 but userspace 580.95.05: reboot to load the installed driver, and hold the driver packages')
    facts['nvidia']['driver_version'] = None
    checks = by_name(judge(facts, layers=['host']))
    assert checks['nvidia_driver_versions']['status'] == 'fail'
    assert checks['nvidia_driver_versions']['detail'].startswith('no NVIDIA kernel module is loaded')
    # nvidia-smi that saw fewer GPUs than PCI fails too, with the count.
    facts = p3_facts()
    facts['nvidia']['gpus'][3]['uuid'] = None
    check = by_name(judge(facts, layers=['host']))['nvidia_smi']
    assert (check['status'], check['detail']) == ('fail', 'nvidia-smi sees 3 of 4 GPU(s)')


def test_no_accelerator_fails_the_host_layer():
    facts = copy.deepcopy(H200)
    facts.update(vendors=[], nvidia=dict(facts['nvidia'], gpus=[]))
    checks = judge(facts, layers=['host'])
    assert [c['name'] for c in checks] == ['runtime', 'container', 'cri', 'accelerators_present']
    assert checks[3]['status'] == 'fail'
    assert checks[3]['detail'].startswith('no NVIDIA GPU or Neuron device on the PCI bus')


def test_the_inf1_with_a_clean_dkms_passes():
    checks = judge(inf1_facts('2.27.4.0'), docker_info(runtimes=('runc', 'oci-neuron')), layers=['host', 'runtime'],
                   dkms=dkms(DKMS_NEURON_INSTALLED))
    assert [(c['name'], c['status']) for c in checks] == [
        ('container', 'skip'), ('cri', 'skip'), ('accelerators_present', 'pass'), ('neuron_devices_present', 'pass'),
        ('neuron_ls', 'pass'),
        ('neuron_dkms', 'pass'), ('docker', 'pass'), ('runtime_oci-neuron', 'pass')]
    checks = by_name(checks)
    assert checks['neuron_devices_present']['detail'] == '4 Neuron device(s) on the PCI bus, inf1.6xlarge promises 4'
    assert checks['neuron_devices_present']['measured'] == {'devices': 4, 'expected': 4}
    assert checks['neuron_ls']['detail'] == 'neuron-ls lists 4 device(s)'
    assert checks['neuron_ls']['measured'] == {'source': 'ok', 'driver_version': '2.27.4.0'}
    assert checks['neuron_dkms']['detail'] == 'dkms status is clean: aws-neuronx/2.27.4.0, 6.18.44-fc-v782, x86_64: installed'
    assert checks['neuron_dkms']['measured'] == {'dkms': ['aws-neuronx/2.27.4.0, 6.18.44-fc-v782, x86_64: installed'],
                                                 'dkms_version': '2.27.4.0'}


@pytest.mark.parametrize('result, status, detail', [
    (dkms(rc=127, stderr='dkms: command not found'), 'fail',
     'dkms is not installed: install aws-neuronx-dkms (accel.nodes.neuron_driver)'),
    (dkms(''), 'fail', 'dkms status lists no neuron module: install aws-neuronx-dkms (accel.nodes.neuron_driver)'),
    (dkms('aws-neuronx/2.27.4.0, 6.1.0-99-cloud-amd64, x86_64: built\n'), 'fail',
     'dkms status is not clean: aws-neuronx/2.27.4.0, 6.1.0-99-cloud-amd64, x86_64: built: install the headers of the '
     'running kernel and rebuild'),
    (dkms(DKMS_NEURON_INSTALLED, stderr='Error! Bad return status for module build on kernel: 6.1.0-99-cloud-amd64\n'), 'fail',
     'dkms status is not clean: Error! Bad return status for module build on kernel: 6.1.0-99-cloud-amd64: install the '
     'headers of the running kernel and rebuild'),
    (dkms(DKMS_NEURON_INSTALLED.replace('2.27.4.0', '2.28.1.0')), 'fail',
     'the loaded neuron module is 2.27.4.0 but DKMS built 2.28.1.0: reboot to load it'),
    # DKMS 2's format names no version after a slash: nothing to compare.
    (dkms('aws-neuronx, 2.28.1.0, 5.15.0-1-aws, x86_64: installed\n'), 'pass',
     'dkms status is clean: aws-neuronx, 2.28.1.0, 5.15.0-1-aws, x86_64: installed'),
])
def test_dkms(result, status, detail):
    check = by_name(judge(inf1_facts('2.27.4.0'), layers=['host'], dkms=result))['neuron_dkms']
    assert (check['status'], check['detail']) == (status, detail)


def test_dkms_deprecation_warnings_are_not_modules():
    # The fixture as DKMS 3.0.10 printed it, its REMAKE_INITRD warning first, on stdout or on stderr (deprecated()
    # writes to stderr; a capture with 2>&1 has it among the modules).
    assert DKMS_DEPRECATED.startswith('Deprecated feature: REMAKE_INITRD (/var/lib/dkms/aws-neuronx/')
    clean = 'dkms status is clean: aws-neuronx/2.27.4.0, 6.18.44-fc-v782, x86_64: installed'
    for result in (dkms(DKMS_STATUS), dkms(DKMS_STATUS.replace(DKMS_DEPRECATED + '\n', ''), stderr=DKMS_DEPRECATED)):
        check = by_name(judge(inf1_facts('2.27.4.0'), layers=['host'], dkms=result))['neuron_dkms']
        assert (check['status'], check['detail']) == ('pass', clean)
        assert check['measured'] == {'dkms': ['aws-neuronx/2.27.4.0, 6.18.44-fc-v782, x86_64: installed'],
                                     'dkms_version': '2.27.4.0'}


@pytest.mark.parametrize('module_line', [
    # DKMS 3's own lines for a module added but not built, and built but not installed
    # (tests/fixtures/dkms/status-dkms3-added.txt and status-dkms3-built-and-diff.txt).
    'aws-neuronx/2.27.4.0: added',
    'aws-neuronx/2.27.4.0, 6.18.44-fc-v782, x86_64: built',
])
def test_a_module_not_installed_fails_among_deprecation_warnings(module_line):
    stdout = DKMS_STATUS.replace(DKMS_NEURON_INSTALLED.strip(), module_line)
    assert stdout.splitlines()[0] == DKMS_DEPRECATED and module_line in stdout.splitlines()
    check = by_name(judge(inf1_facts('2.27.4.0'), layers=['host'], dkms=dkms(stdout)))['neuron_dkms']
    assert (check['status'], check['detail']) == (
        'fail', 'dkms status is not clean: %s: install the headers of the running kernel and rebuild' % module_line)
    assert check['measured'] == {'dkms': [module_line], 'dkms_version': '2.27.4.0'}


def test_dkms_skipped_on_an_unchanged_node_says_why():
    reason = 'the node is unchanged since the run of 2026-11-24T06:00:00Z: accel.nodes.validate runs it'
    checks = judge(inf1_facts(), layers=['host', 'runtime', 'container'], skip={'container': reason, 'neuron_dkms': reason},
                   dkms=NOT_ASKED)
    assert [(c['name'], c['status']) for c in checks if c['status'] == 'skip'][:3] == [
        ('container', 'skip'), ('cri', 'skip'), ('neuron_dkms', 'skip')]
    assert by_name(checks)['neuron_dkms'] == {'name': 'neuron_dkms', 'layer': 'host', 'status': 'skip',
                                              'detail': 'skipped: ' + reason, 'measured': {}}
    assert checks[0]['detail'] == 'skipped: ' + reason


def test_neuron_ls_failure_and_a_missing_device():
    facts = inf1_facts()
    facts['sources']['neuron_ls'] = 'missing'
    facts['neuron']['devices'] = facts['neuron']['devices'][:3]
    checks = by_name(judge(facts, layers=['host'], dkms=NOT_ASKED))
    assert checks['neuron_ls']['detail'] == ('neuron-ls: missing: install aws-neuronx-tools and load the neuron module '
                                             '(accel.nodes.neuron_driver)')
    assert checks['neuron_devices_present']['status'] == 'fail'
    assert checks['neuron_devices_present']['detail'] == (
        '3 Neuron device(s) on the PCI bus, inf1.6xlarge promises 4: a device is missing; stop and start the instance to '
        'move it to other hardware')


def test_docker_that_does_not_answer_fails_and_skips_the_runtimes():
    checks = judge(inf1_facts(), NOT_ANSWERING, layers=['runtime'], neuron_mode='oci_hook')
    assert checks[3:] == [
        {'name': 'docker', 'layer': 'runtime', 'status': 'fail', 'measured': {'version': None, 'runtimes': []},
         'detail': 'docker is installed but the daemon does not answer: Cannot connect to the Docker daemon at '
                   'unix:///var/run/docker.sock. Is the docker daemon running? (systemctl status docker; journalctl -u docker)'},
        {'name': 'runtime_oci-neuron', 'layer': 'runtime', 'status': 'skip', 'detail': 'skipped: Docker does not answer',
         'measured': {'registered': False}}]


def test_a_runtime_docker_does_not_list_fails_with_what_it_has():
    check = by_name(judge(p3_facts(), docker_info(runtimes=('io.containerd.runc.v2', 'runc')), layers=['runtime']))['runtime_nvidia']
    assert check['status'] == 'fail'
    assert check['detail'] == ('Docker does not list the nvidia runtime (it has io.containerd.runc.v2, runc): run the vendor '
                               'container runtime role, then restart Docker')


def test_neuron_device_mode_needs_no_runtime():
    checks = judge(inf1_facts(), docker_info(runtimes=('runc',)), layers=['runtime'])
    assert [(c['name'], c['status']) for c in checks if c['layer'] == 'runtime'] == [
        ('docker', 'pass'), ('runtime_neuron_device_mode', 'skip')]
    assert checks[-1]['detail'] == 'skipped: Neuron device mode passes /dev/neuronN to the default runtime, no runtime to register'


def test_the_container_layer_says_why_it_ran_nothing_or_judges_the_runs():
    checks = judge(p3_facts(), docker_info(), layers=['container'])
    assert checks[-1] == {'name': 'container', 'layer': 'container', 'status': 'skip',
                          'detail': 'skipped: accelerator_validation_image is not set', 'measured': {}}
    facts = p3_facts(1)
    engine = validation_engine(docker_info())
    plan = validation_container_plan(facts, engine=engine, image='accel-test/busybox:1')
    output = 'GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-1a5e2b3c-0000-4000-8000-000000000000)\n'
    runs = {'changed': False, 'results': [
        dict(item=case, skipped=True) if case['skip'] else dict(item=case, status=0, container={'Output': output})
        for case in plan['cases']]}
    checks = validation_checks(facts, layers=['container'], plan=plan, runs=runs)
    assert [(c['name'], c['status']) for c in checks[3:]] == [
        ('container_nvidia_gpus_all', 'pass'), ('container_nvidia_gpus_2', 'skip'), ('container_nvidia_gpus_device', 'pass'),
        ('container_nvidia_visible_devices', 'pass'), ('container_nvidia_cdi_all', 'skip'),
        ('container_nvidia_restriction', 'skip')]


def test_layers_left_out_or_skipped_come_first_with_the_reason():
    checks = judge(p3_facts(), docker_info(), layers=['host', 'runtime'], skip={'runtime': 'asked to'}, cuda=SKIPPED)
    assert checks[:3] == [
        {'name': 'runtime', 'layer': 'runtime', 'status': 'skip', 'detail': 'skipped: asked to', 'measured': {}},
        {'name': 'container', 'layer': 'container', 'status': 'skip', 'detail': 'skipped: not in accelerator_validation_layers',
         'measured': {}}, CRI_LEFT_OUT]
    assert {c['layer'] for c in checks[3:]} == {'host'}


def test_the_report_of_the_node_with_a_gpu_missing():
    facts = p3_facts(3)
    checks = judge(facts, docker_info(), cuda=SKIPPED)
    report = validation_report(checks, facts, validation_engine(docker_info()), host='validation17-p3-gpu-missing',
                               timestamp='2026-11-24T07:00:00Z', ansible_core='2.19.14')
    assert report['status'] == 'fail'
    assert report['layers'] == {'host': 'fail', 'runtime': 'pass', 'container': 'skip', 'cri': 'skip'}
    assert report['versions'] == {'nvidia_kernel_module': '580.95.05', 'nvidia_userspace': '580.95.05', 'cuda': '13.0',
                                  'neuron_driver': None, 'docker': '20.10.24+dfsg1', 'cri_runtime': None,
                                  'ansible_core': '2.19.14'}
    assert report['problems'] == ['PCI shows 3 NVIDIA GPU(s), p3.8xlarge promises 4']
    assert validation_summary(report) == (
        'accelerator validation FAIL (nvidia): host fail, runtime pass, container skip, cri skip'
        ' | nvidia_gpus_present fail: 3 GPU(s) on the PCI bus, p3.8xlarge promises 4: a GPU is missing or fell off the bus; '
        'stop and start the instance to move it to other hardware'
        ' | container skip: skipped: accelerator_validation_image is not set'
        ' | cri skip: skipped: no crictl on the node: the CRI layer runs where crictl is (EKS and kubeadm nodes have it; '
        'install cri-tools) or where accelerator_validation_crictl names it')
    assert validation_failure(report, '') == (
        'accelerator validation failed on validation17-p3-gpu-missing: nvidia_gpus_present: 3 GPU(s) on the PCI bus, '
        'p3.8xlarge promises 4: a GPU is missing or fell off the bus; stop and start the instance to move it to other '
        'hardware. Report: not written')
    assert validation_failure(report, '/var/lib/accel-nodes/validation.json').endswith(
        'hardware. Report: /var/lib/accel-nodes/validation.json')


def _finding(id_, severity='broken'):
    return {'id': id_, 'severity': severity, 'summary': id_, 'evidence': [], 'fix': 'fix ' + id_, 'source': 's'}


def test_each_failed_check_names_the_broken_findings_of_its_layers():
    """The node with a GPU missing, and Docker without the nvidia runtime: the host finding explains the host
    check, Docker's registration finding the runtime check; a will_break finding and a containerd one explain
    neither, and checks that passed name none."""
    facts = p3_facts(3)
    checks = judge(facts, docker_info(runtimes=('io.containerd.runc.v2', 'runc')), cuda=SKIPPED)
    found = [_finding('gpu.missing'), _finding('runtime.docker.not_loaded'), _finding('runtime.containerd.x'),
             _finding('cdi.spec.shadowed', 'will_break')]
    report = validation_report(checks, facts, findings=found)
    failed = dict((c['name'], c['findings']) for c in report['checks'] if c['status'] == 'fail')
    assert failed == {'nvidia_gpus_present': ['gpu.missing'], 'runtime_nvidia': ['runtime.docker.not_loaded']}
    assert all('findings' not in c for c in report['checks'] if c['status'] != 'fail')
    assert report['findings'] == found
    assert validation_failure(report, '').startswith(
        'accelerator validation failed on : nvidia_gpus_present: 3 GPU(s) on the PCI bus')
    message = validation_failure(report, '')
    assert '(explained by gpu.missing); runtime_nvidia: ' in message
    assert message.endswith('(explained by runtime.docker.not_loaded). Fix: gpu.missing: fix gpu.missing '
                            'runtime.docker.not_loaded: fix runtime.docker.not_loaded Report: not written')
    # Without a diagnosis the report is as before: no findings key at all.
    assert 'findings' not in validation_report(checks, facts)
    with pytest.raises(AnsibleFilterError, match='findings is the list'):
        validation_report(checks, facts, findings={'id': 'x'})


def test_summary_of_a_passing_node_and_of_no_accelerator():
    assert validation_summary(H100_REPORT) == (
        'accelerator validation PASS (nvidia): container pass, host pass, runtime pass'
        ' | container_nvidia_gpus_2 skip: skipped: the host has 1 GPU: --gpus 2 asks for more than there are'
        ' | container_nvidia_restriction skip: skipped: the host has 1 GPU(s): every request asks for all of them, so no '
        'container can show that the others are kept out')
    report = validation_report([], {'vendors': []})
    assert validation_summary(report).startswith('accelerator validation PASS (no accelerator): host skip, runtime skip')


def test_bad_input_says_what_is_wrong():
    with pytest.raises(AnsibleFilterError, match='validation_checks: needs the accelerator facts'):
        validation_checks(None)
    with pytest.raises(AnsibleFilterError, match='validation_report: needs the checks'):
        validation_report(None, H200)


def test_the_filters_are_exported():
    assert set(FilterModule().filters()) == {'validation_probe', 'validation_engine', 'validation_checks',
                                             'validation_report', 'validation_summary', 'validation_failure'}
