# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""toml_settings_in_place, docker_runtime_in_place and containerd_runtime_in_place must agree with the modules they stand in for: a role
skips toml_settings or container_runtime where the filter, fed by node_probe's description of the file, says
that the module would change nothing. Each case runs the module in check mode beside the filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.filter.config_files import containerd_runtime_in_place, \
    docker_runtime_in_place, toml_settings_in_place
from ansible_collections.accel.nodes.plugins.module_utils import _node_probe
from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlDocument, apply_settings
from ansible_collections.accel.nodes.plugins.modules import container_runtime, toml_settings

FIXTURES = Path(__file__).parents[3] / 'fixtures' / 'toml'
NVIDIA = '/usr/bin/nvidia-container-runtime'

# What the nvidia_container_toolkit role sets by default, and the debug keys it removes.
ROLE_SETTINGS = {'nvidia-container-cli.ldconfig': '@/sbin/ldconfig', 'nvidia-container-runtime.mode': 'legacy',
                 'accept-nvidia-visible-devices-envvar-when-unprivileged': True}
ROLE_REMOVE = ['nvidia-container-runtime.debug', 'nvidia-container-cli.debug']


def _agrees(result, in_place):
    assert not result.get('failed') or in_place is False, result
    assert in_place == (not result.get('changed') and not result.get('failed')), (in_place, result)


@pytest.mark.parametrize('fixture', ['nvidia-container-toolkit-1.17.6.toml', 'nvidia-container-toolkit-1.18-rpm.toml'])
@pytest.mark.parametrize('case', ['as shipped', 'after the role', 'a key drifted', 'a debug key back', 'missing',
                                  'not TOML', 'removing from a missing file'])
def test_toml_settings_in_place_agrees_with_the_module(module_in_tmp, tmp_path, fixture, case):
    run = module_in_tmp(toml_settings.main)
    config = tmp_path / 'config.toml'
    config.write_text((FIXTURES / fixture).read_text(encoding='utf-8'), encoding='utf-8')
    state = 'absent' if case == 'removing from a missing file' else 'present'
    if case != 'as shipped':
        assert run(path=str(config), settings=ROLE_SETTINGS, remove=ROLE_REMOVE, create=True)['changed'] is True
    if case == 'a key drifted':
        config.write_text(config.read_text().replace("ldconfig = \"@/sbin/ldconfig\"", "ldconfig = \"/sbin/ldconfig.real\""))
    elif case == 'a debug key back':
        config.write_text(config.read_text().replace('[nvidia-container-cli]\n',
                                                     '[nvidia-container-cli]\ndebug = "/var/log/x.log"\n'))
    elif case in ('missing', 'removing from a missing file'):
        config.unlink()
    elif case == 'not TOML':
        config.write_text('[nvidia-container-cli\nldconfig = \n')
    seen = _node_probe.describe(str(config))
    in_place = toml_settings_in_place(seen, ROLE_SETTINGS, ROLE_REMOVE, state)
    _agrees(run(path=str(config), settings=ROLE_SETTINGS, remove=ROLE_REMOVE, create=True, state=state,
                _ansible_check_mode=True), in_place)
    assert in_place is (case in ('after the role', 'removing from a missing file'))


USER_DAEMON_JSON = '{\n    "data-root": "/mnt/docker-data",\n    "runtimes": {\n        "runsc": {\n' \
                   '            "path": "/usr/local/bin/runsc"\n        }\n    }\n}\n'


@pytest.mark.parametrize('args', [dict(), dict(default=True), dict(cdi=True), dict(runtime_args=['--debug']),
                                  dict(state='absent')])
@pytest.mark.parametrize('case', ['user file', 'after the module', 'registered by hand', 'missing', 'not JSON'])
def test_docker_runtime_in_place_agrees_with_the_module(module_in_tmp, tmp_path, args, case):
    run = module_in_tmp(container_runtime.main)
    path = tmp_path / 'daemon.json'
    path.write_text(USER_DAEMON_JSON, encoding='utf-8')
    module_args = dict(engine='docker', name='nvidia', path=NVIDIA, config_path=str(path), **args)
    if case == 'after the module':
        run(**module_args)
    elif case == 'registered by hand':
        path.write_text('{"runtimes": {"nvidia": {"path": "%s", "runtimeArgs": []}}}' % NVIDIA)
    elif case == 'missing':
        path.unlink()
    elif case == 'not JSON':
        path.write_text('{"runtimes": ')
    seen = _node_probe.describe(str(path))
    in_place = docker_runtime_in_place(seen, 'nvidia', NVIDIA, args.get('runtime_args', []), args.get('default'),
                                       args.get('cdi'), args.get('state', 'present'))
    _agrees(run(_ansible_check_mode=True, **module_args), in_place)
    assert in_place is (case == 'after the module' or (case == 'registered by hand' and not args)
                        or (case == 'missing' and args.get('state') == 'absent')
                        or (case == 'user file' and args.get('state') == 'absent'))


# What nvidia-ctk runtime configure (1.20.0) writes for containerd 1.x: the module replaces it.
NVIDIA_CTK_DROP_IN = (Path(__file__).parents[3] / 'fixtures' / 'containerd' / 'nvidia-ctk-1.20.0' / 'v2'
                      / '99-nvidia.toml')
CONTAINERD_ARGS = [dict(), dict(default=True), dict(cdi=True), dict(containerd_options={'SystemdCgroup': True}),
                   dict(state='absent')]


