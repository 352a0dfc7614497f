# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils import basic

from ansible_collections.accel.nodes.plugins.modules import dkms_kernels

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'dkms'
NO_HEADERS = (FIXTURES / 'install-no-headers.txt').read_text()
RUNNING = '6.1.0-28-cloud-amd64'
NEW = '6.1.0-29-cloud-amd64'


def make_kernel(root: Path, version: str, image: bool = True, headers: bool = True) -> None:
    modules = root / 'lib' / 'modules' / version
    modules.mkdir(parents=True, exist_ok=True)
    if image:
        (root / 'boot').mkdir(exist_ok=True)
        (root / 'boot' / ('vmlinuz-' + version)).write_text('kernel')
    if headers:
        (root / 'usr' / 'src' / ('linux-headers-' + version) / 'include').mkdir(parents=True)
        (modules / 'build').symlink_to('/usr/src/linux-headers-' + version)


class FakeDkms:
    """Stands in for run_command: `dkms status` prints the lines of the kernels that have the module,
    in the real DKMS 3 format; `dkms install` installs it where the fake tree has headers, and fails
    with the real dkms's text where it has none."""

    def __init__(self, root: Path, installed=(), added=True, name='nvidia-current', version='580.95.05', broken=()):
        self.root = root
        self.installed = list(installed)
        self.added = added
        self.name = name
        self.version = version
        self.broken = set(broken)
        self.calls = []

    def __call__(self, argv, environ_update=None, **kwargs):
        assert environ_update == {'LANG': 'C', 'LC_ALL': 'C'}
        self.calls.append(list(argv[1:]))
        if argv[1] == 'status':
            lines = ['%s/%s, %s, x86_64: installed' % (self.name, self.version, k) for k in self.installed]
            if self.added and not lines:
                lines = ['%s/%s: added' % (self.name, self.version)]
            return 0, ''.join(line + '\n' for line in lines), ''
        kernel = argv[argv.index('-k') + 1]
        if not (self.root / 'lib' / 'modules' / kernel / 'build').is_symlink():
            return 1, '', NO_HEADERS.replace('6.1.0-96-cloud-amd64', kernel)
        if kernel in self.broken:
            return 10, '', 'Error! Bad return status for module build on kernel: %s (x86_64)' % kernel
        self.installed.append(kernel)
        return 0, 'depmod...\n', ''


@pytest.fixture
def run(run_module, tmp_path):
    def _run(fake=None, check_mode=False, builds_here=True, **args):
        args.setdefault('distribution', 'Debian')
        args.setdefault('root', str(tmp_path))
        args['_ansible_check_mode'] = check_mode
        with mock.patch('os.uname', return_value=('Linux', 'node', RUNNING, '#1', 'x86_64')), \
                mock.patch.object(basic.AnsibleModule, 'get_bin_path', return_value='/usr/sbin/dkms' if fake else None), \
                mock.patch.object(basic.AnsibleModule, 'run_command', side_effect=fake), \
                mock.patch.object(dkms_kernels, '_builds_here', return_value=builds_here):
            return run_module(dkms_kernels.main, args)
    return _run


def test_lists_the_kernels_and_their_headers_packages_without_running_dkms(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW, headers=False)
    make_kernel(tmp_path, '6.1.0-27-cloud-amd64', image=False, headers=False)
    result = run(root=str(tmp_path))
    assert not result['changed'] and 'failed' not in result
    assert result['target'] == RUNNING
    assert result['targets'] == [RUNNING, NEW]
    assert result['headers_packages'] == ['linux-headers-' + RUNNING, 'linux-headers-' + NEW]
    leftover, running, new = result['kernels']
    assert (leftover['version'], leftover['target'], leftover['image']) == ('6.1.0-27-cloud-amd64', False, None)
    assert running['running'] and running['headers'] and running['image'] == '/boot/vmlinuz-' + RUNNING
    assert not new['running'] and not new['headers'] and new['headers_package'] == 'linux-headers-' + NEW


