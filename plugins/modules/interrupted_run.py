#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: interrupted_run
short_description: Finish what an interrupted run left on a node, or say exactly what a person must do
version_added: 0.4.0
description:
  - A run that stops part-way (Ctrl-C, a CI timeout, a dropped SSH connection that takes the node's processes with
    it) can leave dpkg half-way through a transaction. apt then refuses every later run (C(dpkg was interrupted, you must manually run
    'dpkg --configure -a' to correct the problem)). This module finishes such
    a transaction, so that the next run of the roles goes on where the last one stopped.
  - B(dpkg.) It reads dpkg's status file and journal (C(/var/lib/dpkg/updates), where a run writes each step
    before folding it into the status file) as dpkg would, and lists the packages a run left half-way (the states
    C(dpkg --audit) reports (half-installed, unpacked, half-configured, triggers-awaited, triggers-pending, and
    any package flagged reinst-required).
  - First it waits while a package manager holds dpkg's frontend lock (up to O(lock_timeout)), since an apt run whose
    controller was killed goes on on the node, and what it has not finished yet is not interrupted.
  - Where every one of them is a package the roles of this collection install (RV(managed)), a package waiting
    only for triggers, or a package of an apt transaction that did not end and in which every package asked for
    is the collection's (apt's history, C(/var/log/apt/history.log), lists what each transaction asked for and
    what it pulled in for them), it runs
    C(dpkg --configure -a), then reinstalls with C(apt-get install --reinstall) the packages that are still
    half-installed (their files were being unpacked; configuring cannot finish them), and checks that nothing is
    left half-way. A transaction that involves any other package is not touched, and the module fails with the
    packages, their states and the commands to run.
  - Each package is reinstalled at the version dpkg's status records for it (C(name=version); for a package a run
    was installing, that version), not apt's candidate, with C(--allow-change-held-packages) and C(--allow-downgrades) since
    the roles pin and hold versions below the newest; a package whose version dpkg does not record is
    reinstalled by its name.
  - Where there is a package to reinstall, C(dpkg --configure -a) fails on each package that depends on it
    (dpkg skips the half-installed one). That failure does not stop the module, which reinstalls, runs
    C(dpkg --configure -a) again, and judges by what dpkg is left with; it fails, with the output of the
    commands that failed, only where a package is still left half-way or the journal is not folded in.
  - B(Leftovers.) Beside each of O(paths) it removes the temporary files of this collection's atomic writes
    (C(.<name>.<random>.tmp), which a write killed before its rename leaves), and reports C(<path>.dpkg-new),
    C(.dpkg-old), C(.dpkg-dist) and C(.dpkg-tmp) files that are still there once dpkg is finished (a package's
    new default for a configuration file that has local changes), for a person to merge or remove.
  - A node with nothing to finish costs one read of the status file; the roles run this module only where
    M(accel.nodes.node_probe) or M(accel.nodes.engine_state) reported something (their RV(interrupted)), so a
    converged node does not run it at all.
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads everything and reports what it would finish and remove; runs no dpkg or apt and removes nothing.
  diff_mode:
    support: none
options:
  packages:
    description:
      - Names of packages the calling role installs besides the families the collection always counts as its own
        (RV(managed)), for example a role's C(docker_extra_packages).
      - Each is compared with the package's name exactly, not as a regular expression (C(g++) is that package
        only). A version, architecture or release given the way apt takes it (C(name=version), C(name:arch),
        C(name/release)) is left out of the comparison.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Files the calling role writes. Temporary files of their atomic writes that are left beside them are
        removed, and dpkg's leftovers beside them reported.
    type: list
    elements: path
    default: []
  lock_timeout:
    description:
      - Seconds to wait while apt or dpkg holds dpkg's frontend lock (C(/var/lib/dpkg/lock-frontend)) before
        judging. A run whose controller was killed leaves the package manager it started running on the node, and
        a driver's DKMS build can take minutes; the next run waits for it instead of taking it for interrupted.
    type: int
    default: 600
notes:
  - Debian family. On a node without dpkg only the leftovers of O(paths) are looked at.
seealso:
  - module: accel.nodes.node_probe
  - module: accel.nodes.engine_state
"""

EXAMPLES = r"""
- name: Finish what an interrupted run left
  accel.nodes.interrupted_run:
    packages: "{{ docker_extra_packages }}"
    paths: [/etc/docker/daemon.json]
  when: docker_engine_state.interrupted | length > 0
"""

RETURN = r"""
interrupted:
  description: The packages a run left half-way, with their states, before this run; empty when dpkg was finished.
  returned: always
  type: dict
  sample: {docker.io: half-installed (reinstreq), containerd: unpacked}
journal:
  description: Whether dpkg's journal held entries that no run had folded into the status file.
  returned: always
  type: bool
  sample: true
foreign:
  description: The packages of RV(interrupted) that are neither the collection's nor pulled in for them.
  returned: always
  type: list
  elements: str
  sample: []
commands:
  description: The commands run (in check mode, that would run), in order.
  returned: always
  type: list
  elements: str
  sample: ["dpkg --configure -a --force-confdef --force-confold",
           "apt-get install --reinstall --no-install-recommends --allow-change-held-packages --allow-downgrades -y -q
            -o=Dpkg::Options::=--force-confdef -o=Dpkg::Options::=--force-confold docker.io=20.10.24+dfsg1-1+deb12u1+b6"]
removed:
  description: The temporary files of interrupted writes that were (or would be) removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/docker/.daemon.json.k2j4hd1x.tmp]
