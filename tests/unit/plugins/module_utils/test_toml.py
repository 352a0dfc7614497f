# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""_toml against Python's tomllib as the oracle, on the real configs we edit."""

from __future__ import annotations

import copy
import math
import os

import pytest

from ansible_collections.accel.nodes.plugins.module_utils._toml import (
    TomlDocument, TomlError, dumps, join_key, loads, split_key)

tomllib = pytest.importorskip('tomllib')

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'toml')
FIXTURE_NAMES = sorted(name for name in os.listdir(FIXTURES) if name.endswith('.toml'))


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding='utf-8', newline='') as f:
        return f.read()


def changed_lines(before, after):
    """The lines of before that are gone and the lines of after that are new, in order."""
    import difflib
    old, new = before.splitlines(True), after.splitlines(True)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != 'equal':
            out.append((old[i1:i2], new[j1:j2]))
    return out


# reading

@pytest.mark.parametrize('name', FIXTURE_NAMES)
def test_loads_matches_tomllib_on_real_configs(name):
    text = fixture(name)
    assert loads(text) == tomllib.loads(text)


VALID = [
    'a = """x\r\ny"""',
    'a = """\nfirst newline trimmed"""',
    'a = """\\\n   folded \\\n  line"""',
    "a = '''x''''",
    'a = """x"""""',
    'a = "\\u00e9\\U0001F600 \\t \\" \\\\"',
    "key = 'C:\\path'",
    'a = 1_000\nb = 0xDEAD_beef\nc = 0o17\nd = 0b101\ne = -0\nf = +7',
    'a = 1e10\nb = -1.5E-3\nc = 6.626e-34\nd = -0.0\ne = 1_000.5',
    'a = inf\nb = -inf\nc = 9223372036854775808',
    'a = [\n  1, # one\n  2,\n]\nb = [[1, 2], ["a", \'b\']]\nc = []',
    'a = {b = 1, c.d = "x", e = {f = [1]}}\nz = {}',
    '# c\n[x] # c\ny = "z" # c\n',
    '"" = 1\n1 = 2\n3.4 = 5',
    "'a'.\"b\" = 1\n[\"a.b\".'c']\nd = 1",
    '[ a . b ]\nc = 1',
    'a.b = 1\n[a.c]\nx = 1',
    '[a.b.c]\n[a]\nb.d = 1',
    '[x.y]\n[x.y.z]\n[x]',
    '[[a]]\n[a.b]\nc = 1\n[[a]]\n[a.b]\nc = 2',
    '[[fruits]]\nname = "apple"\n[[fruits.varieties]]\nname = "red"\n[[fruits]]\nname = "banana"',
    'a = "caf\u00e9 \u00fc\u00df \u4e2d\u6587"  # comment \u00e9',
    'a = 1\r\n[b]\r\nc = 2\r\n',
    '',
    '\n\n# only a comment\n',
]


@pytest.mark.parametrize('text', VALID)
def test_loads_matches_tomllib(text):
    assert loads(text) == tomllib.loads(text)


def test_loads_nan():
    assert math.isnan(loads('a = nan')['a'])
    assert math.isnan(loads('a = -nan')['a'])


INVALID = [
    ('a = {b = 1,}', 1), ('a = {\nb = 1}', 1), ('a = 0x_1', 1), ('a = """x""""""', 1), ('a=1\r', 1),
    ('a = "\x7f"', 1), ('a = 1__0', 1), ('a = 01', 1), ('a = 1.', 1), ('a = .1', 1), ('a = 1e', 1),
    ('a = -0x1', 1), ('[a]\nb=1\n[a.b]', 3), ('a = [,]', 1), ('a = "\\e"', 1), ('a = "\\uD800"', 1),
    ('a = [1]\n[[a]]', 2), ('[a]]', 1), ('a = {b = {c = 1}, b.d = 2}', 1), ('x = 1 y = 2', 1),
    ('a = tru', 1), ('[a]\n[a]', 2), ('x = 0\na = 1\na = 2', 3), ('a.b = 1\na.b.c = 2', 2), ('a = {}\n[a]', 2),
    ('[a]\nb.c=1\n[a.b]', 3), ("a = 'x\ny'", 1), ('a="b"c', 1), ('a = [1 2]', 1), ('[[a]]\nb=1\n[a]', 3),
    ('a = [{b=1}]\n[[a]]', 2), ('a.b=1\n[a]', 2), ('a = {b = 1, b.c = 2}', 1), ('a = 1 #\x01', 1),
    ('a = "unterminated', 1), ('a = """never closed', 1), ('[table', 1), ('= 1', 1), ('a', 1), ('a =', 1),
    ('ok = 1\n\nbad = [1, 2', 3),
]


