# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The host findings of accel.nodes.diagnose (issue 28): DKMS and headers, nouveau, Secure Boot, missing GPUs and
Fabric Manager, on real DKMS captures, the accelerator facts gathered from the documented fake roots, real nvidia-smi
captures and the efivarfs layout. tests/fixtures/diagnose/host/README.md names each source."""

from __future__ import annotations

import os
import sys
import re
from pathlib import Path

from ansible_collections.accel.nodes.plugins.filter import diagnose
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose, _diagnose_host

sys.path.insert(0, os.path.dirname(__file__))
from diagnose_shape import gather, ids  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
HOST = FIXTURES / 'diagnose' / 'host'
DKMS = FIXTURES / 'dkms'
SMI = FIXTURES / 'facts' / 'commands' / 'nvidia-smi'
FIND = (HOST / 'find-kernel-files-nvidia_driver.txt').read_text()
GREP = (HOST / 'grep-nouveau-nvidia_driver.txt').read_text()
INSTALLED = ['6.1.0-98-cloud-amd64', '6.1.0-99-cloud-amd64']
RUNNING = '6.18.44-fc-v657'


def latin(path):
    """An efivarfs file as node_probe gives it: its bytes, each one character (they are all ASCII)."""
    return path.read_bytes().decode('latin-1')


def command(stdout='', rc=0, stderr=''):
    return {'rc': rc, 'stdout': stdout.strip(), 'stderr': stderr}


def probe(facts, commands=None, paths=None, packages=None, directories=None):
    """A node_probe result: the facts, and what the commands and paths gave (the rest not found)."""
    return {'ansible_facts': {'accelerators': facts}, 'commands': commands or {}, 'paths': paths or {},
            'packages': packages or {}, 'directories': directories or {}}


def no_facts():
    return {'vendors': [], 'nvidia': {'gpus': [], 'nvswitch': {'present': False}}, 'sources': {'pci': 'ok'},
            'observed': {'kernel_modules': []}}


# -- kernels and DKMS -------------------------------------------------------------------------------------------------

def test_kernels_are_the_installed_ones_that_could_boot_with_their_headers():
    # The nvidia_driver scenario's node, captured: 98 has an image, 99 headers only (a target, not bootable).
    assert _diagnose_host.kernels(RUNNING, INSTALLED, FIND) == [
        {'version': '6.1.0-98-cloud-amd64', 'image': '/boot/vmlinuz-6.1.0-98-cloud-amd64', 'headers': True,
         'running': False}]
    # RHEL 9 ships the image in /lib/modules/<v>; the running kernel counts where it is installed.
    assert _diagnose_host.kernels('5.14.0-1.el9', ['5.14.0-1.el9', '5.14.0-2.el9'],
                                  '/lib/modules/5.14.0-2.el9/vmlinuz\n/lib/modules/5.14.0-2.el9/build/include') == [
        {'version': '5.14.0-1.el9', 'image': None, 'headers': False, 'running': True},
        {'version': '5.14.0-2.el9', 'image': '/lib/modules/5.14.0-2.el9/vmlinuz', 'headers': True,
         'running': False}]


def test_the_converged_node_has_no_dkms_finding():
    status = '%s\nnvidia-current/580.95.05, 6.1.0-98-cloud-amd64, x86_64: installed' % (
        DKMS / 'status-dkms3-installed.txt').read_text()
    assert _diagnose_host.dkms_findings(RUNNING, INSTALLED, FIND, status) == []


def test_a_bootable_kernel_without_the_module_is_named_with_the_command_that_builds_it():
    # Real dkms 3.0.10 output: the module installed for 99 only (status-dkms3-installed.txt).
    found = _diagnose_host.dkms_findings(RUNNING, INSTALLED, FIND, (DKMS / 'status-dkms3-installed.txt').read_text())
    assert ids(found) == ['kernel.dkms.missing']
    assert found[0]['severity'] == 'will_break'
    assert 'nvidia-current/580.95.05' in found[0]['summary'] and '6.1.0-98-cloud-amd64' in found[0]['summary']
    assert 'dkms autoinstall -k 6.1.0-98-cloud-amd64' in found[0]['fix']
    assert 'accel.nodes.nvidia_driver' in found[0]['fix']
    assert 'headers are missing' not in found[0]['fix']


def test_built_is_not_installed_and_a_kernel_without_headers_says_so():
    # 6.1.0-97 built, not installed (real capture); it has an image and no headers here.
    found = _diagnose_host.dkms_findings(None, ['6.1.0-97-cloud-amd64'], '/boot/vmlinuz-6.1.0-97-cloud-amd64',
                                         (DKMS / 'status-dkms3-built-and-diff.txt').read_text())
    assert ids(found) == ['kernel.dkms.missing']
    assert 'dkms status: nvidia-current/580.95.05, 6.1.0-97-cloud-amd64: built' in found[0]['evidence']
    assert 'install linux-headers-6.1.0-97-cloud-amd64' in found[0]['fix']


def test_the_running_kernel_without_the_module_is_broken():
    found = _diagnose_host.dkms_findings('6.1.0-98-cloud-amd64', INSTALLED, FIND,
                                         (DKMS / 'status-dkms3-added.txt').read_text())
    assert ids(found) == ['kernel.dkms.missing'] and found[0]['severity'] == 'broken'
    assert 'the running kernel' in found[0]['summary']


def test_missing_headers_of_a_kernel_with_the_module_will_break_the_next_build():
    status = 'nvidia-current/580.95.05, 6.1.0-98-cloud-amd64, x86_64: installed'
    files = FIND.replace('/lib/modules/6.1.0-98-cloud-amd64/build/include\n', '')
    found = _diagnose_host.dkms_findings(RUNNING, INSTALLED, files, status)
    assert ids(found) == ['kernel.headers.missing']
    assert found[0]['severity'] == 'will_break'
    assert 'linux-headers-6.1.0-98-cloud-amd64' in found[0]['fix']


def test_no_dkms_finding_without_an_nvidia_dkms_module():
    # Only Neuron's module (the two-modules capture without its nvidia line), or no module at all, or no dkms.
    neuron_only = '\n'.join(line for line in (DKMS / 'status-dkms3-two-modules.txt').read_text().splitlines()
                            if 'nvidia' not in line)
    assert _diagnose_host.dkms_findings(RUNNING, INSTALLED, FIND, neuron_only) == []
    assert _diagnose_host.dkms_findings(RUNNING, INSTALLED, FIND, (DKMS / 'status-dkms3-empty.txt').read_text()) == []
    node = probe(no_facts(), commands={'host_dkms_status': command('', 127), 'host_kernel_files': command(FIND)},
                 directories={'/lib/modules': dict.fromkeys(INSTALLED)})
    assert _diagnose_host.findings(node, {}) == []


# -- nouveau ----------------------------------------------------------------------------------------------------------

def test_nouveau_loaded_on_a_gpu_node_is_broken(fact_roots):
    # The documented g4dn.xlarge with nouveau bound: /proc/modules lists it.
    facts = gather(fact_roots / 'g4dn.xlarge-nouveau')
    assert 'nouveau' in facts['observed']['kernel_modules']
    found = _diagnose_host.findings(probe(facts, commands={'host_nouveau_config': command(GREP)}), {})
    assert ids(found) == ['kernel.nouveau.loaded']
    assert found[0]['severity'] == 'broken'
    assert 'blacklist-nouveau.conf' in found[0]['fix'] and 'reboot' in found[0]['fix']


# A kernel that ships nouveau: the path of Documentation/kbuild/modules.rst ("Module Installation"), xz-compressed.
NOUVEAU_KO = command('/lib/modules/6.1.0-98-amd64/kernel/drivers/gpu/drm/nouveau/nouveau.ko.xz')


def test_nouveau_not_blacklisted_where_the_nvidia_driver_is(fact_roots):
    facts = gather(fact_roots / 'p3.16xlarge')
    assert facts['nvidia']['driver_version']
    none = command('', 1)
    found = _diagnose_host.findings(probe(facts, commands={'host_nouveau_config': none, 'host_nouveau_modules': NOUVEAU_KO}), {})
    assert ids(found) == ['kernel.nouveau.not_blacklisted']
    assert found[0]['severity'] == 'will_break'
    assert found[0]['evidence'][0] == NOUVEAU_KO['stdout']
    assert 'update-initramfs -u' in found[0]['fix'] and 'nvidia_driver_blacklist_nouveau' in found[0]['fix']
    # The collection's file (real, from the nvidia_driver scenario), NVIDIA installer's, or the kernel command line.
    blacklists = [command(GREP), command('/etc/modprobe.d/nvidia-installer-disable-nouveau.conf:blacklist nouveau')]
    for config in blacklists:
        assert _diagnose_host.findings(probe(facts, commands={'host_nouveau_config': config, 'host_nouveau_modules': NOUVEAU_KO}), {}) == []
    cmdline = {'/proc/cmdline': {'exists': True, 'text': 'BOOT_IMAGE=/vmlinuz ro modprobe.blacklist=nouveau\n'}}
    assert _diagnose_host.findings(probe(facts, commands={'host_nouveau_config': none, 'host_nouveau_modules': NOUVEAU_KO},
                                         paths=cmdline), {}) == []


def test_no_nouveau_finding_where_no_kernel_has_nouveau(fact_roots):
    # The real H200 node (tests/fixtures/hardware/h200-2026-11-28-issue28/): the host's driver, a kernel whose
    # modules are not in the node, nothing blacklists nouveau. find prints nothing (or fails without /lib/modules).
    facts = gather(fact_roots / 'p3.16xlarge')
    for found_none in (command(''), command('', 1, "find: '/lib/modules': No such file or directory"), None):
        commands = {'host_nouveau_config': command('', 1)}
        if found_none is not None:
            commands['host_nouveau_modules'] = found_none
        assert _diagnose_host.findings(probe(facts, commands=commands), {}) == []
    # A comment or an options line alone does not blacklist it.
    assert _diagnose_host.nouveau_blacklisted('/etc/modprobe.d/x.conf:options nouveau modeset=0', '') == []


def test_no_nouveau_finding_without_nvidia_gpus_or_without_the_nvidia_driver(fact_roots):
    assert _diagnose_host.findings(probe(no_facts(), commands={'host_nouveau_config': command('', 1)}), {}) == []
    # GPUs on the bus, no NVIDIA driver at all: nouveau is the driver, and that is no fault here.
    facts = gather(fact_roots / 'g4dn.xlarge-driver-not-loaded')
    assert facts['vendors'] == ['nvidia'] and not facts['nvidia']['driver_version']
    assert _diagnose_host.findings(probe(facts, commands={'host_nouveau_config': command('', 1)}), {}) == []


# -- Secure Boot ------------------------------------------------------------------------------------------------------

def test_secure_boot_on_and_an_unsigned_module_that_is_not_loaded():
    on, off, user = (latin(HOST / n) for n in ('efivar-SecureBoot-on', 'efivar-SecureBoot-off',
                                               'efivar-SetupMode-user'))
    assert (_diagnose_host.efi_value(on), _diagnose_host.efi_value(off)) == (1, 0)
    unsigned = command('')
    found = _diagnose_host.secure_boot_findings(on, user, unsigned, nvidia_loaded=False)
    assert ids(found) == ['kernel.secure_boot.unsigned'] and found[0]['severity'] == 'broken'
    assert 'mokutil --import' in found[0]['fix']
    assert _diagnose_host.secure_boot_findings(off, user, unsigned, False) == []
    assert _diagnose_host.secure_boot_findings(on, on, unsigned, False) == []  # setup mode: not enforcing
    assert _diagnose_host.secure_boot_findings(on, user, command('Build time autogenerated kernel key'), False) == []
    assert _diagnose_host.secure_boot_findings(on, user, command('', 1, 'modinfo: ERROR: Module nvidia not found.'),
                                               False) == []
    assert _diagnose_host.secure_boot_findings(on, user, unsigned, nvidia_loaded=True) == []
    assert _diagnose_host.secure_boot_findings(None, None, unsigned, False) == []


# -- GPUs missing -------------------------------------------------------------------------------------------------------

def test_a_gpu_on_the_bus_that_nvidia_smi_lost(fact_roots):
    facts = gather(fact_roots / 'p3.16xlarge')
    # p3.16xlarge-v11.xml without its GPU 00:1E.0, and the lost-GPU line of rc15-gpu-lost.txt, exit status 15.
    xml = re.sub(r'\s*<gpu id="00000000:00:1E.0">.*?</gpu>', '', (SMI / 'p3.16xlarge-v11.xml').read_text(),
                 flags=re.S)
    assert xml.count('<gpu id=') == 7
    smi = command(xml + '\n' + (SMI / 'rc15-gpu-lost.txt').read_text(), 15)
    found = _diagnose_host.findings(probe(facts, commands={'nvidia_smi_xml': smi}), {})
    assert ids(found) == ['gpu.missing'] and found[0]['severity'] == 'broken'
    assert found[0]['summary'].startswith('1 of the 8 NVIDIA GPU(s) on the PCI bus are missing from nvidia-smi')
    assert found[0]['evidence'] == ['PCI bus: NVIDIA GPU 0000:00:1e.0; nvidia-smi -q -x: lost: GPU is lost.  Reboot '
                                    'the system to recover this GPU']
    assert 'reboot' in found[0]['fix']
    whole = command((SMI / 'p3.16xlarge-v11.xml').read_text())
    assert _diagnose_host.findings(probe(facts, commands={'nvidia_smi_xml': whole}), {}) == []


def test_fewer_gpus_on_the_bus_than_the_instance_type_has(fact_roots):
    facts = gather(fact_roots / 'g5.12xlarge-one-gpu-missing')
    smi = command((SMI / 'g5.12xlarge-three-gpus-v12.xml').read_text())
    found = _diagnose_host.findings(probe(facts, commands={'nvidia_smi_xml': smi}), {})
    assert ids(found) == ['gpu.missing']
    assert found[0]['evidence'] == ['g5.12xlarge has 4 A10G GPU(s) (EC2 catalog); the PCI bus shows 3']


def test_no_missing_gpu_where_nvidia_smi_gave_no_list(fact_roots):
    facts = gather(fact_roots / 'g4dn.xlarge-driver-not-loaded')
    for smi in (command((SMI / 'rc9-driver-not-loaded.txt').read_text(), 9), command('', 127), None):
        node = probe(facts, commands={'nvidia_smi_xml': smi} if smi else {})
        assert 'gpu.missing' not in ids(_diagnose_host.findings(node, {}))


# -- Fabric Manager -----------------------------------------------------------------------------------------------------

ACTIVE = 'LoadState=loaded\nActiveState=active\nSubState=running\nResult=success'
FAILED = 'LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code'


def p5_probe(fact_roots, unit=ACTIVE, fm='580.95.05-1', xml='nvidia-smi-h200-v13-fabric-completed.xml'):
    """The documented p5.48xlarge tree's facts, driver 580.95.05 loaded, with what Fabric Manager and nvidia-smi say
    (the real H200 capture, its fabric element set as README.md says)."""
    return probe(gather(fact_roots / 'p5.48xlarge'),
                 commands={'host_fabricmanager_unit': command(unit),
                           'nvidia_smi_xml': command((HOST / xml).read_text())},
                 packages={'nvidia-fabricmanager': {'version': fm, 'selection': 'hold', 'status': 'installed'}},
                 paths={_diagnose.SYS_VERSION: {'exists': True, 'text': '580.95.05\n'}})


def fabric_ids(node):
    return [i for i in ids(_diagnose_host.findings(node, {})) if i.startswith('fabric.')]


def test_a_healthy_fabric_has_no_finding(fact_roots):
    node = p5_probe(fact_roots)
    assert node['ansible_facts']['accelerators']['nvidia']['nvswitch']['present']
    assert fabric_ids(node) == []


def test_fabric_manager_down_at_another_version_and_the_fabric_not_ready(fact_roots):
    node = p5_probe(fact_roots, unit=FAILED, fm='580.82.07-1', xml='nvidia-smi-h200-v13-fabric-in-progress.xml')
    found = [f for f in _diagnose_host.findings(node, {}) if f['id'].startswith('fabric.')]
    assert ids(found) == ['fabric.manager.down', 'fabric.manager.version', 'fabric.state']
    assert all(f['severity'] == 'broken' for f in found)
    assert found[0]['evidence'] == ['systemctl show nvidia-fabricmanager: LoadState=loaded, ActiveState=failed, '
                                    'SubState=failed, Result=exit-code']
    assert found[1]['summary'].startswith('Fabric Manager is 580.82.07, but the loaded NVIDIA driver is 580.95.05')
    assert 'accel.nodes.nvidia_driver' in found[0]['fix'] and 'accel.nodes.nvidia_driver' in found[1]['fix']
    assert found[2]['evidence'][0].endswith('GPU 0000:00:06.0: fabric state In Progress, status (none)')


def test_fabric_manager_not_installed_is_down(fact_roots):
    node = p5_probe(fact_roots, unit='LoadState=not-found\nActiveState=inactive\nSubState=dead\nResult=success')
    node['packages'] = {}
    assert fabric_ids(node) == ['fabric.manager.down']


def test_no_fabric_finding_off_nvswitch(fact_roots):
    # The real H200's fabric state is N/A; the p3.16xlarge has no NVSwitch, whatever Fabric Manager does.
    facts = gather(fact_roots / 'p3.16xlarge')
    assert not facts['nvidia']['nvswitch']['present']
    node = probe(facts, commands={'host_fabricmanager_unit': command(FAILED)},
                 packages={'nvidia-fabricmanager': {'version': '1.0-1', 'status': 'installed'}})
    assert fabric_ids(node) == []
    # nvidia-smi's N/A is no value (_nvidia): the real H200's fabric element gives no state at all.
    assert _diagnose_host.fabric_states((SMI / 'h200-v13.xml').read_text()) == []


# -- the filter ---------------------------------------------------------------------------------------------------------

def test_the_probe_names_no_command_of_another_area():
    merged = diagnose.diagnose_probe({})
    for name, argv in _diagnose_host.PROBE['commands'].items():
        assert name.startswith('host_') and merged['commands'][name] == argv
    assert '/lib/modules' in merged['directories']


def test_the_filter_reports_the_host_findings(fact_roots):
    node = p5_probe(fact_roots, unit=FAILED)
    node.update(paths=dict(node['paths']), directories={}, executables={})
    assert 'fabric.manager.down' in [f['id'] for f in diagnose.diagnose_findings(node)]


def test_the_headers_package_follows_the_distribution_of_os_release():
    # The real Debian 12 os-release of tests/fixtures/state; Amazon Linux 2023's newer kernels have their own series.
    assert _diagnose_host.os_release_id((FIXTURES / 'state' / 'os-release').read_text()) == 'debian'
    assert _diagnose_host.os_release_id('NAME="Amazon Linux"\nID="amzn"\n') == 'amzn'
    kernel = '6.12.40-63.114.amzn2023.x86_64'
    found = _diagnose_host.dkms_findings(None, [kernel], '/lib/modules/%s/vmlinuz' % kernel,
                                         'nvidia/580.95.05, %s, x86_64: installed' % kernel, 'amzn')
    assert ids(found) == ['kernel.headers.missing']
    assert found[0]['fix'].startswith('Install kernel6.12-devel-%s:' % kernel)


def test_the_running_kernel_without_the_module_while_nvidia_is_loaded_breaks_at_the_next_load():
    found = _diagnose_host.dkms_findings('6.1.0-98-cloud-amd64', INSTALLED, FIND,
                                         (DKMS / 'status-dkms3-added.txt').read_text(), 'debian', nvidia_loaded=True)
    assert ids(found) == ['kernel.dkms.missing'] and found[0]['severity'] == 'will_break'
