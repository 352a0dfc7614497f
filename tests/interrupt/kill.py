#!/usr/bin/env python
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Kill converge runs at fixed points, and check that the next run finishes the job (issue 24).

    kill.py [--plan FILE] [--report FILE] TRIAL_OR_CHAIN...

Runs the converge playbook of a Molecule scenario (MOLECULE_SCENARIO_DIRECTORY,
MOLECULE_INVENTORY_FILE and the rest of Molecule's environment, as a
side_effect playbook or `molecule` itself sets them) and kills it where each
trial of the plan (trials.json, beside this file) says:

  task     when the controller starts that task or handler (the test callback
           callback/kill_at.py stops it there, before any host runs it); with
           "delay", that many seconds after it starts, while it runs;
  path     when that path appears inside the node (dpkg unpacking a package
           writes <file>.dpkg-new first);
  process  when a process whose command line matches the regular expression
           runs inside the node;
  after_task  arms a path or process trigger only once that task has started.

A path or process trigger freezes the node (`docker pause`) the moment it is
seen, so the kill lands exactly there. Then the controller's whole process
tree is killed with SIGKILL: every descendant of ansible-playbook, found
through /proc (Ansible's workers call setsid(), so killing its process group
would leave them running). Variant B then also kills what the run started
inside the nodes, as a dropped SSH connection does: each process of the node
that does not descend from the node's init (the modules, apt, dpkg, their
maintainer scripts), while services that systemd started keep running.

Trials given one after another form a chain: the run after a kill is killed at
the next trial's point, which it must reach (the points are in the order a run
meets them), so each run proves that it got past the state the kill before it
left. A trial may ask for a setup run first (for example a converged node) and
for the run after it to finish ("next": "finish") with checks on the nodes.

Prints one line per trial and writes a JSON report; exits non-zero on the
first trial whose next run does not get past the point the kill left.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
POLL = 0.01


