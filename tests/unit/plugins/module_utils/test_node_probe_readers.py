# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ansible_collections.accel.nodes.plugins.module_utils import _node_probe

FIXTURES = Path(__file__).parents[3] / 'fixtures'


def test_the_converged_inf1_node_holds_its_neuron_and_kernel_packages():
    text = (FIXTURES / 'neuron' / 'dpkg-status-inf1-converged').read_text()
    found = _node_probe.parse_dpkg_status(text, ['^aws-neuron', '^linux-(image|headers)-'])
    assert found['aws-neuronx-dkms'] == {'version': '2.24.13.0', 'selection': 'hold', 'status': 'installed'}
    assert found['aws-neuron-runtime-base']['version'] == '1.0.7173.0'
    assert sorted(n for n in found if n.startswith('linux-')) == [
        'linux-headers-6.1.0-98-cloud-amd64', 'linux-headers-6.1.0-99-cloud-amd64', 'linux-image-6.1.0-98-cloud-amd64']
    assert 'dkms' not in found  # no pattern matches it


def test_a_package_removed_without_purge_is_reported_as_config_files_and_a_purged_one_not_at_all():
    text = ('Package: aws-neuron-tools\nStatus: deinstall ok config-files\nVersion: 2.1.4.0\n\n'
            'Package: aws-neuron-dkms\nStatus: purge ok not-installed\n\n'
            'Package: aws-neuronx-tools\nStatus: install ok installed\nVersion: 2.29.18.0\n'
            'Description: Neuron tools\n continued: line with a colon\n')
    found = _node_probe.parse_dpkg_status(text, ['^aws-'])
    assert found == {'aws-neuron-tools': {'version': '2.1.4.0', 'selection': 'deinstall', 'status': 'config-files'},
                     'aws-neuronx-tools': {'version': '2.29.18.0', 'selection': 'install', 'status': 'installed'}}


def test_a_multi_arch_package_counts_once_with_its_installed_architecture():
    """libcuda1 of Debian's non-free driver, amd64 installed, i386 left as configuration: one entry, the
    installed one, as dpkg_holds and engine_state read the same file (_dpkg.parse_status)."""
    text = ('Package: libcuda1\nStatus: install ok installed\nArchitecture: amd64\nMulti-Arch: same\n'
            'Version: 535.216.01-1~deb12u1\n\n'
            'Package: libcuda1\nStatus: deinstall ok config-files\nArchitecture: i386\nMulti-Arch: same\n'
            'Version: 535.183.01-1~deb12u1\n')
    assert _node_probe.parse_dpkg_status(text, ['^libcuda']) == {
        'libcuda1': {'version': '535.216.01-1~deb12u1', 'selection': 'install', 'status': 'installed'}}


def test_rpm_query_gives_version_release_as_dnf_pins_are_written():
    # issue 25: with the version alone, a toolkit pinned at 1.17.8-1 was never "at the pin" on dnf.
    out = ('aws-neuronx-dkms\t2.27.4.0\t1\nkernel-core\t6.1.102\t108.177.amzn2023\nbash\t5.2.15\t1.amzn2023\n'
           'nvidia-container-toolkit\t1.17.8\t1\ngarbage line\n')
    found = _node_probe.parse_rpm_query(out, ['^aws-neuron', '^kernel', '^nvidia-container-toolkit$'])
    assert found == {
        'aws-neuronx-dkms': {'version': '2.27.4.0-1', 'release': '1', 'selection': None, 'status': 'installed'},
        'kernel-core': {'version': '6.1.102-108.177.amzn2023', 'release': '108.177.amzn2023', 'selection': None,
                        'status': 'installed'},
        'nvidia-container-toolkit': {'version': '1.17.8-1', 'release': '1', 'selection': None, 'status': 'installed'}}


def test_describe_gives_kind_mode_owner_checksum_and_small_text(tmp_path):
    script = tmp_path / 'update-pciids'
    script.write_text('#!/bin/sh\nexit 0\n')
    script.chmod(0o755)
    info = _node_probe.describe(str(script))
    assert info['exists'] and info['type'] == 'file' and info['mode'] == '0755' and info['executable']
    assert info['uid'] == os.getuid()
    assert info['sha256'] == hashlib.sha256(b'#!/bin/sh\nexit 0\n').hexdigest()
    assert info['text'] == '#!/bin/sh\nexit 0\n'
    assert _node_probe.describe(str(tmp_path))['type'] == 'directory'
    assert _node_probe.describe(str(tmp_path / 'missing')) == dict(
        path=str(tmp_path / 'missing'), exists=False, type=None, mode=None, uid=None, gid=None, executable=False,
        sha256=None, text=None)


def test_a_large_or_binary_file_is_described_but_not_read(tmp_path):
    big = tmp_path / 'big'
    big.write_bytes(b'x' * (_node_probe.TEXT_LIMIT + 1))
    info = _node_probe.describe(str(big))
    assert info['text'] is None and info['sha256'] == hashlib.sha256(b'x' * (_node_probe.TEXT_LIMIT + 1)).hexdigest()
    binary = tmp_path / 'bin'
    binary.write_bytes(b'\x7fELF\xff\xfe')
    assert _node_probe.describe(str(binary))['text'] is None


def test_only_an_executable_regular_file_counts_links_followed(tmp_path):
    plain = tmp_path / 'plain'
    plain.write_text('x')
    runc = tmp_path / 'runc'
    runc.write_text('#!/bin/sh\n')
    runc.chmod(0o755)
    link = tmp_path / 'link'
    link.symlink_to(runc)
    directory = tmp_path / 'dir'
    directory.mkdir()
    directory.chmod(0o755)
    candidates = [str(tmp_path / 'missing'), str(plain), str(directory), str(link), str(runc)]
    assert _node_probe.first_executable(candidates) == str(link)
    assert _node_probe.first_executable(candidates[:3]) == ''


def test_distribution_facts_import_only_the_collectors_they_call():
    # A fresh interpreter, as a module run is: the facts package's __init__ (compat,
    # default_collectors and every collector behind them) must not run, and the facts
    # must still be setup's.
    import json
    import subprocess
    import sys
    code = ('import json, sys\n'
            'from ansible_collections.accel.nodes.plugins.module_utils import _node_probe\n'
            'class M:\n'
            '    def get_bin_path(self, *a, **k): return None\n'
            '    def run_command(self, *a, **k): return 1, "", ""\n'
            'facts = _node_probe.distribution_facts(M())\n'
            'loaded = sorted(m for m in sys.modules if m.startswith("ansible.module_utils.facts"))\n'
            'print(json.dumps({"facts": facts, "loaded": loaded}, default=str))\n')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True,
                         env=dict(os.environ)).stdout
    answer = json.loads(out)
    assert 'ansible.module_utils.facts.compat' not in answer['loaded']
    assert 'ansible.module_utils.facts.default_collectors' not in answer['loaded']
    assert 'ansible.module_utils.facts.hardware.linux' not in answer['loaded']
    assert len(answer['loaded']) < 15, answer['loaded']
    for key in ('os_family', 'distribution', 'distribution_major_version', 'architecture', 'kernel', 'pkg_mgr'):
        assert key in answer['facts'], key
