"""The diagnose findings (issue 28) on real captures: the H200's nvidia-smi XML and /proc version, the toolkit's own
golden CDI spec, and NVIDIA's documented kernel log lines. tests/fixtures/diagnose/README.md names each source."""

import os
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.accel.nodes.plugins.filter import diagnose
from ansible_collections.accel.nodes.plugins.module_utils import _diagnose

sys.path.insert(0, os.path.dirname(__file__))
from diagnose_shape import check_shape, ids  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'
H200_XML = (FIXTURES / 'facts' / 'commands' / 'nvidia-smi' / 'h200-v13.xml').read_text()
H200_PROC = (FIXTURES / 'facts' / 'roots' / 'h200' / 'proc' / 'driver' / 'nvidia' / 'version').read_text()
GOLDEN_CDI = yaml.safe_load((FIXTURES / 'diagnose' / 'cdi-spec-nvidia-ctk-1.20.0-golden.yaml').read_text())


# --- driver/library mismatch -------------------------------------------------------------------------------------

LIBS_580_159 = ['/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04', '/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04',
                '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1']


def test_the_h200_as_captured_has_no_mismatch():
    libraries = _diagnose.library_versions(LIBS_580_159)
    assert libraries == {LIBS_580_159[0]: '580.159.04', LIBS_580_159[1]: '580.159.04'}
    assert _diagnose.driver_mismatch(None, H200_PROC, libraries) == []
    assert _diagnose.driver_mismatch('580.159.04\n', None, libraries) == []


def test_new_libraries_under_the_loaded_module_are_a_mismatch():
    """The H200's module, with the libraries of a newer package installed after it loaded."""
    libraries = _diagnose.library_versions([p.replace('580.159.04', '580.195.03') for p in LIBS_580_159])
    found = _diagnose.driver_mismatch(None, H200_PROC, libraries)
    check_shape(found)
    assert ids(found) == ['nvidia.driver.version_mismatch'] and found[0]['severity'] == 'broken'
    assert 'module is 580.159.04, but the user-space libraries are 580.195.03' in found[0]['summary']
    assert found[0]['evidence'][0] == 'loaded kernel module: 580.159.04 (/proc/driver/nvidia/version)'
    assert 'nvidia_driver_reload' in found[0]['fix']


def test_no_loaded_module_or_no_libraries_is_not_this_finding():
    assert _diagnose.driver_mismatch(None, None, _diagnose.library_versions(LIBS_580_159)) == []
    assert _diagnose.driver_mismatch('580.159.04', None, {}) == []


# --- Xid ---------------------------------------------------------------------------------------------------------

# NVIDIA's own example line (GPU Memory Error Management, "User Visible Statistics"), the format of kernel_rc.c
# ("NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s"), and the 79 line of drivers that print no pid.
KERNEL_LOG = '\n'.join([
    '2026-11-27T10:00:00+0000 node kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, '
    'Contained: CE User Channel (0x9). RST: No, D-RST: No',
    '2026-11-27T10:01:00+0000 node kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=812, name=python3, '
    'Graphics Exception: ESR 0x404600=0x80000002',
    '2026-11-27T10:02:00+0000 node kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.',
    '2026-11-27T10:02:00+0000 node kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.',
    '2026-11-27T10:03:00+0000 node kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=\'<unknown>\', name=<unknown>, '
    'GPU has fallen off the bus.',
    '2026-11-27T10:04:00+0000 node kernel: usb 1-1: new high-speed USB device number 2',
])


def test_xid_lines_are_read_with_and_without_pid():
    events = _diagnose.xid_events(KERNEL_LOG)
    assert [(e['pci'], e['xid']) for e in events] == [
        ('0000:01:00', 94), ('0000:3b:00', 13), ('0000:3b:00', 79), ('0000:3b:00', 79)]


