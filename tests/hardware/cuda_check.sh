#!/usr/bin/env bash
# Prove accel.nodes.nvidia_cuda_check on a real NVIDIA GPU host, without Ansible's controller:
#   tests/hardware/cuda_check.sh OUTDIR
# Needs python3 and ansible-core importable (put it on PYTHONPATH); no CUDA toolkit.
# Runs the module three times and writes each JSON result to OUTDIR:
#   normal.json          defaults                               must pass
#   no-such-gpu.json     CUDA_VISIBLE_DEVICES=<a GPU not there>   must fail: cuInit ... CUDA_ERROR_NO_DEVICE
#   library-hidden.json  libcuda.so.1 hidden from the module      must fail: libcuda.so.1 not found in ...
# The library is hidden with the module's own options (search_loader: false and an empty
# library_dirs directory), so nothing on the host is touched.
# Exit status 0 when all three behave as above; 1, with the reason, when one does not.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The collection as ansible_collections/accel/nodes, as tests/rig/collection-tree.sh does.
mkdir -p "$work/collections/ansible_collections/accel" "$work/empty"
ln -s "$top" "$work/collections/ansible_collections/accel/nodes"
export PYTHONPATH="$work/collections${PYTHONPATH:+:$PYTHONPATH}"
if ! "$python" -c 'import ansible.module_utils.basic' 2>/dev/null; then
  echo "cuda_check: ansible-core is not importable by $python; put it on PYTHONPATH" >&2
  exit 2
fi

# A GPU index that does not exist: the number of GPUs nvidia-smi lists (99 without nvidia-smi).
gpus=$(PATH="$PATH:/usr/local/nvidia/bin" nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
missing=${gpus:-0}
[ "$missing" -gt 0 ] || missing=99

run() {  # run NAME ARGS_JSON: the module's JSON result goes to OUTDIR/NAME.json
  printf '{"ANSIBLE_MODULE_ARGS": %s}\n' "$2" >"$work/$1.args.json"
  # The module exits 1 when a check fails; its JSON says why.
  "$python" -m ansible_collections.accel.nodes.plugins.modules.nvidia_cuda_check "$work/$1.args.json" \
    >"$out/$1.json" 2>"$out/$1.stderr" || true
}

run normal '{}'
run no-such-gpu "{\"cuda_visible_devices\": \"$missing\"}"
run library-hidden "{\"search_loader\": false, \"library_dirs\": [\"$work/empty\"]}"

# Judge the three results. The empty directory's name changes every run, so it is matched by pattern.
"$python" - "$out" "$missing" "$work/empty" <<'PY'
import json
import sys

out, missing, empty = sys.argv[1:4]
expected = {
    'normal': (False, None),
    'no-such-gpu': (True, 'cuda: cuInit failed: CUDA_ERROR_NO_DEVICE'),
    'library-hidden': (True, 'cuda: libcuda.so.1 not found in %s' % empty),
}
ok = True
for name, (should_fail, start) in expected.items():
    try:
        with open('%s/%s.json' % (out, name)) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        print('FAIL %s: no JSON result (%s); see %s/%s.stderr' % (name, e, out, name))
        ok = False
        continue
    cuda = result.get('cuda') or {}
    took = cuda.get('elapsed_ms')
    failed = bool(result.get('failed'))
    msg = result.get('msg', '')
    good = failed == should_fail and (start is None or msg.startswith(start))
    print('%s %s (CUDA check %s ms): %s' % ('ok  ' if good else 'FAIL', name, took, msg))
    if name == 'normal' and not good and cuda.get('error', {}).get('name') in ('LIBRARY_NOT_FOUND', 'LIBRARY_NOT_LOADED'):
        print('     this machine has no usable libcuda.so.1 (no NVIDIA driver): the check cannot pass here')
    ok = ok and good
print('results in %s' % out)
sys.exit(0 if ok else 1)
PY
