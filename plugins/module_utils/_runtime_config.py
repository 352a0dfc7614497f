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

containerd: the runtimes go into one drop-in file we own, which the main
config imports. The main config is edited only where containerd could not use
the drop-in otherwise (no version, CRI disabled, no import), through the
format-preserving TOML editor.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re

from ansible_collections.accel.nodes.plugins.module_utils._toml import TomlDocument, TomlError, dumps, loads

DOCKER_CONFIG = '/etc/docker/daemon.json'
CONTAINERD_CONFIG = '/etc/containerd/config.toml'
CONTAINERD_DROP_IN = '/etc/containerd/conf.d/99-accel-nodes.toml'
# Where versions before the shared drop-in put each runtime.
CONTAINERD_LEGACY_DROP_IN = '/etc/containerd/conf.d/99-%s.toml'
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


def daemon_options_merged(data: dict, options: dict, path: str = DOCKER_CONFIG) -> dict:
    """A copy of daemon.json data with the top-level keys of options set, features merged one key deeper.

    Keys already in data keep their place; new keys go at the end.
    """
    new = copy.deepcopy(data)
    for key, value in options.items():
        if key == 'features' and isinstance(value, dict):
            _sub_object(new, 'features', path).update(copy.deepcopy(value))
        else:
            new[key] = copy.deepcopy(value)
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


def docker_runtime_text(before, name, path=None, runtime_args=(), default=None, cdi=None, state='present',
                        config_path=DOCKER_CONFIG):
    """(data, the text of daemon.json) once runtime name is registered (state present) or not (absent), from
    its text before (None: no file); the text is None where there is to be no file. Raises ConfigError."""
    data = read_daemon_json(before, config_path)
    if state == 'present':
        data = docker_present(data, name, path, runtime_args, default, cdi, config_path)
    else:
        data = docker_absent(data, name)
    after = render_daemon_json(data, before) if before is not None or state == 'present' else None
    return data, after


# containerd
#
# Vendor facts this part rests on:
# - containerd reads a config without a version key as version 1, whose plugin
#   names are short ("cri"); version 2 (containerd 1.3 and later) takes full
#   URIs and containerd 1.x refuses a short name in disabled_plugins once the
#   merged config is version 2 ("invalid disabled plugin URI"): containerd
#   1.6/1.7 services/server/config/config.go, GetVersion and ValidateV2.
#   Debian 12's containerd 1.6.20 does both: Docker's file with a version 2
#   drop-in fails to load, and of two drop-ins that set CRI runtimes,
#   `containerd config dump` shows the last one's alone.
# - containerd 1.x merges an imported file over the main config with mergo,
#   then replaces each plugin's whole section with the imported file's
#   ("Replace entire sections instead of merging map's values", mergeConfig in
#   the same file; containerd/containerd#5837 and #7982 show the effect).
#   containerd 2.x migrates every file to its own version and merges plugin
#   sections key by key (containerd/containerd#9982, cmd/containerd/server/
#   config/config.go LoadConfigWithPlugins). Slices such as disabled_plugins
#   are appended to in both, so a drop-in cannot take an entry out again.
# - Docker's containerd.io package ships /etc/containerd/config.toml with
#   disabled_plugins = ["cri"] and no version (docker/containerd-packaging
#   common/containerd.toml, added in docker/containerd-packaging#41; the file
#   as installed: containerd/containerd#4956). Debian 12's containerd 1.6.20
#   ships a version 2 config with a CRI cni section
#   (tests/fixtures/toml/containerd-1.6.20-debian12.toml).

# The short names of version 1 and the URIs they stand for, as containerd 2.x
# migrates them (v1MigratePluginName in cmd/containerd/server/config/config.go).
V1_PLUGIN_URIS = {
    'cri': 'io.containerd.grpc.v1.cri',
    'cgroups': 'io.containerd.monitor.v1.cgroups',
    'linux': 'io.containerd.runtime.v1.linux',
    'scheduler': 'io.containerd.gc.v1.scheduler',
    'bolt': 'io.containerd.metadata.v1.bolt',
    'task': 'io.containerd.runtime.v2.task',
    'opt': 'io.containerd.internal.v1.opt',
    'restart': 'io.containerd.internal.v1.restart',
    'tracing': 'io.containerd.internal.v1.tracing',
    'otlp': 'io.containerd.tracing.processor.v1.otlp',
    'aufs': 'io.containerd.snapshotter.v1.aufs',
    'btrfs': 'io.containerd.snapshotter.v1.btrfs',
    'devmapper': 'io.containerd.snapshotter.v1.devmapper',
    'native': 'io.containerd.snapshotter.v1.native',
    'overlayfs': 'io.containerd.snapshotter.v1.overlayfs',
    'zfs': 'io.containerd.snapshotter.v1.zfs',
}

