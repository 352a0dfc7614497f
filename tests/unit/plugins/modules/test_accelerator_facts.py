# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accelerator_facts against fake sysfs/procfs trees and the test doubles of
nvidia-smi and neuron-ls (tests/doubles/README.md)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _accelerators, _ec2
from ansible_collections.accel.nodes.plugins.modules import accelerator_facts

TESTS = Path(__file__).parents[3]
FACTS = TESTS / 'fixtures' / 'facts'
SMI = FACTS / 'commands' / 'nvidia-smi'
NEURON_LS = FACTS / 'commands' / 'neuron-ls'
NVIDIA_SMI_DOUBLE = str(TESTS / 'doubles' / 'replay' / 'nvidia-smi')
NEURON_LS_DOUBLE = str(TESTS / 'doubles' / 'replay' / 'neuron-ls')


@pytest.fixture
def calls(tmp_path, monkeypatch):
    """Lines the doubles logged, one per run: tool, arguments and locale."""
    log = tmp_path / 'calls.log'
    monkeypatch.setenv('ACCEL_DOUBLE_LOG', str(log))
    return lambda: log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def facts(fact_roots, run_module, monkeypatch):
    """facts(root=..., smi=(fixture, rc), neuron_ls=(fixture, rc), **args) -> ansible_facts.accelerators."""
    def _facts(root=None, smi=None, neuron_ls=None, **args):
        if root is not None:
            args['root'] = str(fact_roots / root)
        if smi is not None:
            output, rc = smi
            monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(SMI / output))
            monkeypatch.setenv('ACCEL_NVIDIA_SMI_RC', str(rc))
            args.setdefault('nvidia_smi_path', NVIDIA_SMI_DOUBLE)
        if neuron_ls is not None:
            output, rc = neuron_ls
            monkeypatch.setenv('ACCEL_NEURON_LS_OUTPUT', str(NEURON_LS / output))
            monkeypatch.setenv('ACCEL_NEURON_LS_RC', str(rc))
            args.setdefault('neuron_ls_path', NEURON_LS_DOUBLE)
        result = run_module(accelerator_facts.main, args)
        assert not result.get('failed'), result
        assert result['changed'] is False
        return result['ansible_facts']['accelerators']
    return _facts


@pytest.fixture
def no_imds(monkeypatch):
    """Fail the test if the module asks the instance metadata service."""
    def refuse(*args, **kwargs):
        raise AssertionError('IMDS must not be asked here')
    monkeypatch.setattr(_ec2, 'imds_instance_type', refuse)


def tree_digest(root):
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames + dirnames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest.update(('%s %o %d %d\n' % (path, st.st_mode, st.st_size, st.st_mtime_ns)).encode())
    return digest.hexdigest()


# -- the 8 x V100 p3.16xlarge ---------------------------------------------------

def test_p3_16xlarge_eight_v100s(facts, calls, no_imds):
    acc = facts(root='p3.16xlarge', smi=('p3.16xlarge-v11.xml', 0), instance_type='p3.16xlarge')
    assert acc['schema_version'] == 1
    assert acc['vendors'] == ['nvidia']
    nvidia = acc['nvidia']
    assert (nvidia['driver_version'], nvidia['userspace_driver_version'], nvidia['cuda_version'],
            nvidia['kernel_module_flavor']) == ('470.256.02', '470.256.02', '11.4', 'proprietary')
    assert [g['pci_bus_id'] for g in nvidia['gpus']] == ['0000:00:%02x.0' % n for n in range(0x17, 0x1f)]
    assert [g['index'] for g in nvidia['gpus']] == list(range(8))
    assert nvidia['gpus'][0] == {
        'index': 0,
        'name': 'Tesla V100-SXM2-16GB',
        'uuid': 'GPU-0c5f3e9a-4e1b-7d1a-1f7e-6a3b0b2d1c01',
        'pci_bus_id': '0000:00:17.0',
        'pci_device_id': '0x1db1',
        'memory_total_mib': 16160,
        'compute_capability': '7.0',
        'mig_mode': None,
        'persistence_mode': True,
        'numa_node': None,
    }
    assert len(set(g['uuid'] for g in nvidia['gpus'])) == 8
    assert acc['ec2'] == {
        'instance_type': 'p3.16xlarge', 'source': 'option',
        'expected': {'vendor': 'nvidia', 'model': 'V100', 'count': 8, 'memory_mib_each': 16384},
    }
    assert acc['container_runtimes']['docker'] == {'runtimes': ['nvidia'], 'default_runtime': 'nvidia'}
    assert acc['problems'] == []
    assert acc['sources'] == {
        'pci': 'ok', 'nvidia_procfs': 'ok', 'nvidia_smi': 'ok', 'neuron': 'missing', 'neuron_ls': 'skipped',
        'kernel_modules': 'ok', 'device_nodes': 'ok', 'container_runtimes': 'ok', 'dmi': 'skipped',
        'imds': 'skipped',
    }
    assert acc['observed']['kernel_modules'] == ['nvidia', 'nvidia_drm', 'nvidia_modeset', 'nvidia_uvm']
    # One nvidia-smi run, in the C locale.
    assert calls() == ['nvidia-smi -q -x LANG=C LC_ALL=C']


