#!/usr/bin/env bash
# Re-run cost of one role on a node its Molecule scenario already converged
# (SIMULATED hardware): runs the scenario's converge.yml three times with
# ansible-playbook (what Molecule runs, without Molecule around it) and prints
# each run's wall time, the role's task count and summed task seconds
# (profile_tasks), then the medians and the spread.
#   ACCEL_NODE_PREFIX=... tests/benchmarks/role_rerun.sh SCENARIO ROLE
# Converge the scenario first (tests/rig/molecule.sh SCENARIO converge).
# Logs: build/bench-rerun/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
scenario=$1 role=$2
out=$top/build/bench-rerun
mkdir -p "$out"
eph=$(ls -d "$HOME"/.ansible/tmp/molecule.*."$scenario" | head -1)
export PATH=$top/.venv/bin:$PATH MOLECULE_PROJECT_DIRECTORY=$top ANSIBLE_CONFIG=$eph/ansible.cfg \
  MOLECULE_SCENARIO_DIRECTORY=$top/molecule/$scenario \
  ANSIBLE_COLLECTIONS_PATH=$top/build/collections ANSIBLE_ROLES_PATH=$top/roles \
  ACCEL_REPOS_DIR=$top/build/repos ANSIBLE_NOCOLOR=1 PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=none
tests/rig/collection-tree.sh
for i in 1 2 3; do
  log=$out/$scenario-$i.log
  start=$(date +%s.%N)
  ansible-playbook -i "$eph/inventory" "molecule/$scenario/converge.yml" >"$log" 2>&1 ||
    { tail -30 "$log" >&2; echo "failed: $log" >&2; exit 1; }
  end=$(date +%s.%N)
  grep -q ": ok=[0-9]* *changed=0 " "$log" || echo "WARNING: re-run $i changed something: $log" >&2
  echo "$start $end $log"
done | python3 -c '
import re, statistics, sys
role = sys.argv[1]
walls, sums, counts = [], [], []
for line in sys.stdin:
    start, end, log = line.split()
    n, s = 0, 0.0
    for text in open(log):
        m = re.match(r"^(.*?) -{3,} +(\d+\.\d+)s$", text.rstrip())
        if m and m.group(1).startswith(role + " : "):
            n, s = n + 1, s + float(m.group(2))
    walls.append(float(end) - float(start)); sums.append(s); counts.append(n)
    print("run: wall %.1f s, %s: %d tasks run, %.1f s" % (walls[-1], role, n, s))
print("median: wall %.1f s (%.1f-%.1f), %s %.1f s (%.1f-%.1f), %d tasks run" % (
    statistics.median(walls), min(walls), max(walls), role,
    statistics.median(sums), min(sums), max(sums), statistics.median(counts)))
' "accel.nodes.$role"
