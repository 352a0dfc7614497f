# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.module_utils import _kernels

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'dkms'


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def make_kernel(root: Path, version: str, image: str = 'boot', headers: bool = False) -> None:
    """A kernel as its packages lay it out: /lib/modules/<v>, an image (Debian's
    /boot/vmlinuz-<v>, or kernel-core's /lib/modules/<v>/vmlinuz), and headers
    behind an absolute /lib/modules/<v>/build link, as linux-headers ships it."""
    modules = root / 'lib' / 'modules' / version
    modules.mkdir(parents=True, exist_ok=True)
    if image == 'boot':
        (root / 'boot').mkdir(exist_ok=True)
        (root / 'boot' / ('vmlinuz-' + version)).write_text('kernel')
    elif image == 'modules':
        (modules / 'vmlinuz').write_text('kernel')
    if headers:
        tree = root / 'usr' / 'src' / ('linux-headers-' + version)
        (tree / 'include').mkdir(parents=True)
        (modules / 'build').symlink_to('/usr/src/linux-headers-' + version)


def test_installed_kernels_reads_images_and_headers_under_the_root(tmp_path):
    make_kernel(tmp_path, '6.1.0-28-cloud-amd64', headers=True)
    make_kernel(tmp_path, '6.1.0-101-cloud-amd64', image='boot')
    make_kernel(tmp_path, '5.14.0-427.13.1.el9_4.x86_64', image='modules', headers=False)
    make_kernel(tmp_path, '6.1.0-27-cloud-amd64', image=None)  # left over from a removed kernel
    (tmp_path / 'lib' / 'modules' / 'modules.builtin.bin').write_text('not a kernel')
    kernels = _kernels.installed_kernels(str(tmp_path))
    assert [k['version'] for k in kernels] == [
        '5.14.0-427.13.1.el9_4.x86_64', '6.1.0-27-cloud-amd64', '6.1.0-28-cloud-amd64', '6.1.0-101-cloud-amd64']
    assert [k['image'] for k in kernels] == [
        '/lib/modules/5.14.0-427.13.1.el9_4.x86_64/vmlinuz', None,
        '/boot/vmlinuz-6.1.0-28-cloud-amd64', '/boot/vmlinuz-6.1.0-101-cloud-amd64']
    assert [k['headers'] for k in kernels] == [False, False, True, False]


def test_a_build_link_is_followed_inside_the_root_not_on_the_host(tmp_path):
    make_kernel(tmp_path, '6.1.0-28-cloud-amd64')
    # The link points at /usr/src/..., which exists on no host; inside the root it does not either.
    (tmp_path / 'lib/modules/6.1.0-28-cloud-amd64/build').symlink_to('/usr')
    assert not _kernels.has_headers(str(tmp_path), '6.1.0-28-cloud-amd64')
    (tmp_path / 'usr' / 'include').mkdir(parents=True)
    assert _kernels.has_headers(str(tmp_path), '6.1.0-28-cloud-amd64')


def test_no_lib_modules_is_no_kernel(tmp_path):
    assert _kernels.installed_kernels(str(tmp_path)) == []


def test_version_key_orders_abi_numbers_as_numbers():
    versions = ['6.1.0-101-cloud-amd64', '6.12.40-63.114.amzn2023.x86_64', '6.1.0-28-cloud-amd64', '6.1.0-9-amd64']
    assert sorted(versions, key=_kernels.version_key) == [
        '6.1.0-9-amd64', '6.1.0-28-cloud-amd64', '6.1.0-101-cloud-amd64', '6.12.40-63.114.amzn2023.x86_64']