def test_xen_p3_under_another_root_has_no_instance_type_and_never_asks_imds(facts, no_imds):
    acc = facts(root='p3.16xlarge', smi=('p3.16xlarge-v11.xml', 0))
    assert acc['ec2'] == {'instance_type': None, 'source': None, 'expected': None}
    assert acc['sources']['dmi'] == 'ok'
    assert acc['sources']['imds'] == 'skipped'


def test_nvidia_smi_sees_fewer_gpus_than_the_pci_bus(facts, tmp_path, monkeypatch):
    xml = (SMI / 'p3.16xlarge-v11.xml').read_text()
    last = xml.rindex('\t<gpu id=')
    short = tmp_path / 'seven.xml'
    short.write_text(xml[:last] + '\n</nvidia_smi_log>\n')
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(short))
    acc = facts(root='p3.16xlarge', nvidia_smi_path=NVIDIA_SMI_DOUBLE, instance_type='p3.16xlarge')
    assert acc['problems'] == [
        'nvidia-smi sees 7 of the 8 NVIDIA GPU(s) on the PCI bus; not seen: 0000:00:1e.0']
    # The GPU is still listed, from PCI and the driver's procfs, with what nvidia-smi no longer says as null.
    lost = acc['nvidia']['gpus'][7]
    assert (lost['pci_bus_id'], lost['name'], lost['memory_total_mib'], lost['compute_capability']) == (
        '0000:00:1e.0', 'Tesla V100-SXM2-16GB', None, '7.0')


def test_gpu_lost_rc15(facts):
    acc = facts(root='p3.16xlarge', smi=('rc15-gpu-lost.txt', 15), instance_type='p3.16xlarge')
    assert acc['sources']['nvidia_smi'] == 'rc 15'
    assert acc['problems'] == [
        'nvidia-smi cannot reach GPU 0000:00:1e.0: GPU is lost.  Reboot the system to recover this GPU']
    assert len(acc['nvidia']['gpus']) == 8
    assert acc['nvidia']['userspace_driver_version'] is None


def test_driver_library_version_mismatch(facts):
    acc = facts(root='p3.16xlarge', smi=('rc18-version-mismatch.txt', 18))
    assert acc['sources']['nvidia_smi'] == 'rc 18'
    assert acc['nvidia']['driver_version'] == '470.256.02'
    assert acc['nvidia']['userspace_driver_version'] == '535.183'
    assert acc['problems'] == [
        'NVIDIA driver/library version mismatch: kernel module 470.256.02, user-space NVML 535.183; '
        'reboot, or unload and reload the nvidia modules']


# -- Inferentia --------------------------------------------------------------------

INF1_DEVICES = [
    {'index': i, 'pci_bus_id': bus_id, 'pci_device_id': '0x7064', 'name': 'Inferentia',
     'core_count': 4, 'memory_bytes': 8589934592}
    for i, bus_id in enumerate(['0000:00:1c.0', '0000:00:1d.0', '0000:00:1e.0', '0000:00:1f.0'])
]


