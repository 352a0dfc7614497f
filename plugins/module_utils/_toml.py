# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""A small TOML reader, writer and format-preserving editor.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Target hosts run Python 3.8 and later, where tomllib (3.11+) is not always
there, and the configs we touch (containerd, nvidia-container-toolkit) are
owned by their users, so an edit must leave every byte we did not mean to
change exactly where it was.

  loads(text)            -> dict, for reading any file.
  dumps(data)            -> str, for whole files we own (drop-ins).
  TomlDocument(text)     -> get/set/delete on one key, keeping the rest of the
                            text as it was; every edit is parsed back and
                            checked before it is accepted.
  split_key('a."b.c"')   -> ('a', 'b.c'), the TOML dotted-key syntax.

Supported: TOML 1.0 without dates and times (a file that holds one fails with
a TomlError that says so).
"""

from __future__ import annotations

import copy
import math
import re

__all__ = ['TomlError', 'TomlDocument', 'loads', 'dumps', 'split_key', 'join_key', 'SettingsError', 'apply_settings']


class TomlError(ValueError):
    """Malformed TOML, or an edit that cannot be made safely."""

    def __init__(self, msg, lineno=None, colno=None):
        self.msg = msg
        self.lineno = lineno
        self.colno = colno
        if lineno is not None:
            msg = '%s (line %d, column %d)' % (msg, lineno, colno)
        super(TomlError, self).__init__(msg)


_BARE = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_')
_ESCAPES = {'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', '"': '"', '\\': '\\'}
_VALUE_END = frozenset(' \t\r\n,]}#')
# Lexing only: these validate one token the parser has already cut out.
_DEC_INT = re.compile(r'[+-]?(?:0|[1-9](?:_?[0-9])*)\Z')
_FLOAT = re.compile(r'[+-]?(?:0|[1-9](?:_?[0-9])*)(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9](?:_?[0-9])*)?\Z')
_RADIX = {
    '0x': (16, re.compile(r'[0-9A-Fa-f](?:_?[0-9A-Fa-f])*\Z')),
    '0o': (8, re.compile(r'[0-7](?:_?[0-7])*\Z')),
    '0b': (2, re.compile(r'[01](?:_?[01])*\Z')),
}
_DATE_OR_TIME = re.compile(r'[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}:[0-9]{2}')


def _is_control(ch):
    return (ch < ' ' and ch != '\t') or ch == '\x7f'


class _Parser(object):
    """Character-level reader over one TOML text."""

    def __init__(self, src):
        self.src = src
        self.pos = 0

    def fail(self, msg, pos=None):
        pos = self.pos if pos is None else pos
        line_start = self.src.rfind('\n', 0, pos) + 1
        return TomlError(msg, self.src.count('\n', 0, pos) + 1, pos - line_start + 1)

    def peek(self, offset=0):
        i = self.pos + offset
        return self.src[i] if i < len(self.src) else ''

    def skip_ws(self):
        src, n, p = self.src, len(self.src), self.pos
        while p < n and src[p] in ' \t':
            p += 1
        self.pos = p

    def skip_comment(self):
        """At '#': move to the newline that ends the comment (not past it)."""
        src, n, p = self.src, len(self.src), self.pos + 1
        while p < n and src[p] != '\n':
            ch = src[p]
            if ch == '\r' and src.startswith('\r\n', p):
                break
            if _is_control(ch):
                raise self.fail('control character %r in a comment' % ch, p)
            p += 1
        self.pos = p

    def newline(self):
        """Consume one newline; at the end of the text there is none to consume."""
        ch = self.peek()
        if ch == '':
            return
        if ch == '\n':
            self.pos += 1
        elif ch == '\r' and self.peek(1) == '\n':
            self.pos += 2
        else:
            raise self.fail('expected the end of the line')

    def end_of_statement(self):
        self.skip_ws()
        if self.peek() == '#':
            self.skip_comment()
        self.newline()

    def skip_blank_and_comments(self):
        while True:
            self.skip_ws()
            ch = self.peek()
            if ch == '#':
                self.skip_comment()
            elif ch == '\n' or (ch == '\r' and self.peek(1) == '\n'):
                self.newline()
            else:
                return

    # keys

    def parse_key(self):
        parts = [self.parse_simple_key()]
        while True:
            self.skip_ws()
            if self.peek() != '.':
                return tuple(parts)
            self.pos += 1
            self.skip_ws()
            parts.append(self.parse_simple_key())

    def parse_simple_key(self):
        ch = self.peek()
        if ch in ('"', "'"):
            if self.src.startswith(ch * 3, self.pos):
                raise self.fail('a key cannot be a multi-line string')
            return self.parse_basic_string() if ch == '"' else self.parse_literal_string()
        start = self.pos
        src, n = self.src, len(self.src)
        while self.pos < n and src[self.pos] in _BARE:
            self.pos += 1
        if self.pos == start:
            raise self.fail('expected a key')
        return src[start:self.pos]

    # strings

    def parse_escape(self):
        ch = self.peek(1)
        if ch in _ESCAPES:
            self.pos += 2
            return _ESCAPES[ch]
        if ch in ('u', 'U'):
            width = 4 if ch == 'u' else 8
            digits = self.src[self.pos + 2:self.pos + 2 + width]
            if len(digits) != width or any(c not in '0123456789abcdefABCDEF' for c in digits):
                raise self.fail('invalid \\%s escape' % ch)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise self.fail('escape \\%s%s is not a Unicode scalar value' % (ch, digits))
            self.pos += 2 + width
            return chr(code)
        raise self.fail('invalid escape sequence in a string')

    def parse_basic_string(self):
        src, n = self.src, len(self.src)
        self.pos += 1
        out = []
        while True:
            if self.pos >= n:
                raise self.fail('unterminated string')
            ch = src[self.pos]
            if ch == '"':
                self.pos += 1
                return ''.join(out)
            if ch == '\\':
                out.append(self.parse_escape())
                continue
            if ch in '\r\n':
                raise self.fail('unterminated string: a newline in a single-line string')
            if _is_control(ch):
                raise self.fail('control character %r in a string' % ch)
            out.append(ch)
            self.pos += 1

    def parse_literal_string(self):
        src, n = self.src, len(self.src)
        self.pos += 1
        start = self.pos
        while True:
            if self.pos >= n:
                raise self.fail('unterminated string')
            ch = src[self.pos]
            if ch == "'":
                self.pos += 1
                return src[start:self.pos - 1]
            if ch in '\r\n':
                raise self.fail('unterminated string: a newline in a single-line string')
            if _is_control(ch):
                raise self.fail('control character %r in a string' % ch)
            self.pos += 1

    def parse_multiline_string(self, quote):
        src, n = self.src, len(self.src)
        self.pos += 3
        if self.peek() == '\n' or (self.peek() == '\r' and self.peek(1) == '\n'):
            self.newline()  # a newline right after the opening quotes is trimmed
        out = []
        while True:
            if self.pos >= n:
                raise self.fail('unterminated multi-line string')
            ch = src[self.pos]
            if ch == quote:
                run = 1
                while run < 6 and src.startswith(quote, self.pos + run):
                    run += 1
                if run >= 3:
                    if run > 5:
                        raise self.fail('too many quotes at the end of a multi-line string')
                    out.append(quote * (run - 3))
                    self.pos += run
                    return ''.join(out)
                out.append(quote * run)
                self.pos += run
            elif ch == '\\' and quote == '"':
                p = self.pos + 1
                while p < n and src[p] in ' \t':
                    p += 1
                if p < n and (src[p] == '\n' or src.startswith('\r\n', p)):
                    # A line-ending backslash eats the newline and the blanks after it.
                    while p < n and (src[p] in ' \t\n' or src.startswith('\r\n', p)):
                        p += 1
                    self.pos = p
                else:
                    out.append(self.parse_escape())
            elif ch == '\n':
                out.append('\n')
                self.pos += 1
            elif ch == '\r' and self.peek(1) == '\n':
                out.append('\n')
                self.pos += 2
            elif _is_control(ch):
                raise self.fail('control character %r in a string' % ch)
            else:
                out.append(ch)
                self.pos += 1

    # values

    def parse_value(self):
        ch = self.peek()
        if ch in ('"', "'"):
            if self.src.startswith(ch * 3, self.pos):
                return self.parse_multiline_string(ch)
            return self.parse_basic_string() if ch == '"' else self.parse_literal_string()
        if ch == '[':
            return self.parse_array()
        if ch == '{':
            return self.parse_inline_table()
        start = self.pos
        src, n = self.src, len(self.src)
        while self.pos < n and src[self.pos] not in _VALUE_END:
            self.pos += 1
        token = src[start:self.pos]
        if token == 'true':
            return True
        if token == 'false':
            return False
        return self.parse_number(token, start)

    def parse_number(self, token, start):
        if not token:
            raise self.fail('expected a value', start)
        if token in ('inf', '+inf', '-inf', 'nan', '+nan', '-nan'):
            return float(token)
        if _DATE_OR_TIME.match(token):
            raise self.fail('dates and times are not supported', start)
        radix = _RADIX.get(token[:2])
        if radix is not None:
            base, digits = radix
            if digits.match(token[2:]):
                return int(token[2:].replace('_', ''), base)
        elif _DEC_INT.match(token):
            return int(token.replace('_', ''))
        elif _FLOAT.match(token) and any(c in token for c in '.eE'):
            return float(token.replace('_', ''))
        raise self.fail('invalid value %r' % token, start)

    def parse_array(self):
        self.pos += 1
        items = []
        while True:
            self.skip_blank_and_comments()
            if self.peek() == ']':
                self.pos += 1
                return items
            items.append(self.parse_value())
            self.skip_blank_and_comments()
            ch = self.peek()
            if ch == ',':
                self.pos += 1
            elif ch == ']':
                self.pos += 1
                return items
            else:
                raise self.fail("expected ',' or ']' in an array")

    def parse_inline_table(self):
        self.pos += 1
        table = {}
        frozen = set()  # ids of tables written as inline tables inside this one
        self.skip_ws()
        if self.peek() == '}':
            self.pos += 1
            return table
        while True:
            key_pos = self.pos
            key = self.parse_key()
            if self.peek() != '=':
                raise self.fail("expected '=' after a key")
            self.pos += 1
            self.skip_ws()
            value = self.parse_value()
            node = table
            for part in key[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict) or id(node) in frozen:
                    raise self.fail('cannot add keys to %s' % join_key(key[:-1]), key_pos)
            if key[-1] in node:
                raise self.fail('duplicate key %s' % join_key(key), key_pos)
            node[key[-1]] = value
            if isinstance(value, dict):
                frozen.add(id(value))
            self.skip_ws()
            ch = self.peek()
            if ch == '}':
                self.pos += 1
                return table
            if ch != ',':
                raise self.fail("expected ',' or '}' in an inline table")
            self.pos += 1
            self.skip_ws()
            if self.peek() == '}':
                raise self.fail('an inline table cannot end with a comma')


_EXPLICIT = 'explicit'  # defined by a [header] or [[header]]
_FROZEN = 'frozen'  # an inline table or array: nothing may be added to it


class _Builder(object):
    """Applies TOML's rules on which table may be defined or extended where."""

    def __init__(self):
        self.data = {}
        self._flags = {}
        self._pending = []

    def _node(self, key, create):
        sub, node = self._flags, None
        for part in key:
            if part not in sub:
                if not create:
                    return None
                sub[part] = {'own': set(), 'all': set(), 'sub': {}}
            node = sub[part]
            sub = node['sub']
        return node

    def has(self, key, flag):
        sub = self._flags
        for part in key[:-1]:
            node = sub.get(part)
            if node is None:
                return False
            if flag in node['all']:
                return True
            sub = node['sub']
        node = sub.get(key[-1]) if key else None
        return node is not None and (flag in node['own'] or flag in node['all'])

    def mark(self, key, flag, recursive=False):
        node = self._node(key, True)
        node['all' if recursive else 'own'].add(flag)

    def _close_section(self):
        for key in self._pending:
            self.mark(key, _EXPLICIT)
        self._pending = []

    def _nest(self, key):
        node = self.data
        for part in key:
            node = node.setdefault(part, {})
            if isinstance(node, list):
                node = node[-1] if node else None
            if not isinstance(node, dict):
                raise KeyError(part)
        return node

    def table(self, key, fail):
        self._close_section()
        if self.has(key, _EXPLICIT) or self.has(key, _FROZEN):
            raise fail('table [%s] is defined twice, or inside an inline table or array' % join_key(key))
        self.mark(key, _EXPLICIT)
        try:
            self._nest(key)
        except KeyError:
            raise fail('[%s] would overwrite a value that is not a table' % join_key(key))

    def array_table(self, key, fail):
        self._close_section()
        if self.has(key, _FROZEN):
            raise fail('[[%s]] cannot extend a static array' % join_key(key))
        parent = self._node(key[:-1], False) if len(key) > 1 else {'sub': self._flags}
        if parent is not None:
            parent['sub'].pop(key[-1], None)  # a new element starts with a clean slate
        self.mark(key, _EXPLICIT)
        try:
            container = self._nest(key[:-1])
            items = container.setdefault(key[-1], [])
            if not isinstance(items, list):
                raise KeyError(key[-1])
            items.append({})
        except KeyError:
            raise fail('[[%s]] would overwrite a value that is not an array of tables' % join_key(key))

    def value(self, header, key, value, fail):
        for i in range(1, len(key)):
            container = header + key[:i]
            if self.has(container, _EXPLICIT):
                raise fail('dotted key %s redefines table [%s]' % (join_key(key), join_key(container)))
            self._pending.append(container)
        parent = header + key[:-1]
        if parent and self.has(parent, _FROZEN):
            raise fail('cannot add keys to %s: it is an inline table or an array' % join_key(parent))
        try:
            table = self._nest(parent)
        except KeyError:
            raise fail('%s would overwrite a value that is not a table' % join_key(header + key))
        if key[-1] in table:
            raise fail('duplicate key %s' % join_key(header + key))
        if isinstance(value, (dict, list)):
            self.mark(header + key, _FROZEN, recursive=True)
        table[key[-1]] = value


