# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""The size of each role's tasks, as issue 17 counts it.

    .venv/bin/python tests/benchmarks/role_size.py [--ref GIT_REF] [ROLES_DIR]

Per role: task files, tasks (blocks not counted: a block is not a task, its
tasks are), YAML lines in tasks/, task files with two tasks or fewer, and the
Jinja expressions in tasks/ and vars/ that span more than one line; and, as issue 29
counts them, the private `__` variables of vars/main.yml and the longest chain of
them (a `__` variable whose value reads another, and so on; 1: reads none). With --ref,
the roles are read from that commit (git show), so that a before and an after
come from the same script.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import yaml

_JINJA = re.compile(r'{[{%].*?[}%]}', re.S)


def count_tasks(items) -> int:
    total = 0
    for item in items or []:
        if not isinstance(item, dict):
            continue
        if 'block' in item:
            total += count_tasks(item.get('block')) + count_tasks(item.get('rescue')) + count_tasks(item.get('always'))
        else:
            total += 1
    return total


def files(ref: str | None, roles_dir: str, role: str, sub: str) -> dict[str, str]:
    """{name: text} of the YAML files under roles/<role>/<sub>."""
    if ref:
        # A role without the directory has no files: the command fails, and that is the answer.
        listing = subprocess.run(['git', 'ls-tree', '--name-only', '%s:%s/%s/%s' % (ref, roles_dir, role, sub)],
                                 capture_output=True, text=True, check=False)
        names = [n for n in listing.stdout.split() if n.endswith('.yml')]
        return {n: subprocess.run(['git', 'show', '%s:%s/%s/%s/%s' % (ref, roles_dir, role, sub, n)],
                                  capture_output=True, text=True, check=True).stdout for n in names}
    path = os.path.join(roles_dir, role, sub)
    if not os.path.isdir(path):
        return {}
    return {n: open(os.path.join(path, n)).read() for n in sorted(os.listdir(path)) if n.endswith('.yml')}


def roles(ref: str | None, roles_dir: str) -> list[str]:
    if ref:
        out = subprocess.run(['git', 'ls-tree', '--name-only', '%s:%s' % (ref, roles_dir)],
                             capture_output=True, text=True, check=True).stdout
        return sorted(out.split())
    return sorted(d for d in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, d)))


def multiline_jinja(text: str) -> tuple[int, int]:
    """(expressions, lines) of the Jinja expressions that span lines, in a YAML file's parsed strings."""
    count = lines = 0

    def walk(node):
        nonlocal count, lines
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            for match in _JINJA.finditer(node):
                n = match.group(0).count('\n')
                if n:
                    count += 1
                    lines += n + 1
    walk(yaml.safe_load(text))
    return count, lines


def private_chain(text: str) -> tuple[int, int]:
    """(private __ variables, their longest chain) in a vars/main.yml."""
    data = yaml.safe_load(text) or {}
    private = dict((k, v) for k, v in data.items() if str(k).startswith('__'))
    reads = dict((k, set(re.findall(r'\b(__[A-Za-z0-9_]+)', yaml.safe_dump(v))) & set(private) - {k})
                 for k, v in private.items())
    depth: dict[str, int] = {}

    def chain(name: str, seen: frozenset) -> int:
        if name not in depth:
            depth[name] = 1 + max([chain(n, seen | {name}) for n in reads[name] if n not in seen] or [0])
        return depth[name]
    return len(private), max([chain(k, frozenset()) for k in private] or [0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--ref')
    parser.add_argument('roles_dir', nargs='?', default='roles')
    args = parser.parse_args()
    rows = []
    for role in roles(args.ref, args.roles_dir):
        tasks = files(args.ref, args.roles_dir, role, 'tasks')
        handlers = files(args.ref, args.roles_dir, role, 'handlers')
        variables = files(args.ref, args.roles_dir, role, 'vars')
        counts = {name: count_tasks(yaml.safe_load(text)) for name, text in tasks.items()}
        jinja = [multiline_jinja(text) for text in list(tasks.values()) + list(handlers.values()) + list(variables.values())]
        private, deepest = private_chain(variables.get('main.yml', ''))
        rows.append((role, len(tasks), sum(counts.values()), sum(t.count('\n') for t in tasks.values()),
                     sum(1 for c in counts.values() if c <= 2), sum(j[0] for j in jinja), sum(j[1] for j in jinja),
                     private, deepest))
    header = ('role', 'task files', 'tasks', 'YAML lines', 'files <= 2 tasks', 'multi-line Jinja', 'their lines',
              '__ vars', 'deepest __ chain')
    print('| ' + ' | '.join(header) + ' |')
    print('|' + '---|' * len(header))
    for row in rows:
        print('| ' + ' | '.join(str(x) for x in row) + ' |')
    totals = ['all'] + [sum(r[i] for r in rows) for i in range(1, len(header) - 1)] + [max(r[-1] for r in rows)]
    print('| ' + ' | '.join('**%s**' % x for x in totals) + ' |')


if __name__ == '__main__':
    sys.exit(main())
