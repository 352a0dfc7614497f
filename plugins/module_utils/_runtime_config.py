# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""OCI runtime registration in Docker's daemon.json and containerd's config.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Pure functions over texts and dicts: nothing here reads or writes a file, so
the facts module can reuse the readers and the tests need no file system.

Docker: daemon.json is the user's. Only runtimes.<name>, default-runtime and
features.cdi are touched; every other key keeps its value and its place.

containerd: the runtime goes into a drop-in file we own, which the main
config imports. The main config is edited only to add that import, through
the format-preserving TOML editor.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os

from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlDocument, TomlError, dumps

DOCKER_CONFIG = '/etc/docker/daemon.json'
CONTAINERD_CONFIG = '/etc/containerd/config.toml'
CONTAINERD_DROP_IN = '/etc/containerd/conf.d/99-%s.toml'
RUNC_SHIM = 'io.containerd.runc.v2'

# Names dockerd refuses in "runtimes": it defines them itself.
DOCKER_RESERVED_NAMES = ('runc', 'io.containerd.runc.v2', 'io.containerd.runtime.v1.linux')

# The plugin that holds the CRI runtimes, by containerd config version. Version 3
# came with containerd 2.0; containerd 2.3's version 4 moved server settings
# into plugins but left the CRI plugins where version 3 put them.
CRI_RUNTIME_PLUGIN = {
    2: 'io.containerd.grpc.v1.cri',
    3: 'io.containerd.cri.v1.runtime',
    4: 'io.containerd.cri.v1.runtime',
}


class ConfigError(Exception):
    """A config file that cannot be used as it is; the message says which file and what to do."""


# Docker