# Plugins whose absence leaves the CRI runtimes unused: the CRI gRPC service
# (all versions) and, in containerd 2.x, the CRI runtime and image plugins.
CRI_PLUGINS = ('cri', 'io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images')

_MANAGED = '# Managed by accel.nodes.container_runtime'
_MANAGED_RE = re.compile(r'\A# Managed by accel\.nodes\.container_runtime: (?:the (\S+) runtime|runtimes? (.+?))\. Changes made')


def v1_plugin_uri(name: str) -> str:
    """The URI containerd gives a version 1 plugin name (a name with a dot is a URI already)."""
    if '.' in name:
        return name
    if name in V1_PLUGIN_URIS:
        return V1_PLUGIN_URIS[name]
    if name.endswith('-service'):
        return 'io.containerd.service.v1.' + name
    if name in ('windows', 'windows-lcow'):
        return 'io.containerd.snapshotter.v1.' + name
    return 'io.containerd.grpc.v1.' + name


def containerd_version(data, path=CONTAINERD_CONFIG):
    """The config version of a parsed containerd config: 1 for a config without a version key, {} is 2."""
    if not data:
        return 2
    version = data.get('version', 1)
    integer = isinstance(version, int) and not isinstance(version, bool)  # true is not 1, and '2' is not 2
    if not integer or version not in (1,) + tuple(CRI_RUNTIME_PLUGIN):
        raise ConfigError('%s has version = %r, which this module does not know; it supports containerd config '
                          'versions 1 (converted to 2), %s.'
                          % (path, version, ', '.join(str(v) for v in sorted(CRI_RUNTIME_PLUGIN))))
    return version


def parse_containerd_config(text, path=CONTAINERD_CONFIG):
    """TomlDocument of a containerd config text; None (no file) gives an empty document."""
    try:
        return TomlDocument(text or '')
    except TomlError as exc:
        raise ConfigError('%s is not valid TOML: %s. Fix the file; it was left as it was.' % (path, exc))


def import_covers(entry, config_path, main_path):
    pattern = entry if os.path.isabs(entry) else os.path.join(os.path.dirname(main_path), entry)
    return (os.path.normpath(pattern) == os.path.normpath(config_path)
            or (os.path.dirname(pattern) == os.path.dirname(config_path)
                and fnmatch.fnmatchcase(os.path.basename(config_path), os.path.basename(pattern))))


def containerd_imports(data, path=CONTAINERD_CONFIG):
    imports = data.get('imports', [])
    if not isinstance(imports, list) or not all(isinstance(item, str) for item in imports):
        raise ConfigError('imports in %s must be a list of paths; fix it by hand, it was left as it was.' % path)
    return imports


def _plugin_list(data, key, path):
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError('%s in %s must be a list of plugin names; fix it by hand, it was left as it was.' % (key, path))
    return value


def _convert_v1(doc, path):
    """Make a version 1 main config version 2 in place, as containerd 2.x's migration would."""
    data = doc.as_dict()
    short = sorted(k for k in (data.get('plugins') or {}) if '.' not in k)
    short += sorted('proxy_plugins.' + k for k in (data.get('proxy_plugins') or {}) if '.' not in k)
    if short:
        raise ConfigError(
            '%s is a containerd config of version 1 (it has no version key) with plugin tables under short names '
            '(%s). This module converts only the plugin lists of such a file. Set version = 2 and rename each table '
            'to its URI (for example [plugins.cri] to [plugins."io.containerd.grpc.v1.cri"]), or run '
            '`containerd config migrate` on containerd 2.x; the file was left as it was.' % (path, ', '.join(short)))
    doc.set('version', 2)
    for key in ('disabled_plugins', 'required_plugins'):
        names = _plugin_list(data, key, path)
        if names:
            doc.set(key, [v1_plugin_uri(name) for name in names])


