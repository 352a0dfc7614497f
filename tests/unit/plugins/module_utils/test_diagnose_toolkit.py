"""The toolkit findings of accel.nodes.diagnose (issue 28): config.toml the runtime cannot load, a runtime mode it
cannot serve, and cdi mode without a spec of the GPUs. The inputs are real captures from the site scenario's node;
tests/fixtures/diagnose/toolkit/README.md names each source, and each test says what it changed."""

import os
import sys
from pathlib import Path

import pytest

from ansible_collections.accel.nodes.plugins.filter import diagnose
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose_toolkit as toolkit

sys.path.insert(0, os.path.dirname(__file__))
from diagnose_shape import check_shape, gather, ids  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
HERE = FIXTURES / 'diagnose' / 'toolkit'
CONFIG = (HERE / 'config-1.20.0.toml').read_text()
CONFIG_1_17 = (FIXTURES / 'toml' / 'nvidia-container-toolkit-1.17.6.toml').read_text()
CDI_LIST_NONE = (HERE / 'nvidia-ctk-cdi-list-none.txt').read_text()
CDI_LIST_SPEC = (HERE / 'nvidia-ctk-cdi-list-spec.txt').read_text()
RUNTIME_NODE_CDI = (HERE / 'runtime-node-nvidia-cdi.txt').read_text()
PACKAGES = {'nvidia-container-toolkit': {'version': '1.20.0-1', 'status': 'installed'},
            'nvidia-container-toolkit-base': {'version': '1.20.0-1', 'status': 'installed'}}
PACKAGES_1_17 = dict((n, {'version': '1.17.8-1', 'status': 'installed'}) for n in PACKAGES)


@pytest.fixture(name='gpus')
def gpus_facts(fact_roots):
    return gather(fact_roots / 'p3.16xlarge')


def described(text, **changes):
    """config.toml as node_probe describes a readable file, with changes (each test says which)."""
    seen = {'exists': True, 'type': 'file', 'mode': '0644', 'uid': 0, 'sha256': '0' * 64, 'text': text}
    seen.update(changes)
    return seen


def probe(facts, config=CONFIG, cdi_list=CDI_LIST_SPEC, packages=None, csv_dir=None, runtime_node=''):
    paths = {toolkit.CONFIG: described(config) if isinstance(config, str) else (config or {'exists': False})}
    return {'ansible_facts': {'accelerators': facts}, 'paths': paths, 'directories': {toolkit.CSV_DIR: csv_dir},
            'packages': PACKAGES if packages is None else packages,
            'commands': {'toolkit_cdi_devices': {'rc': 0, 'stdout': cdi_list, 'stderr': ''},
                         'runtime_node': {'rc': 0, 'stdout': runtime_node, 'stderr': ''}}}


def with_mode(mode, text=CONFIG):
    """The captured config.toml with its [nvidia-container-runtime] mode line set to mode."""
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip().startswith('mode =')]
    assert len(at) == 1, 'the capture has one mode line'
    lines[at[0]] = 'mode = "%s"' % mode
    return '\n'.join(lines) + '\n'


def test_the_converged_node_as_captured_has_no_toolkit_finding(gpus):
    assert toolkit.findings(probe(gpus), {}) == []
    assert toolkit.findings(probe(gpus, cdi_list=CDI_LIST_NONE), {}) == [], 'auto mode needs no spec'
    assert toolkit.findings(probe(gpus, config=None), {}) == [], 'no config.toml: the runtime runs on its defaults'


def test_no_gpus_or_no_toolkit_is_no_finding(gpus):
    no_gpus = dict(gpus, nvidia=dict(gpus['nvidia'], gpus=[]), observed=dict(gpus['observed'], device_nodes=[]))
    assert toolkit.findings(probe(no_gpus, config='mode = [broken'), {}) == []
    assert toolkit.findings(probe(gpus, config='mode = [broken', packages={}), {}) == []


def test_the_probe_reads_config_toml_and_asks_nvidia_ctk_for_the_cdi_devices():
    merged = diagnose.diagnose_probe({})
    assert toolkit.CONFIG in merged['paths'] and toolkit.CSV_DIR in merged['directories']
    assert merged['commands']['toolkit_cdi_devices'] == ['nvidia-ctk', 'cdi', 'list']


@pytest.mark.parametrize('config, evidence', [
    (CONFIG.replace('[nvidia-container-runtime]', '[nvidia-container-runtime', 1), 'is not valid TOML'),
    (described(None, type='directory', sha256=None), 'is a directory, not a file'),
    (described(None, mode='0000', sha256=None), 'could not be read (mode 0000'),
])
def test_a_config_toml_the_runtime_cannot_load_is_broken(gpus, config, evidence):
    found = toolkit.findings(probe(gpus, config=config), {})
    check_shape(found)
    assert ids(found) == ['toolkit.config.unreadable'] and found[0]['severity'] == 'broken'
    assert evidence in found[0]['evidence'][0]
    assert 'nvidia-ctk config default --output=/etc/nvidia-container-runtime/config.toml' in found[0]['fix']