def read_daemon_json(text, path=DOCKER_CONFIG):
    """daemon.json text -> dict in file order. A missing (None) or blank file is {}."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            '%s is not valid JSON: %s at line %d, column %d. Fix the file (dockerd would not start with it '
            'either); it was left as it was.' % (path, exc.msg, exc.lineno, exc.colno))
    if not isinstance(data, dict):
        raise ConfigError('%s must hold a JSON object ({...}), not a JSON %s; it was left as it was.'
                          % (path, type(data).__name__))
    return data


def docker_runtimes(data):
    """Names under "runtimes" in a parsed daemon.json, in file order."""
    runtimes = data.get('runtimes')
    return list(runtimes) if isinstance(runtimes, dict) else []


def _docker_entry(path, runtime_args):
    entry = {'path': path}
    if runtime_args:
        entry['runtimeArgs'] = list(runtime_args)
    return entry


def _sub_object(data, key, path):
    value = data.get(key)
    if value is None:
        value = data[key] = {}
    elif not isinstance(value, dict):
        raise ConfigError('"%s" in %s is a JSON %s, not an object; fix it by hand, it was left as it was.'
                          % (key, path, type(value).__name__))
    return value


def docker_present(data, name, path, runtime_args=(), default=None, cdi=None, config_path=DOCKER_CONFIG):
    """A copy of daemon.json data with runtime name registered.

    default: True makes it the default runtime, False removes default-runtime
    if it names this runtime, None leaves default-runtime alone. cdi: True or
    False sets features.cdi, None leaves it alone.
    """
    new = copy.deepcopy(data)
    runtimes = _sub_object(new, 'runtimes', config_path)
    entry = _docker_entry(path, runtime_args)
    current = runtimes.get(name)
    # An empty runtimeArgs list means what no list means: not a reason to rewrite.
    if not (isinstance(current, dict) and {k: v for k, v in current.items() if k != 'runtimeArgs' or v} == entry):
        runtimes[name] = entry
    if default is True:
        new['default-runtime'] = name
    elif default is False and new.get('default-runtime') == name:
        del new['default-runtime']
    if cdi is not None:
        _sub_object(new, 'features', config_path)['cdi'] = cdi
    return new


def docker_absent(data, name):
    """A copy of daemon.json data without runtime name, and without default-runtime if it named it."""
    new = copy.deepcopy(data)
    runtimes = new.get('runtimes')
    if isinstance(runtimes, dict) and name in runtimes:
        del runtimes[name]
        if not runtimes:
            del new['runtimes']
    if new.get('default-runtime') == name:
        del new['default-runtime']
    return new


def _json_indent(text):
    """The indent of the first indented line of text: a tab, or a number of spaces (2 by default)."""
    for line in (text or '').splitlines():
        body = line.lstrip(' \t')
        if body and body != line:
            lead = line[:len(line) - len(body)]
            return '\t' if '\t' in lead else len(lead)
    return 2


def render_daemon_json(data, before_text=None):
    """The text for daemon.json: before_text itself if data is what it holds, else JSON in its indent."""
    if before_text is not None and json.dumps(data) == json.dumps(read_daemon_json(before_text)):
        return before_text
    return json.dumps(data, indent=_json_indent(before_text), ensure_ascii=False) + '\n'


# containerd

def containerd_version(data, path=CONTAINERD_CONFIG):
    """The config version of a parsed containerd config. An empty one ({}) is taken as version 2."""
    if not data:
        return 2
    version = data.get('version')
    integer = isinstance(version, int) and not isinstance(version, bool)  # true is not 1, and '2' is not 2
    if version is None or (integer and version == 1):
        raise ConfigError(
            '%s is a containerd config of version 1 (it has %s). Version 1 is not supported: '
            'set version = 2 for containerd 1.x, or convert it with `containerd config migrate` on containerd 2.x.'
            % (path, 'no version key' if version is None else 'version = 1'))
    if not integer or version not in CRI_RUNTIME_PLUGIN:
        raise ConfigError('%s has version = %r, which this module does not know; it supports containerd config '
                          'versions %s.' % (path, version, ', '.join(str(v) for v in sorted(CRI_RUNTIME_PLUGIN))))
    return version


def parse_containerd_config(text, path=CONTAINERD_CONFIG):
    """TomlDocument of a containerd config text; None (no file) gives an empty document."""
    try:
        return TomlDocument(text or '')
    except TomlError as exc:
        raise ConfigError('%s is not valid TOML: %s. Fix the file; it was left as it was.' % (path, exc))


def _import_covers(entry, config_path, main_path):
    pattern = entry if os.path.isabs(entry) else os.path.join(os.path.dirname(main_path), entry)
    return (os.path.normpath(pattern) == os.path.normpath(config_path)
            or (os.path.dirname(pattern) == os.path.dirname(config_path)
                and fnmatch.fnmatchcase(os.path.basename(config_path), os.path.basename(pattern))))


def containerd_imports(data, path=CONTAINERD_CONFIG):
    imports = data.get('imports', [])
    if not isinstance(imports, list) or not all(isinstance(item, str) for item in imports):
        raise ConfigError('imports in %s must be a list of paths; fix it by hand, it was left as it was.' % path)
    return imports


def containerd_with_import(doc, config_path, main_path=CONTAINERD_CONFIG):
    """Edit doc (the main config) so that its imports cover config_path. Returns True if it changed.

    The entry added is the glob of config_path's directory, so that other
    drop-ins there are read too. A document with no keys yet also gets
    version = 2, which is what containerd assumes of no config at all.
    """
    data = doc.as_dict()
    imports = containerd_imports(data, main_path)
    if any(_import_covers(entry, config_path, main_path) for entry in imports):
        return False
    if not data:
        doc.set('version', 2)
    doc.set('imports', imports + [os.path.join(os.path.dirname(config_path), '*.toml')])
    return True


def cri_runtime_path(version, name):
    """The key path of runtime name in a containerd config of this version."""
    return ('plugins', CRI_RUNTIME_PLUGIN[version], 'containerd', 'runtimes', name)


def containerd_runtimes(data):
    """Names of the CRI runtimes in one parsed containerd config (main or drop-in)."""
    plugins = data.get('plugins')
    if not isinstance(plugins, dict):
        return []
    names = []
    for plugin in sorted(set(CRI_RUNTIME_PLUGIN.values())):
        runtimes = ((plugins.get(plugin) or {}).get('containerd') or {}).get('runtimes')
        if isinstance(runtimes, dict):
            names.extend(name for name in runtimes if name not in names)
    return names


def containerd_drop_in(version, name, path, options=None, default=None, cdi=None, main=None):
    """The data of the drop-in that registers runtime name, for a main config of this version.

    For version 2 the drop-in starts from a copy of the main config's CRI
    plugin section (main, parsed): containerd 1.x replaces a plugin's whole
    section with the one of an imported file, so a drop-in with the runtime
    alone would reset everything else the user set there. containerd 2.x
    merges key by key, which makes the copy harmless.
    """
    options = dict(options or {})
    if 'BinaryName' in options:
        raise ConfigError('containerd_options must not set BinaryName: it is the path option.')
    plugin = CRI_RUNTIME_PLUGIN[version]
    section = {}
    if version == 2 and main:
        section = copy.deepcopy((main.get('plugins') or {}).get(plugin) or {})
    cri = _sub_table(section, 'containerd')
    runtimes = _sub_table(cri, 'runtimes')
    runtime_options = {'BinaryName': path}
    runtime_options.update(options)
    runtimes[name] = {'runtime_type': RUNC_SHIM, 'options': runtime_options}
    if default is True:
        cri['default_runtime_name'] = name
    if cdi is not None:
        section['enable_cdi'] = cdi
    if version == 2 and cri.get('default_runtime_name', 'runc') == 'runc' and 'runc' not in runtimes:
        # containerd 1.x drops its built-in runc entry once a config names any
        # runtime, and the CRI plugin then fails on its default runtime.
        runtimes['runc'] = {'runtime_type': RUNC_SHIM}
    return {'version': version, 'plugins': {plugin: section}}


def _sub_table(table, key):
    value = table.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigError('%s in the CRI plugin section is not a table' % key)
    return value


def render_drop_in(data, name, main_path=CONTAINERD_CONFIG):
    header = ['# Managed by accel.nodes.container_runtime: the %s runtime. Changes made here are overwritten.' % name]
    if data['version'] == 2:
        header.append('# The CRI plugin section repeats the one of %s, because containerd 1.x' % main_path)
        header.append("# replaces a plugin's whole section with the one of an imported file.")
    return '\n'.join(header) + '\n' + dumps(data)
