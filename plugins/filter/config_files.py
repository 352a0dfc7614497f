# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Whether accel.nodes.toml_settings, accel.nodes.container_runtime (engine docker or containerd) or
accel.nodes.dev_char_symlinks would leave the node as it is, judged on the controller from what
accel.nodes.node_probe read and ran, with the modules' own code. Documented in toml_settings_in_place.yml,
docker_runtime_in_place.yml, containerd_runtime_in_place.yml, dev_char_dry_run.yml and
dev_char_symlinks_in_place.yml next to this file."""

from __future__ import annotations

import json
import os
import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.accel.nodes.plugins.module_utils import _dev_char
from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc
from ansible_collections.accel.nodes.plugins.module_utils._toml import SettingsError, TomlDocument, TomlError, \
    apply_settings, loads


def _text(seen: t.Any, name: str) -> t.Optional[str]:
    """The text node_probe read of the file, None where it found no file; raises _Unknown where it read none."""
    if not isinstance(seen, dict) or 'exists' not in seen:
        raise AnsibleFilterError('%s: needs what accel.nodes.node_probe says of the file (one entry of its paths)'
                                 % name)
    if not seen['exists']:
        return None
    if seen.get('type') != 'file' or seen.get('text') is None:
        raise _Unknown()
    return seen['text']


def _plain(value: t.Any) -> t.Any:
    """value as the module receives it, through JSON: ansible-core 2.19 hands templated strings to a filter as
    tagged str subclasses, which the TOML writer does not take for strings."""
    return json.loads(json.dumps(value))


class _Unknown(Exception):
    """Only the module can tell: a file that is not text, or that the probe did not read."""


def toml_settings_in_place(seen: t.Any, settings: t.Any, remove: t.Any = (), state: str = 'present') -> bool:
    """True where accel.nodes.toml_settings, with these settings, remove and state, would not change the file
    (create true; its mode is not judged). False where it would, where it would fail, and where only it can tell."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError('toml_settings_in_place: settings must be a dict')
    settings, remove = _plain(settings), _plain(list(remove or ()))
    try:
        text = _text(seen, 'toml_settings_in_place')
    except _Unknown:
        return False
    if text is None:
        return state == 'absent'
    try:
        doc = TomlDocument(text)
        changed = apply_settings(doc, settings, state) + apply_settings(doc, dict.fromkeys(remove or ()), 'absent')
    except (TomlError, SettingsError):
        return False
    return not changed and doc.text() == text


def docker_runtime_in_place(seen: t.Any, name: str, path: t.Optional[str] = None, runtime_args: t.Any = (),
                            default: t.Optional[bool] = None, cdi: t.Optional[bool] = None,
                            state: str = 'present') -> bool:
    """True where accel.nodes.container_runtime (engine docker) would leave daemon.json as it is. False where it
    would change it, where it would fail, and where only it can tell."""
    # ansible-core 2.18 may hand a templated boolean over as its text.
    default = None if default is None else boolean(default, strict=False)
    cdi = None if cdi is None else boolean(cdi, strict=False)
    try:
        before = _text(seen, 'docker_runtime_in_place')
    except _Unknown:
        return False
    try:
        dummy, after = rc.docker_runtime_text(before, _plain(name), _plain(path), _plain(list(runtime_args or ())),
                                              default, cdi, state, seen.get('path') or rc.DOCKER_CONFIG)
    except rc.ConfigError:
        return False
    return after == before