# The vendors' names for the headers packages: Debian's and Ubuntu's linux-headers-<v>,
# EL's kernel-devel-<v>, and on AL2023 the package of the kernel's series, as the EKS
# AMI's install-neuron-driver.sh does (KERNEL_PACKAGE=kernel6.12 on a 6.12 kernel).
@pytest.mark.parametrize('distribution, kernel, package', [
    ('Ubuntu', '6.8.0-1024-aws', 'linux-headers-6.8.0-1024-aws'),
    ('Debian', '6.1.0-28-cloud-amd64', 'linux-headers-6.1.0-28-cloud-amd64'),
    ('RedHat', '5.14.0-427.13.1.el9_4.x86_64', 'kernel-devel-5.14.0-427.13.1.el9_4.x86_64'),
    ('Rocky', '5.14.0-427.13.1.el9_4.x86_64', 'kernel-devel-5.14.0-427.13.1.el9_4.x86_64'),
    ('AlmaLinux', '5.14.0-427.13.1.el9_4.x86_64', 'kernel-devel-5.14.0-427.13.1.el9_4.x86_64'),
    ('Amazon', '6.1.102-108.177.amzn2023.x86_64', 'kernel-devel-6.1.102-108.177.amzn2023.x86_64'),
    ('Amazon', '6.12.40-63.114.amzn2023.x86_64', 'kernel6.12-devel-6.12.40-63.114.amzn2023.x86_64'),
    ('Amazon', '6.18.2-10.45.amzn2023.aarch64', 'kernel6.18-devel-6.18.2-10.45.amzn2023.aarch64'),
    ('SLES', '6.4.0-150600.23.25-default', None),
    ('', '6.1.0-28-cloud-amd64', None),
])
def test_headers_package(distribution, kernel, package):
    assert _kernels.headers_package(distribution, kernel) == package


def test_headers_metapackages_follow_the_image_metapackages():
    installed = ['linux-image-cloud-amd64', 'linux-image-6.1.0-28-cloud-amd64', 'linux-image-amd64-dbg',
                 'linux-image-unsigned-6.8.0-1024-aws', 'linux-headers-6.1.0-28-cloud-amd64', 'linux-image-aws']
    assert _kernels.headers_metapackages('Debian', installed) == ['linux-headers-aws', 'linux-headers-cloud-amd64']
    assert _kernels.headers_metapackages('Amazon', installed) == []


def test_parse_dkms3_status_of_the_real_dkms():
    assert _kernels.parse_dkms_status(fixture('status-dkms3-installed.txt')) == [
        {'name': 'nvidia-current', 'version': '580.95.05', 'kernel': '6.1.0-99-cloud-amd64', 'arch': 'x86_64',
         'status': 'installed', 'note': None}]


def test_parse_dkms3_added_built_and_warning():
    assert _kernels.parse_dkms_status(fixture('status-dkms3-added.txt')) == [
        {'name': 'nvidia-current', 'version': '580.95.05', 'kernel': None, 'arch': None, 'status': 'added',
         'note': None}]
    built, diff = _kernels.parse_dkms_status(fixture('status-dkms3-built-and-diff.txt'))
    assert (built['kernel'], built['status']) == ('6.1.0-97-cloud-amd64', 'built')
    assert (diff['status'], diff['note']) == ('installed', 'WARNING! Diff between built and installed module!')


def test_parse_skips_dkms_warnings_and_keeps_every_module():
    entries = _kernels.parse_dkms_status(fixture('status-dkms3-two-modules.txt'))
    assert [(e['name'], e['version'], e['kernel']) for e in entries] == [
        ('aws-neuronx', '2.27.4.0', '6.18.44-fc-v782'), ('nvidia-current', '580.95.05', '6.1.0-99-cloud-amd64')]
    assert _kernels.parse_dkms_status(fixture('status-dkms3-empty.txt')) == []


# DKMS 2 (Ubuntu 20.04, Amazon Linux 2's and EPEL's older dkms) separates the version with
# ", " ($module, $version, $kernel, $arch: $state in DKMS 2's do_status).
def test_parse_dkms2_status():
    text = ('nvidia, 580.95.05, 5.15.0-1-aws, x86_64: installed\n'
            'aws-neuronx, 2.24.13.0: added\n'
            'nvidia, 570.172.08, 5.15.0-2-aws, x86_64: built\n')
    assert [(e['name'], e['version'], e['kernel'], e['status']) for e in _kernels.parse_dkms_status(text)] == [
        ('nvidia', '580.95.05', '5.15.0-1-aws', 'installed'), ('aws-neuronx', '2.24.13.0', None, 'added'),
        ('nvidia', '570.172.08', '5.15.0-2-aws', 'built')]


def test_matching_uses_globs():
    entries = _kernels.parse_dkms_status(fixture('status-dkms3-two-modules.txt'))
    assert [e['name'] for e in _kernels.matching(entries, 'nvidia*', '580.*')] == ['nvidia-current']
    assert _kernels.matching(entries, 'nvidia*', '570.*') == []
    assert [e['name'] for e in _kernels.matching(entries, 'aws-neuronx', '2.27.4.0')] == ['aws-neuronx']


