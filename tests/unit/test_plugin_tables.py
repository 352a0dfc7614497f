"""tests/rig/plugin-tables.py (issue 29): the README's module, filter and callback tables name every plugin, from
the plugins' own documentation, and the lint stage's --check fails where they are stale."""

import importlib.util
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location('plugin_tables', TOP / 'tests' / 'rig' / 'plugin-tables.py')
tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tables)


def plugin_names():
    modules = [p.stem for p in (TOP / 'plugins' / 'modules').glob('*.py') if not p.name.startswith('_')]
    filters = [p.stem for p in (TOP / 'plugins' / 'filter').glob('*.yml')]
    callbacks = [p.stem for p in (TOP / 'plugins' / 'callback').glob('*.py') if not p.name.startswith('_')]
    return modules, filters, callbacks


def test_the_readme_tables_are_current_and_name_every_plugin():
    readme = (TOP / 'README.md').read_text()
    assert tables.main(['--check', str(TOP / 'README.md')]) == 0
    block = readme.split(tables.BEGIN, 1)[1].split(tables.END, 1)[0]
    modules, filters, callbacks = plugin_names()
    assert len(modules) >= 18 and len(filters) >= 28 and callbacks
    for name in modules + filters + callbacks:
        assert '| `accel.nodes.%s` |' % name in block, name


def test_a_stale_table_fails_the_check_and_is_rewritten(tmp_path):
    readme = tmp_path / 'README.md'
    text = (TOP / 'README.md').read_text()
    stale = text.replace('| `accel.nodes.node_probe` |', '| `accel.nodes.node_probe_gone` |')
    readme.write_text(stale)
    assert tables.main(['--check', str(readme)]) == 1
    assert readme.read_text() == stale, '--check writes nothing'
    assert tables.main([str(readme)]) == 0
    assert readme.read_text() == text


def test_a_readme_without_markers_or_a_plugin_without_a_description_cannot_be_rendered(tmp_path):
    readme = tmp_path / 'README.md'
    readme.write_text('# no markers\n')
    assert tables.main([str(readme)]) == 2
    plugin = tmp_path / 'plugins' / 'filter' / 'nameless.yml'
    plugin.parent.mkdir(parents=True)
    plugin.write_text('DOCUMENTATION:\n  name: nameless\n')
    try:
        tables.render(tmp_path)
    except tables.RenderError as exc:
        assert 'no short_description' in str(exc)
    else:
        raise AssertionError('a filter without short_description rendered')