def containerd_runtime_in_place(paths: t.Any, name: str, path: t.Optional[str] = None, options: t.Any = None,
                                default: t.Optional[bool] = None, cdi: t.Optional[bool] = None, state: str = 'present',
                                drop_in: str = rc.CONTAINERD_DROP_IN, main_path: str = rc.CONTAINERD_CONFIG) -> bool:
    """True where accel.nodes.container_runtime (engine containerd) would leave the main config, the drop-in and
    the runtime's old drop-in (conf.d/99-<name>.toml) as they are, and warn of nothing there. paths: node_probe's
    paths, which must hold all three; False where one is missing or unread, and where the module would change,
    fail or warn."""
    if not isinstance(paths, dict):
        raise AnsibleFilterError('containerd_runtime_in_place: needs the paths of accel.nodes.node_probe')
    present = state == 'present'
    legacy = os.path.join(os.path.dirname(drop_in), os.path.basename(rc.CONTAINERD_LEGACY_DROP_IN % name))
    if any(p not in paths for p in (main_path, drop_in, legacy)):
        return False
    default = None if default is None else boolean(default, strict=False)
    cdi = None if cdi is None else boolean(cdi, strict=False)
    try:
        main_before = _text(paths[main_path], 'containerd_runtime_in_place')
        drop_in_before = _text(paths[drop_in], 'containerd_runtime_in_place')
        legacy_text = None if legacy == drop_in else _text(paths[legacy], 'containerd_runtime_in_place')
    except _Unknown:
        return False
    if drop_in_before is not None and rc.drop_in_runtimes(drop_in_before) is None:
        return False  # not the module's file: it fails, and says why
    try:
        try:
            main_doc = rc.parse_containerd_config(main_before, main_path)
        except rc.ConfigError:
            if present:
                return False
            main_doc = rc.parse_containerd_config(None, main_path)  # as the module does, with a warning
        dummy, dummy, drop_in_after = rc.containerd_runtime_change(
            main_doc, drop_in_before, _plain(name), _plain(path), _plain(dict(options or {})), default, cdi, present,
            drop_in, main_path)
        if legacy_text is not None:
            owned = rc.drop_in_runtimes(legacy_text)
            # The module removes its own old drop-in of this runtime whatever the state, and in state present
            # nvidia-ctk's, or warns of what the latter holds (container_runtime.legacy_drop_ins).
            if owned == [name] or (present and owned is None and rc.nvidia_ctk_drop_in_extras(
                    loads(legacy_text), main_doc.as_dict(), name) is not None):
                return False
    except (rc.ConfigError, TomlError):
        return False
    return drop_in_after == drop_in_before and (not present or main_doc.text() == main_before)


def dev_char_dry_run(ctk_path: str, dev_char_path: str = '/dev/char', create_all: t.Any = True) -> list[str]:
    """The argv of nvidia-ctk's dry run, as accel.nodes.dev_char_symlinks runs it, for node_probe's commands."""
    return _dev_char.dry_run_argv(str(ctk_path), str(dev_char_path), boolean(create_all, strict=False))


def dev_char_symlinks_in_place(probe: t.Any, udev_rule: str, ctk_path: str, state: str = 'present', links: t.Any = True,
                               dev_char_path: str = '/dev/char', command: str = 'dev_char') -> bool:
    """True where accel.nodes.dev_char_symlinks, with these options, would change nothing, judged from the
    node_probe result that read udev_rule, listed dev_char_path, and ran the dry run (dev_char_dry_run) as
    command. False where it would change something, warn of a link that points elsewhere, fail, and where
    only it can tell."""
    if not isinstance(probe, dict) or not isinstance(probe.get('paths'), dict):
        raise AnsibleFilterError('dev_char_symlinks_in_place: needs the result of accel.nodes.node_probe')
    present = state == 'present'
    try:
        before = _text(probe['paths'].get(udev_rule), 'dev_char_symlinks_in_place')
    except _Unknown:
        return False
    if before != (_dev_char.udev_rule(str(ctk_path)) if present else None):
        return False
    if not present or not boolean(links, strict=False):
        return True
    ran = (probe.get('commands') or {}).get(command)
    if not isinstance(ran, dict) or ran.get('rc') != 0:
        return False
    found = _dev_char.parse_links('%s\n%s' % (ran.get('stdout') or '', ran.get('stderr') or ''))
    drift = _dev_char.link_drift(found, str(dev_char_path), (probe.get('directories') or {}).get(dev_char_path))
    return not drift['missing'] and not drift['wrong']


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'toml_settings_in_place': toml_settings_in_place, 'docker_runtime_in_place': docker_runtime_in_place,
                'containerd_runtime_in_place': containerd_runtime_in_place,
                'dev_char_dry_run': dev_char_dry_run, 'dev_char_symlinks_in_place': dev_char_symlinks_in_place}
