#!/usr/bin/env bash
# Wall time of playbooks/site.yml on fresh nodes with SIMULATED hardware (the
# Molecule scenario molecule/site): the first run, with the opt-in state record
# (accel_nodes_state_record=true); runs with the record, which find the node
# unchanged and skip the provisioning roles and validation containers; full
# runs as by default (no state record), which go through every role and
# container; and a floor play that only gathers facts on the same node. Prints the figures, and the task count and
# seconds of each role (profile_tasks) in each site.yml run.
#   tests/benchmarks/site_bench.sh [p3|inf1 ...]   (default: p3 inf1)
# The nodes are named bench-site-* and have their own Molecule state, so they
# do not disturb the site scenario's nodes; they are destroyed at the end.
# Molecule's ansible.cfg turns pipelining on. Logs: build/bench-site/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ $# -gt 0 ] || set -- p3 inf1
out=$top/build/bench-site
rm -rf "$out" && mkdir -p "$out"

tests/rig/host.sh
tests/rig/venv.sh .venv requirements/dev.txt
export ACCEL_NODE_PREFIX=bench MOLECULE_EPHEMERAL_DIRECTORY=$out/molecule
destroy() {
  tests/rig/molecule.sh site destroy >"$out/destroy.log" 2>&1 || echo "destroy failed: see $out/destroy.log" >&2
}
trap destroy EXIT

echo "Creating the nodes (SIMULATED hardware) ..." >&2
tests/rig/molecule.sh site create >"$out/create.log" 2>&1 ||
  { tail -30 "$out/create.log" >&2; exit 1; }

# What Molecule runs, without Molecule around it.
export PATH=$top/.venv/bin:$PATH MOLECULE_PROJECT_DIRECTORY=$top ANSIBLE_CONFIG=$out/molecule/ansible.cfg \
  ANSIBLE_COLLECTIONS_PATH=$top/build/collections ANSIBLE_ROLES_PATH=$top/roles \
  ACCEL_REPOS_DIR=$top/build/repos ANSIBLE_NOCOLOR=1 PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=none
cat >"$out/floor.yml" <<'EOF'
- name: Floor, facts only
  hosts: all
  gather_facts: true
  tasks: []
EOF

# run LOG PLAYBOOK NODE [ARGS...]: prints the wall time in seconds.
run() {
  local log=$1 playbook=$2 node=$3 start end
  shift 3
  start=$(date +%s.%N)
  ansible-playbook -i "$out/molecule/inventory" --limit "$node" "$@" "$playbook" >"$out/$log" 2>&1 ||
    { tail -30 "$out/$log" >&2; echo "failed: $out/$log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$start $end" | awk '{printf "%.1f", $2 - $1}'
}

# median LOGPREFIX NODE PLAYBOOK [ARGS...]: the median wall time of three runs.
median() {
  local prefix=$1 node=$2 playbook=$3 i
  shift 3
  for i in 1 2 3; do
    run "$prefix-$i.log" "$playbook" "$node" "$@"
    echo
  done | sort -n | sed -n 2p
}

# The scenario's inventory gives site.yml test hooks around each batch (molecule/site/hooks/, each a module run
# that writes a marker file): a user's run has none unless they set them.
nohooks=(-e accel_nodes_pre_batch_tasks= -e accel_nodes_post_batch_tasks=)
for sim in "$@"; do
  node=bench-site-$sim
  echo "$node: first site.yml run ..." >&2
  first=$(run "$sim-first.log" molecule/site/converge.yml "$node" -e accel_nodes_state_record=true "${nohooks[@]}")
  echo "$node: unchanged runs, full runs, floor (three each) ..." >&2
  second=$(median "$sim-unchanged" "$node" molecule/site/converge.yml -e accel_nodes_state_record=true "${nohooks[@]}")
  # The scenario's inventory opts its P3 and inf1 into the record: say false, the default.
  full=$(median "$sim-full" "$node" molecule/site/converge.yml -e accel_nodes_state_record=false "${nohooks[@]}")
  floor=$(median "$sim-floor" "$node" "$out/floor.yml")
  for log in "$out/$sim"-unchanged-?.log "$out/$sim"-full-?.log; do
    grep -q "$node *: ok=[0-9]* *changed=0 " "$log" ||
      echo "WARNING: a repeated run of $node changed something: $log" >&2
  done
python3 - "$node" "$first" "$second" "$full" "$floor" "$out/$sim" <<'EOF2'
import re
import sys

node, first, second, full, floor, logs = sys.argv[1:]
first, second, full, floor = (float(x) for x in (first, second, full, floor))


def per_role(log):
    """Task count and seconds per role, from the profile_tasks summary."""
    roles = {}
    for line in open(log):
        match = re.match(r'^(.*?) -{3,} +(\d+\.\d+)s$', line.rstrip())
        if match:
            role = match.group(1).split(' : ')[0] if ' : ' in match.group(1) else '(plays)'
            count, seconds = roles.get(role, (0, 0.0))
            roles[role] = (count + 1, seconds + float(match.group(2)))
    return roles


print('\n%s (SIMULATED hardware)' % node)
print('  first run %.1f s' % first)
print('  floor (facts only) %.1f s' % floor)
print('  unchanged node (opt-in state record matches) %.1f s: %.1fx the floor' % (second, second / floor))
print('  full run (the default: every role, no state record) %.1f s: %.1fx the floor' % (full, full / floor))
runs = [per_role(logs + suffix) for suffix in ('-first.log', '-unchanged-1.log', '-full-1.log')]
print('  %-38s %14s %14s %14s' % ('role: tasks, seconds', 'first', 'unchanged', 'full'))
for role in sorted(set().union(*runs), key=lambda r: -runs[2].get(r, (0, 0.0))[1]):
    print('  %-38s' % role + ''.join('%6d %7.1f' % run.get(role, (0, 0.0)) for run in runs))
EOF2
done
