#!/usr/bin/env bash
# Issue 27, read-only: what holds the GPU of the real GPU host, as
# accel.nodes.driver_holders reads it, idle and with a CUDA process running, and
# what accel.nodes.driver_reload would do, in check mode only. Nothing is
# stopped, unloaded or loaded: the lent machine's driver must not be touched.
# The modules run on the host itself (not in the systemd node of run.sh, whose
# PID namespace hides the host's processes), with the ansible-core module_utils
# of LIBDIR (only ansible/module_utils is needed to run a module by hand).
#
#   tests/hardware/holders.sh LIBDIR OUTDIR
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
lib=$1 out=$2
mkdir -p "$out"
work=$(mktemp -d)
mkdir -p "$work/c/ansible_collections/accel"
ln -s "$repo" "$work/c/ansible_collections/accel/nodes"
export PYTHONPATH="$lib:$work/c"
fails=0
say() { printf '%s\n' "$*" | tee -a "$out/summary.txt"; }
check() { if [ "$1" = ok ]; then say "PASS $2"; else say "FAIL $2"; fails=$((fails + 1)); fi; }
# pycheck NAME FILE EXPR: EXPR over the module's result r, in Python.
pycheck() { if [ "$(field "$2" "$3")" = True ]; then check ok "$1"; else check no "$1"; fi; }
module() {  # module-name json-args output-file
  printf '{"ANSIBLE_MODULE_ARGS": %s}' "$2" > "$work/args.json"
  python3 "$repo/plugins/modules/$1.py" "$work/args.json" > "$out/$3" 2>"$out/$3.stderr"
}
field() { python3 -c "import json,sys; r=json.load(open('$out/$1')); print(eval(sys.argv[1], {}, {'r': r}))" "$2"; }

{
  echo "# uname -r"; uname -r
  echo "# nvidia-smi -L"; nvidia-smi -L
  echo "# driver_version"; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  echo "# /proc/modules (nvidia, nouveau)"; grep -E '^(nvidia|nouveau)' /proc/modules || echo "(none listed)"
  echo "# /sys/module/*/refcnt"
  for m in nvidia nvidia_uvm nvidia_modeset nvidia_drm nvidia_peermem; do
    if [ -r /sys/module/$m/refcnt ]; then echo "$m $(cat /sys/module/$m/refcnt)"; else echo "$m (no /sys/module/$m/refcnt)"; fi
  done
  echo "# /sys/module/nvidia/version"; cat /sys/module/nvidia/version 2>/dev/null || echo "(unreadable)"
  echo "# /dev/nvidia*"; ls -l /dev/nvidia* 2>&1
  echo "# systemctl"; command -v systemctl || echo "(no systemctl)"
  echo "# docker socket"; ls -l /var/run/docker.sock 2>&1
} > "$out/host.txt" 2>&1
version=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1 | tr -d ' ')
say "driver $version, kernel $(uname -r)"

module driver_holders '{"vendor": "nvidia"}' idle.json
say "idle: $(field idle.json "(r.get('held'), r.get('summary'), [p['comm'] for p in r.get('processes', [])], r.get('msg'))")"

# A real CUDA process: PyTorch makes a context on the GPU and keeps it.
python3 -c "
import time, torch
x = torch.ones(1024, device='cuda')
open('$work/ready', 'w').write('ok')
time.sleep(120)
" > "$out/cuda-process.log" 2>&1 &
cuda_pid=$!
for _ in $(seq 1 120); do [ -f "$work/ready" ] && break; sleep 0.5; done
[ -f "$work/ready" ] || say "the CUDA process did not start: $(tail -n3 "$out/cuda-process.log")"
module driver_holders '{"vendor": "nvidia"}' busy.json
say "busy: $(field busy.json "(r.get('held'), r.get('summary'))")"
pycheck "a running CUDA process (pid $cuda_pid) holds the GPU, with its devices" busy.json \
  "any(p['pid'] == $cuda_pid and any(d.startswith('/dev/nvidia') for d in p['devices']) for p in r['processes']) and r['held']"

module driver_holders '{"vendor": "nvidia", "stop": true, "_ansible_check_mode": true}' busy-stop-check.json
pycheck "check mode with stop names the process it would stop" busy-stop-check.json "$cuda_pid in r['stopped']['processes'] and r['changed']"
if kill -0 "$cuda_pid"; then check ok "... and stops nothing"; else check no "... and stops nothing"; fi

module driver_reload "{\"vendor\": \"nvidia\", \"version\": \"$version\", \"_ansible_check_mode\": true}" reload-check.json
say "reload (check mode, version $version): $(field reload-check.json "(r.get('changed'), r.get('reloaded'), r.get('reason'), r.get('before'))")"
if nvidia-smi -L >/dev/null && kill -0 "$cuda_pid"; then check ok "the reload in check mode changes nothing on the host"; else check no "the reload in check mode changes nothing on the host"; fi

kill "$cuda_pid" 2>/dev/null; wait "$cuda_pid" 2>/dev/null
module driver_holders '{"vendor": "nvidia"}' after.json
pycheck "after the CUDA process ends, it is no longer listed" after.json "not any(p['pid'] == $cuda_pid for p in r['processes'])"
say "after: $(field after.json "(r.get('held'), r.get('summary'))")"
say "failures: $fails"
exit $((fails > 0))