@pytest.mark.parametrize('text,line', INVALID)
def test_loads_rejects_what_tomllib_rejects(text, line):
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    with pytest.raises(TomlError) as caught:
        loads(text)
    assert caught.value.lineno == line
    assert 'line %d' % line in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_dates_fail_clearly():
    with pytest.raises(TomlError, match='dates and times are not supported'):
        loads('when = 1979-05-27T07:32:00Z')


def test_loads_wants_text():
    with pytest.raises(TypeError):
        loads(b'a = 1')


# keys

@pytest.mark.parametrize('dotted,path', [
    ('a', ('a',)),
    ('nvidia-container-runtime.mode', ('nvidia-container-runtime', 'mode')),
    ('plugins."io.containerd.grpc.v1.cri".enable_cdi', ('plugins', 'io.containerd.grpc.v1.cri', 'enable_cdi')),
    ("a . 'b c' . d", ('a', 'b c', 'd')),
])
def test_split_and_join_key(dotted, path):
    assert split_key(dotted) == path
    assert split_key(join_key(path)) == path


@pytest.mark.parametrize('bad', ['', 'a.', '.a', 'a..b', 'a b', '"open'])
def test_split_key_rejects_malformed(bad):
    with pytest.raises(TomlError):
        split_key(bad)


# writing

ROUND_TRIP = [
    {},
    {'version': 2},
    {'a': 'caf\u00e9 "quoted" \\ back\nnew\ttab \x01', 'b': True, 'c': -3, 'd': 1.5, 'e': 1e100, 'f': -2.5e-07,
     'g': [1, 2], 'h': [], 'i': ['x', ['y']], 'j': {}, 'k': float('inf')},
    {'version': 3, 'plugins': {'io.containerd.cri.v1.runtime': {'enable_cdi': True, 'containerd': {
        'default_runtime_name': 'nvidia',
        'runtimes': {'nvidia': {'runtime_type': 'io.containerd.runc.v2',
                                'options': {'BinaryName': '/usr/bin/nvidia-container-runtime', 'SystemdCgroup': True}}}}}}},
    {'key with space': {'': 1, 'a.b': {'c': 2}}, '\u00fc': 'x'},
    {'fruits': [{'name': 'apple', 'varieties': [{'name': 'red'}]}, {'name': 'banana', 'sub': {'x': 1}}]},
    {'mixed': [{'a': 1}, {'b': {'c': [1, 2]}}], 'plain': 1},
]


@pytest.mark.parametrize('data', ROUND_TRIP)
def test_dumps_round_trips_through_tomllib(data):
    text = dumps(data)
    assert tomllib.loads(text) == data
    assert loads(text) == data
    assert dumps(copy.deepcopy(data)) == text