def containerd_main(doc, config_path, main_path=CONTAINERD_CONFIG):
    """Edit the main config doc so that containerd's CRI plugin uses the drop-in config_path.

    Returns (version, changes): the config version the drop-in must use, and
    one sentence per change made. In order: a missing config becomes version 2;
    a version 1 config (Docker's containerd.io ships one) becomes version 2,
    its plugin names turned into URIs; the CRI plugins leave disabled_plugins;
    imports gains the glob of the drop-in's directory. Other keys and every
    comment stay as they were.
    """
    changes = []
    data = doc.as_dict()
    version = containerd_version(data, main_path)
    if not data:
        doc.set('version', 2)
    elif version == 1:
        _convert_v1(doc, main_path)
        version = 2
        changes.append('%s had no version key, so containerd read it as version 1; it now says version = 2 '
                       'and names its plugins by URI' % main_path)
    disabled = _plugin_list(doc.as_dict(), 'disabled_plugins', main_path)
    kept = [name for name in disabled if name not in CRI_PLUGINS]
    if kept != disabled:
        doc.set('disabled_plugins', kept)
        changes.append('%s disabled the CRI plugin (%s), so no CRI client could use a runtime; it is enabled now'
                       % (main_path, ', '.join(name for name in disabled if name in CRI_PLUGINS)))
    imports = containerd_imports(doc.as_dict(), main_path)
    if not any(import_covers(entry, config_path, main_path) for entry in imports):
        doc.set('imports', imports + [os.path.join(os.path.dirname(config_path), '*.toml')])
    return version, changes


def cri_runtime_path(version, name):
    """The key path of runtime name in a containerd config of this version."""
    return ('plugins', CRI_RUNTIME_PLUGIN[version], 'containerd', 'runtimes', name)


def _cri_sections(data):
    plugins = data.get('plugins')
    if not isinstance(plugins, dict):
        return []
    sections = [plugins.get(plugin) for plugin in sorted(set(CRI_RUNTIME_PLUGIN.values()))]
    return [s for s in sections if isinstance(s, dict)]


def containerd_runtimes(data):
    """Names of the CRI runtimes in one parsed containerd config (main, drop-in or merged)."""
    names = []
    for section in _cri_sections(data):
        runtimes = (section.get('containerd') or {}).get('runtimes')
        if isinstance(runtimes, dict):
            names.extend(name for name in runtimes if name not in names)
    return names


def containerd_default_runtime(data):
    """default_runtime_name of the CRI plugin in one parsed config, or None."""
    for section in _cri_sections(data):
        cri = section.get('containerd')
        name = cri.get('default_runtime_name') if isinstance(cri, dict) else None
        if isinstance(name, str) and name:
            return name
    return None


def _deep_merge(into, data):
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def containerd_sections_replaced(configs, major=None):
    """Whether containerd replaces plugin sections on import for these parsed files, main first.

    A version 3 or 4 file proves containerd 2.x, which merges. Otherwise major,
    containerd's major version, decides where known. Without it, a version 1
    or 2 config may be read by containerd 1.x, and True is the answer that
    claims no runtime containerd might not have.
    """
    versions = [data.get('version') for data in configs if isinstance(data.get('version'), int)]
    if any(v >= 3 for v in versions):
        return False
    return major is None or major < 2


def containerd_effective(configs, major=None):
    """The config containerd builds from these parsed files (main first, then imports in load order).

    Plugin sections replace each other (containerd 1.x) or merge key by key
    (containerd 2.x), per containerd_sections_replaced. Other keys merge.
    """
    replace = containerd_sections_replaced(configs, major)
    merged = {}
    for data in configs:
        data = copy.deepcopy(data)
        plugins = data.pop('plugins', None)
        _deep_merge(merged, data)
        if isinstance(plugins, dict):
            into = merged.setdefault('plugins', {})
            for name, section in plugins.items():
                if replace or not isinstance(into.get(name), dict) or not isinstance(section, dict):
                    into[name] = section
                else:
                    _deep_merge(into[name], section)
    return merged