def test_xids_that_need_the_node_are_findings_and_application_errors_are_not():
    found = _diagnose.xid_findings(KERNEL_LOG)
    check_shape(found)
    assert ids(found) == ['gpu.xid.79', 'gpu.xid.94']
    fallen = found[0]
    assert fallen['severity'] == 'broken'
    assert 'GPU 0000:3b:00 logged Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)' in fallen['summary']
    assert '2 time(s)' in fallen['summary'] and len(fallen['evidence']) == 2
    assert found[1]['severity'] == 'will_break'
    assert _diagnose.xid_findings('') == []


def test_every_catalog_entry_is_complete():
    for xid, (mnemonic, meaning, severity, fix) in _diagnose.XID_CATALOG.items():
        assert mnemonic.isupper() and meaning and fix, xid
        assert severity in _diagnose.SEVERITIES + (None,), xid


# --- nvidia-smi -q -x --------------------------------------------------------------------------------------------

def test_the_healthy_h200_has_no_health_findings():
    assert _diagnose.smi_health(H200_XML, persistence_wanted=True) == []


def _h200_with(old, new):
    assert H200_XML.count(old) == 1, old
    return H200_XML.replace(old, new)


@pytest.mark.parametrize('old, new, expected, severity', [
    ('<remapped_row_pending>No</remapped_row_pending>', '<remapped_row_pending>Yes</remapped_row_pending>',
     'gpu.row_remap.pending', 'will_break'),
    ('<remapped_row_failure>No</remapped_row_failure>', '<remapped_row_failure>Yes</remapped_row_failure>',
     'gpu.row_remap.failure', 'broken'),
    ('<pending_retirement>N/A</pending_retirement>', '<pending_retirement>Yes</pending_retirement>',
     'gpu.page_retirement.pending', 'will_break'),
    ('<pending_mig>Disabled</pending_mig>', '<pending_mig>Enabled</pending_mig>', 'gpu.mig.pending', 'will_break'),
    ('<persistence_mode>Enabled</persistence_mode>', '<persistence_mode>Disabled</persistence_mode>',
     'gpu.persistence.off', 'will_break'),
])
def test_one_flag_changed_in_the_real_h200_capture_is_one_finding(old, new, expected, severity):
    found = _diagnose.smi_health(_h200_with(old, new), persistence_wanted=True)
    check_shape(found)
    assert ids(found) == [expected] and found[0]['severity'] == severity
    assert 'nvidia-smi -q -x, GPU 00000000:' in found[0]['evidence'][0]


def test_persistence_off_is_a_finding_only_where_it_was_asked_for():
    xml = _h200_with('<persistence_mode>Enabled</persistence_mode>', '<persistence_mode>Disabled</persistence_mode>')
    assert _diagnose.smi_health(xml, persistence_wanted=False) == []
    assert _diagnose.smi_health(xml) == []


def test_a_failure_is_reported_rather_than_the_pending_remap_it_implies():
    xml = _h200_with('<remapped_row_failure>No</remapped_row_failure>', '<remapped_row_failure>Yes</remapped_row_failure>')
    xml = xml.replace('<remapped_row_pending>No</remapped_row_pending>', '<remapped_row_pending>Yes</remapped_row_pending>')
    assert ids(_diagnose.smi_health(xml)) == ['gpu.row_remap.failure']


def test_no_xml_is_no_finding():
    assert _diagnose.smi_health('Failed to initialize NVML: Driver/library version mismatch') == []


# --- toolkit packages --------------------------------------------------------------------------------------------

def test_toolkit_packages_at_one_version_are_fine():
    assert _diagnose.toolkit_skew({'nvidia-container-toolkit': '1.20.0-1', 'nvidia-container-toolkit-base': '1.20.0-1',
                                   'libnvidia-container-tools': '1.20.0-1', 'libnvidia-container1': '1.20.0-1'}) == []