def test_target_only_and_an_explicit_headers_package(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW)
    result = run(root=str(tmp_path), kernels='target', headers_package='linux-headers-cloud-amd64')
    assert result['targets'] == [RUNNING]
    assert result['headers_packages'] == ['linux-headers-cloud-amd64']


def test_the_headers_metapackage_of_the_image_metapackage(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    status = tmp_path / 'var' / 'lib' / 'dpkg'
    status.mkdir(parents=True)
    (status / 'status').write_text(
        'Package: linux-image-cloud-amd64\nStatus: install ok installed\nVersion: 6.1.158-1\n\n'
        'Package: linux-image-amd64\nStatus: deinstall ok config-files\nVersion: 6.1.158-1\n\n'
        'Package: linux-image-%s\nStatus: install ok installed\n' % RUNNING)
    assert run(root=str(tmp_path))['headers_metapackages'] == ['linux-headers-cloud-amd64']


def test_builds_for_the_kernel_that_lacks_the_module_only(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW)
    fake = FakeDkms(tmp_path, installed=[RUNNING])
    result = run(fake, module='nvidia*', module_version='580.*')
    assert result['changed'] and 'failed' not in result, result.get('msg')
    assert result['built'] == [NEW] and result['missing'] == []
    assert fake.calls == [['status'], ['install', '-m', 'nvidia-current', '-v', '580.95.05', '-k', NEW], ['status']]
    assert result['module_versions'] == ['580.95.05']
    assert [k['module']['status'] for k in result['kernels']] == ['installed', 'installed']
    assert result['summary'] == ['%s (running): nvidia-current 580.95.05 installed' % RUNNING,
                                 '%s: nvidia-current 580.95.05 installed (built now)' % NEW]


def test_nothing_to_do_runs_dkms_status_once(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW)
    fake = FakeDkms(tmp_path, installed=[RUNNING, NEW])
    result = run(fake, module='nvidia*', module_version='580.*')
    assert not result['changed'] and result['built'] == [] and fake.calls == [['status']]


def test_check_mode_reports_the_build_and_builds_nothing(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW, headers=False)
    fake = FakeDkms(tmp_path, installed=[RUNNING])
    result = run(fake, check_mode=True, module='nvidia*', module_version='580.*')
    assert result['changed'] and result['built'] == [NEW] and result['missing'] == [NEW]
    assert 'failed' not in result and fake.calls == [['status']]
    assert result['summary'][1] == '%s: no module (would be built)' % NEW


def test_check_mode_on_a_fresh_host_without_dkms(run, tmp_path):
    make_kernel(tmp_path, RUNNING, headers=False)
    result = run(None, check_mode=True, module='nvidia*', module_version='580.*')
    assert result['changed'] and result['built'] == [RUNNING] and 'failed' not in result


def test_a_kernel_without_headers_fails_naming_the_kernel_and_the_package(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW, headers=False)
    fake = FakeDkms(tmp_path, installed=[RUNNING])
    result = run(fake, module='nvidia*', module_version='580.*')
    assert result['failed']
    assert 'kernel %s: headers missing (install linux-headers-%s)' % (NEW, NEW) in result['msg']
    assert result['missing'] == [NEW] and result['built'] == []
    assert 'set the role\'s *_kernels to target' in result['msg']
    # No build is attempted without headers.
    assert fake.calls == [['status']]


def test_a_failed_build_quotes_dkms_and_the_make_log(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW)
    fake = FakeDkms(tmp_path, installed=[RUNNING], broken=[NEW])
    result = run(fake, module='nvidia*', module_version='580.*')
    assert result['failed'] and result['missing'] == [NEW]
    assert 'Bad return status for module build on kernel: %s' % NEW in result['msg']
    assert '/var/lib/dkms/nvidia-current/580.95.05/build/make.log' in result['msg']
    assert 'kernel %s: headers installed' % NEW in result['msg']


def test_only_the_target_with_kernels_target(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    make_kernel(tmp_path, NEW, headers=False)
    fake = FakeDkms(tmp_path, installed=[RUNNING])
    result = run(fake, kernels='target', module='nvidia*', module_version='580.*')
    assert not result['changed'] and result['targets'] == [RUNNING] and 'failed' not in result


def test_registered_but_built_for_no_kernel_builds_the_newest_matching_version(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    fake = FakeDkms(tmp_path, name='aws-neuronx', version='2.27.4.0')
    result = run(fake, module='aws-neuronx', module_version='2.27.4.0')
    assert result['built'] == [RUNNING]
    assert ['install', '-m', 'aws-neuronx', '-v', '2.27.4.0', '-k', RUNNING] in fake.calls


def test_another_version_does_not_count(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    fake = FakeDkms(tmp_path, installed=[RUNNING], version='570.172.08')
    result = run(fake, module='nvidia*', module_version='580.*')
    assert result['failed'] and 'no DKMS module matching nvidia* 580.* is registered' in result['msg']


def test_an_image_builds_for_its_own_kernels_not_the_build_hosts(run, tmp_path):
    # The build host runs RUNNING, which is not in the image.
    make_kernel(tmp_path, NEW)
    result = run(root=str(tmp_path), image=True)
    assert result['target'] == NEW and result['targets'] == [NEW]
    assert not [k for k in result['kernels'] if k['running']]


def test_an_image_without_a_kernel_fails_and_says_what_to_do(run, tmp_path):
    (tmp_path / 'lib' / 'modules' / RUNNING).mkdir(parents=True)  # a leftover directory, no image
    result = run(root=str(tmp_path), image=True)
    assert result['failed'] and 'Install a kernel package in the image' in result['msg']
    assert '*_kernel_version' in result['msg']


def test_building_under_another_root_is_refused(run, tmp_path):
    result = run(FakeDkms(tmp_path), builds_here=False, module='nvidia*')
    assert result['failed'] and 'chroot connection' in result['msg']


def test_kernel_packages_and_headers_to_install_on_debian(run, tmp_path):
    make_kernel(tmp_path, RUNNING)
    status = tmp_path / 'var' / 'lib' / 'dpkg'
    status.mkdir(parents=True)
    (status / 'status').write_text(
        'Package: linux-image-cloud-amd64\nStatus: install ok installed\n\n'
        'Package: linux-image-%s\nStatus: install ok installed\n\n'
        'Package: linux-headers-%s\nStatus: install ok installed\n\n'
        'Package: linux-image-6.1.0-27-cloud-amd64\nStatus: deinstall ok config-files\n\n'
        'Package: linux-base\nStatus: install ok installed\n\n'
        'Package: linux-libc-dev\nStatus: install ok installed\n' % (RUNNING, RUNNING))
    result = run(root=str(tmp_path), distribution='Debian', kernel_packages=True)
    assert result['kernel_packages'] == ['linux-headers-' + RUNNING, 'linux-image-' + RUNNING,
                                         'linux-image-cloud-amd64']
    assert result['headers_to_install'] == ['linux-headers-' + RUNNING, 'linux-headers-cloud-amd64']
    assert run(root=str(tmp_path), distribution='Debian')['kernel_packages'] == []
    target = run(root=str(tmp_path), distribution='Debian', kernels='target')
    assert target['headers_to_install'] == ['linux-headers-' + RUNNING]


def test_kernel_packages_on_amazon_linux_come_from_rpm(run_module, tmp_path):
    make_kernel(tmp_path, RUNNING)
    calls = []

    def rpm(argv, environ_update=None, **kwargs):
        calls.append(argv[1:])
        return 0, 'kernel\nkernel6.12\nkernel6.12-devel\nkernel-tools\nkmod-nvidia-latest-dkms\nbash\n', ''
    with mock.patch.object(basic.AnsibleModule, 'run_command', side_effect=rpm), \
            mock.patch.object(basic.AnsibleModule, 'get_bin_path', return_value='/usr/bin/rpm'):
        result = run_module(dkms_kernels.main, dict(root='/', distribution='Amazon', kernel_packages=True,
                                                    kernel_version=RUNNING))
    assert result['kernel_packages'] == ['kernel', 'kernel6.12', 'kernel6.12-devel']
    assert calls == [['-qa', '--queryformat', '%{NAME}\\n']]
