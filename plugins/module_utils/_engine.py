# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Checked restarts of Docker and containerd, and their last known good configuration.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Docker reads daemon.json, and containerd the files under /etc/containerd, when
it starts. The last configuration an engine was seen running with is kept in a
state directory: a copy of daemon.json (or a marker that Docker ran without
one), and a tar of /etc/containerd with the digest of its files. A restart
after a change is checked: the engine must answer (and Docker must list the
runtimes daemon.json registers), or the last known good configuration comes
back, the engine is started with it, and the caller fails with the engine's
own error from its journal.

The pure functions at the top take texts and dicts; Host runs the commands
through AnsibleModule.run_command, so that the tests can fake them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.accel.nodes.plugins.module_utils import _files
from ansible_collections.accel.nodes.plugins.module_utils import _runtime_config as rc

UNITS = {'docker': 'docker.service', 'containerd': 'containerd.service'}
# The order to act in: Docker runs its containers through containerd.
ENGINE_ORDER = ('containerd', 'docker')

STATE_DIR = '/var/lib/accel-nodes/docker'
CONTAINERD_DIR = '/etc/containerd'
# The options engine_state and engine_restart share; documented once, in doc_fragments/engine_paths.py.
PATH_OPTIONS = dict(
    config_path=dict(type='path', default=rc.DOCKER_CONFIG),
    containerd_dir=dict(type='path', default=CONTAINERD_DIR),
    state_dir=dict(type='path', default=STATE_DIR),
)

ENV = {'LANG': 'C', 'LC_ALL': 'C'}
# `docker info --format '{{json .}}'`: the whole answer, Runtimes and ServerErrors among it.
DOCKER_INFO = ['docker', 'info', '--format', '{{json .}}']
CONTAINERD_VERSION = ['ctr', 'version']

# UnitFileState values for which `systemctl is-enabled` exits 0 (systemctl(1),
# is-enabled): the unit starts at boot or needs no enabling.
ENABLED_STATES = ('enabled', 'enabled-runtime', 'alias', 'static', 'indirect', 'generated', 'transient')

# Journal lines that carry an engine's fatal error: dockerd's "unable to
# configure the Docker daemon with file ..." and "failed to start daemon: ...",
# logrus's level=fatal, and containerd's "containerd: failed to load TOML ...".
_FATAL = ('unable to configure', 'failed to start daemon', 'level=fatal')

Run = Tuple[int, str, str]


class EngineError(Exception):
    """A restart that failed; the message says what happened and what to do."""


def state_paths(state_dir: str) -> Dict[str, str]:
    """The files of the state directory, by role."""
    return {
        'last_good': os.path.join(state_dir, 'daemon.json.last-good'),
        'last_good_none': os.path.join(state_dir, 'daemon.json.last-good-was-absent'),
        'rejected': os.path.join(state_dir, 'daemon.json.rejected'),
        'containerd_tar': os.path.join(state_dir, 'containerd.last-good.tar'),
        'containerd_digest': os.path.join(state_dir, 'containerd.last-good.tar.sha256'),
        'containerd_rejected': os.path.join(state_dir, 'containerd.rejected'),
    }


def _unique(lines: List[str]) -> List[str]:
    seen: List[str] = []
    for line in lines:
        if line not in seen:
            seen.append(line)
    return seen


def engine_said(journal: List[str], fallback: str) -> str:
    """What an engine said when it failed to start, from its journal lines since the restart.

    Its fatal error if it printed one, else its error lines, else the last
    lines of its journal, else fallback (what systemd said).
    """
    fatal = _unique([line for line in journal
                     if any(word in line for word in _FATAL) or line.startswith('containerd: ')])[-3:]
    errors = _unique([line for line in journal if 'level=error' in line])[-3:]
    return ' | '.join(fatal or errors or journal[-5:] or [fallback])


def _runtime_pairs(runtimes: Any) -> List[str]:
    if not isinstance(runtimes, dict):
        return []
    return ['%s=%s' % (name, (entry or {}).get('path', '') if isinstance(entry, dict) else '')
            for name, entry in runtimes.items()]


def pending_runtimes(config: Dict[str, Any], info: Dict[str, Any]) -> List[str]:
    """The runtime registrations of daemon.json (parsed) that Docker (its `docker info`) does not run with.

    Each as name=path, and default-runtime=name where daemon.json names another
    default than the one Docker uses.
    """
    have = _runtime_pairs(info.get('Runtimes'))
    pending = _unique([pair for pair in _runtime_pairs(config.get('runtimes')) if pair not in have])
    running_default = info.get('DefaultRuntime')
    wanted_default = config.get('default-runtime', running_default)
    if wanted_default != running_default:
        pending.append('default-runtime=%s' % wanted_default)
    return pending