KERNELS = [
    {'version': '6.1.0-27-cloud-amd64', 'image': None},
    {'version': '6.1.0-28-cloud-amd64', 'image': '/boot/vmlinuz-6.1.0-28-cloud-amd64'},
    {'version': '6.1.0-29-cloud-amd64', 'image': '/boot/vmlinuz-6.1.0-29-cloud-amd64'},
]


@pytest.mark.parametrize('running, kernel_version, image, mode, target, targets', [
    # A node after an unattended upgrade: running 28, 29 installed, 27 left over.
    ('6.1.0-28-cloud-amd64', '', False, 'all', '6.1.0-28-cloud-amd64', ['6.1.0-28-cloud-amd64', '6.1.0-29-cloud-amd64']),
    ('6.1.0-28-cloud-amd64', '', False, 'target', '6.1.0-28-cloud-amd64', ['6.1.0-28-cloud-amd64']),
    # An explicit kernel still wins, and is added when it is not installed.
    ('6.1.0-28-cloud-amd64', '6.1.0-30-cloud-amd64', False, 'target', '6.1.0-30-cloud-amd64', ['6.1.0-30-cloud-amd64']),
    ('6.1.0-28-cloud-amd64', '6.1.0-30-cloud-amd64', False, 'all', '6.1.0-30-cloud-amd64',
     ['6.1.0-28-cloud-amd64', '6.1.0-29-cloud-amd64', '6.1.0-30-cloud-amd64']),
    # A chroot on a build host: the host's kernel is never a target.
    ('6.18.44-fc-v782', '', True, 'all', '6.1.0-29-cloud-amd64', ['6.1.0-28-cloud-amd64', '6.1.0-29-cloud-amd64']),
    ('6.18.44-fc-v782', '', True, 'target', '6.1.0-29-cloud-amd64', ['6.1.0-29-cloud-amd64']),
    ('6.18.44-fc-v782', '6.1.0-28-cloud-amd64', True, 'target', '6.1.0-28-cloud-amd64', ['6.1.0-28-cloud-amd64']),
])
def test_select_targets(running, kernel_version, image, mode, target, targets):
    assert _kernels.select_targets(KERNELS, running, kernel_version, image, mode) == (target, targets)


def test_an_image_without_a_kernel_has_no_target():
    assert _kernels.select_targets(KERNELS[:1], '6.18.44-fc-v782', '', True, 'all') == (None, [])


@pytest.mark.parametrize('distribution, held, free', [
    ('Debian',
     ['linux-image-6.1.0-28-cloud-amd64', 'linux-image-cloud-amd64', 'linux-headers-6.1.0-28-cloud-amd64',
      'linux-modules-6.8.0-1024-aws', 'linux-image-aws'],
     ['linux-base', 'linux-libc-dev', 'firmware-linux-free', 'nvidia-kernel-dkms']),
    ('Amazon',
     ['kernel', 'kernel-devel', 'kernel6.12', 'kernel6.12-devel', 'kernel-modules-extra', 'kernel-headers'],
     ['kernel-livepatch-repo-s3', 'kernel-srpm-macros', 'kmod-nvidia-latest-dkms', 'kernel-tools']),
    ('Rocky', ['kernel-core', 'kernel-modules', 'kernel-modules-core'], ['kernel-tools-libs']),
])
def test_kernel_packages_that_a_kernel_hold_covers(distribution, held, free):
    assert _kernels.kernel_packages(distribution, free + held) == sorted(held)


def test_kernel_packages_of_an_unknown_distribution():
    assert _kernels.kernel_packages('SLES', ['kernel-default']) == []


def test_headers_to_install():
    assert _kernels.headers_to_install(['linux-headers-6.1.0-28-amd64'], ['linux-headers-amd64'], 'all') == [
        'linux-headers-6.1.0-28-amd64', 'linux-headers-amd64']
    assert _kernels.headers_to_install(['linux-headers-6.1.0-28-amd64'], ['linux-headers-amd64'], 'target') == [
        'linux-headers-6.1.0-28-amd64']