def test_inf1_6xlarge_four_inferentia(facts, calls):
    acc = facts(root='inf1.6xlarge', neuron_ls=('inf1.6xlarge.json', 0))
    assert acc['vendors'] == ['neuron']
    assert acc['neuron'] == {'driver_version': '2.19.64.0', 'devices': INF1_DEVICES, 'core_count_total': 16}
    assert acc['nvidia']['gpus'] == []
    assert acc['ec2'] == {
        'instance_type': 'inf1.6xlarge', 'source': 'dmi',
        'expected': {'vendor': 'neuron', 'devices': 4, 'cores': 16},
    }
    assert acc['problems'] == []
    assert acc['sources']['neuron_ls'] == 'ok'
    assert acc['sources']['nvidia_smi'] == 'skipped'
    assert calls() == ['neuron-ls -j LANG=C LC_ALL=C']


def test_inf1_old_neuron_ls_falls_back_to_sysfs(facts):
    acc = facts(root='inf1.6xlarge', neuron_ls=('table-only.txt', 0))
    assert acc['sources']['neuron_ls'] == 'no JSON output'
    assert [d['core_count'] for d in acc['neuron']['devices']] == [4, 4, 4, 4]
    assert [d['memory_bytes'] for d in acc['neuron']['devices']] == [None] * 4
    assert acc['neuron']['core_count_total'] == 16
    assert acc['problems'] == []


def test_inf1_checked_against_a_bigger_type(facts):
    acc = facts(root='inf1.6xlarge', neuron_ls=('inf1.6xlarge.json', 0), instance_type='inf1.24xlarge')
    assert acc['problems'] == [
        'inf1.24xlarge should have 16 Neuron device(s); the PCI bus shows 4',
        'inf1.24xlarge should have 64 NeuronCores; its devices report 16',
    ]


def test_neuron_devices_without_the_driver(facts, tmp_path):
    root = tmp_path / 'root'
    for bus_id in ('0000:00:1e.0', '0000:00:1f.0'):
        base = root / 'sys/bus/pci/devices' / bus_id
        base.mkdir(parents=True)
        (base / 'vendor').write_text('0x1d0f\n')
        (base / 'device').write_text('0x7264\n')
        (base / 'class').write_text('0x088000\n')
    (root / 'proc').mkdir()
    (root / 'proc/modules').write_text('ena 135168 0 - Live 0xffffffffc0400000\n')
    acc = facts(root=str(root), instance_type='inf2.24xlarge')
    assert [d['name'] for d in acc['neuron']['devices']] == ['Inferentia2', 'Inferentia2']
    assert acc['problems'] == [
        '2 Neuron device(s) on the PCI bus but the neuron kernel driver is not loaded',
        'inf2.24xlarge should have 6 Neuron device(s); the PCI bus shows 2',
    ]


def neuron_tree(root, devices):
    """A synthetic host tree: Amazon PCI devices (bus id, device id), all bound to the Neuron driver,
    the neuron module loaded, a neuron sysfs entry and a /dev node for each."""
    for index, (bus_id, device_id) in enumerate(devices):
        base = root / 'sys/bus/pci/devices' / bus_id
        base.mkdir(parents=True)
        for name, value in (('vendor', '0x1d0f'), ('device', device_id), ('class', '0x088000'), ('numa_node', '0')):
            (base / name).write_text(value + '\n')
        os.symlink('../../../../bus/pci/drivers/neuron-driver', base / 'driver')
        node = root / 'sys/class/neuron_device' / ('neuron%d' % index)
        node.mkdir(parents=True)
        (node / 'core_count').write_text('8\n')
        (root / 'dev').mkdir(exist_ok=True)
        (root / 'dev' / ('neuron%d' % index)).write_text('')
    (root / 'sys/module/neuron').mkdir(parents=True)
    (root / 'sys/module/neuron/version').write_text('2.31.7.0\n')
    (root / 'proc').mkdir()
    (root / 'proc/modules').write_text('neuron 389120 0 - Live 0xffffffffc0400000\n')
    return str(root)