def processes() -> Dict[int, int]:
    """{pid: parent pid} of every process on this host."""
    found = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as handle:
                found[int(name)] = int(handle.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return found


def descendants(root: int) -> List[int]:
    parents = processes()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(p for p, parent in parents.items() if parent == pid and p not in tree)
    return tree


def kill_tree(root: int) -> List[int]:
    """SIGSTOP the tree top-down (so nothing forks or reaps meanwhile), then SIGKILL every process of it."""
    tree = []
    for _attempt in range(3):  # a process may fork between the listing and its stop
        for pid in descendants(root):
            if pid not in tree:
                tree.append(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return tree


def freeze(node: 'Node') -> bool:
    """docker pause the node, so that the kill lands where the trigger was seen. The freezer gives up where a
    process does not stop in time (runc: "unable to freeze", as with dpkg in an uninterruptible fsync): then
    try again, and at worst kill without freezing, a few milliseconds later. Returns whether it froze."""
    for _attempt in range(3):
        if subprocess.run(['docker', 'pause', node.name], capture_output=True, check=False).returncode == 0:
            return True
    return False


def docker(*args: str, check: bool = True) -> str:
    done = subprocess.run(['docker'] + list(args), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError('docker %s: %s' % (' '.join(args), done.stderr.strip()))
    return done.stdout


class Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.init = int(docker('inspect', '-f', '{{.State.Pid}}', name).strip())
        self.ns = os.readlink('/proc/%d/ns/pid' % self.init)

    def path(self, path: str) -> str:
        return '/proc/%d/root%s' % (self.init, path)

    def members(self) -> List[int]:
        found = []
        for name in os.listdir('/proc'):
            if name.isdigit():
                try:
                    if os.readlink('/proc/%s/ns/pid' % name) == self.ns:
                        found.append(int(name))
                except OSError:
                    continue
        return found

    def commands(self) -> List[str]:
        found = []
        for pid in self.members():
            try:
                with open('/proc/%d/cmdline' % pid, 'rb') as handle:
                    found.append(handle.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip())
            except OSError:
                continue
        return found

    def run_processes(self) -> List[int]:
        """The node's processes that do not descend from its init: what `docker exec` (the run) started."""
        parents = processes()
        members = set(self.members())
        started = []
        for pid in members:
            if pid == self.init:
                continue
            cur = pid
            while cur in members and cur != self.init:
                cur = parents.get(cur, 0)
            if cur != self.init:
                started.append(pid)
        return started

    def sh(self, script: str) -> str:
        done = subprocess.run(['docker', 'exec', self.name, 'sh', '-c', script], capture_output=True, text=True,
                              check=False)
        return (done.stdout + done.stderr).strip()


def evidence(node: Node) -> Dict[str, str]:
    """What the kill left, as a person would look at it."""
    return {
        'dpkg --audit': node.sh('dpkg --audit 2>&1 | grep -v "^ " | head -20; true'),
        'dpkg journal entries': node.sh('ls /var/lib/dpkg/updates | grep -c "^[0-9]*$"; true'),
        'engines': node.sh('for u in docker containerd; do printf "%s=%s " $u $(systemctl is-active $u); done; true'),
    }


def converge(env: Dict[str, str], extra: List[str], log: str) -> subprocess.Popen:
    scenario = os.environ['MOLECULE_SCENARIO_DIRECTORY']
    argv = ['ansible-playbook', '-i', os.environ['MOLECULE_INVENTORY_FILE'], os.path.join(scenario, 'converge.yml')]
    return subprocess.Popen(argv + extra, env=env, stdout=open(log, 'w'), stderr=subprocess.STDOUT,
                            start_new_session=True)


def tail(log: str, lines: int = 25) -> str:
    with open(log, errors='replace') as handle:
        return ''.join(handle.readlines()[-lines:])


def recap(log: str) -> Dict[str, Dict[str, int]]:
    """PLAY RECAP counts by host."""
    found = {}
    with open(log, errors='replace') as handle:
        for line in handle:
            m = re.match(r'^(\S+)\s+:\s+(.*)$', line)
            if m and 'ok=' in m.group(2):
                found[m.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2)))
    return found


class Interrupted(Exception):
    pass


def run_until(trial: Dict[str, Any], nodes: Dict[str, Node], workdir: str, index: int) -> Dict[str, Any]:
    """Run converge and kill it at the trial's point. Returns what happened."""
    marker = os.path.join(workdir, 'marker-%d' % index)
    log = os.path.join(workdir, 'run-%02d-%s.log' % (index, trial['id']))
    env = dict(os.environ)
    env['ANSIBLE_CALLBACK_PLUGINS'] = os.path.join(HERE, 'callback') + (
        ':' + env['ANSIBLE_CALLBACK_PLUGINS'] if env.get('ANSIBLE_CALLBACK_PLUGINS') else '')
    env['ANSIBLE_CALLBACKS_ENABLED'] = 'profile_tasks,kill_at'
    trigger = trial['trigger']
    if 'task' in trigger or 'after_task' in trigger:
        # after_task arms a path or process trigger once that task starts; the run goes on meanwhile.
        env.update(ACCEL_KILL_AT_TASK=trigger.get('task') or trigger['after_task'], ACCEL_KILL_MARKER=marker,
                   ACCEL_KILL_AT_PLAY=trigger.get('play', ''),
                   ACCEL_KILL_AT_DELAY=str(trigger.get('delay', '0' if 'after_task' in trigger else '')))
    node = nodes[trigger['node']] if 'node' in trigger else None
    pattern = re.compile(trigger['process']) if 'process' in trigger else None
    started = time.time()
    proc = converge(env, trial.get('extra', []), log)
    seen = None
    frozen = False
    while seen is None:
        if proc.poll() is not None:
            raise Interrupted('%s: the run ended (rc %d) before it reached the point %s; its end:\n%s'
                              % (trial['id'], proc.returncode, json.dumps(trigger), tail(log)))
        if 'task' in trigger:
            if os.path.exists(marker):
                time.sleep(float(trigger.get('delay') or 0))
                seen = open(marker).read().strip().replace('\n', ': ')
        elif 'after_task' in trigger and not os.path.exists(marker):
            pass
        elif 'path' in trigger and os.path.lexists(node.path(trigger['path'])):
            frozen = freeze(node)
            seen = trigger['path']
        elif pattern is not None:
            hits = [c for c in node.commands() if pattern.search(c)]
            if hits:
                frozen = freeze(node)
                seen = hits[0]
        if seen is None:
            time.sleep(POLL)
    killed = kill_tree(proc.pid)
    in_node: Dict[str, int] = {}
    if trial['variant'] == 'B':
        for each in nodes.values():
            pids = each.run_processes()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            in_node[each.name] = len(pids)
    for each in nodes.values():
        docker('unpause', each.name, check=False)
    proc.wait()
    time.sleep(1)  # let the killed processes go before the next run looks at the node
    return {'id': trial['id'], 'what': trial['what'], 'variant': trial['variant'], 'seen': seen,
            'after_s': round(time.time() - started, 1), 'frozen': frozen, 'controller_processes_killed': len(killed),
            'node_processes_killed': in_node, 'log': log,
            'left': dict((n.name, evidence(n)) for n in nodes.values())}


def run_to_end(name: str, extra: List[str], workdir: str, index: int) -> Dict[str, Any]:
    log = os.path.join(workdir, 'run-%02d-%s.log' % (index, name))
    proc = converge(dict(os.environ), extra, log)
    rc = proc.wait()
    return {'rc': rc, 'log': log, 'recap': recap(log), 'tail': tail(log) if rc else ''}


def check(nodes: Dict[str, Node], checks: List[Dict[str, str]]) -> List[str]:
    """Each check runs a shell command in a node; its output must match the regular expression."""
    failed = []
    for item in checks:
        out = nodes[item['node']].sh(item['sh'])
        if not re.search(item['expect'], out):
            failed.append('%s: `%s` printed %r, expected /%s/' % (item['node'], item['sh'], out, item['expect']))
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--plan', default=os.path.join(HERE, 'trials.json'))
    parser.add_argument('--report', default='')
    parser.add_argument('--workdir', default='')
    parser.add_argument('--scenario', action='store_true',
                        help='print the scenario the trials run on, and 1 where it has a side_effect of its own')
    parser.add_argument('names', nargs='+', help='trials or chains of the plan, in the order to run them')
    args = parser.parse_args()
    with open(args.plan) as handle:
        plan = json.load(handle)
    trials = []
    for name in args.names:
        if name not in plan['chains'] and name not in plan['trials']:
            parser.error('%s is neither a trial nor a chain of %s' % (name, args.plan))
        trials += [plan['trials'][t] for t in plan['chains'].get(name, [name])]
    scenarios = sorted(set(t.get('scenario', 'site') for t in trials))
    if len(scenarios) != 1:
        parser.error('the trials run on different scenarios (%s): run them apart' % ', '.join(scenarios))
    scenario = plan['scenarios'][scenarios[0]]
    if args.scenario:
        print('%s %d' % (scenarios[0], scenario['side_effect']))
        return 0
    prefix = os.environ.get('ACCEL_NODE_PREFIX', 'accel') + '-'
    workdir = args.workdir or os.path.join(os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY', '/tmp'), 'interrupt')
    os.makedirs(workdir, exist_ok=True)
    nodes = dict((short, Node(prefix + short)) for short in scenario['nodes'])
    report: Dict[str, Any] = {'trials': [], 'ok': False}
    index = 0
    status = 0
    try:
        for trial in trials:
            if trial.get('setup'):
                index += 1
                setup = run_to_end(trial['id'] + '-setup', trial.get('setup_extra', []), workdir, index)
                if setup['rc'] != 0:
                    raise Interrupted('%s: the setup run failed:\n%s' % (trial['id'], setup['tail']))
            index += 1
            result = run_until(trial, nodes, workdir, index)
            report['trials'].append(result)
            print('%-4s %s (variant %s): killed at %s after %.0f s' % (
                trial['id'], trial['what'], trial['variant'], result['seen'], result['after_s']), flush=True)
            for name, left in result['left'].items():
                print('       %s left: %s' % (name, '; '.join('%s: %s' % (k, v.replace('\n', ' | ')[:160])
                                                              for k, v in left.items())), flush=True)
            if trial.get('next') == 'finish':
                index += 1
                nxt = run_to_end(trial['id'] + '-next', trial.get('extra', []), workdir, index)
                result['next'] = nxt
                if nxt['rc'] != 0:
                    raise Interrupted('%s: the next run failed (rc %d):\n%s' % (trial['id'], nxt['rc'], nxt['tail']))
                failed = check(nodes, trial.get('checks', []))
                result['checks_failed'] = failed
                if failed:
                    raise Interrupted('%s: the next run passed, but: %s' % (trial['id'], '; '.join(failed)))
                recap = ', '.join('%s changed=%d failed=%d' % (h, c.get('changed', 0), c.get('failed', 0))
                                  for h, c in sorted(nxt['recap'].items()))
                print('       next run: ok (%s)' % recap, flush=True)
        report['ok'] = True
    except Interrupted as exc:
        print('FAILED: %s' % exc, flush=True)
        report['error'] = str(exc)
        status = 1
    finally:
        if args.report:
            with open(args.report, 'w') as handle:
                json.dump(report, handle, indent=1)
    return status


if __name__ == '__main__':
    sys.exit(main())