# The daemon.json key accel.nodes.container_runtime writes that `docker info`
# does not show (runtimes and default-runtime it shows: pending_runtimes); a
# role adds its own (accel.nodes.docker: the keys of docker_daemon_options).
DOCKER_MANAGED_KEYS = ('features',)


def pending_keys(config: Dict[str, Any], last_good: Optional[Dict[str, Any]], keys: List[str]) -> List[str]:
    """The keys whose value in daemon.json (parsed) differs from the one Docker was last seen running with
    (last_good; None where none was recorded: then every key daemon.json sets counts)."""
    if last_good is None:
        return [k for k in keys if k in config]
    return [k for k in keys if config.get(k) != last_good.get(k)]


def runtimes_not_used(config: Dict[str, Any], info: Dict[str, Any], path: str) -> Optional[str]:
    """Why Docker, restarted with daemon.json config, does not use its runtimes; None when it does."""
    runtimes = config.get('runtimes') if isinstance(config.get('runtimes'), dict) else {}
    listed = info.get('Runtimes') or {}
    missing = [name for name in runtimes if name not in listed]
    wanted_default = config.get('default-runtime') or ''
    running_default = info.get('DefaultRuntime')
    if not missing and wanted_default in ('', running_default):
        return None
    return ('Docker restarted but does not use the runtimes in %s: %s%sCheck that dockerd reads this file '
            '(no --config-file elsewhere) and that no --add-runtime or --default-runtime flag in its unit '
            'overrides it.' % (
                path,
                'missing runtimes: %s. ' % ', '.join(missing) if missing else '',
                'default runtime is %s, not %s. ' % (running_default, wanted_default)
                if wanted_default not in ('', running_default) else ''))