def containerd_major(version_output):
    """containerd's major version from `containerd --version`, or None."""
    match = re.search(r'\sv?(\d+)\.\d+', version_output or '')
    return int(match.group(1)) if match else None


def drop_in_runtimes(text):
    """The runtimes a drop-in written by this module holds, from its first line; None for any other file."""
    match = _MANAGED_RE.match(text or '')
    if not match:
        return None
    names = match.group(1) or match.group(2)
    return [n.strip() for n in names.split(',') if n.strip()]


def _leaves(data, prefix=()):
    """{dotted path tuple: value} of every value in nested dicts; empty tables give nothing."""
    found = {}
    for key, value in (data or {}).items():
        if isinstance(value, dict):
            found.update(_leaves(value, prefix + (key,)))
        else:
            found[prefix + (key,)] = value
    return found


def nvidia_ctk_drop_in_extras(drop_in, main, name):
    """What a drop-in of `nvidia-ctk runtime configure` (toolkit 1.18 and later: conf.d/99-nvidia.toml) holds
    besides runtime name: the settings of it that the main config does not have, as dotted keys; None where it
    does not register runtime name, so is not such a drop-in.

    nvidia-ctk starts the drop-in as a copy of the main config's whole CRI plugin section, then adds its
    runtime (v1.20.0 pkg/config/engine/containerd/config_drop_in.go; "plugins are overridden by key and the
    content is not merged" before containerd 2.1). So it registers the main config's runtimes too (runc, from
    `containerd config default`), in any order beside name: those count as settings it holds where they differ
    from the main config leaf by leaf, and a runtime the main config does not register is one, named by its own
    key where it has no settings. Where the copy holds nothing the main config does not, the drop-in is the
    runtime alone, which accel.nodes.container_runtime registers in its own drop-in."""
    plugins = drop_in.get('plugins') if isinstance(drop_in.get('plugins'), dict) else {}
    registered = {(plugin, n) for plugin in sorted(set(CRI_RUNTIME_PLUGIN.values()))
                  if isinstance(plugins.get(plugin), dict) for n in _runtimes_of(plugins[plugin])}
    if name not in {n for dummy, n in registered}:
        return None
    main_leaves = _leaves(main)
    extras = set()
    for path, value in _leaves(drop_in).items():
        if path == ('version',) or (len(path) > 4 and path[0] == 'plugins' and path[2:5] == ('containerd', 'runtimes', name)):
            continue
        if main_leaves.get(path) != value:
            extras.add(path)
    for plugin, n in registered:
        path = ('plugins', plugin, 'containerd', 'runtimes', n)
        if n != name and not isinstance(_runtimes_of(_section_of(main, plugin)).get(n), dict) \
                and not any(extra[:5] == path for extra in extras):
            extras.add(path)
    return ['.'.join(path) for path in sorted(extras)]


def _section_of(data, plugin):
    section = ((data or {}).get('plugins') or {}).get(plugin)
    return section if isinstance(section, dict) else {}


def _runtimes_of(section):
    runtimes = (section.get('containerd') or {}).get('runtimes') if isinstance(section.get('containerd'), dict) else None
    return runtimes if isinstance(runtimes, dict) else {}


def runtime_entry(path, options=None):
    """The CRI runtime entry for a runtime binary behind the runc shim."""
    options = dict(options or {})
    if 'BinaryName' in options:
        raise ConfigError('containerd_options must not set BinaryName: it is the path option.')
    entry_options = {'BinaryName': path}
    entry_options.update(options)
    return {'runtime_type': RUNC_SHIM, 'options': entry_options}


