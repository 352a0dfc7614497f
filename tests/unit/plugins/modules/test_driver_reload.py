# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""accel.nodes.driver_reload against a fake kernel: /sys/module and /proc/modules
in a temporary tree, and run_command answering modprobe, systemctl and nvidia-smi
as they do (modprobe -r of a module in use: "modprobe: FATAL: Module nvidia is in use.")."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible.module_utils import basic

from ansible_collections.accel.nodes.plugins.modules import driver_reload


class FakeKernel:
    def __init__(self, root: Path, loaded, old='570.86.15', new='580.95.05', services=('nvidia-persistenced',)):
        self.root, self.loaded, self.version, self.new = root, dict(loaded), old, new
        self.active = set(services)
        self.calls = []
        self.refuse_remove = set()
        self.refuse_load = set()
        self.container = False
        self.write()

    def write(self):
        sysm = self.root / 'sys'
        if sysm.exists():
            for p in sorted(sysm.rglob('*'), reverse=True):
                p.unlink() if p.is_file() else p.rmdir()
        sysm.mkdir(exist_ok=True)
        for name, count in self.loaded.items():
            (sysm / name).mkdir()
            (sysm / name / 'refcnt').write_text('%d\n' % count)
        if 'nvidia' in self.loaded:
            (sysm / 'nvidia' / 'version').write_text(self.version + '\n')
        (self.root / 'proc_modules').write_text(''.join('%s 1 %d - Live 0x0\n' % i for i in self.loaded.items()))

    def __call__(self, argv, environ_update=None, **kwargs):
        tool = Path(argv[0]).name
        self.calls.append([tool] + list(argv[1:]))
        if tool == 'systemctl' and argv[1] == 'show':
            units = [a for a in argv[2:] if not a.startswith('--')]
            out = '\n\n'.join('Id=%s\nActiveState=%s' % (u, 'active' if u[:-8] in self.active else 'inactive') for u in units)
            return 0, out + '\n', ''
        if tool == 'systemctl':
            for unit in argv[2:]:
                (self.active.add if argv[1] == 'start' else self.active.discard)(unit[:-8])
            return 0, '', ''
        if tool == 'modprobe' and argv[1] == '-r':
            name = argv[2]
            if name in self.refuse_remove:
                return 1, '', 'modprobe: FATAL: Module %s is in use.\n' % name
            self.loaded.pop(name, None)
            self.write()
            return 0, '', ''
        if tool == 'modprobe':
            name = argv[1]
            if name in self.refuse_load:
                return 1, '', 'modprobe: ERROR: could not insert \'%s\': No such device\n' % name
            if name == 'nvidia' and 'nvidia' not in self.loaded:
                self.version = self.new
            self.loaded.setdefault(name, 0)
            self.write()
            return 0, '', ''
        if tool == 'nvidia-smi':
            if 'nvidia' not in self.loaded:
                return 9, '', 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\n'
            return 0, '%s\n' % self.version, ''
        raise AssertionError(argv)


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    def make(loaded, **kw):
        k = FakeKernel(tmp_path, loaded, **kw)
        monkeypatch.setattr(driver_reload, 'SYS_MODULE', str(tmp_path / 'sys'))
        monkeypatch.setattr(driver_reload, 'PROC_MODULES', str(tmp_path / 'proc_modules'))
        monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda self, argv, **kwa: k(argv, **kwa))
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kwa: '/usr/bin/' + name)
        monkeypatch.setattr(driver_reload, 'in_a_container', lambda: k.container)
        return k
    return make


def run(run_module, **args):
    args.setdefault('vendor', 'nvidia')
    args.setdefault('version', '580.95.05')
    return run_module(driver_reload.main, args)


def test_a_free_driver_is_reloaded_in_order_around_its_services(kernel, run_module):
    k = kernel({'nvidia_drm': 0, 'nvidia_modeset': 1, 'nvidia_uvm': 0, 'nvidia': 2})
    result = run(run_module)
    assert result['reloaded'] and result['changed']
    assert result['unloaded'] == ['nvidia_drm', 'nvidia_modeset', 'nvidia_uvm', 'nvidia']
    assert result['loaded'] == ['nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm']
    assert result['loaded_version'] == '580.95.05'
    verbs = [c[:2] for c in k.calls if c[0] in ('systemctl', 'modprobe') and c[1] != 'show']
    assert verbs[0] == ['systemctl', 'stop'] and verbs[-1] == ['systemctl', 'start']
    assert k.active == {'nvidia-persistenced'}


def test_a_driver_in_use_is_left_loaded_and_its_services_come_back(kernel, run_module):
    k = kernel({'nvidia_uvm': 1, 'nvidia': 2})
    result = run(run_module)
    assert not result['reloaded']
    assert result['reason'] == 'in use: nvidia_uvm (refcnt 1), nvidia (refcnt 2, 1 loaded users)'
    assert [c for c in k.calls if c[0] == 'modprobe'] == []
    assert k.active == {'nvidia-persistenced'} and k.version == '570.86.15'


def test_a_failed_removal_loads_back_what_went_out(kernel, run_module):
    k = kernel({'nvidia_uvm': 0, 'nvidia': 1})
    k.refuse_remove.add('nvidia')
    result = run(run_module)
    assert not result['reloaded']
    assert result['reason'] == 'modprobe -r nvidia: modprobe: FATAL: Module nvidia is in use.'
    assert result['unloaded'] == ['nvidia_uvm'] and 'nvidia_uvm' in k.loaded


def test_a_module_that_loads_the_old_version_is_not_a_reload(kernel, run_module):
    kernel({'nvidia': 0}, new='570.86.15')
    result = run(run_module)
    assert not result['reloaded']
    assert result['reason'] == 'after the reload the driver reports 570.86.15, not 580.95.05'


def test_a_driver_that_does_not_load_says_why(kernel, run_module):
    k = kernel({})
    k.refuse_load.add('nvidia')
    result = run(run_module)
    assert not result['reloaded']
    assert result['reason'].startswith("modprobe nvidia: modprobe: ERROR: could not insert 'nvidia'")


def test_loaded_already_and_check_mode_change_nothing(kernel, run_module):
    k = kernel({'nvidia': 0}, old='580.95.05')
    assert run(run_module)['reason'] == 'nvidia 580.95.05 is loaded already'
    k = kernel({'nvidia': 0})
    result = run(run_module, _ansible_check_mode=True)
    assert result['changed'] and not result['reloaded']
    assert [c for c in k.calls if c[0] in ('modprobe', 'systemctl')] == []


def test_in_a_container_nothing_is_touched_unless_asked(kernel, run_module):
    k = kernel({'nvidia': 0})
    k.container = True
    result = run(run_module)
    assert not result['reloaded'] and result['reason'].startswith('this runs in a container')
    assert [c for c in k.calls if c[0] in ('modprobe', 'systemctl')] == []
    assert run(run_module, in_container=True)['reloaded']