dpkg_leftovers:
  description: dpkg's files beside O(paths) that a person must look at, with what to do in RV(messages).
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/config.toml.dpkg-dist]
managed:
  description: The package families the collection counts as its own, as regular expressions.
  returned: always
  type: list
  elements: str
messages:
  description: What was done, and what a person must still do, one sentence group each.
  returned: always
  type: list
  elements: str
"""

import os
import time
from typing import Any, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _dpkg
from ansible_collections.accel.nodes.plugins.module_utils import _interrupted


def run(module: AnsibleModule, argv: List[str], result: Dict[str, Any], errors: Optional[List[str]] = None) -> bool:
    """Run argv (in check mode, only list it); whether it succeeded. A failure fails the module, or where errors
    is given is added to it, for the caller to judge by the state dpkg is left in."""
    result['commands'].append(' '.join(argv))
    if module.check_mode:
        return True
    rc, out, err = module.run_command(argv, environ_update=_interrupted.ENV)
    if rc == 0:
        return True
    failure = '%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()[-2000:])
    if errors is None:
        module.fail_json(msg=failure, **result)
    errors.append(failure)
    return False


def wait_for_frontend(module: AnsibleModule, result: Dict[str, Any]) -> None:
    """Wait while apt or dpkg runs: what looks interrupted may be a run still going on the node (its controller
    was killed, not it)."""
    deadline = time.time() + module.params['lock_timeout']
    waited = False
    while _interrupted.frontend_busy():
        if time.time() >= deadline:
            module.fail_json(msg='A package manager has held %s for %d s and still does: apt or dpkg is running on this '
                                 'node (perhaps a run whose controller was killed). Let it finish, or look at '
                                 '`ps -C apt-get,dpkg -o pid,etime,args`, then run again.'
                                 % (_interrupted.FRONTEND_LOCK, module.params['lock_timeout']), **result)
        waited = True
        time.sleep(2)
    if waited:
        result['messages'].append('Waited for a package manager that was still running.')


def finish_dpkg(module: AnsibleModule, result: Dict[str, Any]) -> None:
    status = _dpkg.read_status(_dpkg.STATUS_FILE)
    if status is None:
        return
    wait_for_frontend(module, result)
    status = _dpkg.read_status(_dpkg.STATUS_FILE) or ''
    journal = _dpkg.journal()
    result['journal'] = bool(journal)
    result['interrupted'] = _dpkg.unfinished(status, journal)
    if not result['interrupted'] and not result['journal']:
        return
    result['foreign'] = _interrupted.foreign(result['interrupted'], _dpkg.read_status(_interrupted.HISTORY),
                                             module.params['packages'])
    if result['foreign']:
        module.fail_json(msg=_interrupted.foreign_message(result['interrupted'], result['foreign']), **result)
    # dpkg --configure -a skips a half-installed package, and then fails on each unpacked package that depends
    # on it: where there is one to reinstall, that failure is expected, and the reinstall and a second
    # configure finish what the first could not. The state dpkg is left in judges them.
    errors: List[str] = []
    to_reinstall = any(_interrupted.needs_reinstall(state) for state in result['interrupted'].values())
    configured = run(module, _interrupted.CONFIGURE, result, errors if to_reinstall else None)
    if not module.check_mode:
        status, journal = _dpkg.read_status(_dpkg.STATUS_FILE) or '', _dpkg.journal()
    left = _dpkg.unfinished(status, journal)
    reinstall = sorted(n for n, state in left.items() if _interrupted.needs_reinstall(state))
    if reinstall:
        run(module, _interrupted.reinstall_argv(reinstall, _interrupted.versions(status, journal)), result,
            None if configured else errors)
    if not configured:
        run(module, _interrupted.CONFIGURE, result, errors)
    if module.check_mode:
        result['messages'].append('Check mode: %s would be finished.' % _interrupted.describe(result['interrupted']))
        return
    left = _dpkg.unfinished(_dpkg.read_status(_dpkg.STATUS_FILE), _dpkg.journal())
    if left or _dpkg.journal_pending():
        dummy, audit, dummy2 = module.run_command(['dpkg', '--audit'], environ_update=_interrupted.ENV)
        failed = (' Failed on the way: %s' % ' '.join(errors)) if errors else ''
        module.fail_json(msg='dpkg is still not finished after %s: %s. dpkg --audit says: %s%s'
                         % (' and '.join(result['commands']), _interrupted.describe(left), audit.strip(), failed), **result)
    result['messages'].append('An interrupted run had left %s; %s finished it.'
                              % (_interrupted.describe(result['interrupted']), ' and '.join(result['commands'])))
    # Shown in the run's output without -v: the operator sees what was repaired.
    module.warn(result['messages'][-1])


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type='list', elements='str', default=[]),
            paths=dict(type='list', elements='path', default=[]),
            lock_timeout=dict(type='int', default=600),
        ),
        supports_check_mode=True,
    )
    result: Dict[str, Any] = dict(changed=False, interrupted={}, journal=False, foreign=[], commands=[], removed=[],
                                  dpkg_leftovers=[], managed=list(_interrupted.MANAGED), messages=[])
    finish_dpkg(module, result)
    leftovers = _interrupted.leftovers(module.params['paths'])
    result['removed'] = leftovers['ours']
    if not module.check_mode:
        for path in result['removed']:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
    result['dpkg_leftovers'] = leftovers['dpkg']
    if result['dpkg_leftovers']:
        module.warn(_interrupted.dpkg_leftovers_message(result['dpkg_leftovers']))
        result['messages'].append(_interrupted.dpkg_leftovers_message(result['dpkg_leftovers']))
    result['changed'] = bool(result['commands'] or result['removed'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
