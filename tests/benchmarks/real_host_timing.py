# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Time accelerator_facts on a real GPU host against a bare `nvidia-smi -q -x`.

Runs, interleaved so that drift hits all alike:
  smi      nvidia-smi -q -x                                   (the yardstick)
  module   python3 -m ansible_collections...accelerator_facts ARGS.json
  import   python3 -c 'import ansible.module_utils.basic'    (Ansible's own floor)
  python   python3 -c pass                                    (the interpreter's floor)
and, fewer times, the module through Ansible:
  ansible  ansible localhost -c local -m accel.nodes.accelerator_facts -o

Needs ansible-core importable (PYTHONPATH) and the collection under
ANSIBLE_COLLECTIONS_PATH (PYTHONPATH must reach it too, for `python3 -m`).
Writes into --out: timing.json, module-direct.json (the module's answer),
ansible-adhoc.txt (Ansible's one-line answer) and h200-real-run.json (the
host's result from it, as JSON). Read-only on the host: it changes no GPU setting.

  real_host_timing.py --out DIR [--runs 10] [--ansible-runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MODULE = 'ansible_collections.accel.nodes.plugins.modules.accelerator_facts'
SMI_DIRS = ['/usr/bin', '/usr/local/nvidia/bin', '/usr/local/bin', '/opt/nvidia/bin']


def timed(cmd, env=None):
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return time.perf_counter() - started, proc


def stats(seconds):
    ms = [s * 1000 for s in seconds]
    return {'median_ms': round(statistics.median(ms), 1), 'min_ms': round(min(ms), 1),
            'max_ms': round(max(ms), 1), 'runs': len(ms), 'all_ms': [round(m, 1) for m in ms]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--out', required=True)
    parser.add_argument('--runs', type=int, default=10)
    parser.add_argument('--ansible-runs', type=int, default=5)
    options = parser.parse_args()

    smi = shutil.which('nvidia-smi', path=os.pathsep.join([os.environ.get('PATH', '')] + SMI_DIRS))
    if not smi:
        sys.exit('no nvidia-smi found')
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump({'ANSIBLE_MODULE_ARGS': {}}, f)
        args_file = f.name

    commands = {
        'smi': [smi, '-q', '-x'],
        'module': [sys.executable, '-m', MODULE, args_file],
        'import': [sys.executable, '-c', 'import ansible.module_utils.basic'],
        'python': [sys.executable, '-c', 'pass'],
    }
    # One warm-up each: page cache, the driver's first NVML initialisation.
    for cmd in commands.values():
        timed(cmd)
    times = dict((name, []) for name in commands)
    module_out = None
    for dummy in range(options.runs):
        for name, cmd in commands.items():
            seconds, proc = timed(cmd)
            if proc.returncode != 0:
                sys.exit('%s failed (rc %d): %s' % (cmd, proc.returncode, proc.stderr.decode()[-2000:]))
            times[name].append(seconds)
            if name == 'module':
                module_out = proc.stdout
    with open(os.path.join(options.out, 'module-direct.json'), 'wb') as f:
        f.write(module_out)

    # -o: one line per host, `localhost | SUCCESS => {json}`. The json callback
    # is in ansible.posix since ansible-core 2.19, which a bare install lacks.
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false',
               LC_ALL='C.UTF-8', LANG='C.UTF-8')
    ansible_bin = shutil.which('ansible')
    if not ansible_bin:
        sys.exit('no ansible on PATH')
    ansible = [ansible_bin, 'localhost', '-c', 'local', '-m', 'accel.nodes.accelerator_facts',
               '-e', 'ansible_python_interpreter=python3', '-o']
    times['ansible'] = []
    for dummy in range(options.ansible_runs):
        seconds, proc = timed(ansible, env=env)
        if proc.returncode != 0:
            # Keep the figures already taken; say why Ansible failed.
            with open(os.path.join(options.out, 'ansible-error.txt'), 'wb') as f:
                f.write(proc.stdout[-20000:] + b'\n---\n' + proc.stderr[-20000:])
            break
        times['ansible'].append(seconds)
        with open(os.path.join(options.out, 'ansible-adhoc.txt'), 'wb') as f:
            f.write(proc.stdout)
    if times['ansible']:
        with open(os.path.join(options.out, 'ansible-adhoc.txt')) as f:
            line = [text for text in f if text.startswith('localhost | ')][0]
        host_result = json.loads(line.split(' => ', 1)[1])
        with open(os.path.join(options.out, 'h200-real-run.json'), 'w') as f:
            json.dump(host_result, f, indent=2, sort_keys=True)
            f.write('\n')
    else:
        del times['ansible']

    report = dict((name, stats(values)) for name, values in times.items())
    report['module_over_smi'] = round(report['module']['median_ms'] / report['smi']['median_ms'], 3)
    if 'ansible' in report:
        report['ansible_over_smi'] = round(report['ansible']['median_ms'] / report['smi']['median_ms'], 3)
    report['nvidia_smi'] = smi
    report['python_version'] = sys.version
    with open(os.path.join(options.out, 'timing.json'), 'w') as f:
        json.dump(report, f, indent=2)
    os.unlink(args_file)
    print(json.dumps(dict((k, v) for k, v in report.items() if k != 'python_version'), indent=1))


if __name__ == '__main__':
    main()
