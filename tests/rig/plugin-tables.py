#!/usr/bin/env python
"""Render the collection's module, filter and callback tables into the README.

    tests/rig/plugin-tables.py [--check] [README]

(`python` with PyYAML: the project venv, .venv/bin/python, has both.)

Reads each plugin's own documentation (DOCUMENTATION in plugins/modules/*.py and plugins/callback/*.py, the
DOCUMENTATION of plugins/filter/*.yml) and writes one table per kind, a row per plugin with its short_description,
into README (default: the collection's README.md), between the lines

    <!-- BEGIN PLUGIN TABLES -->
    <!-- END PLUGIN TABLES -->

Everything outside the markers is left as it is. Issue 29: the hand-written tables had named 11 of 18 modules and
12 of 28 filters; generated, they name every plugin, and --check (the lint stage of tests/rig/test-all.sh) fails
where a plugin was added, removed or redescribed without the README: it writes nothing, exits 1 and says so.
Exit status 2 means the tables could not be rendered (a plugin without documentation, no markers).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the interpreter
    sys.exit('plugin-tables.py needs PyYAML; run it with the project venv: .venv/bin/python tests/rig/plugin-tables.py')

TOP = Path(__file__).resolve().parents[2]
BEGIN = '<!-- BEGIN PLUGIN TABLES -->'
END = '<!-- END PLUGIN TABLES -->'
NOTE = ('<!-- Generated from each plugin\'s DOCUMENTATION by tests/rig/plugin-tables.py. Edit the plugins\' '
        'short_description, not these tables. -->')
# Heading, the directory, how a plugin's documentation is found there, and the ansible-doc type.
KINDS = (
    ('Modules', 'plugins/modules', '*.py', 'module'),
    ('Filters', 'plugins/filter', '*.yml', 'filter'),
    ('Callback', 'plugins/callback', '*.py', 'callback'),
)


class RenderError(Exception):
    """A plugin that cannot be rendered; the message says which file and why."""


def python_documentation(path: Path) -> dict:
    """The DOCUMENTATION string of a Python plugin, parsed, without importing the plugin (ast)."""
    for node in ast.parse(path.read_text(encoding='utf-8'), str(path)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == 'DOCUMENTATION' for t in node.targets):
            return yaml.safe_load(ast.literal_eval(node.value))
    raise RenderError('%s has no DOCUMENTATION' % path)


def documentation(path: Path) -> dict:
    doc = python_documentation(path) if path.suffix == '.py' else (yaml.safe_load(path.read_text()) or {}).get(
        'DOCUMENTATION')
    if not isinstance(doc, dict) or not doc.get('short_description'):
        raise RenderError('%s: its DOCUMENTATION has no short_description' % path)
    return doc


def cell(text: str) -> str:
    return ' '.join(str(text).split()).replace('|', '\\|')


def render(top: Path = TOP) -> str:
    lines = [NOTE, '']
    for heading, directory, pattern, kind in KINDS:
        paths = sorted(p for p in (top / directory).glob(pattern) if not p.name.startswith('_'))
        if kind == 'filter':
            paths = [p for p in paths if 'DOCUMENTATION' in (yaml.safe_load(p.read_text()) or {})]
        if not paths:
            continue
        lines += ['%s (`ansible-doc%s accel.nodes.<name>`):' % (heading, '' if kind == 'module' else ' -t ' + kind),
                  '', '| %s | What it does |' % heading.rstrip('s'), '| --- | --- |']
        for path in paths:
            doc = documentation(path)
            name = doc.get('module') or doc.get('name') or path.stem
            lines.append('| `accel.nodes.%s` | %s |' % (name, cell(doc['short_description'])))
        lines.append('')
    return '\n'.join(lines)


def update(readme_text: str, block: str, readme_path: Path) -> str:
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1:
        raise RenderError('%s needs one %s and one %s line' % (readme_path, BEGIN, END))
    head, rest = readme_text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return '%s%s\n%s%s%s' % (head, BEGIN, block, END, tail)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 if the tables are stale')
    parser.add_argument('readme', nargs='?', default=str(TOP / 'README.md'))
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    try:
        before = readme.read_text(encoding='utf-8')
        after = update(before, render(), readme)
    except (RenderError, OSError, yaml.YAMLError, SyntaxError, ValueError) as exc:
        print('plugin-tables.py: %s' % exc, file=sys.stderr)
        return 2
    if before == after:
        return 0
    if args.check:
        print('%s: the plugin tables are stale; run tests/rig/plugin-tables.py' % readme, file=sys.stderr)
        return 1
    readme.write_text(after, encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main())
