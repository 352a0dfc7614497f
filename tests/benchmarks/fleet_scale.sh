#!/usr/bin/env bash
# How a converged fleet's re-run scales (issue 27, part 6): site.yml's full
# re-run (the default: every role, no state record) and a facts-only play, on
# 1, 2, 4 and 8 nodes with SIMULATED hardware (the nodes of molecule/fleet: a
# p3.2xlarge each, driver 570, Docker and the toolkit), with as many forks as
# nodes. Medians of three runs each; the ratio is the full run over the floor.
# Beside each full re-run: the controller's CPU seconds, the rest of the
# machine's (the nodes), and how busy that kept the machine's cores.
#   tests/benchmarks/fleet_scale.sh [SIZES...]   (default: 1 2 4 8)
# With ACCEL_BENCH_MITOGEN=DIR (a directory holding ansible_mitogen, as
# `pip install --target DIR mitogen` leaves it), the full re-run is timed a
# second time under Mitogen's mitogen_linear strategy (issue 29 asks how the
# collection fares under it); the collection itself is not changed for it.
# With ACCEL_BENCH_BASE=REF, the full re-run of the collection as it was at that
# commit (a worktree under build/) runs too, on the same nodes, alternating with
# the checkout's, so that both meet the same load on this shared machine.
# The eight nodes come from a scenario generated from molecule/fleet with
# eight platforms (molecule/fleet-scale, removed at the end), named scale-*.
# Logs: build/bench-fleet/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- 1 2 4 8
max=$(printf '%s\n' "$@" | sort -n | tail -n1)
out=$top/build/bench-fleet
scenario=molecule/fleet-scale
rm -rf "${out:?}" "${scenario:?}" && mkdir -p "$out"

tests/rig/host.sh
tests/rig/venv.sh .venv requirements/dev.txt
cp -r molecule/fleet "$scenario"
python3 - "$scenario/molecule.yml" "$max" <<'EOF2'
import re
import sys
path, count = sys.argv[1], int(sys.argv[2])
text = open(path).read().replace('  name: fleet\n', '  name: fleet-scale\n', 1)
first = text.index('  - name: ${ACCEL_NODE_PREFIX:-accel}-fleet-2')
end = text.index('provisioner:')
more = ''.join('  - name: ${ACCEL_NODE_PREFIX:-accel}-fleet-%d\n    groups: [fleet]\n    <<: *accel_test_node\n' % n
               for n in range(2, count + 1))
open(path, 'w').write(text[:first] + more + text[end:])
EOF2
export ACCEL_NODE_PREFIX=scale MOLECULE_EPHEMERAL_DIRECTORY=$out/molecule
destroy() {
  tests/rig/molecule.sh fleet-scale destroy >"$out/destroy.log" 2>&1 || echo "destroy failed: see $out/destroy.log" >&2
  rm -rf "${top:?}/${scenario:?}"
}
trap destroy EXIT

echo "Creating and converging $max nodes (SIMULATED hardware) ..." >&2
for step in create prepare converge; do
  tests/rig/molecule.sh fleet-scale "$step" >"$out/$step.log" 2>&1 || { tail -30 "$out/$step.log" >&2; exit 1; }
done

export PATH=$top/.venv/bin:$PATH MOLECULE_PROJECT_DIRECTORY=$top MOLECULE_SCENARIO_DIRECTORY=$top/$scenario \
  ANSIBLE_CONFIG=$out/molecule/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$top/build/collections \
  ANSIBLE_ROLES_PATH=$top/roles ACCEL_REPOS_DIR=$top/build/repos ANSIBLE_NOCOLOR=1
cat >"$out/floor.yml" <<'EOF2'
- name: Floor, facts only
  hosts: all
  gather_facts: true
  tasks: []
EOF2

