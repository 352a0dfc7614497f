#!/usr/bin/env python
"""Render a role's argument specs into its README.

    tests/rig/role-readme.py [--check] [--entry-point NAME] ROLE_DIR [ROLE_DIR ...]

(`python` with PyYAML: the project venv, .venv/bin/python, has both.)

Reads ROLE_DIR/meta/argument_specs.yml and writes a table of the entry point's
options (default: main) into ROLE_DIR/README.md, between the lines

    <!-- BEGIN ARGUMENT SPECS -->
    <!-- END ARGUMENT SPECS -->

Everything outside the markers is left as it is. Suboptions get rows of their
own, named parent.child (parent[].child for a list of dicts).

--check writes nothing: it exits 1 and names each README whose table is stale,
so that CI can catch an argument_specs.yml edited without its README.
Exit status 2 means a role could not be rendered (no specs, no markers).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - depends on the interpreter
    sys.exit('role-readme.py needs PyYAML; run it with the project venv: .venv/bin/python tests/rig/role-readme.py ...')

BEGIN = '<!-- BEGIN ARGUMENT SPECS -->'
END = '<!-- END ARGUMENT SPECS -->'
NOTE = '<!-- Generated from meta/argument_specs.yml by tests/rig/role-readme.py. Edit the specs, not this table. -->'

# Ansible documentation markup -> Markdown. Order matters: L() before the
# one-argument forms.
_MARKUP = [
    (re.compile(r'L\(([^)]+?),\s*([^)]+?)\)'), lambda m: '[%s](%s)' % (m.group(1), m.group(2))),
    (re.compile(r'U\(([^)]+)\)'), lambda m: m.group(1)),
    (re.compile(r'I\(([^)]+)\)'), lambda m: '*%s*' % m.group(1)),
    (re.compile(r'B\(([^)]+)\)'), lambda m: '**%s**' % m.group(1)),
    (re.compile(r'\b(?:C|V|O|RV|E|P|M)\(([^)]+)\)'), lambda m: '`%s`' % m.group(1)),
    (re.compile(r'HORIZONTALLINE'), lambda m: ''),
]


class RenderError(Exception):
    """A role that cannot be rendered; the message says which file and why."""


def markup(text: str) -> str:
    """One line of Markdown from Ansible-marked-up text."""
    text = ' '.join(str(text).split())
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text


def cell(text: str) -> str:
    """Text that is safe inside a Markdown table cell."""
    return text.replace('|', '\\|')


def code(value) -> str:
    """A default value as inline code: strings as they are, the rest in YAML flow style."""
    if isinstance(value, str):
        text = value if value != '' else '""'
    else:
        text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10 ** 6)
        text = text.strip()
        if text.endswith('\n...') or text.endswith('...'):
            text = text[:-3].strip()
    tick = '``' if '`' in text else '`'
    pad = ' ' if text.startswith('`') or text.endswith('`') else ''
    return '%s%s%s%s%s' % (tick, pad, text, pad, tick)


def type_name(spec: dict) -> str:
    kind = spec.get('type', 'str')
    if kind == 'list' and spec.get('elements'):
        return 'list of %s' % spec['elements']
    return kind


def description(spec: dict) -> str:
    parts = spec.get('description', [])
    if isinstance(parts, str):
        parts = [parts]
    text = ' '.join(markup(p) for p in parts)
    if spec.get('choices') is not None:
        text += '%sChoices: %s.' % (' ' if text else '', ', '.join(code(c) for c in spec['choices']))
    return text


def rows(options: dict, prefix: str = ''):
    """Table rows for options and, after each, its suboptions."""
    for name in options:
        spec = options[name] or {}
        if not isinstance(spec, dict):
            raise RenderError('option %s%s is not a mapping' % (prefix, name))
        if spec.get('required'):
            default = '*required*'
        elif 'default' in spec:
            default = code(spec['default'])
        else:
            default = ''
        yield '| %s | %s | %s | %s |' % (
            cell(code(prefix + name)), cell(type_name(spec)), cell(default), cell(description(spec)))
        if spec.get('options'):
            sep = '[].' if spec.get('type') == 'list' else '.'
            yield from rows(spec['options'], prefix + name + sep)


def render(specs_path: Path, entry_point: str) -> str:
    """The generated block, markers included."""
    try:
        data = yaml.safe_load(specs_path.read_text(encoding='utf-8')) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise RenderError('cannot read %s: %s' % (specs_path, exc))
    entry = (data.get('argument_specs') or {}).get(entry_point)
    if entry is None:
        raise RenderError('%s has no entry point %r under argument_specs' % (specs_path, entry_point))
    options = entry.get('options') or {}
    lines = [BEGIN, NOTE, '']
    if options:
        lines += ['| Variable | Type | Default | Description |', '| --- | --- | --- | --- |']
        lines += list(rows(options))
    else:
        lines.append('This role takes no variables.')
    lines += ['', END]
    return '\n'.join(lines)


def update(readme_text: str, block: str, readme_path: Path) -> str:
    """readme_text with the block between the markers replaced."""
    begin = readme_text.find(BEGIN)
    end = readme_text.find(END)
    if begin < 0 or end < 0 or end < begin:
        raise RenderError('%s needs the lines %s and %s where the variables table goes'
                          % (readme_path, BEGIN, END))
    if readme_text.find(BEGIN, begin + 1) >= 0 or readme_text.find(END, end + 1) >= 0:
        raise RenderError('%s has more than one %s/%s pair' % (readme_path, BEGIN, END))
    return readme_text[:begin] + block + readme_text[end + len(END):]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('roles', nargs='+', type=Path, metavar='ROLE_DIR')
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 if a README is stale')
    parser.add_argument('--entry-point', default='main', help='argument_specs entry point (default: main)')
    args = parser.parse_args(argv)

    status = 0
    for role in args.roles:
        readme = role / 'README.md'
        try:
            block = render(role / 'meta' / 'argument_specs.yml', args.entry_point)
            try:
                before = readme.read_text(encoding='utf-8')
            except OSError as exc:
                raise RenderError('cannot read %s: %s' % (readme, exc))
            after = update(before, block, readme)
        except RenderError as exc:
            print('role-readme: %s' % exc, file=sys.stderr)
            status = 2
            continue
        if after == before:
            continue
        if args.check:
            print('role-readme: %s is stale; run tests/rig/role-readme.py %s' % (readme, role), file=sys.stderr)
            status = max(status, 1)
        else:
            readme.write_text(after, encoding='utf-8')
            print('role-readme: updated %s' % readme)
    return status


if __name__ == '__main__':
    sys.exit(main())
