#!/usr/bin/env bash
# Re-run cost of one role on a node its Molecule scenario already converged
# (SIMULATED hardware): runs the scenario's converge.yml with ansible-playbook
# (what Molecule runs, without Molecule around it) and prints each run's wall
# time, the role's task count and summed task seconds (profile_tasks), then
# the medians and the spread.
#   ACCEL_NODE_PREFIX=... tests/benchmarks/role_rerun.sh SCENARIO ROLE [BASE_REF]
# With BASE_REF (a commit), the collection as it was there runs too, on the
# same node, alternating with this checkout's, three runs each: on a shared
# machine the load changes from minute to minute, and alternating spreads it
# over both. Both must find the node converged (changed=0); a warning says
# when a run changed something.
# Converge the scenario first (tests/rig/molecule.sh SCENARIO converge).
# Logs: build/bench-rerun/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
scenario=$1 role=$2 base=${3:-}
out=$top/build/bench-rerun
rm -rf "$out" && mkdir -p "$out"
# Molecule's state of this scenario whose inventory holds this prefix's nodes:
# other agents' nodes of the same scenario have their own.
eph=
for dir in "$HOME"/.ansible/tmp/molecule.*."$scenario"; do
  if grep -qs -- "${ACCEL_NODE_PREFIX:?set ACCEL_NODE_PREFIX}-$scenario" "$dir"/inventory/*; then eph=$dir; break; fi
done
[ -n "$eph" ] || { echo "no converged $scenario nodes of prefix $ACCEL_NODE_PREFIX: converge first" >&2; exit 1; }
export PATH=$top/.venv/bin:$PATH MOLECULE_PROJECT_DIRECTORY=$top ANSIBLE_CONFIG=$eph/ansible.cfg \
  MOLECULE_SCENARIO_DIRECTORY=$top/molecule/$scenario \
  ACCEL_REPOS_DIR=$top/build/repos ANSIBLE_NOCOLOR=1 PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=none
tests/rig/collection-tree.sh
kinds=(current)
if [ -n "$base" ]; then
  mkdir -p "$out/base/ansible_collections/accel/nodes"
  git archive "$base" | tar -C "$out/base/ansible_collections/accel/nodes" -x
  kinds=(base current)
fi

# run KIND I: one re-run; prints "KIND START END LOG".
run() {
  local kind=$1 i=$2 log=$out/$1-$2.log start end collections=$top/build/collections
  [ "$kind" = current ] || collections=$out/base
  start=$(date +%s.%N)
  ANSIBLE_COLLECTIONS_PATH=$collections ansible-playbook -i "$eph/inventory" "molecule/$scenario/converge.yml" >"$log" 2>&1 ||
    { tail -30 "$log" >&2; echo "failed: $log" >&2; exit 1; }
  end=$(date +%s.%N)
  grep -q ": ok=[0-9]* *changed=0 " "$log" || echo "WARNING: $kind re-run $i changed something: $log" >&2
  echo "$kind $start $end $log"
}

for i in 1 2 3; do
  for kind in "${kinds[@]}"; do
    run "$kind" "$i"
  done
done | python3 -c '
import re, statistics, sys
role = sys.argv[1]
runs = {}
for line in sys.stdin:
    kind, start, end, log = line.split()
    n, s = 0, 0.0
    for text in open(log):
        m = re.match(r"^(.*?) -{3,} +(\d+\.\d+)s$", text.rstrip())
        if m and m.group(1).startswith(role + " : "):
            n, s = n + 1, s + float(m.group(2))
    runs.setdefault(kind, []).append((float(end) - float(start), s, n))
    print("%-7s run: wall %.1f s, %s: %d tasks timed, %.1f s" % (kind, float(end) - float(start), role, n, s))
for kind, rs in runs.items():
    walls, sums, counts = zip(*rs)
    print("%-7s median: wall %.1f s (%.1f-%.1f), %s %.1f s (%.1f-%.1f), %d tasks timed" % (
        kind, statistics.median(walls), min(walls), max(walls), role,
        statistics.median(sums), min(sums), max(sums), statistics.median(counts)))
' "accel.nodes.$role"
