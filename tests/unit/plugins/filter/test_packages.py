# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter.packages import packages_to_change
from ansible_collections.accel.nodes.plugins.module_utils._node_probe import parse_dpkg_status

TOOLKIT = ['nvidia-container-toolkit', 'nvidia-container-toolkit-base', 'libnvidia-container-tools',
           'libnvidia-container1']
STANZA = 'Package: %s\nStatus: %s\nVersion: %s\nArchitecture: amd64\n\n'


def status(*entries):
    """What node_probe returns for a dpkg status file of these (name, 'want flag status', version) stanzas."""
    text = ''.join(STANZA % entry for entry in entries)
    return parse_dpkg_status(text, ['.'])


HELD = status(*[(name, 'hold ok installed', '1.17.8-1') for name in TOOLKIT],
              ('nvidia-docker2', 'deinstall ok config-files', '2.13.0-1'))


def test_a_converged_node_needs_no_run():
    assert packages_to_change(HELD, TOOLKIT, version='1.17.8-1') == []
    assert packages_to_change(HELD, TOOLKIT, version='1.17.8-1', selection='hold') == []
    assert packages_to_change(HELD, ['nvidia-docker2', 'nvidia-container-runtime'], want='absent') == []


def test_names_what_is_missing_at_another_version_or_not_held():
    seen = status(('nvidia-container-toolkit', 'install ok installed', '1.17.8-1'),
                  ('nvidia-container-toolkit-base', 'hold ok installed', '1.16.2-1'),
                  ('libnvidia-container1', 'hold ok half-configured', '1.17.8-1'))
    assert packages_to_change(seen, TOOLKIT, version='1.17.8-1') == [
        'nvidia-container-toolkit-base', 'libnvidia-container-tools', 'libnvidia-container1']
    assert packages_to_change(seen, TOOLKIT[:1], selection='hold') == ['nvidia-container-toolkit']
    assert packages_to_change(seen, TOOLKIT[:1], selection='install') == []


def test_fabric_manager_at_the_driver_s_upstream_version_needs_no_run():
    # nvidia_driver asks apt for nvidia-fabricmanager=<driver version>-* (vars/Debian.yml).
    seen = status(('nvidia-fabricmanager', 'hold ok installed', '580.95.05-1'))
    fm = ['nvidia-fabricmanager']
    assert packages_to_change(seen, fm, version='580.95.05', upstream=True) == []
    assert packages_to_change(seen, fm, version='580.95.05') == fm
    assert packages_to_change(seen, fm, version='580.95', upstream=True) == fm
    assert packages_to_change(seen, fm, version='580.105.08', upstream=True) == fm
    assert packages_to_change(status(), fm, version='580.95.05', upstream=True) == fm


def test_an_installed_legacy_package_is_to_remove():
    seen = status(('nvidia-docker2', 'install ok installed', '2.13.0-1'))
    assert packages_to_change(seen, ['nvidia-docker2', 'nvidia-container-runtime'], want='absent') == ['nvidia-docker2']


def test_refuses_bad_input():
    with pytest.raises(AnsibleFilterError):
        packages_to_change([], TOOLKIT)
    with pytest.raises(AnsibleFilterError):
        packages_to_change(HELD, TOOLKIT, want='latest')


# dpkg_selection_plan: what accel.nodes.dpkg_holds would do, from the same probe.
from ansible_collections.accel.nodes.plugins.filter.packages import dpkg_selection_plan  # noqa: E402

OWNED = r'^(cuda-drivers.*|nvidia-.*|libnvidia-.*|libcuda1.*|firmware-nvidia-.*)$'
FOREIGN = r'^(nvidia-container-.*|libnvidia-container.*)$'
DRIVER = ['cuda-drivers', 'cuda-drivers-580', 'firmware-nvidia-gsp', 'libcuda1', 'libnvidia-ml1',
          'nvidia-driver', 'nvidia-kernel-dkms', 'nvidia-persistenced', 'nvidia-smi']


def test_held_driver_packages_need_no_dpkg_holds_run():
    seen = status(*[(n, 'hold ok installed', '580.95.05-1') for n in DRIVER + TOOLKIT],
                  ('nvidia-driver-bin', 'deinstall ok config-files', '535.216.01-1'))
    plan = dpkg_selection_plan(seen, [OWNED], [FOREIGN])
    assert plan == {'names': sorted(DRIVER), 'change': [], 'unknown': []}


def test_an_unheld_package_is_held_and_a_release_touches_only_held_ones():
    seen = status(*[(n, 'hold ok installed', '580.95.05-1') for n in DRIVER[1:]],
                  ('cuda-drivers', 'install ok installed', '580.95.05-1'),
                  ('libnvidia-container1', 'install ok installed', '1.17.8-1'))
    assert dpkg_selection_plan(seen, [OWNED], [FOREIGN])['change'] == ['cuda-drivers']
    assert dpkg_selection_plan(seen, [OWNED], [FOREIGN], selection='install')['change'] == sorted(DRIVER[1:])


def test_names_the_probe_did_not_read_are_left_to_the_module():
    seen = status(('cuda-drivers', 'hold ok installed', '580.95.05-1'))
    plan = dpkg_selection_plan(seen, [OWNED], names=['linux-image-6.1.0-28-cloud-amd64'])
    assert plan == {'names': ['linux-image-6.1.0-28-cloud-amd64', 'cuda-drivers'], 'change': [],
                    'unknown': ['linux-image-6.1.0-28-cloud-amd64']}


@pytest.mark.parametrize('args', [dict(seen=[]), dict(seen={}, selection='purge'), dict(seen={}, patterns=['('])])
def test_dpkg_selection_plan_refuses_bad_input(args):
    with pytest.raises(AnsibleFilterError):
        dpkg_selection_plan(**args)