def tree_files(directory: str) -> List[str]:
    """Regular files under directory, as ./relative paths in byte order; symbolic links are not followed."""
    found = []
    for top, dirs, files in os.walk(directory):
        for name in files:
            path = os.path.join(top, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append('./' + os.path.relpath(path, directory))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return sorted(found, key=lambda p: p.encode('utf-8', 'surrogateescape'))


def tree_digest(directory: str) -> str:
    """The digest of the files under directory, 'absent' when it does not exist.

    The same as `cd DIR && find . -type f -print0 | sort -z | xargs -0r sha256sum | sha256sum`
    in the C locale, which earlier releases of the role stored, so their state stays valid.
    """
    if not os.path.isdir(directory):
        return 'absent'
    lines = []
    for rel in tree_files(directory):
        digest = hashlib.sha256()
        with open(os.path.join(directory, rel), 'rb') as handle:
            for block in iter(lambda: handle.read(1 << 16), b''):
                digest.update(block)
        lines.append('%s  %s\n' % (digest.hexdigest(), rel))
    return hashlib.sha256(''.join(lines).encode('utf-8', 'surrogateescape')).hexdigest()


def newest_mtime(directory: str) -> float:
    """The modification time of the newest file under directory; 0 when there is none."""
    newest = 0.0
    for rel in tree_files(directory) if os.path.isdir(directory) else []:
        newest = max(newest, os.stat(os.path.join(directory, rel)).st_mtime)
    return newest


def process_started(pid: int, proc: str = '/proc') -> Optional[float]:
    """When process pid started, in seconds since the epoch, as ps computes it; None where it cannot be read.

    /proc/PID/stat field 22 is the start time in clock ticks after boot, and
    /proc/stat's btime the boot time (proc(5)).
    """
    try:
        with open(os.path.join(proc, str(pid), 'stat')) as handle:
            # The command name (field 2) may hold spaces; the fields after it do not.
            fields = handle.read().rsplit(')', 1)[1].split()
        with open(os.path.join(proc, 'stat')) as handle:
            btime = next(int(line.split()[1]) for line in handle if line.startswith('btime '))
        return btime + int(fields[19]) / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def parse_show(text: str) -> List[Dict[str, str]]:
    """`systemctl show` output for several units: one dict of properties per unit, in order."""
    units: List[Dict[str, str]] = [{}]
    for line in text.splitlines():
        if not line.strip():
            if units[-1]:
                units.append({})
            continue
        key, dummy, value = line.partition('=')
        units[-1][key] = value
    return [unit for unit in units if unit]


def _sha256(path: str) -> Optional[str]:
    try:
        with open(path, 'rb') as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except FileNotFoundError:
        return None


class Host:
    """The engines of one node, driven through an AnsibleModule."""

    sleep: Callable[[float], None] = staticmethod(time.sleep)
    clock: Callable[[], float] = staticmethod(time.time)
    started = staticmethod(process_started)

    def __init__(self, module: Any, daemon_json: str = rc.DOCKER_CONFIG, containerd_dir: str = CONTAINERD_DIR,
                 state_dir: str = STATE_DIR, timeout: int = 60) -> None:
        self.module = module
        self.daemon_json = daemon_json
        self.containerd_dir = containerd_dir
        self.state_dir = state_dir
        self.paths = state_paths(state_dir)
        self.timeout = timeout
        self.check_mode = module.check_mode

    # commands

    def run(self, argv: List[str]) -> Run:
        return self.module.run_command(argv, environ_update=ENV)

    def systemctl(self, *args: str) -> Run:
        return self.run(['systemctl'] + list(args))

    def show(self, engines: List[str]) -> Dict[str, Dict[str, str]]:
        """LoadState, UnitFileState, ActiveState and MainPID of each engine's unit, in one call."""
        rc_, out, err = self.systemctl('show', '--property=Id,LoadState,UnitFileState,ActiveState,MainPID',
                                       *[UNITS[e] for e in engines])
        if rc_ != 0:
            self.module.fail_json(msg='systemctl show failed: %s' % (err or out).strip())
        units = parse_show(out)
        if len(units) != len(engines):
            self.module.fail_json(msg='systemctl show answered for %d units, not %d: %s' % (len(units), len(engines), out))
        return dict(zip(engines, units))

    def docker_info(self) -> Optional[Dict[str, Any]]:
        """What `docker info` answers, or None when the daemon does not answer (or reports server errors)."""
        rc_, out, dummy = self.run(DOCKER_INFO)
        if rc_ != 0:
            return None
        try:
            info = json.loads(out)
        except ValueError:
            return None
        if not isinstance(info, dict) or info.get('ServerErrors'):
            return None
        return info

    def containerd_answers(self) -> bool:
        return self.run(CONTAINERD_VERSION)[0] == 0

    def wait_for(self, engine: str) -> Optional[Dict[str, Any]]:
        """Ask the engine every 2 s, for up to timeout seconds: `docker info` (its answer) or `ctr version` ({})."""
        deadline = self.clock() + self.timeout
        while True:
            answer = self.docker_info() if engine == 'docker' else ({} if self.containerd_answers() else None)
            if answer is not None or self.clock() >= deadline:
                return answer
            self.sleep(2)

    def journal(self, engine: str, since: int) -> List[str]:
        dummy, out, dummy2 = self.run(['journalctl', '--unit', UNITS[engine], '--since', '@%d' % since,
                                       '--lines', '200', '--no-pager', '--output', 'cat'])
        return out.splitlines()

    def restart(self, engine: str, *more_units: str) -> Optional[str]:
        """Restart the engine's unit; None when systemd did, else what it said.

        systemd refuses a start after too many in a short time (docker.service:
        3 in 60 s, moby's contrib/init/systemd/docker.service; otherwise
        systemd's defaults, 5 in 10 s), and a deliberate restart after a
        configuration change is not a crash loop: "systemctl reset-failed will
        cause the restart rate counter for a service to be flushed, which is
        useful if the administrator wants to manually start a unit and the start
        limit interferes with that" (systemd.unit(5), StartLimitIntervalSec=).
        Without it a restart refused for its rate would be taken for a
        configuration the engine rejects, and the change undone. A unit that is
        not loaded fails the restart, with systemd's own message.
        """
        unit = UNITS[engine]
        self.systemctl('reset-failed', unit, *more_units)
        rc_, out, err = self.systemctl('restart', unit)
        if rc_ != 0:
            return 'Unable to restart service %s: %s' % (unit, (err or out).strip())
        return None

    # last known good configuration

    def _write(self, path: str, content: bytes) -> None:
        _files.make_parents(path, 0o700)
        _files.write_atomic(self.module, path, content, 0o600)
        os.chmod(path, 0o600)

    def _remove(self, path: str) -> bool:
        if not os.path.lexists(path):
            return False
        if not self.check_mode:
            os.remove(path)
        return True

    def _state_dir(self) -> None:
        if not os.path.isdir(self.state_dir):
            _files.make_parents(os.path.join(self.state_dir, 'x'), 0o700)

    def docker_in_sync(self) -> bool:
        """Whether daemon.json is still what Docker was last seen running with."""
        current = _sha256(self.daemon_json)
        if current is None:
            return os.path.exists(self.paths['last_good_none'])
        return current == _sha256(self.paths['last_good'])

    def docker_last_good_config(self) -> Optional[Dict[str, Any]]:
        """The daemon.json Docker was last seen running with, parsed: {} where it ran without one, None where
        nothing was recorded (or the record cannot be read)."""
        if os.path.exists(self.paths['last_good_none']):
            return {}
        if not os.path.exists(self.paths['last_good']):
            return None
        try:
            return rc.read_daemon_json(_files.read_text(self.paths['last_good']), self.paths['last_good'])
        except (rc.ConfigError, ValueError, OSError):
            return None

    def containerd_in_sync(self) -> bool:
        """Whether the files under containerd_dir are still those containerd was last seen running with."""
        try:
            with open(self.paths['containerd_digest']) as handle:
                return handle.read().strip() == tree_digest(self.containerd_dir)
        except FileNotFoundError:
            return False

    def keep_docker(self) -> bool:
        """Keep daemon.json (or its absence) as the last known good one. Returns whether anything changed."""
        try:
            with open(self.daemon_json, 'rb') as handle:
                content: Optional[bytes] = handle.read()
        except FileNotFoundError:
            content = None
        if content is not None:
            keep, drop = self.paths['last_good'], self.paths['last_good_none']
        else:
            keep, drop = self.paths['last_good_none'], self.paths['last_good']
            content = ('Docker ran without %s: restoring means removing it.\n' % self.daemon_json).encode()
        try:
            with open(keep, 'rb') as handle:
                changed = handle.read() != content
        except FileNotFoundError:
            changed = True
        if changed and not self.check_mode:
            self._state_dir()
            self._write(keep, content)
        return self._remove(drop) or changed

    def keep_containerd(self) -> bool:
        """Keep the tree under containerd_dir as the last known good one, if its digest changed."""
        digest = tree_digest(self.containerd_dir)
        tar, digest_file = self.paths['containerd_tar'], self.paths['containerd_digest']
        try:
            with open(digest_file) as handle:
                if handle.read().strip() == digest:
                    return False
        except FileNotFoundError:
            pass
        if self.check_mode:
            return True
        # Imported here: tarfile takes 30 ms to import, and a converged run needs none.
        import tarfile  # pylint: disable=import-outside-toplevel
        self._state_dir()
        if os.path.lexists(tar):
            os.remove(tar)
        if digest != 'absent':
            _files.make_parents(tar, 0o700)
            tmp = tar + '.tmp'
            with tarfile.open(tmp, 'w', format=tarfile.GNU_FORMAT) as archive:
                archive.add(self.containerd_dir, arcname='.')
            os.chmod(tmp, 0o600)
            os.rename(tmp, tar)
        self._write(digest_file, ('%s\n' % digest).encode())
        return True

    def restore_docker(self) -> Tuple[bool, bool]:
        """Put the last known good daemon.json back. Returns (restorable, rejected file kept)."""
        paths = self.paths
        kept = os.path.exists(self.daemon_json)
        mode = os.stat(self.daemon_json).st_mode & 0o7777 if kept else 0o644
        if kept:
            self._state_dir()
            shutil.copyfile(self.daemon_json, paths['rejected'])
            os.chmod(paths['rejected'], 0o600)
        if os.path.exists(paths['last_good']):
            with open(paths['last_good'], 'rb') as handle:
                good = handle.read()
            _files.write_atomic(self.module, self.daemon_json, good, mode)
            os.chmod(self.daemon_json, mode)
            return True, kept
        if os.path.exists(paths['last_good_none']):
            if kept:
                os.remove(self.daemon_json)
            return True, kept
        return False, kept

    def restore_containerd(self) -> bool:
        """Move the rejected tree aside whole and unpack the last known good one. Returns whether there was one.

        The whole tree moves, so that drop-ins added since the last good state
        do not survive the restore.
        """
        paths = self.paths
        if not os.path.exists(paths['containerd_digest']):
            return False
        shutil.rmtree(paths['containerd_rejected'], ignore_errors=True)
        if os.path.isdir(self.containerd_dir):
            os.rename(self.containerd_dir, paths['containerd_rejected'])
        if os.path.exists(paths['containerd_tar']):
            import tarfile  # pylint: disable=import-outside-toplevel
            os.mkdir(self.containerd_dir, 0o755)
            os.chmod(self.containerd_dir, 0o755)
            with tarfile.open(paths['containerd_tar']) as archive:
                if hasattr(tarfile, 'fully_trusted_filter'):  # Python 3.12, 3.11.4 and later
                    archive.extractall(self.containerd_dir, filter='fully_trusted')
                else:
                    archive.extractall(self.containerd_dir)
        return True


def read_daemon_json(path: str) -> Dict[str, Any]:
    """daemon.json parsed, {} where it is missing, blank or not a JSON object."""
    try:
        return rc.read_daemon_json(_files.read_text(path), path)
    except (rc.ConfigError, ValueError, OSError):
        return {}


# Checked restarts, shared by engine_restart (the handlers) and engine_state (an engine found stopped).


def docker_failed(host: Host, since: int, failure: str) -> dict:
    """Docker did not come back: restore the last good daemon.json, start it again, and say what happened."""
    said = engine_said(host.journal('docker', since), failure)
    restorable, kept = host.restore_docker()
    back = False
    if restorable and host.restart('docker', 'docker.socket') is None:
        back = host.wait_for('docker') is not None
    path = host.daemon_json
    if back:
        state = 'The last known good daemon.json was restored and Docker runs again with it. '
    elif restorable:
        state = 'It did not start with the last known good daemon.json either, so Docker is DOWN on this node. '
    else:
        state = 'No last known good daemon.json was recorded, so nothing was restored and Docker is DOWN on this node. '
    return dict(restored=restorable, msg=(
        'Docker did not start with the changed %s. %sDocker said: %s %s'
        'Fix the change that the role notifying accel_nodes_restart_docker made, and run again; '
        '`journalctl -u docker.service` has the whole story.' % (
            path, state, said,
            'The rejected daemon.json is kept in %s. ' % host.paths['rejected'] if kept else '')))


def containerd_failed(host: Host, since: int, failure: str) -> dict:
    """containerd did not come back: restore the last good tree, start it again, and say what happened."""
    said = engine_said(host.journal('containerd', since), failure)
    restored = host.restore_containerd()
    back = False
    if restored and host.restart('containerd') is None:
        back = host.wait_for('containerd') is not None
    if back:
        state = ('The last known good %s was restored and containerd runs again with it. ' % host.containerd_dir)
    elif restored:
        state = 'It did not start with the last known good configuration either, so containerd is DOWN on this node. '
    else:
        state = ('No last known good configuration was recorded, so nothing was restored and containerd is DOWN '
                 'on this node. ')
    return dict(restored=restored, msg=(
        'containerd did not start with its changed configuration. %scontainerd said: %s %s'
        'Fix the change that the role notifying accel_nodes_restart_containerd made, and run again; '
        '`journalctl -u containerd.service` has the whole story.' % (
            state, said,
            'The rejected configuration is kept in %s. ' % host.paths['containerd_rejected'] if restored else '')))


def checked_restart(host: Host, engine: str) -> dict:
    """Restart engine and check it. Returns the result; 'failed' is set where the restart did not hold, 'kept'
    where the configuration it now runs with became the last known good one."""
    since = int(host.clock())
    failure = host.restart(engine)
    answer = host.wait_for(engine) if failure is None else None
    if answer is None:
        if engine == 'docker':
            result = docker_failed(host, since, failure or 'Docker did not answer within %ds' % host.timeout)
        else:
            result = containerd_failed(host, since, failure or 'containerd did not answer')
        result['failed'] = True
        return result
    if engine == 'containerd':
        return dict(msg='containerd answers.', kept=host.keep_containerd())
    result = dict(runtimes=sorted(answer.get('Runtimes') or {}), default_runtime=answer.get('DefaultRuntime'))
    problem = runtimes_not_used(read_daemon_json(host.daemon_json), answer, host.daemon_json)
    if problem:
        result.update(failed=True, msg=problem)
        return result
    result['kept'] = host.keep_docker()
    result['msg'] = 'Docker answers with runtimes %s, default %s.' % (', '.join(result['runtimes']),
                                                                      result['default_runtime'])
    return result