@pytest.mark.parametrize('args', CONTAINERD_ARGS)
@pytest.mark.parametrize('main', ['containerd-1.6.20-debian12.toml', 'containerd.io-docker.toml',
                                  'containerd-2.0-default.toml', None])
@pytest.mark.parametrize('case', ['fresh', 'after the module', 'drop-in edited', "nvidia-ctk's drop-in",
                                  'a drop-in of the user', 'its own old drop-in'])
def test_containerd_runtime_in_place_agrees_with_the_module(module_in_tmp, tmp_path, args, main, case):
    """The main configs as Debian's containerd, Docker's containerd.io and containerd 2.0 ship them, and none."""
    run = module_in_tmp(container_runtime.main)
    config, conf_d = tmp_path / 'config.toml', tmp_path / 'conf.d'
    drop_in, legacy = conf_d / '99-accel-nodes.toml', conf_d / '99-nvidia.toml'
    if main:
        config.write_text((FIXTURES / main).read_text(encoding='utf-8'), encoding='utf-8')
    module_args = dict(engine='containerd', name='nvidia', path=NVIDIA, config_path=str(drop_in),
                       containerd_config=str(config), **args)
    if case != 'fresh':
        conf_d.mkdir()
        run(**dict(module_args, state='present'))
    if case == 'drop-in edited':
        drop_in.write_text(drop_in.read_text().replace(NVIDIA, '/usr/local/bin/nvidia-container-runtime'))
    elif case == "nvidia-ctk's drop-in":
        legacy.write_text(NVIDIA_CTK_DROP_IN.read_text(encoding='utf-8'), encoding='utf-8')
    elif case == 'a drop-in of the user':
        drop_in.write_text('version = 2\n')
    elif case == 'its own old drop-in':
        # The one-file-per-runtime layout of earlier releases: the module removes it in either state.
        drop_in.rename(legacy)
    paths = dict((str(p), _node_probe.describe(str(p))) for p in (config, drop_in, legacy))
    in_place = containerd_runtime_in_place(
        paths, 'nvidia', NVIDIA, args.get('containerd_options'), args.get('default'), args.get('cdi'),
        args.get('state', 'present'), str(drop_in), str(config))
    result = run(_ansible_check_mode=True, **module_args)
    if case == "nvidia-ctk's drop-in" and args.get('state') != 'absent':
        # The module removes it, or leaves it and warns of what it holds: the role runs it each time, to warn.
        assert result.get('changed') or result.get('vendor_drop_in', {}).get('extras'), result
    else:
        _agrees(result, in_place)
    if args.get('state') == 'absent':
        assert in_place is (case == 'fresh')
    else:
        assert in_place is (case == 'after the module')


def test_containerd_files_the_probe_did_not_look_at_are_left_to_the_module(tmp_path):
    """A drop-in elsewhere (k3s's import directory) that the role's probe did not read."""
    config = tmp_path / 'config.toml'
    config.write_text('version = 2\n')
    assert containerd_runtime_in_place({str(config): _node_probe.describe(str(config))}, 'nvidia', NVIDIA,
                                       main_path=str(config), drop_in=str(tmp_path / '99-accel-nodes.toml')) is False


def test_a_file_the_probe_could_not_read_as_text_is_left_to_the_module():
    seen = dict(path='/etc/docker/daemon.json', exists=True, type='file', text=None)
    assert docker_runtime_in_place(seen, 'nvidia', NVIDIA) is False
    assert toml_settings_in_place(dict(seen, path='/etc/x.toml'), {'a': 1}) is False


def test_booleans_templated_as_text_mean_what_they_say(tmp_path):
    path = tmp_path / 'daemon.json'
    path.write_text('{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "%s"}}}\n' % NVIDIA)
    seen = _node_probe.describe(str(path))
    assert docker_runtime_in_place(seen, 'nvidia', NVIDIA, default='True') is True
    assert docker_runtime_in_place(seen, 'nvidia', NVIDIA, default='False') is False


def test_values_templated_by_ansible_are_taken_as_the_module_takes_them(tmp_path):
    """ansible-core 2.19 passes templated strings to filters as tagged str subclasses: the role's own settings,
    templated, must find the file the module wrote with them in place."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    try:
        from ansible.template import trust_as_template
    except ImportError:  # ansible-core 2.18
        def trust_as_template(value):
            return value
    # Variables as a role's YAML files hold them (role_files.load trusts them, as Ansible does).
    templar = Templar(loader=DataLoader(), variables=dict(
        (k, trust_as_template(v)) for k, v in {'mode': 'cdi', 'ldconfig': '@/sbin/ldconfig', 'rt': NVIDIA}.items()))
    settings = templar.template(trust_as_template(
        "{{ {'nvidia-container-runtime.mode': mode, 'nvidia-container-cli.ldconfig': ldconfig} }}"))
    config = tmp_path / 'config.toml'
    config.write_text((FIXTURES / 'nvidia-container-toolkit-1.17.6.toml').read_text(encoding='utf-8'))
    doc = TomlDocument(config.read_text())
    apply_settings(doc, json.loads(json.dumps(settings)), 'present')  # as the module receives them
    config.write_text(doc.text())
    assert toml_settings_in_place(_node_probe.describe(str(config)), settings) is True
    daemon = tmp_path / 'daemon.json'
    daemon.write_text('{"runtimes": {"nvidia": {"path": "%s"}}}\n' % NVIDIA)
    assert docker_runtime_in_place(_node_probe.describe(str(daemon)), templar.template(trust_as_template('nvidia')),
                                   templar.template(trust_as_template('{{ rt }}'))) is True