def test_toolkit_1_18_with_older_libnvidia_container_is_a_finding():
    found = _diagnose.toolkit_skew({'nvidia-container-toolkit': '1.20.0-1', 'nvidia-container-toolkit-base': '1.20.0-1',
                                    'libnvidia-container-tools': '1.17.8-1', 'libnvidia-container1': '1.17.8-1',
                                    'docker.io': '20.10.24+dfsg1-1'})
    check_shape(found)
    assert ids(found) == ['toolkit.packages.version_skew'] and found[0]['severity'] == 'broken'
    assert '(1.17.8, 1.20.0)' in found[0]['summary']
    assert found[0]['evidence'] == ['package nvidia-container-toolkit 1.20.0-1',
                                    'package nvidia-container-toolkit-base 1.20.0-1',
                                    'package libnvidia-container-tools 1.17.8-1',
                                    'package libnvidia-container1 1.17.8-1']


def test_before_1_18_a_newer_libnvidia_container_was_allowed():
    """1.17.8's packaging asks libnvidia-container-tools for a floor only (packaging/debian/control)."""
    assert _diagnose.toolkit_skew({'nvidia-container-toolkit': '1.17.8-1', 'libnvidia-container-tools': '1.18.0-1'}) == []


def test_rpm_release_and_a_tilde_prerelease_compare_by_upstream_version():
    assert _diagnose.toolkit_skew({'nvidia-container-toolkit': '1.18.0~rc.1-1',
                                   'libnvidia-container-tools': '1.18.0~rc.1-1'}) == []
    assert _diagnose.toolkit_skew({'nvidia-container-toolkit': '1.20.0-1.el9',
                                   'libnvidia-container-tools': '1.20.0-1.el9'}) == []


# --- CDI -----------------------------------------------------------------------------------------------------------

KIND = 'example.com/device'  # the golden spec's kind (nvidia-ctk's default is nvidia.com/gpu)


def test_the_golden_spec_names_its_driver():
    spec = _diagnose.cdi_spec('/var/run/cdi/nvidia.yaml', GOLDEN_CDI)
    assert spec == {'path': '/var/run/cdi/nvidia.yaml', 'kind': KIND, 'devices': ['0', 'all'],
                    'driver_versions': ['999.88.77']}


def test_a_spec_of_the_loaded_driver_alone_is_fine():
    spec = _diagnose.cdi_spec('/var/run/cdi/nvidia.yaml', GOLDEN_CDI)
    assert _diagnose.cdi_findings([spec], '999.88.77', kind=KIND) == []


def test_a_spec_of_another_driver_is_stale():
    found = _diagnose.cdi_findings([_diagnose.cdi_spec('/etc/cdi/nvidia.yaml', GOLDEN_CDI)], '580.159.04', kind=KIND)
    check_shape(found)
    assert ids(found) == ['cdi.spec.stale'] and found[0]['severity'] == 'broken'
    assert 'generated for driver 999.88.77, but driver 580.159.04 is loaded' in found[0]['summary']
    assert 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml' in found[0]['fix']


def test_the_same_devices_in_both_directories_shadow_one_another():
    specs = [_diagnose.cdi_spec('/etc/cdi/nvidia.yaml', GOLDEN_CDI), _diagnose.cdi_spec('/var/run/cdi/nvidia.yaml', GOLDEN_CDI)]
    found = _diagnose.cdi_findings(specs, '999.88.77', kind=KIND)
    check_shape(found)
    assert ids(found) == ['cdi.spec.shadowed'] and found[0]['severity'] == 'will_break'


def test_the_same_devices_twice_in_one_directory_conflict():
    specs = [_diagnose.cdi_spec('/etc/cdi/nvidia.yaml', GOLDEN_CDI), _diagnose.cdi_spec('/etc/cdi/nvidia-old.yaml', GOLDEN_CDI)]
    found = _diagnose.cdi_findings(specs, '999.88.77', kind=KIND)
    check_shape(found)
    assert ids(found) == ['cdi.spec.conflict'] and found[0]['severity'] == 'broken'
    assert 'example.com/device=0 in /etc/cdi/nvidia.yaml and /etc/cdi/nvidia-old.yaml' in found[0]['evidence']


def test_specs_of_other_kinds_are_left_alone():
    spec = _diagnose.cdi_spec('/etc/cdi/nvidia.yaml', GOLDEN_CDI)
    assert _diagnose.cdi_findings([spec, spec], '580.159.04') == []  # kind nvidia.com/gpu