def test_trainium3_is_named_and_a_neuron_device_nobody_knows_is_kept(facts, tmp_path):
    # 0x7f64 is made up: a Neuron device newer than every table here. It is listed, unnamed, with a problem.
    root = neuron_tree(tmp_path / 'root', [('0000:00:1c.0', '0x7564'), ('0000:00:1d.0', '0x7565'),
                                           ('0000:00:1e.0', '0x7f64')])
    acc = facts(root=root, gather=['pci', 'neuron', 'kernel_modules', 'device_nodes'])
    assert acc['vendors'] == ['neuron']
    assert [(d['pci_bus_id'], d['pci_device_id'], d['name'], d['core_count']) for d in acc['neuron']['devices']] == [
        ('0000:00:1c.0', '0x7564', 'Trainium3', 8),
        ('0000:00:1d.0', '0x7565', 'Trainium3', 8),
        ('0000:00:1e.0', '0x7f64', None, 8),
    ]
    assert acc['neuron']['core_count_total'] == 24
    assert acc['problems'] == [
        'Neuron device(s) 0000:00:1e.0 have PCI device id 0x7f64, which accel.nodes does not know: they are '
        'listed with no model name. Update accel.nodes to a release that knows this device.']


# -- broken NVIDIA hosts -------------------------------------------------------------

def test_gpu_present_but_driver_not_loaded(facts):
    acc = facts(root='g4dn.xlarge-driver-not-loaded', smi=('rc9-driver-not-loaded.txt', 9))
    assert acc['sources']['nvidia_smi'] == 'rc 9'
    assert acc['sources']['nvidia_procfs'] == 'missing'
    assert acc['nvidia']['driver_version'] is None
    assert acc['nvidia']['gpus'] == [{
        'index': 0, 'name': None, 'uuid': None, 'pci_bus_id': '0000:00:1e.0', 'pci_device_id': '0x1eb8',
        'memory_total_mib': None, 'compute_capability': '7.5', 'mig_mode': None, 'persistence_mode': None,
        'numa_node': None,
    }]
    assert acc['ec2']['instance_type'] == 'g4dn.xlarge'
    assert acc['problems'] == ['1 NVIDIA GPU(s) on the PCI bus but the NVIDIA kernel driver is not loaded']


def test_nouveau_bound_to_the_gpu(facts):
    acc = facts(root='g4dn.xlarge-nouveau')
    assert acc['sources']['nvidia_smi'] == 'skipped'    # not '/', and no nvidia_smi_path
    assert acc['problems'] == [
        'nouveau is bound to NVIDIA GPU(s) 0000:00:1e.0: blacklist nouveau and reboot so that '
        'the NVIDIA driver can take them',
        '1 NVIDIA GPU(s) on the PCI bus but the NVIDIA kernel driver is not loaded',
        '/etc/containerd/config.toml does not import /etc/containerd/conf.d/99-nvidia.toml, '
        'so containerd ignores it',
    ]


def test_one_gpu_missing_versus_the_instance_type(facts):
    acc = facts(root='g5.12xlarge-one-gpu-missing', smi=('g5.12xlarge-three-gpus-v12.xml', 0))
    assert acc['ec2']['source'] == 'dmi'
    assert [(g['name'], g['memory_total_mib'], g['compute_capability'], g['numa_node'])
            for g in acc['nvidia']['gpus']] == [('NVIDIA A10G', 23028, '8.6', 0)] * 3
    assert acc['problems'] == ['g5.12xlarge should have 4 NVIDIA A10G GPU(s); the PCI bus shows 3']
    assert acc['container_runtimes']['containerd']['default_runtime'] == 'nvidia'
    assert acc['container_runtimes']['cdi_specs'] == [{'path': '/var/run/cdi/nvidia.yaml', 'kind': 'nvidia.com/gpu'}]


def test_gpu_bound_to_another_driver(facts, tmp_path):
    root = tmp_path / 'root'
    base = root / 'sys/bus/pci/devices/0000:00:1e.0'
    base.mkdir(parents=True)
    for name, value in (('vendor', '0x10de'), ('device', '0x2237'), ('class', '0x030200'), ('numa_node', '0')):
        (base / name).write_text(value + '\n')
    os.symlink('../../../../bus/pci/drivers/vfio-pci', base / 'driver')
    (root / 'proc/driver/nvidia').mkdir(parents=True)
    (root / 'proc/driver/nvidia/version').write_text(
        'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n')
    acc = facts(root=str(root))
    assert acc['problems'] == ['NVIDIA GPU 0000:00:1e.0 is bound to vfio-pci, not to nvidia']


# -- the real H200 tree ----------------------------------------------------------------

