# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A recorded fake of the two Slurm command lines the Slurm hooks use (extras/hooks/slurm-*.yml). Not Slurm.

    python fake_slurm.py sinfo --noheader --nodes=NODE --format=%T|%E
    python fake_slurm.py scontrol update NodeName=NODE State=DRAIN|RESUME [Reason=TEXT]

The test puts `sinfo` and `scontrol` wrappers that call this file first on PATH. Every call is appended to
$FAKE_SLURM_LOG (one JSON list of argv per line). The cluster is $FAKE_SLURM_STATE, a JSON object:
{"NODE": {"drain": false, "reason": "", "jobs": 2, "jobs_end_per_poll": 1}}.

What it models, from Slurm's manual pages (slurm.schedmd.com/scontrol.html, sinfo.html): State=DRAIN lets the
running jobs finish and takes no new one, and the node is "draining" while a job runs, "drained" once none does;
State=RESUME clears the drain; sinfo's %T is the state in extended form, %E the reason. Jobs end on their own here:
each sinfo call of a draining node ends jobs_end_per_poll of them (0: they never end). What it assumes, and no
page says: sinfo prints nothing for a node it does not know, and %E prints "none" for a node without a reason;
scontrol refuses an unknown node with "slurm_update error: Invalid node name specified" and exit status 1. Any
other command line is refused with exit status 2, so that a hook that changes how it calls Slurm fails its test
instead of passing against a model that does not cover it."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from typing import Dict, List


def _state(node: Dict) -> str:
    if node['drain']:
        return 'draining' if node['jobs'] else 'drained'
    return 'mixed' if node['jobs'] else 'idle'


def main(argv: List[str]) -> int:
    # The hooks of a batch's nodes run at once: one call at a time, as slurmctld answers them.
    with open(os.environ['FAKE_SLURM_STATE'] + '.lock', 'w', encoding='utf-8') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _call(argv)


def _call(argv: List[str]) -> int:
    with open(os.environ['FAKE_SLURM_LOG'], 'a', encoding='utf-8') as log:
        log.write(json.dumps(argv) + '\n')
    path = os.environ['FAKE_SLURM_STATE']
    with open(path, encoding='utf-8') as f:
        nodes = json.load(f)
    tool, args = argv[0], argv[1:]
    if tool == 'sinfo' and len(args) == 3 and args[0] == '--noheader' and args[1].startswith('--nodes=') \
            and args[2] == '--format=%T|%E':
        node = nodes.get(args[1].split('=', 1)[1])
        if node is None:
            return 0
        print('%s|%s' % (_state(node), node['reason'] or 'none'))
        if node['drain'] and node['jobs']:
            node['jobs'] = max(0, node['jobs'] - node.get('jobs_end_per_poll', 1))
    elif tool == 'scontrol' and len(args) >= 3 and args[0] == 'update' and args[1].startswith('NodeName='):
        name = args[1].split('=', 1)[1]
        if name not in nodes:
            sys.stderr.write('slurm_update error: Invalid node name specified\n')
            return 1
        if args[2:] == ['State=RESUME']:
            nodes[name].update(drain=False, reason='')
        elif args[2] == 'State=DRAIN' and len(args) == 4 and args[3].startswith('Reason='):
            nodes[name].update(drain=True, reason=args[3].split('=', 1)[1])
        else:
            sys.stderr.write('fake_slurm: not modelled: %r\n' % argv)
            return 2
    else:
        sys.stderr.write('fake_slurm: not modelled: %r\n' % argv)
        return 2
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(nodes, f)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
