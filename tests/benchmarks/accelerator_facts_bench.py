# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Measure accelerator_facts' own overhead beyond the commands it runs.

The host is the 8 x V100 p3.16xlarge fixture tree. Three figures:

  in-process   main() run again and again in one interpreter, with nvidia-smi
               answered instantly from its captured output: the module's own
               work (reading sysfs/procfs, parsing the XML, building the facts,
               argument handling and the JSON answer). Goal: median < 50 ms.
  with double  the same, but nvidia-smi is the shell double under tests/doubles/replay,
               run through run_command: adds a fork and exec.
  cold         a fresh `python -m ...accelerator_facts ARGS.json` per run, next
               to a fresh `python -c "import ansible.module_utils.basic"`: the
               difference is what the module adds to an interpreter that has
               already paid for Ansible's own imports.

This is a measurement, not a test: it prints figures and exits 0.

  tests/rig/collection-tree.sh
  .venv/bin/python tests/benchmarks/accelerator_facts_bench.py [--runs N] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
COLLECTIONS = TOP / 'build' / 'collections'
FACTS = TOP / 'tests' / 'fixtures' / 'facts'
SMI_OUTPUT = FACTS / 'commands' / 'nvidia-smi' / 'p3.16xlarge-v11.xml'
SMI_DOUBLE = TOP / 'tests' / 'doubles' / 'replay' / 'nvidia-smi'
MODULE = 'ansible_collections.accel.nodes.plugins.modules.accelerator_facts'

if not (COLLECTIONS / 'ansible_collections' / 'accel' / 'nodes').exists():
    subprocess.run([str(TOP / 'tests' / 'rig' / 'collection-tree.sh')], check=True)
sys.path.insert(0, str(COLLECTIONS))

ROOT = FACTS / 'roots' / 'p3.16xlarge'
ARGS = {'root': str(ROOT), 'nvidia_smi_path': str(SMI_DOUBLE), 'instance_type': 'p3.16xlarge'}

from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes  # noqa: E402

from ansible_collections.accel.nodes.plugins.modules import accelerator_facts  # noqa: E402


class _Exit(Exception):
    pass


def _exit_json(self, **kwargs):
    # What exit_json costs is the module's too: serialise as it would.
    json.dumps(kwargs)
    raise _Exit(kwargs)


try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18
    import contextlib

    @contextlib.contextmanager
    def patch_module_args(args):
        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved


def run_once(replay):
    """One main() call; returns (seconds, facts). With replay, run_command
    answers with that text at once instead of running nvidia-smi."""
    saved = basic.AnsibleModule.exit_json, basic.AnsibleModule.run_command
    basic.AnsibleModule.exit_json = _exit_json
    if replay is not None:
        basic.AnsibleModule.run_command = lambda self, args, **kwargs: (0, replay, '')
    result = None
    try:
        with patch_module_args(ARGS):
            started = time.perf_counter()
            try:
                accelerator_facts.main()
            except _Exit as done:
                result = done.args[0]
            elapsed = time.perf_counter() - started
    finally:
        basic.AnsibleModule.exit_json, basic.AnsibleModule.run_command = saved
    if result is None:
        raise RuntimeError('the module returned without exit_json')
    return elapsed, result['ansible_facts']['accelerators']


def summary(label, seconds):
    ms = sorted(s * 1000 for s in seconds)
    print('%-12s median %7.2f ms   p90 %7.2f ms   min %7.2f ms   (%d runs)' % (
        label, statistics.median(ms), ms[int(len(ms) * 0.9) - 1], ms[0], len(ms)))
    return statistics.median(ms)


def cold(runs):
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump({'ANSIBLE_MODULE_ARGS': ARGS}, f)
        args_file = f.name
    env = dict(os.environ, PYTHONPATH=str(COLLECTIONS))
    module_cmd = [sys.executable, '-m', MODULE, args_file]
    import_cmd = [sys.executable, '-c', 'import ansible.module_utils.basic']
    times = {'module': [], 'import': []}
    try:
        for dummy in range(runs):
            for name, cmd in (('module', module_cmd), ('import', import_cmd)):
                started = time.perf_counter()
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - started)
    finally:
        os.unlink(args_file)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=200, help='in-process runs (default 200)')
    parser.add_argument('--cold-runs', type=int, default=10, help='fresh-interpreter runs (default 10)')
    parser.add_argument('--profile', action='store_true', help='print where an in-process run spends its time')
    options = parser.parse_args()

    os.environ['ACCEL_NVIDIA_SMI_OUTPUT'] = str(SMI_OUTPUT)
    replay = SMI_OUTPUT.read_text()
    _seconds, facts = run_once(replay)
    assert len(facts['nvidia']['gpus']) == 8 and facts['problems'] == [], facts
    for dummy in range(5):
        run_once(replay)

    print('accelerator_facts on %s (8 GPUs), Python %s, ansible-core %s' % (
        ROOT.name, sys.version.split()[0], __import__('ansible.release').release.__version__))
    overhead = summary('in-process', [run_once(replay)[0] for dummy in range(options.runs)])
    summary('with double', [run_once(None)[0] for dummy in range(max(options.runs // 4, 10))])
    times = cold(options.cold_runs)
    module_ms = summary('cold module', times['module'])
    import_ms = summary('cold import', times['import'])
    print('cold module minus cold ansible import: %.1f ms' % (module_ms - import_ms))
    print('goal: in-process median < 50 ms: %s' % ('met' if overhead < 50 else 'NOT met'))

    if options.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        profiler.enable()
        for dummy in range(20):
            run_once(replay)
        profiler.disable()
        pstats.Stats(profiler).sort_stats('cumulative').print_stats(25)


if __name__ == '__main__':
    main()
