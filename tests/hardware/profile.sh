#!/usr/bin/env bash
# In the node (run.sh, ACCEL_HW_PROFILE=1): what the programs the roles run cost
# on their own, and where a module's own Python time goes (cProfile), for the
# modules a converged re-run spends most on. Read-only; prints to stdout.
set -u
TIMEFORMAT=%R
export PATH=$PATH:/usr/local/nvidia/bin PYTHONPATH=/opt/accel-nodes/python:/opt/accel-nodes/collections LANG=C.UTF-8
t() { printf '%-70s ' "$*"; { time "$@" >/dev/null 2>&1; } 2>&1; }
echo "== programs (seconds, wall)"
t python3 -c pass
t python3 -c 'import ansible.module_utils.basic'
t nvidia-smi -L
t nvidia-smi -q -x
t nvidia-smi -q -x
t nvidia-ctk system create-dev-char-symlinks --create-all --dry-run
t docker info --format '{{json .}}'
t dkms status
t systemctl is-active docker
t systemctl show docker --property MainPID,ActiveState,UnitFileState
args=$(mktemp)
mod() { # name json: cProfile of one module run, its 25 costliest calls
  echo "== cProfile: $1 $2"
  printf '{"ANSIBLE_MODULE_ARGS": %s}' "$2" >"$args"
  { time python3 -m cProfile -s cumtime -m "ansible_collections.accel.nodes.plugins.modules.$1" "$args" | sed -n '/Ordered by/,+30p' | cut -c1-150; } 2>&1
}
mod accelerator_facts '{}'
mod node_probe '{"facts": true, "packages": ["^nvidia"]}'
mod engine_state '{"engines": ["docker"], "_ansible_check_mode": true}'
mod dev_char_symlinks '{"_ansible_check_mode": true}'
mod nvidia_cuda_check '{"fail_on_error": false}'
rm -f "$args"
echo "== nvidia-ctk system create-dev-char-symlinks --dev-char-path=/dev/char --create-all --dry-run (stderr; rc last)"
{ nvidia-ctk system create-dev-char-symlinks --dev-char-path=/dev/char --create-all --dry-run >/dev/null; } 2>&1; echo "rc $?"
echo "== the NVIDIA links in /dev/char"
find /dev/char -maxdepth 1 -lname '*nvidia*' -printf '%f -> %l\n' | sort
