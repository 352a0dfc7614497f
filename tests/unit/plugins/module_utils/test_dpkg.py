# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg

# Stanzas as dpkg 1.21 (Debian 12) writes /var/lib/dpkg/status, fields cut to the ones read:
# an installed package, a Multi-Arch package installed for two architectures, one held,
# one removed with its configuration kept, one a failed upgrade left half-configured.
STATUS = """Package: adduser
Status: install ok installed
Priority: important
Version: 3.134

Package: libnvidia-compute-580
Status: hold ok installed
Architecture: amd64
Version: 580.95.05-1

Package: libnvidia-compute-580
Status: hold ok installed
Architecture: i386
Version: 580.95.05-1

Package: linux-image-6.1.0-27-cloud-amd64
Status: deinstall ok config-files
Version: 6.1.115-1

Package: nvidia-kernel-dkms
Status: install reinstreq half-configured
Version: 580.95.05-1
"""


def test_parse_status_keeps_the_version_the_selection_and_the_state():
    packages = _dpkg.parse_status(STATUS)
    assert packages == {
        'adduser': {'version': '3.134', 'selection': 'install', 'status': 'installed'},
        'libnvidia-compute-580': {'version': '580.95.05-1', 'selection': 'hold', 'status': 'installed'},
        'linux-image-6.1.0-27-cloud-amd64': {'version': '6.1.115-1', 'selection': 'deinstall',
                                             'status': 'config-files'},
        'nvidia-kernel-dkms': {'version': '580.95.05-1', 'selection': 'install', 'status': 'half-configured'},
    }


def test_installed_leaves_out_what_has_no_files_on_disk():
    assert _dpkg.installed(_dpkg.parse_status(STATUS)) == ['adduser', 'libnvidia-compute-580', 'nvidia-kernel-dkms']


def test_an_installed_architecture_wins_over_a_removed_one():
    text = ('Package: libfoo1\nStatus: deinstall ok config-files\nArchitecture: i386\n\n'
            'Package: libfoo1\nStatus: install ok installed\nArchitecture: amd64\n')
    assert _dpkg.installed(_dpkg.parse_status(text)) == ['libfoo1']


def test_no_status_file_is_no_package(tmp_path):
    assert _dpkg.read_status(str(tmp_path / 'status')) is None
    assert _dpkg.parse_status(None) == {}


def test_matching_with_exclude():
    names = ['nvidia-driver', 'nvidia-container-toolkit', 'libnvidia-compute-580', 'libnvidia-container1', 'dkms']
    assert _dpkg.matching(names, ['^nvidia-.*$', '^libnvidia-.*$'], ['^nvidia-container-.*$', '^libnvidia-container.*$']) == [
        'libnvidia-compute-580', 'nvidia-driver']
    assert _dpkg.matching(names, []) == []