def test_a_bad_severity_is_refused():
    with pytest.raises(ValueError, match='severity is one of broken, will_break'):
        _diagnose.finding('x', 'warning', 's', ['e'], 'f', 's')


# --- the filter, on what node_probe returns ----------------------------------------------------------------------

def _probe(**changes):
    """What accel.nodes.node_probe returns for _diagnose.PROBE on the H200 as captured (its /proc version, its
    nvidia-smi XML), with toolkit 1.20.0 and the golden CDI spec in /var/run/cdi."""
    golden = (FIXTURES / 'diagnose' / 'cdi-spec-nvidia-ctk-1.20.0-golden.yaml').read_text()
    probe = {
        'paths': {_diagnose.SYS_VERSION: {'exists': False, 'text': None},
                  _diagnose.PROC_VERSION: {'exists': True, 'text': H200_PROC},
                  '/var/run/cdi/nvidia.yaml': {'exists': True, 'text': golden.replace('999.88.77', '580.159.04')},
                  '/etc/cdi/nvidia.yaml': {'exists': False, 'text': None}},
        'directories': {'/usr/lib/x86_64-linux-gnu': {'libnvidia-ml.so.1': 'libnvidia-ml.so.580.159.04',
                                                      'libnvidia-ml.so.580.159.04': None,
                                                      'libcuda.so.580.159.04': None, 'libc.so.6': None},
                        '/usr/lib64': None},
        'packages': dict((n, {'version': '1.20.0-1', 'selection': 'hold', 'status': 'installed'})
                         for n in _diagnose.TOOLKIT_PACKAGES),
        'commands': {'nvidia_smi_xml': {'rc': 0, 'stdout': H200_XML, 'stderr': ''},
                     'kernel_log': {'rc': 1, 'stdout': '-- No entries --', 'stderr': ''}},
    }
    for key, value in changes.items():
        probe[key] = dict(probe[key], **value)
    return probe


def test_the_healthy_h200_probe_has_no_findings():
    assert diagnose.diagnose_findings(_probe(), persistence_wanted=True, cdi_kind=KIND) == []


def test_every_fault_of_the_probe_is_found_broken_ones_first():
    golden = (FIXTURES / 'diagnose' / 'cdi-spec-nvidia-ctk-1.20.0-golden.yaml').read_text()
    mig_pending = _h200_with('<pending_mig>Disabled</pending_mig>', '<pending_mig>Enabled</pending_mig>')
    probe = _probe(
        paths={'/etc/cdi/nvidia.yaml': {'exists': True, 'text': golden}},
        directories={'/usr/lib/x86_64-linux-gnu': {'libnvidia-ml.so.580.195.03': None}},
        packages={'libnvidia-container-tools': {'version': '1.17.8-1', 'status': 'installed'}},
        commands={'nvidia_smi_xml': {'rc': 0, 'stdout': mig_pending}, 'kernel_log': {'rc': 0, 'stdout': KERNEL_LOG}})
    found = diagnose.diagnose_findings(probe, cdi_kind=KIND)
    check_shape(found)
    assert ids(found) == ['gpu.xid.79', 'nvidia.driver.version_mismatch', 'toolkit.packages.version_skew',
                          'cdi.spec.shadowed', 'cdi.spec.stale', 'gpu.mig.pending', 'gpu.xid.94']
    # The stale one is the /etc/cdi spec of driver 999.88.77, not the /var/run/cdi one of the loaded driver; the
    # /var/run/cdi spec defines the same devices, so it waits for a boot to break anything.
    stale = found[4]
    assert stale['evidence'][0] == '/etc/cdi/nvidia.yaml names driver 999.88.77'
    assert stale['severity'] == 'will_break' and 'shadowed by /var/run/cdi now' in stale['summary']


def test_a_probe_that_is_not_a_dict_is_refused():
    with pytest.raises(AnsibleFilterError, match='the result of accel.nodes.node_probe'):
        diagnose.diagnose_findings(['nope'])