# run LOG PLAYBOOK N: one run on the first N nodes, N forks. Prints its wall
# seconds, the CPU seconds of the controller (ansible-playbook and every process
# it started and waited for: forks, docker exec clients) and the CPU seconds of
# everything else on the machine meanwhile (/proc/stat: the nodes, their nested
# Docker and containers, and the host's dockerd), as "wall controller rest".
run() {
  python3 - "$out/$1" "$2" "$3" "$out/molecule/inventory" <<'EOF2'
import os
import resource
import subprocess
import sys
import time

log, playbook, n, inventory = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def busy():
    with open('/proc/stat') as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    # user, nice, system, irq, softirq (steal and guest are in user already or are not ours)
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf('SC_CLK_TCK')


hosts = ','.join('scale-fleet-%d' % i for i in range(1, n + 1))
before, start = busy(), time.monotonic()
with open(log, 'w') as out:
    rc = subprocess.call(['ansible-playbook', '-i', inventory, '--limit', hosts, '--forks', str(n), playbook]
                         + os.environ.get('ACCEL_BENCH_EXTRA_ARGS', '').split(),
                         stdout=out, stderr=subprocess.STDOUT)
wall, total = time.monotonic() - start, busy() - before
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
controller = usage.ru_utime + usage.ru_stime
if rc != 0:
    sys.stderr.write(open(log).read()[-3000:] + '\nfailed: %s\n' % log)
    sys.exit(1)
print('%.2f %.2f %.2f' % (wall, controller, max(total - controller, 0.0)))
EOF2
}
# base PREFIX PLAYBOOK N: one run of the ACCEL_BENCH_BASE collection.
base() {
  ANSIBLE_COLLECTIONS_PATH=$base_tree/build/collections ANSIBLE_ROLES_PATH=$base_tree/roles run "$@"
}
# alternate N: three full re-runs of each, the base's first; the medians, as
# "FULL CTL REST" for the checkout, then for the base.
alternate() {
  local n=$1 i
  for i in 1 2 3; do
    base "base-$n-$i.log" "$scenario/converge.yml" "$n" >>"$out/base-$n.times"
    run "full-$n-$i.log" "$scenario/converge.yml" "$n" >>"$out/full-$n.times"
  done
  sort -n "$out/full-$n.times" | sed -n 2p
  sort -n "$out/base-$n.times" | sed -n 2p
}
# mitogen PREFIX PLAYBOOK N: median, with Mitogen's strategy (ACCEL_BENCH_MITOGEN).
# Mitogen replaces only the connections it knows by their short names
# (ansible_mitogen/strategy.py, REDIRECTED_CONNECTION_PLUGINS): the nodes'
# community.docker.docker becomes docker, which it runs as mitogen_docker.
mitogen() {
  ACCEL_BENCH_EXTRA_ARGS='-e ansible_connection=docker' \
    ANSIBLE_STRATEGY_PLUGINS=$ACCEL_BENCH_MITOGEN/ansible_mitogen/plugins/strategy ANSIBLE_STRATEGY=mitogen_linear \
    PYTHONPATH=$ACCEL_BENCH_MITOGEN${PYTHONPATH:+:$PYTHONPATH} median "$@"
}
# median PREFIX PLAYBOOK N: the run with the median wall time of three.
median() {
  local prefix=$1 playbook=$2 n=$3 i
  for i in 1 2 3; do run "$prefix-$i.log" "$playbook" "$n"; done | sort -n | sed -n 2p
}

base_tree=
if [ -n "${ACCEL_BENCH_BASE:-}" ]; then
  base_tree=$top/build/bench-base
  git worktree remove --force "$base_tree" 2>/dev/null || rm -rf "$base_tree"
  git worktree add -q --detach "$base_tree" "$ACCEL_BENCH_BASE"
  "$base_tree/tests/rig/collection-tree.sh" >/dev/null
  trap 'destroy; git -C "$top" worktree remove --force "$base_tree"' EXIT
fi

cores=$(nproc)
# row N FLOOR PREFIX LABEL "FULL CTL REST": warn where a re-run of PREFIX changed
# something, and print the row; cpu_busy is the share of the machine's cores
# that the full re-run kept busy.
row() {
  local n=$1 floor=$2 prefix=$3 label=$4 full ctl rest log
  read -r full ctl rest <<<"$5"
  for log in "$out/$prefix-$n"-?.log; do
    if grep -E '^scale-fleet-[0-9]+ *: ' "$log" | grep -vq ' changed=0 '; then
      echo "WARNING: a re-run changed something: $log" >&2
    fi
  done
  printf '%-6s %8s %8s %6s %10s %10s %9s%s\n' "$n" "$floor" "$full" \
    "$(echo "$full $floor" | awk '{printf "%.1f", $1 / $2}')" "$ctl" "$rest" \
    "$(echo "$ctl $rest $full $cores" | awk '{printf "%.0f%%", 100 * ($1 + $2) / ($3 * $4)}')" "$label"
}
printf '%-6s %8s %8s %6s %10s %10s %9s\n' nodes floor_s full_s ratio ctl_cpu_s node_cpu_s cpu_busy
for n in "$@"; do
  line=$(median "floor-$n" "$out/floor.yml" "$n")  # set -e stops the script where a run failed
  read -r floor _ _ <<<"$line"
  if [ -n "$base_tree" ]; then
    lines=$(alternate "$n")
    row "$n" "$floor" full '' "$(sed -n 1p <<<"$lines")"
    row "$n" "$floor" base "  (base: $ACCEL_BENCH_BASE)" "$(sed -n 2p <<<"$lines")"
  else
    line=$(median "full-$n" "$scenario/converge.yml" "$n")
    row "$n" "$floor" full '' "$line"
  fi
  if [ -n "${ACCEL_BENCH_MITOGEN:-}" ]; then
    line=$(mitogen "mitogen-$n" "$scenario/converge.yml" "$n")
    row "$n" "$floor" mitogen '  (mitogen_linear)' "$line"
  fi
done