def containerd_drop_in(version, name, entry=None, default=None, cdi=None, main=None, current=None, owned=()):
    """(data, runtimes) of the drop-in after registering runtime name (entry given) or removing it (entry None).

    The drop-in holds every runtime this module registered there (owned, read
    from the drop-in's first line, with their entries from current, its parsed
    data), so that one file sets the CRI plugin. For version 2 it starts from a
    copy of the main config's CRI plugin section (main, parsed): containerd 1.x
    replaces a plugin's whole section with the one of an imported file, so a
    drop-in with the runtimes alone would reset everything else the user set
    there, and two drop-ins would keep only the last one's runtimes. containerd
    2.x merges key by key, which makes the copy harmless. data is None when no
    runtime is left.
    """
    plugin = CRI_RUNTIME_PLUGIN[version]
    base = _section_of(main, plugin) if version == 2 else {}
    # A drop-in written for another config version keeps its runtimes where that version put them.
    old = _section_of(current, CRI_RUNTIME_PLUGIN.get((current or {}).get('version'), plugin))
    old_runtimes = _runtimes_of(old)
    section = copy.deepcopy(base)
    cri = _sub_table(section, 'containerd')
    runtimes = _sub_table(cri, 'runtimes')
    # Runtimes keep their order, so that registering one again rewrites nothing.
    names = [n for n in owned if n in old_runtimes or n == name]
    if name not in names:
        names.append(name)
    if entry is None:
        names.remove(name)
        if name in runtimes and name not in _runtimes_of(base):
            del runtimes[name]
    for n in names:
        runtimes[n] = entry if n == name else copy.deepcopy(old_runtimes[n])
    if not names:
        return None, []
    old_default = (old.get('containerd') or {}).get('default_runtime_name')
    if old_default in names:
        cri['default_runtime_name'] = old_default
    if default is True:
        cri['default_runtime_name'] = name
    elif (default is False or entry is None) and cri.get('default_runtime_name') == name:
        base_default = (base.get('containerd') or {}).get('default_runtime_name')
        if base_default and base_default != name:
            cri['default_runtime_name'] = base_default
        else:
            del cri['default_runtime_name']
    if cdi is not None:
        section['enable_cdi'] = cdi
    elif 'enable_cdi' in old and old.get('enable_cdi') != base.get('enable_cdi'):
        section['enable_cdi'] = old['enable_cdi']
    if version == 2 and cri.get('default_runtime_name', 'runc') == 'runc' and 'runc' not in runtimes:
        # containerd 1.x drops its built-in runc entry once a config names any
        # runtime, and the CRI plugin then fails on its default runtime.
        runtimes['runc'] = {'runtime_type': RUNC_SHIM}
    return {'version': version, 'plugins': {plugin: section}}, names


def _sub_table(table, key):
    value = table.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigError('%s in the CRI plugin section is not a table' % key)
    return value


def render_drop_in(data, names, main_path=CONTAINERD_CONFIG):
    header = ['%s: runtime%s %s. Changes made here are overwritten.'
              % (_MANAGED, 's' if len(names) > 1 else '', ', '.join(names))]
    if data['version'] == 2:
        header.append('# The CRI plugin section repeats the one of %s, and every runtime the module' % main_path)
        header.append("# registers is here, because containerd 1.x replaces a plugin's whole section")
        header.append('# with the one of each imported file.')
    return '\n'.join(header) + '\n' + dumps(data)


def containerd_runtime_change(main_doc, drop_in_before, name, path=None, options=None, default=None, cdi=None,
                              present=True, drop_in=CONTAINERD_DROP_IN, main_path=CONTAINERD_CONFIG):
    """What accel.nodes.container_runtime (engine containerd) makes of containerd's files: (version, changes,
    drop_in_after), drop_in_after None for no drop-in. main_doc (parse_containerd_config) is edited in place: its
    text() is the main config after. Shared by the module and the controller's containerd_runtime_in_place filter.
    Raises ConfigError or TomlError where the module fails."""
    owned = drop_in_runtimes(drop_in_before)
    current = loads(drop_in_before) if drop_in_before else None
    if present:
        version, changes = containerd_main(main_doc, drop_in, main_path)
        entry = runtime_entry(path, options)
    else:
        version = (current or {}).get('version')
        changes, entry = [], None
    if not present and name not in (owned or ()):
        return version, changes, drop_in_before  # nothing of this runtime's here: leave the file as it is
    if version in CRI_RUNTIME_PLUGIN:
        data, names = containerd_drop_in(version, name, entry, default, cdi, main_doc.as_dict(), current, owned or ())
    else:
        data, names = None, []
    if data is current:
        return version, changes, drop_in_before
    return version, changes, render_drop_in(data, names, main_path) if data else None