def test_the_playbook_passes_node_probe_every_input_of_the_probe():
    """playbooks/diagnose.yml gives node_probe each option accel.nodes.diagnose_probe returns, under its name."""
    play = yaml.safe_load((FIXTURES.parents[1] / 'playbooks' / 'diagnose.yml').read_text())[0]
    probe_task = [task for task in play['tasks'] if 'accel.nodes.node_probe' in task][0]
    assert sorted(probe_task['accel.nodes.node_probe']) == sorted(diagnose.diagnose_probe({}))
    for key, value in probe_task['accel.nodes.node_probe'].items():
        assert value == '{{ accel_nodes_diagnose_probe.%s%s }}' % (key, ' | default(omit, true)' if key == 'accelerators'
                                                                   else '')


def test_the_probe_holds_every_area_s_inputs_once():
    probe = diagnose.diagnose_probe({})
    assert probe['accelerators'] == {'gather': _diagnose.FACTS_GATHER}
    assert set(_diagnose.PROBE['commands']) <= set(probe['commands'])
    for area in diagnose.AREAS:
        for key in ('paths', 'directories', 'packages'):
            assert set(area.PROBE.get(key, [])) <= set(probe[key])
        assert set(area.PROBE.get('commands', {})) <= set(probe['commands'])
    for key in ('paths', 'directories', 'packages'):
        assert len(probe[key]) == len(set(probe[key]))
    with pytest.raises(AnsibleFilterError, match='accel_nodes_diagnose_options'):
        diagnose.diagnose_probe(['nope'])


def test_facts_the_caller_has_are_not_gathered_again_and_are_what_the_areas_judge():
    facts = {'schema_version': 1, 'vendors': ['nvidia']}
    assert diagnose.diagnose_probe({'facts': facts})['accelerators'] is None
    seen = []

    class Area(object):
        PROBE: dict = {}

        @staticmethod
        def findings(probe, options):
            seen.append((probe['ansible_facts']['accelerators'], options))
            return []

    areas = diagnose.AREAS
    diagnose.AREAS = (Area,)
    try:
        diagnose.diagnose_findings(dict(_probe(), ansible_facts={'accelerators': {'vendors': []}}), cdi_kind=KIND,
                                   options={'facts': facts})
        diagnose.diagnose_findings(dict(_probe(), ansible_facts={'accelerators': {'vendors': []}}), cdi_kind=KIND)
    finally:
        diagnose.AREAS = areas
    assert seen == [(facts, {'facts': facts}), ({'vendors': []}, {})]
    with pytest.raises(AnsibleFilterError, match='options is the dict'):
        diagnose.diagnose_findings(_probe(), options=['nope'])


def test_without_the_module_version_the_loaded_driver_is_the_one_nvidia_smi_reports():
    """A container node sees no /sys/module/nvidia: the spec is judged against nvidia-smi's driver."""
    golden = (FIXTURES / 'diagnose' / 'cdi-spec-nvidia-ctk-1.20.0-golden.yaml').read_text()
    probe = _probe(paths={_diagnose.PROC_VERSION: {'exists': False, 'text': None},
                          '/var/run/cdi/nvidia.yaml': {'exists': True, 'text': golden}})
    assert ids(diagnose.diagnose_findings(probe, cdi_kind=KIND)) == ['cdi.spec.stale']
    assert _diagnose.loaded_version(None, None, H200_XML) == '580.159.04'
    assert _diagnose.loaded_version(None, None, '') is None


def test_the_summary_is_one_line_per_finding_then_its_details():
    found = diagnose.diagnose_findings(_probe(packages={'libnvidia-container1': {'version': '1.17.8-1'}}), cdi_kind=KIND)
    lines = diagnose.diagnose_summary(found)
    assert lines[0].startswith('[broken] toolkit.packages.version_skew: The NVIDIA Container Toolkit packages')
    assert lines[1] == '    evidence: package nvidia-container-toolkit 1.20.0-1'
    assert [line.split(':')[0] for line in lines[-2:]] == ['    fix', '    source']
    assert diagnose.diagnose_summary([]) == [
        'No findings: none of the faults accel.nodes.diagnose knows shows in what it could read on this node.']
    with pytest.raises(AnsibleFilterError, match='the list diagnose_findings returns'):
        diagnose.diagnose_summary({})