def test_h200_tree_with_its_real_nvidia_smi_capture(facts, no_imds):
    acc = facts(root='h200', smi=('h200-v13.xml', 0))
    assert acc['nvidia'] == {
        'driver_version': '580.159.04',
        'userspace_driver_version': '580.159.04',
        'cuda_version': '13.0',
        'kernel_module_flavor': 'open',
        'gpus': [{
            'index': 0,
            'name': 'NVIDIA H200',
            'uuid': 'GPU-92185b04-1559-f871-0910-0fb475d30f06',
            'pci_bus_id': '0000:00:06.0',
            'pci_device_id': '0x2335',
            'memory_total_mib': 143771,
            'compute_capability': '9.0',
            'mig_mode': 'disabled',
            'persistence_mode': True,
            'numa_node': None,
        }],
        # A single-GPU VM: no NVSwitch on its bus, no instance type to say otherwise.
        'nvswitch': {'present': False, 'generation': None, 'source': 'pci', 'devices': []},
    }
    assert acc['ec2'] == {'instance_type': None, 'source': None, 'expected': None}
    assert acc['sources']['dmi'] == 'missing'
    assert acc['problems'] == []


def test_h200_checked_as_one_gpu_of_a_p5e(facts):
    acc = facts(root='h200', smi=('h200-v13.xml', 0), instance_type='p5e.48xlarge')
    # 143771 MiB is within tolerance of the listed 141 GiB; only the count falls short.
    assert acc['problems'] == [
        'p5e.48xlarge carries NVSwitches (generation 3), but the PCI bus shows neither an NVSwitch '
        'nor an NVSwitch management bridge',
        'p5e.48xlarge should have 8 NVIDIA H200 GPU(s); the PCI bus shows 1',
    ]


# -- options ----------------------------------------------------------------------------

def test_gather_a_subset_runs_nothing_else(facts, calls):
    acc = facts(root='p3.16xlarge', smi=('p3.16xlarge-v11.xml', 0), gather=['pci'])
    assert calls() == []
    assert acc['sources'] == dict.fromkeys(_accelerators.SOURCES, 'skipped') | {'pci': 'ok'}
    assert [g['name'] for g in acc['nvidia']['gpus']] == [None] * 8
    assert acc['container_runtimes'] is None
    assert acc['observed'] == {'kernel_modules': None, 'device_nodes': None}
    assert acc['problems'] == []


def test_commands_are_not_run_under_another_root_without_an_explicit_path(facts, calls):
    acc = facts(root='p3.16xlarge')
    assert calls() == []
    assert acc['sources']['nvidia_smi'] == 'skipped'
    assert [g['name'] for g in acc['nvidia']['gpus']] == ['Tesla V100-SXM2-16GB'] * 8   # from procfs


def test_a_wrong_nvidia_smi_path_is_a_problem_not_a_failure(facts, tmp_path):
    acc = facts(root='h200', nvidia_smi_path=str(tmp_path / 'nvidia-smi'))
    assert acc['sources']['nvidia_smi'] == 'missing'
    assert acc['problems'] == ['nvidia_smi_path %s is not an executable file' % (tmp_path / 'nvidia-smi')]


def test_an_nvidia_smi_that_cannot_be_executed_is_an_error_not_a_crash(facts, tmp_path):
    broken = tmp_path / 'nvidia-smi'
    broken.write_bytes(b'\x7fELF truncated')
    broken.chmod(0o755)
    acc = facts(root='h200', nvidia_smi_path=str(broken))
    assert acc['sources']['nvidia_smi'].startswith('error: ')
    assert acc['nvidia']['gpus'][0]['name'] == 'NVIDIA H200'     # from procfs


def test_on_slash_nvidia_smi_is_found_on_path(facts, calls, monkeypatch):
    monkeypatch.setenv('PATH', str(TESTS / 'doubles' / 'replay') + os.pathsep + os.environ['PATH'])
    monkeypatch.setenv('ACCEL_NVIDIA_SMI_OUTPUT', str(SMI / 'h200-v13.xml'))
    # Without the PCI scan, nvidia-smi is the only way to know, so it runs.
    acc = facts(gather=['nvidia_smi'])
    assert calls() == ['nvidia-smi -q -x LANG=C LC_ALL=C']
    assert [g['name'] for g in acc['nvidia']['gpus']] == ['NVIDIA H200']