class _Stmt(object):
    """One line (or the lines of one multi-line value) of a TOML text."""

    __slots__ = ('kind', 'start', 'end', 'indent', 'header', 'key', 'value', 'vstart', 'vend', 'in_aot', 'body')

    def __init__(self, kind, start, end, indent='', header=(), key=(), value=None, vstart=0, vend=0,
                 in_aot=False, body=''):
        self.kind = kind  # 'kv', 'table', 'array' (of tables), 'comment' or 'blank'
        self.start = start  # the first character of the line
        self.end = end  # just past the newline that ends the statement
        self.indent = indent
        self.header = header  # the table this line is in; for a header, its own path
        self.key = key  # for 'kv', the key as written (relative to header)
        self.value = value
        self.vstart = vstart  # the value's text is src[vstart:vend]
        self.vend = vend
        self.in_aot = in_aot  # inside an array of tables, where a path names no single table
        self.body = body  # for 'comment', the text after '#'

    @property
    def path(self):
        return self.header + self.key


def _parse(text):
    if not isinstance(text, str):
        raise TypeError('TOML text must be str, not %s' % type(text).__name__)
    p = _Parser(text)
    builder = _Builder()
    stmts = []
    header, in_aot, aot_paths = (), False, set()
    n = len(text)
    while p.pos < n:
        start = p.pos
        p.skip_ws()
        indent = text[start:p.pos]
        ch = p.peek()
        if ch == '#':
            p.skip_comment()
            body = text[start + len(indent) + 1:p.pos]
            p.newline()
            stmts.append(_Stmt('comment', start, p.pos, indent, header, in_aot=in_aot, body=body))
        elif ch in ('\n', '\r', ''):
            p.newline()
            stmts.append(_Stmt('blank', start, p.pos, indent, header, in_aot=in_aot))
        elif ch == '[':
            where = p.pos
            is_array = text.startswith('[[', where)
            p.pos += 2 if is_array else 1
            p.skip_ws()
            key = p.parse_key()
            close = ']]' if is_array else ']'
            if not text.startswith(close, p.pos):
                raise p.fail("expected '%s' to close the table header" % close)
            p.pos += len(close)
            p.end_of_statement()

            def fail(msg, where=where):
                return p.fail(msg, where)

            if is_array:
                builder.array_table(key, fail)
                aot_paths.add(key)
            else:
                builder.table(key, fail)
            header = key
            in_aot = any(key[:i] in aot_paths for i in range(1, len(key) + 1))
            stmts.append(_Stmt('array' if is_array else 'table', start, p.pos, indent, key, in_aot=in_aot))
        else:
            where = p.pos
            key = p.parse_key()
            if p.peek() != '=':
                raise p.fail("expected '=' after the key %s" % join_key(key))
            p.pos += 1
            p.skip_ws()
            vstart = p.pos
            value = p.parse_value()
            vend = p.pos
            p.end_of_statement()
            builder.value(header, key, value, lambda msg: p.fail(msg, where))
            stmts.append(_Stmt('kv', start, p.pos, indent, header, key, value, vstart, vend, in_aot))
    return builder.data, stmts