def test_the_spec_nvidia_s_units_wrote_on_the_h100_names_its_driver():
    """The real spec of nvidia-cdi-refresh (toolkit 1.20.0) for the H100's driver 580.159.04."""
    path = FIXTURES / 'hardware' / 'h100-2026-11-27-issue28' / 'cdi-vendor-nvidia.yaml'
    spec = _diagnose.cdi_spec('/var/run/cdi/nvidia.yaml', yaml.safe_load(path.read_text()))
    assert spec == {'path': '/var/run/cdi/nvidia.yaml', 'kind': 'nvidia.com/gpu',
                    'devices': ['0', 'GPU-f09e0175-ad65-f509-201d-b8b5754c1086', 'all'],
                    'driver_versions': ['580.159.04']}
    assert _diagnose.cdi_findings([spec], '580.159.04') == []
    assert ids(_diagnose.cdi_findings([spec], '580.195.03')) == ['cdi.spec.stale']


def test_a_leftover_library_beside_the_linked_one_is_not_a_mismatch():
    """The loader opens libnvidia-ml.so.1: its target is the library in use, whatever else the directory holds."""
    directory = '/usr/lib/x86_64-linux-gnu'
    entries = {'libnvidia-ml.so.1': 'libnvidia-ml.so.580.159.04', 'libnvidia-ml.so.580.159.04': None,
               'libnvidia-ml.so.570.86.15': None, 'libcuda.so.1': 'libcuda.so.580.159.04'}
    assert _diagnose.driver_mismatch(None, H200_PROC, _diagnose.active_libraries({directory: entries})) == []
    entries['libnvidia-ml.so.1'] = 'libnvidia-ml.so.570.86.15'
    found = _diagnose.driver_mismatch(None, H200_PROC, _diagnose.active_libraries({directory: entries}))
    assert ids(found) == ['nvidia.driver.version_mismatch']
    assert found[0]['evidence'][1:] == ['user-space library: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.15']
    # Without the links, every versioned file counts.
    assert _diagnose.active_libraries({directory: {'libcuda.so.580.159.04': None}, '/usr/lib64': None}) == {
        '/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04': '580.159.04'}


def test_a_stale_spec_that_containers_use_is_broken_and_a_shadowed_one_will_break():
    etc = _diagnose.cdi_spec('/etc/cdi/nvidia.yaml', GOLDEN_CDI)
    run = dict(_diagnose.cdi_spec('/var/run/cdi/nvidia.yaml', GOLDEN_CDI), driver_versions=['580.159.04'])
    severities = dict((f['id'], f['severity']) for f in _diagnose.cdi_findings([etc, run], '580.159.04', kind=KIND))
    assert severities == {'cdi.spec.shadowed': 'will_break', 'cdi.spec.stale': 'will_break'}
    assert [f['severity'] for f in _diagnose.cdi_findings([etc], '580.159.04', kind=KIND)] == ['broken']


def test_nvidia_smi_that_times_out_is_a_finding():
    probe = _probe(commands={'nvidia_smi_xml': {'rc': 124, 'stdout': '', 'stderr': ''}})
    found = diagnose.diagnose_findings(probe, cdi_kind=KIND)
    check_shape(found)
    assert ids(found) == ['nvidia.smi.timeout'] and found[0]['severity'] == 'broken'
    assert 'within 60 s' in found[0]['summary']


def test_xid_63_alone_is_no_finding():
    """The catalog's action for 63 (a row remap event) is IGNORE: a pending remap is gpu.row_remap.pending."""
    assert _diagnose.xid_findings('kernel: NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper: New row') == []


# --- libraries the loader cannot find -----------------------------------------------------------------------------

