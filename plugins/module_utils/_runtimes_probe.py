# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Read which container runtimes Docker and containerd have registered, and
which CDI specs exist. Read-only: the runtime roles write these files, through
_runtime_config, whose readers this reuses."""

from __future__ import annotations

import glob
import json
import os
import re

from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

DOCKER_DAEMON_JSON = '/etc/docker/daemon.json'
CONTAINERD_CONFIG = '/etc/containerd/config.toml'
CONTAINERD_DROP_IN_DIR = '/etc/containerd/conf.d'
CDI_DIRS = ('/etc/cdi', '/var/run/cdi')
_CDI_SUFFIXES = ('.yaml', '.yml', '.json')
# A YAML spec's kind is a top-level key; PyYAML is not on every host.
_CDI_KIND_RE = re.compile(r'^kind:\s*["\']?([^"\'\s#]+)', re.MULTILINE)


def _config_readers():
    # The TOML reader behind this costs milliseconds to import: only hosts that
    # have a Docker or containerd config pay for it.
    from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config
    from ansible_collections.accel.nodes.plugins.module_utils import _toml
    return _runtime_config, _toml


def docker(root):
    """(facts, problems) for /etc/docker/daemon.json."""
    facts = {'runtimes': [], 'default_runtime': None}
    text = _rootfs.read_text(root, DOCKER_DAEMON_JSON)
    if text is None:
        return facts, []
    runtime_config, _toml = _config_readers()
    try:
        data = runtime_config.read_daemon_json(text, DOCKER_DAEMON_JSON)
    except runtime_config.ConfigError as e:
        return facts, [str(e)]
    facts['runtimes'] = sorted(runtime_config.docker_runtimes(data))
    default = data.get('default-runtime')
    facts['default_runtime'] = default if isinstance(default, str) else None
    return facts, []


def _host_path(root, path):
    if not root or root == '/':
        return path
    return '/' + os.path.relpath(path, root)


def containerd(root):
    """(facts, problems) for containerd's config.toml and the drop-ins it imports.

    The runtimes and the default are those of the config containerd builds:
    where containerd 1.x may read it (no file of version 3 or later), each
    imported file's CRI plugin section replaces the earlier ones, as in
    containerd 1.x's mergeConfig; runtimes that only containerd 2.x's key by
    key merge would keep are named in a problem.
    """
    facts = {'config_files': [], 'runtimes': [], 'default_runtime': None}
    main_text = _rootfs.read_text(root, CONTAINERD_CONFIG)
    if main_text is None:
        return facts, []
    runtime_config, toml = _config_readers()
    problems = []

    def load(path, text):
        try:
            return toml.loads(text)
        except toml.TomlError as e:
            problems.append('%s is not valid TOML (%s): containerd will not start' % (path, e))
            return {}

    main = load(CONTAINERD_CONFIG, main_text)
    files = [CONTAINERD_CONFIG]
    try:
        imports = runtime_config.containerd_imports(main, CONTAINERD_CONFIG)
    except runtime_config.ConfigError as e:
        problems.append(str(e))
        imports = []
    for pattern in imports:
        if not pattern.startswith('/'):
            pattern = os.path.dirname(CONTAINERD_CONFIG) + '/' + pattern
        files.extend(_host_path(root, path) for path in sorted(glob.glob(_rootfs.join(root, pattern))))

    configs = [main] + [load(path, _rootfs.read_text(root, path) or '') for path in files[1:]]
    effective = runtime_config.containerd_effective(configs)
    runtimes = runtime_config.containerd_runtimes(effective)
    if runtime_config.containerd_sections_replaced(configs):
        merged = runtime_config.containerd_runtimes(runtime_config.containerd_effective(configs, major=2))
        lost = sorted(set(merged) - set(runtimes))
        if lost:
            problems.append(
                'containerd 1.x keeps the CRI plugin section of the last of %s that sets it, so it does not register '
                '%s (imports replace whole plugin sections there; containerd 2.x merges them): put every runtime '
                'in one file' % (', '.join(files), ', '.join(lost)))
    facts.update(config_files=files, runtimes=sorted(runtimes),
                 default_runtime=runtime_config.containerd_default_runtime(effective))

    ignored = [
        CONTAINERD_DROP_IN_DIR + '/' + name
        for name in _rootfs.list_dir(root, CONTAINERD_DROP_IN_DIR) or []
        if name.endswith('.toml') and CONTAINERD_DROP_IN_DIR + '/' + name not in files
    ]
    if ignored:
        problems.append('%s does not import %s, so containerd ignores it' % (
            CONTAINERD_CONFIG, ', '.join(ignored)))
    return facts, problems


def _cdi_kind(text, name):
    if name.endswith('.json'):
        try:
            kind = json.loads(text).get('kind')
        except (ValueError, AttributeError):
            return None
        return kind if isinstance(kind, str) else None
    match = _CDI_KIND_RE.search(text)
    return match.group(1) if match else None


def cdi_specs(root):
    """[{path, kind}] for each CDI spec file, in path order."""
    specs = []
    for directory in CDI_DIRS:
        for name in _rootfs.list_dir(root, directory) or []:
            if name.endswith(_CDI_SUFFIXES):
                path = directory + '/' + name
                specs.append({'path': path, 'kind': _cdi_kind(_rootfs.read_text(root, path) or '', name)})
    return specs


def probe(root):
    """(container_runtimes facts, problems)."""
    docker_facts, problems = docker(root)
    containerd_facts, more = containerd(root)
    return {
        'docker': docker_facts,
        'containerd': containerd_facts,
        'cdi_specs': cdi_specs(root),
    }, problems + more