def loads(text):
    """Parse a TOML text into a dict. Raises TomlError with the line of the fault."""
    return _parse(text)[0]


def split_key(dotted):
    """'a."b.c".d' -> ('a', 'b.c', 'd'): a key path in TOML's dotted-key syntax."""
    p = _Parser(dotted)
    p.skip_ws()
    key = p.parse_key()
    if p.pos != len(dotted):
        raise p.fail('unexpected text after the key')
    return key


def join_key(path):
    """('a', 'b.c') -> 'a."b.c"': the inverse of split_key."""
    return '.'.join(_render_key_part(part) for part in path)


# writing

def _render_key_part(part):
    if part and all(c in _BARE for c in part):
        return part
    return _render_basic_string(part)


def _render_basic_string(s):
    out = ['"']
    for ch in s:
        if ch == '"' or ch == '\\':
            out.append('\\' + ch)
        elif ch in '\b\t\n\f\r':
            out.append('\\' + 'btnfr'['\b\t\n\f\r'.index(ch)])
        elif _is_control(ch):
            out.append('\\u%04X' % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def _render_value(value, literal=False):
    """One value, on one line. literal=True writes strings 'like this' where that can be done."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'nan'
        if math.isinf(value):
            return 'inf' if value > 0 else '-inf'
        return repr(value)
    if isinstance(value, str):
        if literal and "'" not in value and not any(_is_control(c) or c == '\t' for c in value):
            return "'%s'" % value
        return _render_basic_string(value)
    if isinstance(value, (list, tuple)):
        return '[%s]' % ', '.join(_render_value(item, literal) for item in value)
    if isinstance(value, dict):
        if not value:
            return '{}'
        return '{%s}' % ', '.join('%s = %s' % (_render_key_part(k), _render_value(v, literal))
                                  for k, v in value.items())
    if value is None:
        raise TomlError('TOML has no null value')
    raise TomlError('cannot write a value of type %s to TOML' % type(value).__name__)


def _is_array_of_tables(value):
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def dumps(data):
    """Write a dict as a whole TOML text.

    Deterministic: keys keep the order of the dict, a table's plain values come
    before its sub-tables, and sub-tables are written as [dotted.headers]. A
    table with nothing but sub-tables gets no header of its own.
    """
    if not isinstance(data, dict):
        raise TomlError('the top level of a TOML document must be a table')
    lines = []
    _dump_table(lines, (), data, False)
    return '\n'.join(lines) + '\n' if lines else ''


def _dump_table(lines, path, table, array_item):
    plain = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_array_of_tables(v)]
    nested = [(k, v) for k, v in table.items() if isinstance(v, dict) or _is_array_of_tables(v)]
    if path and (plain or not nested or array_item):
        if lines:
            lines.append('')
        lines.append(('[[%s]]' if array_item else '[%s]') % join_key(path))
    for key, value in plain:
        lines.append('%s = %s' % (_render_key_part(key), _render_value(value)))
    for key, value in nested:
        if isinstance(value, dict):
            _dump_table(lines, path + (key,), value, False)
        else:
            for item in value:
                _dump_table(lines, path + (key,), item, True)


# editing

def _same(a, b):
    """Equal as TOML values: true is not 1, and 1 is not 1.0."""
    if type(a) is not type(b):
        if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
            return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _leaves(table, prefix=()):
    """{path: value} for every value that is not a table; empty tables are left out."""
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_leaves(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def _check_value(value, path):
    if isinstance(value, dict):
        raise TomlError('%s: set the keys of a table one by one, not as a table' % join_key(path))
    try:
        _render_value(value)
    except TomlError as e:
        raise TomlError('%s: %s' % (join_key(path), e.msg))


def _as_path(path):
    if isinstance(path, str):
        return split_key(path)
    path = tuple(path)
    if not path or not all(isinstance(part, str) for part in path):
        raise TomlError('a key path is a non-empty sequence of strings, not %r' % (path,))
    return path


class TomlDocument(object):
    """A TOML text that can be edited one key at a time.

    Every edit replaces or inserts whole lines and leaves the rest of the text
    (comments, blank lines, order, quoting, other tables) as it was. The new
    text is parsed again after each edit; an edit that would change anything
    but the key it names raises TomlError and leaves the document as it was.

    Paths are tuples of key parts, or strings in TOML's dotted-key syntax:
    ('plugins', 'io.containerd.grpc.v1.cri', 'enable_cdi') is the same as
    'plugins."io.containerd.grpc.v1.cri".enable_cdi'.
    """

    def __init__(self, text=''):
        self._text = text
        self._data, self._stmts = _parse(text)
        self._newline = '\r\n' if '\r\n' in text else '\n'

    def text(self):
        return self._text

    def as_dict(self):
        return copy.deepcopy(self._data)

    def get(self, path, default=None):
        node = self._data
        for part in _as_path(path):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return copy.deepcopy(node)

    def set(self, path, value):
        """Set one key to a str, bool, int, float or list of those. Returns True if the text changed."""
        path = _as_path(path)
        _check_value(value, path)
        parent = self._walk_to_parent(path)
        if parent is not None and path[-1] in parent:
            if _same(parent[path[-1]], value):
                return False
        stmt = self._kv(path)
        if stmt is not None:
            new_text = self._replace_value(stmt, value)
        else:
            holder = self._inline_holder(path)
            if holder is not None:
                inline = copy.deepcopy(holder.value)
                _assign(inline, path[len(holder.path):], value)
                new_text = self._replace_value(holder, inline)
            elif parent is not None and isinstance(parent.get(path[-1]), dict):
                raise TomlError('%s is a table; delete it before setting it to a value' % join_key(path))
            else:
                new_text = self._insert(path, value)
        expected = copy.deepcopy(self._data)
        _assign(expected, path, value)
        self._accept(new_text, path, lambda data: _same(data, expected))
        return True

    def delete(self, path):
        """Remove one key, or a whole table with its sub-tables. Returns True if the text changed."""
        path = _as_path(path)
        parent = self._walk_to_parent(path)
        if parent is None or path[-1] not in parent:
            return False
        stmt = self._kv(path)
        holder = None if stmt is not None else self._inline_holder(path)
        if holder is not None:
            inline = copy.deepcopy(holder.value)
            _remove(inline, path[len(holder.path):])
            new_text = self._replace_value(holder, inline)
        else:
            spans = [(stmt.start, stmt.end)] if stmt is not None else self._table_spans(path)
            new_text = self._text
            for start, end in sorted(spans, reverse=True):
                new_text = new_text[:start] + new_text[end:]
        expected = copy.deepcopy(self._data)
        _remove(expected, path)
        want = _leaves(expected)

        def check(data):
            node = data
            for part in path[:-1]:
                node = node.get(part, {}) if isinstance(node, dict) else {}
            got = _leaves(data)
            return path[-1] not in node and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)

        self._accept(new_text, path, check)
        return True

    # helpers

    def _accept(self, new_text, path, check):
        try:
            data, stmts = _parse(new_text)
        except TomlError as e:
            raise TomlError('editing %s would leave invalid TOML (%s); the document is unchanged' % (join_key(path), e))
        if not check(data):
            raise TomlError('editing %s would change other keys; the document is unchanged' % join_key(path))
        self._text, self._data, self._stmts = new_text, data, stmts

    def _walk_to_parent(self, path):
        """The table that holds path[-1], or None where it does not exist yet."""
        node = self._data
        for i, part in enumerate(path[:-1]):
            node = node.get(part)
            if node is None:
                return None
            if isinstance(node, list):
                raise TomlError('%s goes through the array %s, which this editor does not edit inside'
                                % (join_key(path), join_key(path[:i + 1])))
            if not isinstance(node, dict):
                raise TomlError('%s: %s is a value, not a table' % (join_key(path), join_key(path[:i + 1])))
        return node

    def _kv(self, path):
        for stmt in self._stmts:
            if stmt.kind == 'kv' and not stmt.in_aot and stmt.path == path:
                return stmt
        return None

    def _inline_holder(self, path):
        """The key/value line whose inline table holds path, if any."""
        for stmt in self._stmts:
            if (stmt.kind == 'kv' and not stmt.in_aot and len(stmt.path) < len(path)
                    and path[:len(stmt.path)] == stmt.path and isinstance(stmt.value, dict)):
                return stmt
        return None

    def _quote_style(self, stmt=None):
        """True where strings should be 'literal': as the value replaced, else as the file's first string."""
        for s in ([stmt] if stmt is not None else []) + [s for s in self._stmts if s.kind == 'kv']:
            for ch in self._text[s.vstart:s.vend]:
                if ch in '"\'':
                    return ch == "'"
        return False

    def _replace_value(self, stmt, value):
        rendered = _render_value(value, self._quote_style(stmt))
        return self._text[:stmt.vstart] + rendered + self._text[stmt.vend:]

    def _line(self, indent, key, value):
        return '%s%s = %s%s' % (indent, join_key(key), _render_value(value, self._quote_style()), self._newline)

    def _insert_at(self, pos, line):
        before = self._text[:pos]
        if before and not before.endswith('\n'):
            before += self._newline
        return before + line + self._text[pos:]

    def _section(self, header_index):
        """Indexes (first, stop) of the lines after a header, up to the next header."""
        stop = header_index + 1
        while stop < len(self._stmts) and self._stmts[stop].kind not in ('table', 'array'):
            stop += 1
        return header_index + 1, stop

    def _insert(self, path, value):
        # _walk_to_parent has already refused paths through arrays of tables.
        table = path[:-1]
        headers = [i for i, s in enumerate(self._stmts) if s.kind in ('table', 'array')]
        if not table:
            first, stop = 0, headers[0] if headers else len(self._stmts)
            return self._insert_in_section(first, stop, path, value, None)
        for i in headers:
            if self._stmts[i].kind == 'table' and self._stmts[i].header == table:
                first, stop = self._section(i)
                return self._insert_in_section(first, stop, path, value, self._stmts[i])
        # No [table] header: the table may hang off dotted keys in some section,
        # where only another dotted key can extend it.
        for size in range(len(table), 0, -1):
            prefix = table[:size]
            dotted = [s for s in self._stmts if s.kind == 'kv' and not s.in_aot
                      and len(s.header) < size < len(s.path) and s.path[:size] == prefix]
            if dotted:
                anchor = dotted[-1]
                return self._insert_at(anchor.end, self._line(anchor.indent, path[len(anchor.header):], value))
        text = self._text
        if text and not text.endswith('\n'):
            text += self._newline
        if text.strip() and not text.endswith(('\n\n', '\n\r\n')):
            text += self._newline
        return text + '[%s]%s%s' % (join_key(table), self._newline, self._line('', path[-1:], value))

    def _insert_in_section(self, first, stop, path, value, header):
        """Put the key after its commented-out default, else after the section's last key."""
        key = path[len(header.header) if header else 0:]
        for stmt in self._stmts[first:stop]:
            if stmt.kind == 'comment' and _commented_key(stmt.body) == key:
                return self._insert_at(stmt.end, self._line(stmt.indent, key, value))
        kvs = [s for s in self._stmts[first:stop] if s.kind == 'kv']
        if kvs:
            return self._insert_at(kvs[-1].end, self._line(kvs[-1].indent, key, value))
        if header is not None:
            return self._insert_at(header.end, self._line(header.indent, key, value))
        if stop < len(self._stmts):  # a document with no top-level keys yet
            return self._insert_at(self._stmts[stop].start, self._line('', key, value) + self._newline)
        return self._insert_at(len(self._text), self._line('', key, value))

    def _table_spans(self, path):
        spans = []
        for index, stmt in enumerate(self._stmts):
            if stmt.kind in ('table', 'array') and stmt.header[:len(path)] == path:
                first, stop = self._section(index)
                kvs = [s for s in self._stmts[first:stop] if s.kind == 'kv']
                spans.append((stmt.start, kvs[-1].end if kvs else stmt.end))
            elif (stmt.kind == 'kv' and len(stmt.header) < len(path) and stmt.path[:len(path)] == path):
                spans.append((stmt.start, stmt.end))
        return spans


def _commented_key(body):
    """'#debug = "x"' names the key ('debug',); a comment that is not a key/value line names None."""
    p = _Parser(body)
    try:
        p.skip_ws()
        key = p.parse_key()
    except TomlError:
        return None
    return key if p.peek() == '=' else None


def _assign(table, path, value):
    for part in path[:-1]:
        table = table.setdefault(part, {})
    table[path[-1]] = copy.deepcopy(value)


def _remove(table, path):
    for part in path[:-1]:
        table = table[part]
    del table[path[-1]]


class SettingsError(ValueError):
    """A setting accel.nodes.toml_settings cannot apply, with the keys changed before it."""

    def __init__(self, msg, changed_keys):
        super(SettingsError, self).__init__(msg)
        self.msg = msg
        self.changed_keys = changed_keys


def apply_settings(doc, settings, state, path=''):
    """Set (state present) or remove (absent) each dotted key of settings in doc, the file at path, as
    accel.nodes.toml_settings does; the keys that changed it. Raises SettingsError."""
    changed_keys = []
    for key, value in settings.items():
        try:
            keys = split_key(key)
        except TomlError as exc:
            raise SettingsError('settings key %r is not a TOML dotted key: %s. Quote a part that contains dots, '
                                'as in plugins."io.containerd.grpc.v1.cri".enable_cdi.' % (key, exc.msg), [])
        try:
            if state == 'present' and value is None:
                raise TomlError('TOML has no null value; to remove the key, use state=absent')
            done = doc.set(keys, value) if state == 'present' else doc.delete(keys)
        except TomlError as exc:
            verb = 'set' if state == 'present' else 'remove'
            raise SettingsError('Cannot %s %s in %s: %s' % (verb, key, path, exc), changed_keys)
        if done:
            changed_keys.append(key)
    return changed_keys