LDCONFIG = (FIXTURES / 'diagnose' / 'nvidia' / 'ldconfig-p-debian12-no-driver.txt').read_text()
# One line of ldconfig -p's own format added to the real capture: a cache that has the driver's libcuda.
LIBCUDA_LINE = '\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1\n'
NO_LIBRARIES = {'/usr/lib/x86_64-linux-gnu': {'libc.so.6': None}, '/usr/lib64': None}


def test_the_real_cache_is_read_by_soname():
    cached = _diagnose.ldcache_entries(LDCONFIG)
    assert cached['libz3.so.4'] == ['/lib/x86_64-linux-gnu/libz3.so.4']
    assert 'libcuda.so.1' not in cached and len(cached) > 500
    assert _diagnose.ldcache_entries(LDCONFIG + LIBCUDA_LINE)['libcuda.so.1'] == ['/usr/local/nvidia/lib64/libcuda.so.1']


def test_a_loaded_driver_whose_libraries_nothing_finds_is_broken():
    found = _diagnose.libraries_not_found(None, H200_PROC, {'rc': 0, 'stdout': LDCONFIG}, NO_LIBRARIES)
    check_shape(found)
    assert ids(found) == ['nvidia.libraries.not_found'] and found[0]['severity'] == 'broken'
    assert found[0]['evidence'][:2] == ['ldconfig -p: no libcuda.so.1', 'ldconfig -p: no libnvidia-ml.so.1']
    assert 'driver 580.159.04 is loaded' in found[0]['summary'] and 'ldconfig' in found[0]['fix']
    # libcuda in the cache, libnvidia-ml in a directory the toolkit searches: both found.
    dirs = dict(NO_LIBRARIES, **{'/usr/lib64': {'libnvidia-ml.so.1': 'libnvidia-ml.so.580.159.04'}})
    only_ml = _diagnose.libraries_not_found(None, H200_PROC, {'rc': 0, 'stdout': LDCONFIG + LIBCUDA_LINE}, NO_LIBRARIES)
    assert only_ml[0]['evidence'][0] == 'ldconfig -p: no libnvidia-ml.so.1'
    assert _diagnose.libraries_not_found(None, H200_PROC, {'rc': 0, 'stdout': LDCONFIG + LIBCUDA_LINE}, dirs) == []


# The real H200 node of the hardware tier (tests/fixtures/hardware/h200-2026-11-28-issue28/), driver 580.159.04 in
# /usr/local/nvidia/lib64: its loader's cache, and the same with that directory out of /etc/ld.so.conf.d.
H200_NODE_LDCONFIG = (FIXTURES / 'diagnose' / 'nvidia' / 'ldconfig-p-h200-node.txt').read_text()
H200_NODE_HIDDEN = (FIXTURES / 'diagnose' / 'nvidia' / 'ldconfig-p-h200-node-hidden.txt').read_text()


def test_the_real_gpu_nodes_cache_finds_the_libraries_and_the_hidden_one_does_not():
    assert _diagnose.ldcache_entries(H200_NODE_LDCONFIG)['libcuda.so.1'] == ['/usr/local/nvidia/lib64/libcuda.so.1']
    assert _diagnose.libraries_not_found(None, H200_PROC, {'rc': 0, 'stdout': H200_NODE_LDCONFIG}, NO_LIBRARIES) == []
    found = _diagnose.libraries_not_found(None, H200_PROC, {'rc': 0, 'stdout': H200_NODE_HIDDEN}, NO_LIBRARIES)
    assert ids(found) == ['nvidia.libraries.not_found']
    assert found[0]['evidence'][:2] == ['ldconfig -p: no libcuda.so.1', 'ldconfig -p: no libnvidia-ml.so.1']


def test_no_loaded_driver_or_no_answer_from_ldconfig_is_not_this_finding():
    assert _diagnose.libraries_not_found(None, None, {'rc': 0, 'stdout': LDCONFIG}, NO_LIBRARIES) == []
    assert _diagnose.libraries_not_found(None, H200_PROC, {'rc': 127, 'stdout': ''}, NO_LIBRARIES) == []