def test_check_mode_reports_the_same_and_writes_nothing(fact_roots, facts, tmp_path):
    before = tree_digest(fact_roots / 'g5.12xlarge-one-gpu-missing')
    normal = facts(root='g5.12xlarge-one-gpu-missing', smi=('g5.12xlarge-three-gpus-v12.xml', 0))
    checked = facts(root='g5.12xlarge-one-gpu-missing', smi=('g5.12xlarge-three-gpus-v12.xml', 0),
                    _ansible_check_mode=True)
    assert checked == normal
    assert tree_digest(fact_roots / 'g5.12xlarge-one-gpu-missing') == before


def test_result_is_plain_json(facts):
    acc = facts(root='h200', smi=('h200-v13.xml', 0))
    assert json.loads(json.dumps(acc)) == acc


# -- EC2 identity on '/' -------------------------------------------------------------------

XEN_EC2 = {'sys_vendor': 'Xen', 'board_vendor': None, 'product_name': 'HVM domU',
           'hypervisor_uuid': 'ec2b6e24-3d4e-8f1a-9c2b-5d6e7f809a1b'}
NITRO_EC2 = {'sys_vendor': 'Amazon EC2', 'board_vendor': 'Amazon EC2', 'product_name': 'g5.12xlarge',
             'hypervisor_uuid': None}
NOT_EC2 = {'sys_vendor': 'QEMU', 'board_vendor': None, 'product_name': 'Standard PC', 'hypervisor_uuid': None}


@pytest.fixture
def on_slash(monkeypatch, fake_imds):
    """Run on '/' with the given DMI, asking the fake IMDS instead of EC2's."""
    monkeypatch.setattr(_ec2, 'IMDS_ENDPOINT', fake_imds.endpoint)

    def _dmi(dmi):
        monkeypatch.setattr(_ec2, 'read_dmi', lambda root: dmi)
        return fake_imds
    return _dmi


def test_ec2_xen_instance_asks_imds(facts, on_slash):
    imds = on_slash(XEN_EC2)
    acc = facts(gather=['ec2'])
    assert acc['ec2']['instance_type'] == 'p3.8xlarge'
    assert acc['ec2']['source'] == 'imds'
    assert acc['ec2']['expected']['count'] == 4
    assert acc['sources']['imds'] == 'ok'
    assert [r[0] for r in imds.requests] == ['PUT', 'GET']


def test_ec2_imds_answer_wins_over_dmi(facts, on_slash, monkeypatch):
    imds = on_slash(NITRO_EC2)
    monkeypatch.setattr(imds, 'instance_type', 'g5.24xlarge')
    acc = facts(gather=['ec2'])
    assert (acc['ec2']['instance_type'], acc['ec2']['source']) == ('g5.24xlarge', 'imds')


def test_ec2_dmi_when_imds_refuses(facts, on_slash, monkeypatch):
    imds = on_slash(NITRO_EC2)
    monkeypatch.setattr(imds, 'token_status', 403)
    acc = facts(gather=['ec2'])
    assert (acc['ec2']['instance_type'], acc['ec2']['source']) == ('g5.12xlarge', 'dmi')
    assert acc['sources']['imds'] == 'HTTP 403 from IMDS'


def test_not_ec2_never_asks_imds(facts, on_slash):
    imds = on_slash(NOT_EC2)
    acc = facts(gather=['ec2'])
    assert acc['ec2'] == {'instance_type': None, 'source': None, 'expected': None}
    assert acc['sources']['imds'] == 'skipped'
    assert imds.requests == []


def test_gather_imds_asks_even_when_dmi_says_nothing(facts, on_slash):
    imds = on_slash(None)
    acc = facts(gather=['imds'])
    assert (acc['ec2']['instance_type'], acc['ec2']['source']) == ('p3.8xlarge', 'imds')
    assert acc['sources']['dmi'] == 'missing'
    assert len(imds.requests) == 2


def test_imds_timeout_zero_and_the_option_both_keep_imds_out(facts, on_slash):
    imds = on_slash(XEN_EC2)
    assert facts(gather=['ec2'], imds_timeout=0)['sources']['imds'] == 'skipped'
    acc = facts(gather=['ec2', 'imds'], instance_type='trn1.32xlarge')
    assert (acc['ec2']['instance_type'], acc['ec2']['source']) == ('trn1.32xlarge', 'option')
    assert acc['ec2']['expected'] == {'vendor': 'neuron', 'devices': 16, 'cores': 32}
    assert imds.requests == []