def test_a_file_too_large_to_read_is_not_judged(gpus):
    assert toolkit.findings(probe(gpus, config=described(None)), {}) == []


def test_a_mode_the_toolkit_does_not_know_is_broken(gpus):
    found = toolkit.findings(probe(gpus, config=with_mode('cdi-jit')), {})
    check_shape(found)
    assert ids(found) == ['toolkit.config.mode_invalid']
    assert found[0]['evidence'] == ["%s: [nvidia-container-runtime] mode = 'cdi-jit'" % toolkit.CONFIG,
                                    'modes toolkit 1.20 accepts: auto, legacy, csv, cdi, jit-cdi']
    assert 'nvidia_container_toolkit_mode' in found[0]['fix']


def test_jit_cdi_is_a_mode_from_1_18_only(gpus):
    assert toolkit.findings(probe(gpus, config=with_mode('jit-cdi')), {}) == []
    found = toolkit.findings(probe(gpus, config=with_mode('jit-cdi', CONFIG_1_17), packages=PACKAGES_1_17), {})
    assert ids(found) == ['toolkit.config.mode_invalid'] and 'toolkit 1.17 accepts: auto, legacy, csv, cdi' in \
        found[0]['evidence'][1]


def test_csv_mode_on_pci_gpus_without_csv_files_is_broken(gpus):
    found = toolkit.findings(probe(gpus, config=with_mode('csv')), {})
    check_shape(found)
    assert ids(found) == ['toolkit.config.mode_unsupported']
    assert found[0]['evidence'][1] == '%s: missing' % toolkit.CSV_DIR
    # Tegra's CSV files where the mode reads them: the runtime has something to inject, not judged.
    assert toolkit.findings(probe(gpus, config=with_mode('csv'), csv_dir={'drivers.csv': None}), {}) == []


def test_cdi_mode_without_a_gpu_spec_is_broken_and_a_spec_clears_it(gpus):
    found = toolkit.findings(probe(gpus, config=with_mode('cdi'), cdi_list=CDI_LIST_NONE), {})
    check_shape(found)
    assert ids(found) == ['cdi.spec.missing'] and found[0]['severity'] == 'broken'
    assert found[0]['evidence'] == ['%s: [nvidia-container-runtime] mode = "cdi"' % toolkit.CONFIG,
                                    'nvidia-ctk cdi list: no nvidia.com/gpu device']
    assert 'nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml' in found[0]['fix']
    assert toolkit.findings(probe(gpus, config=with_mode('cdi'), cdi_list=CDI_LIST_SPEC), {}) == []


def test_the_nvidia_cdi_runtime_needs_a_spec_whatever_config_toml_says(gpus):
    found = toolkit.findings(probe(gpus, cdi_list=CDI_LIST_NONE, runtime_node=RUNTIME_NODE_CDI), {})
    assert ids(found) == ['cdi.spec.missing']
    assert found[0]['evidence'][0] == ('registered runtime binary /usr/bin/nvidia-container-runtime.cdi '
                                       '(always cdi mode)')


def test_nvidia_ctk_missing_is_not_judged(gpus):
    node = probe(gpus, config=with_mode('cdi'))
    node['commands']['toolkit_cdi_devices'] = {'rc': 127, 'stdout': '', 'stderr': 'not found'}
    assert toolkit.findings(node, {}) == []


def test_the_filter_returns_the_area_findings(gpus):
    node = probe(gpus, config=with_mode('cdi'), cdi_list=CDI_LIST_NONE)
    assert 'cdi.spec.missing' in ids(diagnose.diagnose_findings(node))


def test_gpus_seen_only_as_device_nodes_count(gpus):
    """A node in a container sees the host's PCI bus: the facts of the site scenario's node name no NVIDIA GPU there,
    but its device nodes are there."""
    nodes_only = dict(gpus, nvidia=dict(gpus['nvidia'], gpus=[]),
                      observed=dict(gpus['observed'], device_nodes=['/dev/nvidia0', '/dev/nvidiactl']))
    assert ids(toolkit.findings(probe(nodes_only, config=with_mode('cdi'), cdi_list=CDI_LIST_NONE), {})) == \
        ['cdi.spec.missing']
    control_only = dict(nodes_only, observed=dict(nodes_only['observed'], device_nodes=['/dev/nvidiactl']))
    assert toolkit.findings(probe(control_only, config=with_mode('cdi'), cdi_list=CDI_LIST_NONE), {}) == []


def test_tables_that_are_not_tables_read_as_the_defaults():
    assert toolkit.runtime_mode({'nvidia-container-runtime': 'cdi'}) == 'auto'
    assert toolkit.mode_findings({'nvidia-container-runtime': {'mode': 'csv', 'modes': 'x'}}, (1, 20), None)[0]['id'] \
        == 'toolkit.config.mode_unsupported'