def test_dumps_layout_is_plain_values_then_dotted_headers():
    data = {'plugins': {'io.containerd.grpc.v1.cri': {'containerd': {'runtimes': {'nvidia': {
        'runtime_type': 'io.containerd.runc.v2', 'options': {'BinaryName': '/usr/bin/nvidia-container-runtime'}}}}}},
        'version': 2}
    assert dumps(data) == (
        'version = 2\n'
        '\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        'runtime_type = "io.containerd.runc.v2"\n'
        '\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        'BinaryName = "/usr/bin/nvidia-container-runtime"\n')


@pytest.mark.parametrize('data', [None, {'a': None}, {'a': [1, None]}, {'a': object()}, ['not a table']])
def test_dumps_refuses_what_toml_cannot_hold(data):
    with pytest.raises(TomlError):
        dumps(data)


# editing: the whole text stays as it was, but for the key named

def leaf_stmts(text):
    """(path, value) of every key/value line outside arrays of tables."""
    doc = TomlDocument(text)
    return [(s.path, s.value) for s in doc._stmts if s.kind == 'kv' and not s.in_aot]


def different(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1
    if isinstance(value, list):
        return value + ['added']
    if isinstance(value, dict):
        return 'was a table'
    return value + '-changed'


@pytest.mark.parametrize('name', FIXTURE_NAMES)
def test_setting_each_key_of_a_real_config_changes_that_line_only(name):
    text = fixture(name)
    original = tomllib.loads(text)
    for path, value in leaf_stmts(text):
        doc = TomlDocument(text)
        new = different(value)
        assert doc.set(path, new) is True
        expected = copy.deepcopy(original)
        node = expected
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = new
        assert tomllib.loads(doc.text()) == expected, path
        diff = changed_lines(text, doc.text())
        assert len(diff) == 1 and len(diff[0][0]) == 1 and len(diff[0][1]) == 1, (path, diff)


@pytest.mark.parametrize('name', FIXTURE_NAMES)
def test_setting_each_key_to_its_own_value_is_no_change(name):
    text = fixture(name)
    doc = TomlDocument(text)
    for path, value in leaf_stmts(text):
        assert doc.set(path, value) is False, path
    assert doc.text() == text


@pytest.mark.parametrize('old,new', [(True, 1), (1, 1.0), (1, True), ('1', 1), ([1], [1.0]), ([], [''])])
def test_equal_in_python_is_not_equal_in_toml(old, new):
    doc = TomlDocument(dumps({'k': old}))
    assert doc.set('k', new) is True
    assert tomllib.loads(doc.text()) == {'k': new}
    assert type(tomllib.loads(doc.text())['k']) is type(new)


NVIDIA = 'nvidia-container-toolkit-1.17.6.toml'


def test_key_goes_after_its_commented_out_default_and_the_comment_stays():
    text = fixture(NVIDIA)
    doc = TomlDocument(text)
    assert doc.set('nvidia-container-cli.no-cgroups', True)
    assert doc.set('nvidia-container-runtime.debug', '/var/log/nvidia-container-runtime.log')
    assert doc.set('accept-nvidia-visible-devices-as-volume-mounts', True)
    assert changed_lines(text, doc.text()) == [
        ([], ['accept-nvidia-visible-devices-as-volume-mounts = true\n']),
        ([], ['no-cgroups = true\n']),
        ([], ['debug = "/var/log/nvidia-container-runtime.log"\n']),
    ]
    lines = doc.text().splitlines()
    assert lines[lines.index('#no-cgroups = false') + 1] == 'no-cgroups = true'
    assert lines[lines.index('#debug = "/var/log/nvidia-container-runtime.log"') + 1] == (
        'debug = "/var/log/nvidia-container-runtime.log"')
    assert lines[0] == '#accept-nvidia-visible-devices-as-volume-mounts = false'
    assert lines[1] == 'accept-nvidia-visible-devices-as-volume-mounts = true'


def test_new_key_in_a_table_without_a_commented_default_follows_the_last_key_with_its_indent():
    text = fixture('containerd-1.7.18-default.toml')
    doc = TomlDocument(text)
    path = ('plugins', 'io.containerd.grpc.v1.cri', 'containerd', 'runtimes', 'runc', 'options', 'Extra')
    assert doc.set(path, 'x')
    assert changed_lines(text, doc.text()) == [([], ['            Extra = "x"\n'])]
    lines = doc.text().splitlines()
    assert lines[lines.index('            SystemdCgroup = false') + 1] == '            Extra = "x"'


def test_new_key_in_an_empty_table_goes_under_its_header():
    text = fixture('containerd-1.7.18-default.toml')
    doc = TomlDocument(text)
    assert doc.set(('plugins', 'io.containerd.grpc.v1.cri', 'registry', 'mirrors', 'x'), 'y')
    lines = doc.text().splitlines()
    header = '      [plugins."io.containerd.grpc.v1.cri".registry.mirrors]'
    assert lines[lines.index(header) + 1] == '      x = "y"'


def test_key_of_a_missing_table_appends_the_table_at_the_end():
    text = fixture(NVIDIA)
    doc = TomlDocument(text)
    assert doc.set(('nvidia-container-runtime', 'modes', 'legacy', 'cuda-compat-mode'), 'ldconfig')
    assert doc.text() == text + '\n[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = "ldconfig"\n'


def test_implicit_parent_table_gets_its_own_header():
    text = '[a.b.c]\nx = 1\n'
    doc = TomlDocument(text)
    assert doc.set('a.b.y', 2)
    assert doc.text() == text + '\n[a.b]\ny = 2\n'
    assert tomllib.loads(doc.text()) == {'a': {'b': {'c': {'x': 1}, 'y': 2}}}


def test_table_made_by_dotted_keys_is_extended_by_a_dotted_key_in_the_same_section():
    text = 'a.b = 1\nz = 0\n\n[x]\ny.z = 1 # keep\nw = 2\n'
    doc = TomlDocument(text)
    assert doc.set('a.c', 3)
    assert doc.set('x.y.q.r', 4)
    assert doc.text() == 'a.b = 1\na.c = 3\nz = 0\n\n[x]\ny.z = 1 # keep\ny.q.r = 4\nw = 2\n'
    assert tomllib.loads(doc.text()) == {'a': {'b': 1, 'c': 3}, 'z': 0, 'x': {'y': {'z': 1, 'q': {'r': 4}}, 'w': 2}}


def test_top_level_key_when_the_file_starts_with_a_table():
    doc = TomlDocument('# header comment\n[grpc]\naddress = "x"\n')
    assert doc.set('version', 2)
    assert doc.text() == '# header comment\nversion = 2\n\n[grpc]\naddress = "x"\n'


def test_editing_an_empty_document():
    doc = TomlDocument('')
    assert doc.set('version', 2)
    assert doc.set('imports', ['/etc/containerd/conf.d/*.toml'])
    assert doc.set('t.k', 'v')
    assert doc.text() == 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n\n[t]\nk = "v"\n'


def test_file_without_a_final_newline():
    doc = TomlDocument('[a]\nb = 1')
    assert doc.set('a.c', 2)
    assert doc.set('d.e', 3)
    assert doc.text() == '[a]\nb = 1\nc = 2\n\n[d]\ne = 3\n'


def test_crlf_files_stay_crlf():
    text = 'a = 1\r\n\r\n[t]\r\nb = 2\r\n'
    doc = TomlDocument(text)
    assert doc.set('t.c', 3)
    assert doc.set('u.d', 4)
    assert doc.set('a', 5)
    assert doc.text() == 'a = 5\r\n\r\n[t]\r\nb = 2\r\nc = 3\r\n\r\n[u]\r\nd = 4\r\n'


def test_single_quoted_files_keep_single_quotes():
    text = fixture('containerd-2.0-default.toml')
    doc = TomlDocument(text)
    assert doc.set('imports', ['/etc/containerd/conf.d/*.toml'])
    assert doc.set(('plugins', 'io.containerd.cri.v1.runtime', 'containerd', 'default_runtime_name'), 'nvidia')
    assert doc.set(('plugins', 'io.containerd.cri.v1.runtime', 'containerd', 'runtimes', 'runc', 'options',
                    'SystemdCgroup'), True)
    assert doc.set(('plugins', 'io.containerd.cri.v1.images', 'pinned_images', 'sandbox'), "it's \"quoted\"")
    assert changed_lines(text, doc.text()) == [
        (["imports = []\n"], ["imports = ['/etc/containerd/conf.d/*.toml']\n"]),
        (["      sandbox = 'registry.k8s.io/pause:3.10'\n"], ['      sandbox = "it\'s \\"quoted\\""\n']),
        (["      default_runtime_name = 'runc'\n"], ["      default_runtime_name = 'nvidia'\n"]),
        ([], ['            SystemdCgroup = true\n']),
    ]


def test_unicode_values_and_comments_survive():
    text = '# r\u00e9glages \u2014 ne pas toucher\nname = "caf\u00e9"\n[t]\nemoji = "\U0001F600"  # \u00fc\n'
    doc = TomlDocument(text)
    assert doc.set('t.new', '\u4e2d\u6587')
    assert doc.set('name', 'th\u00e9')
    assert doc.text() == ('# r\u00e9glages \u2014 ne pas toucher\nname = "th\u00e9"\n[t]\n'
                          'emoji = "\U0001F600"  # \u00fc\nnew = "\u4e2d\u6587"\n')


def test_replacing_multi_line_values():
    text = 'a = [\n  "x", # first\n  "y",\n]\nb = """\nline\n"""\nc = 1\n'
    doc = TomlDocument(text)
    assert doc.set('a', ['z'])
    assert doc.set('b', 'one line')
    assert doc.text() == 'a = ["z"]\nb = "one line"\nc = 1\n'


def test_trailing_comment_on_the_line_is_kept_when_the_value_changes():
    doc = TomlDocument('mode = "auto" # auto | legacy | cdi\n')
    assert doc.set('mode', 'cdi')
    assert doc.text() == 'mode = "cdi" # auto | legacy | cdi\n'


def test_key_inside_an_inline_table():
    doc = TomlDocument('x = 0\nt = {a = 1, b = 2}  # inline\n')
    assert doc.get('t.a') == 1
    assert doc.set('t.a', 5)
    assert doc.set('t.c.d', 'e')
    assert doc.text() == 'x = 0\nt = {a = 5, b = 2, c = {d = "e"}}  # inline\n'
    assert doc.delete('t.b')
    assert tomllib.loads(doc.text()) == {'x': 0, 't': {'a': 5, 'c': {'d': 'e'}}}


def test_get():
    doc = TomlDocument(fixture('containerd-1.7.18-default.toml'))
    assert doc.get('version') == 2
    assert doc.get(('plugins', 'io.containerd.grpc.v1.cri', 'containerd', 'default_runtime_name')) == 'runc'
    assert doc.get('plugins."io.containerd.grpc.v1.cri".cdi_spec_dirs') == ['/etc/cdi', '/var/run/cdi']
    assert doc.get('missing.key', 'dflt') == 'dflt'
    assert doc.get('version.sub') is None
    assert doc.as_dict() == tomllib.loads(fixture('containerd-1.7.18-default.toml'))


# deleting

def test_delete_removes_the_key_line_and_its_trailing_comment_only():
    text = fixture(NVIDIA)
    doc = TomlDocument(text)
    assert doc.delete('nvidia-container-cli.load-kmods')
    assert changed_lines(text, doc.text()) == [(['load-kmods = true\n'], [])]
    assert doc.delete('nvidia-container-cli.load-kmods') is False


def test_delete_multi_line_value():
    text = 'a = 1\nb = [\n  1,\n  2, # two\n] # end\nc = """\nx\n"""\nd = 4\n'
    doc = TomlDocument(text)
    assert doc.delete('b')
    assert doc.delete('c')
    assert doc.text() == 'a = 1\nd = 4\n'


def test_delete_a_whole_table_with_its_sub_tables():
    text = fixture(NVIDIA)
    doc = TomlDocument(text)
    assert doc.delete('nvidia-container-runtime.modes')
    expected = tomllib.loads(text)
    del expected['nvidia-container-runtime']['modes']
    assert tomllib.loads(doc.text()) == expected
    assert '[nvidia-container-runtime.modes' not in doc.text()
    assert '[nvidia-container-runtime-hook]\npath = "nvidia-container-runtime-hook"\n' in doc.text()


def test_delete_missing_paths_is_no_change():
    doc = TomlDocument('a = 1\n')
    assert doc.delete('b') is False
    assert doc.delete('c.d.e') is False
    assert doc.text() == 'a = 1\n'


def test_delete_a_dotted_key_drops_its_implicit_table():
    doc = TomlDocument('a.b = 1\nc = 2\n')
    assert doc.delete('a.b')
    assert doc.text() == 'c = 2\n'


# refusals: the document is left exactly as it was

@pytest.mark.parametrize('text,path,value,match', [
    ('a = 1\n', 'a.b', 1, 'is a value, not a table'),
    ('[a]\nb = 1\n', 'a', 1, 'is a table'),
    ('[[a]]\nb = 1\n', 'a.b', 2, 'array'),
    ('[[a]]\nb = 1\n', 'a.c', 2, 'array'),
    ('a = [1]\n', 'a.b', 2, 'array'),
    ('a = 1\n', 'b', None, 'null'),
    ('a = 1\n', 'b', {'c': 1}, 'one by one'),
    ('a = 1\n', 'b', [1, None], 'null'),
    ('a = 1\n', 'b', object(), 'cannot write'),
])
def test_set_refuses_and_leaves_the_document_alone(text, path, value, match):
    doc = TomlDocument(text)
    with pytest.raises(TomlError, match=match):
        doc.set(path, value)
    assert doc.text() == text


def test_a_bad_path_is_refused():
    doc = TomlDocument('a = 1\n')
    for bad in [(), [''] * 0, ('a', 1), 'a..b']:
        with pytest.raises(TomlError):
            doc.set(bad, 1)


def test_malformed_document_is_refused_up_front():
    with pytest.raises(TomlError) as caught:
        TomlDocument('a = 1\n[b\n')
    assert caught.value.lineno == 2