# -- the module's answer on the real H200 host ---------------------------------------------

def test_fake_h200_tree_answers_as_the_real_host_did(facts):
    """The module, run on the H200's sysfs tree and captured nvidia-smi XML, gives what Ansible
    got back on the real host (tests/fixtures/facts/h200-real-run.json), but for the GPU's UUID.
    The module's code runs here; the captured answer is what it must reproduce."""
    real = json.loads((FACTS / 'h200-real-run.json').read_text())['ansible_facts']['accelerators']
    fake = facts(root='h200', smi=('h200-v13.xml', 0))
    real['nvidia']['gpus'][0]['uuid'] = fake['nvidia']['gpus'][0]['uuid']
    # The capture (2026-11-21) predates nvidia.nvswitch; the VM has no switch.
    assert fake['nvidia'].pop('nvswitch') == {'present': False, 'generation': None, 'source': 'pci', 'devices': []}
    assert fake == real


# -- NVSwitch fabrics ---------------------------------------------------------------

def test_p5_48xlarge_nvswitches_on_the_pci_bus(facts, no_imds):
    acc = facts(root='p5.48xlarge', gather=['pci', 'nvidia_procfs', 'kernel_modules', 'ec2'])
    assert acc['ec2']['instance_type'] == 'p5.48xlarge' and acc['ec2']['source'] == 'dmi'
    assert len(acc['nvidia']['gpus']) == 8
    assert {g['compute_capability'] for g in acc['nvidia']['gpus']} == {'9.0'}
    assert acc['nvidia']['nvswitch'] == {
        'present': True, 'generation': 3, 'source': 'pci',
        'devices': ['0000:07:00.0', '0000:08:00.0', '0000:09:00.0', '0000:0a:00.0']}
    assert acc['nvidia']['driver_version'] == '580.95.05'
    assert acc['problems'] == []


def test_p6_b200_management_bridge_and_blackwell(facts, no_imds):
    acc = facts(root='p6-b200.48xlarge', gather=['pci', 'ec2'])
    assert {g['compute_capability'] for g in acc['nvidia']['gpus']} == {'10.0'}
    assert acc['nvidia']['nvswitch'] == {
        'present': True, 'generation': 4, 'source': 'pci', 'devices': ['0000:03:00.0']}


def test_nvswitch_override_and_a_p3_without_fabric(facts, no_imds):
    acc = facts(root='p3.16xlarge', gather=['pci'], instance_type='p3.16xlarge')
    assert acc['nvidia']['nvswitch'] == {'present': False, 'generation': None, 'source': 'pci', 'devices': []}
    acc = facts(root='p3.16xlarge', gather=['pci'], nvswitch=True)
    assert acc['nvidia']['nvswitch']['present'] is True and acc['nvidia']['nvswitch']['source'] == 'option'


def test_p6e_gb200_fabric_is_not_the_hosts_even_when_baking(facts, no_imds, tmp_path):
    # Baking: a build host without GPUs. P6e-GB200's switches are managed in the rack, so no Fabric Manager.
    (tmp_path / 'root/sys/bus/pci/devices').mkdir(parents=True)
    acc = facts(root=str(tmp_path / 'root'), gather=['pci'], instance_type='p6e-gb200.36xlarge')
    assert acc['ec2']['expected'] == {'vendor': 'nvidia', 'model': 'GB200', 'count': 4, 'memory_mib_each': 189440}
    assert acc['nvidia']['nvswitch'] == {'present': False, 'generation': None, 'source': 'pci', 'devices': []}
    # A P6-B300 bake trusts the catalog's fourth-generation fabric, as a P6-B200 one does.
    acc = facts(root=str(tmp_path / 'root'), gather=['pci'], instance_type='p6-b300.48xlarge')
    assert acc['nvidia']['nvswitch'] == {'present': True, 'generation': 4, 'source': 'ec2', 'devices': []}


def test_baking_for_a_p5_on_the_h200_tree_asks_the_catalog(facts, no_imds):
    # The H200 host has one GPU and no switch: as a p5e.48xlarge it falls short.
    acc = facts(root='h200', gather=['pci'], instance_type='p5e.48xlarge')
    assert acc['nvidia']['nvswitch']['source'] == 'ec2'
    assert any('carries NVSwitches' in p for p in acc['problems'])
