#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_state
short_description: Keep Docker and containerd enabled and running, and keep the configuration they run with as the last known good one
version_added: 0.2.0
description:
  - B(Packages.) With O(packages), first reads whether they are installed, from the dpkg status file
    (C(/var/lib/dpkg/status)) where there is one, otherwise with one C(rpm -q). No apt or dnf runs. When one is
    missing, the module does nothing more and returns them in RV(missing_packages), for the caller to install
    them and run it again without O(packages).
  - For each engine in O(engines), containerd first, makes sure its systemd unit is enabled and, with O(live), started.
    A unit that systemd does not know fails the module, with O(missing_hint) appended to the message.
  - An engine found stopped (for example by a run killed during its restart) is started the way
    M(accel.nodes.engine_restart) restarts it - checked, and put back on its last known good configuration when it
    does not start with the current one.
  - With O(live), keeps the configuration each engine runs with as its last known good one, which
    M(accel.nodes.engine_restart) puts back when a changed configuration keeps the engine from starting.
  - B(Docker.) A running Docker is asked C(docker info) once, which gives RV(cgroup_driver). When C(daemon.json)
    is what Docker was last seen running with, nothing more is read. Otherwise Docker reads C(daemon.json) when it
    starts, so a file older than the running daemon is the one it runs with, and it is kept. A file changed since
    is compared with what C(docker info) said, and with the last known good C(daemon.json). A runtime
    registration (or C(default-runtime)) that Docker does not run with, or a managed key (O(managed_keys), and
    C(features), which M(accel.nodes.container_runtime) writes) whose value differs from the last known good one
    (where none was recorded, that the file sets), is a change whose restart never happened, for example in a run that
    was killed or failed before its handlers. RV(restart) then names C(docker), for the caller to restart it.
    Edits to other keys are left for the user to apply, since a restart stops running containers; RV(messages)
    says so.
  - B(containerd.) The files under O(containerd_dir) are kept, as a tar and the digest of the files, when none is
    newer than the running daemon and the digest changed. Where one is newer and the files differ from the last
    known good ones (or none was recorded), containerd does not run with them yet, and RV(restart) names
    C(containerd). C(containerd config dump) cannot tell, since it reads the files, not the running daemon; and
    a restart of containerd leaves running containers running (their shims stay). Every file under
    O(containerd_dir) counts, so an edit of one containerd reads live (C(certs.d/*/hosts.toml)) also asks for
    that restart.
  - B(Interrupted runs.) With O(packages) on dpkg, RV(interrupted) lists what a dpkg run left half-way, and any
    temporary file of an interrupted write beside C(daemon.json), C(config.toml) or the drop-in in C(conf.d), for
    M(accel.nodes.interrupted_run) to finish; the module then stops there. dpkg's own files beside them
    (C(.dpkg-dist), C(.dpkg-new), C(.dpkg-old)) are for a person to merge, so RV(messages) names them and the checks
    go on.
  - One C(systemctl show) answers for every unit, and one C(docker info) for Docker; a converged node needs nothing
    more.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
  - accel.nodes.engine_paths
attributes:
  check_mode:
    support: full
    details:
      - Reads everything, enables, starts and writes nothing, and reports what it would change.
  diff_mode:
    support: none
options:
  engines:
    description:
      - The engines to look after.
    type: list
    elements: str
    choices: [docker, containerd]
    required: true
  live:
    description:
      - Whether the engines run here. V(false), as when baking an image in a chroot, only enables the units
        (C(systemctl is-enabled), C(systemctl enable), which work without a running systemd) and keeps nothing.
    type: bool
    default: true
  packages:
    description:
      - Packages the engines need. Where one is not installed, nothing is enabled, started or kept, and
        RV(missing_packages) names it.
      - A name is looked up as it is given. On dpkg a name with a version (V(docker-ce=5:27.3.1-1~debian.12~bookworm))
        or a virtual package always counts as missing, so that the package manager decides.
    type: list
    elements: str
    default: []
  missing_hint:
    description:
      - Text appended to the failure message when a unit is not installed, to say what to do.
    type: str
    default: ''
  managed_keys:
    description:
      - Top-level C(daemon.json) keys the caller manages besides C(runtimes), C(default-runtime) (compared with
        what C(docker info) answers) and C(features).
        Where one differs from the last known good C(daemon.json) and the file changed after Docker started,
        Docker is to be restarted (RV(restart)).
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  timeout:
    description:
      - Seconds to wait for an engine found stopped to answer after its start.
    type: int
    default: 60
    version_added: 0.4.0
seealso:
  - module: accel.nodes.engine_restart
"""

EXAMPLES = r"""
- name: Find the engine packages that are missing; where none is, enable and start Docker
  accel.nodes.engine_state:
    engines: [docker]
    packages: [docker.io, python3-requests]
  register: docker_engine_state

- name: Enable and start Docker, and keep the daemon.json it runs with
  accel.nodes.engine_state:
    engines: [docker]
  register: docker_engine_state

- name: Restart Docker where daemon.json registers a runtime it does not run with yet
  ansible.builtin.debug:
    msg: "{{ docker_engine_state.messages }}"
  changed_when: docker_engine_state.restart | length > 0
  notify: accel_nodes_restart_docker
  when: docker_engine_state.messages | length > 0
"""

RETURN = r"""
missing_packages:
  description:
    - The O(packages) that are not installed, in the order given. When there is one, nothing else was done and
      the other lists are empty.
  returned: always
  type: list
  elements: str
  sample: [docker.io, python3-requests]
cgroup_driver:
  description:
    - The cgroup driver Docker runs with (C(CgroupDriver) of C(docker info)), V(systemd) or V(cgroupfs). Null when
      Docker is not among the O(engines), O(live) is V(false), or Docker is not running or does not answer (as in
      check mode before it would be started).
  returned: always
  type: str
  sample: systemd
enabled:
  description: The units that were (or, in check mode, would be) enabled.
  returned: always
  type: list
  elements: str
  sample: [docker.service]
started:
  description: The units that were (or would be) started.
  returned: always
  type: list
  elements: str
  sample: []
last_good:
  description: The engines whose last known good configuration was (or would be) updated.
  returned: always
  type: list
  elements: str
  sample: [docker]
pending_keys:
  description:
    - The managed C(daemon.json) keys whose value differs from the last known good C(daemon.json), where the file
      changed after Docker started.
  returned: always
  type: list
  elements: str
  sample: [log-opts]
  version_added: 0.4.0
interrupted:
  description:
    - What an interrupted run left, as M(accel.nodes.node_probe) returns it (RV(accel.nodes.node_probe#module:interrupted)),
      packages dpkg left half-way (with O(packages) on dpkg), and temporary files of interrupted writes.
  returned: always
  type: list
  elements: str
  sample: ["docker.io: half-installed (reinstreq)"]
  version_added: 0.4.0
pending_runtimes:
  description:
    - The runtime registrations in C(daemon.json) that Docker does not run with, as C(name=path), and
      C(default-runtime=name) where daemon.json names another default.
  returned: always
  type: list
  elements: str
  sample: [nvidia=/usr/bin/nvidia-container-runtime]
restart:
  description: The engines to restart to apply what their configuration registers.
  returned: always
  type: list
  elements: str
  sample: [docker]
messages:
  description: What the user should know about the configurations the engines run with, one sentence group each.
  returned: always
  type: list
  elements: str
  sample: ["/etc/containerd changed after containerd started and differs from the configuration containerd was last
           seen running with. The checked restart handler applies it."]
"""

import os
import re
from typing import Dict, List, Optional, Tuple

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg
from ansible_collections.accel.nodes.plugins.module_utils import _engine
from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils import _interrupted
from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc
from ansible_collections.accel.nodes.plugins.module_utils._engine import UNITS, Host


def missing_packages(host: Host, names: List[str]) -> Tuple[List[str], Optional[str]]:
    """The names of packages that are not installed, in the order given, and dpkg's status text: from dpkg's
    status file where there is one (only Status "installed" counts), otherwise from one rpm -q."""
    if not names:
        return [], None
    status = _dpkg.read_status(_dpkg.STATUS_FILE)
    if status is not None:
        packages = _dpkg.parse_status(status)
        return [n for n in names if packages.get(n, {}).get('status') != 'installed'], status
    rpm = host.module.get_bin_path('rpm')
    if not rpm:
        host.module.fail_json(msg='Cannot tell which packages are installed: this node has neither %s nor rpm.'
                              % _dpkg.STATUS_FILE)
    # rpm -q says "package NAME is not installed" on stdout for each one missing, and exits with their count.
    rc_, out, err = host.run([rpm, '-q'] + names)
    absent = set(re.findall(r'^package (.+) is not installed$', out, re.M))
    if rc_ != 0 and not absent:
        host.module.fail_json(msg='rpm -q failed (rc %d): %s' % (rc_, (err or out).strip()))
    return [n for n in names if n in absent], None


def missing(host: Host, units: List[str], hint: str) -> None:
    host.module.fail_json(msg=('%s is not installed on this node: systemd knows no such unit. %s'
                               % (' and '.join(units), hint)).strip())


def enable_offline(host: Host, engines: List[str], hint: str, result: Dict) -> None:
    """Enable the units without asking a running systemd, as in a chroot."""
    absent = []
    for engine in engines:
        rc_, out, err = host.systemctl('is-enabled', UNITS[engine])
        state = out.strip()
        if state in _engine.ENABLED_STATES:
            continue
        if state == 'not-found' or 'No such file' in err:
            absent.append(UNITS[engine])
            continue
        result['enabled'].append(UNITS[engine])
    if absent:
        missing(host, absent, hint)
    for unit in result['enabled']:
        if not host.check_mode:
            rc_, out, err = host.systemctl('enable', unit)
            if rc_ != 0:
                host.module.fail_json(msg='Unable to enable %s: %s' % (unit, (err or out).strip()))


def enable_and_start(host: Host, engines: List[str], hint: str, result: Dict) -> Dict[str, Dict[str, str]]:
    units = host.show(engines)
    absent = [UNITS[e] for e in engines if units[e].get('LoadState') == 'not-found']
    if absent:
        missing(host, absent, hint)
    for engine in engines:
        unit, props = UNITS[engine], units[engine]
        if props.get('UnitFileState') not in _engine.ENABLED_STATES:
            result['enabled'].append(unit)
            if not host.check_mode:
                rc_, out, err = host.systemctl('enable', unit)
                if rc_ != 0:
                    host.module.fail_json(msg='Unable to enable %s: %s' % (unit, (err or out).strip()))
        if props.get('ActiveState') not in ('active', 'activating'):
            result['started'].append(unit)
            if not host.check_mode:
                # Started as the handlers restart it: a run killed during a checked restart may have left
                # it stopped, with a configuration it cannot start with.
                outcome = _engine.checked_restart(host, engine)
                if outcome.get('failed'):
                    host.module.fail_json(msg=outcome['msg'], restored=outcome.get('restored'), **result)
                if outcome.get('kept'):
                    result['last_good'].append(engine)
    if result['started'] and not host.check_mode:
        units = host.show(engines)  # the new main processes
    return units


def main_pid(props: Dict[str, str]) -> int:
    try:
        return int(props.get('MainPID') or 0)
    except ValueError:
        return 0


def docker_last_good(host: Host, pid: int, result: Dict, managed_keys: List[str]) -> None:
    """Keep the daemon.json Docker runs with, or find the runtimes it does not run with yet;
    and say which cgroup driver it runs with."""
    info = host.docker_info() if pid else None
    if info is None:
        return
    result['cgroup_driver'] = info.get('CgroupDriver') or None
    if host.docker_in_sync():
        return
    path = host.daemon_json
    started = host.started(pid)
    if started is not None and (not os.path.exists(path) or os.stat(path).st_mtime < started):
        if host.keep_docker():
            result['last_good'].append('docker')
        return
    try:
        config = rc.read_daemon_json(_files.read_text(path), path)
    except (rc.ConfigError, ValueError, OSError) as exc:
        result['messages'].append(
            '%s changed after Docker started and could not be compared with what Docker runs (%s). Docker is not '
            'restarted; it would not start with a file it cannot read either.' % (path, exc))
        return
    pending = _engine.pending_runtimes(config, info)
    result['pending_runtimes'] = pending
    keys = _engine.pending_keys(config, host.docker_last_good_config(),
                                [k for k in list(_engine.DOCKER_MANAGED_KEYS) + managed_keys
                                 if k not in ('runtimes', 'default-runtime')])
    keys = list(dict.fromkeys(keys))
    result['pending_keys'] = keys
    applies = ('it changed after Docker started and no restart followed. The checked restart handler applies it, '
               'and puts the last known good daemon.json back if Docker does not start.')
    if pending:
        result['restart'].append('docker')
        result['messages'].append('%s registers %s, which Docker does not run with: %s' % (path, ', '.join(pending), applies))
    elif keys:
        result['restart'].append('docker')
        result['messages'].append('%s sets %s other than the daemon.json Docker was last seen running with: %s'
                                  % (path, ', '.join(keys), applies))
    else:
        result['messages'].append(
            '%s changed after Docker started. The change touches no key this collection manages, so it does not '
            'restart Docker for it (a restart stops running containers). Restart Docker when it suits you. Until '
            'then it is not kept as the last known good daemon.json.' % path)


def containerd_last_good(host: Host, pid: int, result: Dict, managed_keys: List[str]) -> None:
    """Keep the files containerd runs with: those older than the running daemon. Newer files that differ from
    the last good ones are a change whose restart never happened."""
    if pid == 0:
        return
    started = host.started(pid)
    if started is not None and _engine.newest_mtime(host.containerd_dir) < started:
        if host.keep_containerd():
            result['last_good'].append('containerd')
        return
    if host.containerd_in_sync():
        return
    result['restart'].append('containerd')
    result['messages'].append(
        '%s changed after containerd started and differs from the configuration containerd was last seen running '
        'with (or none was recorded): no restart followed the change. The checked restart handler applies it, and '
        'puts the last known good configuration back if containerd does not start. Running containers keep '
        'running.' % host.containerd_dir)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            engines=dict(type='list', elements='str', required=True, choices=['docker', 'containerd']),
            live=dict(type='bool', default=True),
            packages=dict(type='list', elements='str', default=[]),
            missing_hint=dict(type='str', default=''),
            managed_keys=dict(type='list', elements='str', default=[], no_log=False),
            timeout=dict(type='int', default=60),
            **_engine.PATH_OPTIONS
        ),
        supports_check_mode=True,
    )
    p = module.params
    host = Host(module, p['config_path'], p['containerd_dir'], p['state_dir'], p['timeout'])
    engines = [e for e in _engine.ENGINE_ORDER if e in p['engines']]
    missing, status_text = missing_packages(host, p['packages'])
    result: Dict = dict(enabled=[], started=[], last_good=[], pending_runtimes=[], pending_keys=[], restart=[],
                        messages=[], missing_packages=missing, cgroup_driver=None, interrupted=[])
    # dpkg's files beside a configuration (a package's new default, .dpkg-dist) wait for
    # a person, not for the next run: they are reported and do not stop the engines' checks.
    paths = [p['config_path'], os.path.join(p['containerd_dir'], 'config.toml'),
             os.path.join(p['containerd_dir'], 'conf.d', os.path.basename(rc.CONTAINERD_DROP_IN))]
    dpkg_files = _interrupted.leftovers(paths)['dpkg']
    result['interrupted'] = [line for line in _interrupted.detect(paths, status_text) if line not in dpkg_files]
    if dpkg_files:
        module.warn(_interrupted.dpkg_leftovers_message(dpkg_files))
        result['messages'].append(_interrupted.dpkg_leftovers_message(dpkg_files))
    if result['missing_packages'] or result['interrupted']:
        module.exit_json(changed=False, **result)
    if p['live']:
        units = enable_and_start(host, engines, p['missing_hint'], result)
        for engine in engines:
            keep = containerd_last_good if engine == 'containerd' else docker_last_good
            keep(host, main_pid(units[engine]), result, p['managed_keys'])
    else:
        enable_offline(host, engines, p['missing_hint'], result)
    result['changed'] = bool(result['enabled'] or result['started'] or result['last_good'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
