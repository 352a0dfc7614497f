#!/usr/bin/env bash
# How a converged fleet's re-run scales (issue 27, part 6): site.yml's full
# re-run (the default: every role, no state record) and a facts-only play, on
# 1, 2, 4 and 8 nodes with SIMULATED hardware (the nodes of molecule/fleet: a
# p3.2xlarge each, driver 570, Docker and the toolkit), with as many forks as
# nodes. Medians of three runs each; the ratio is the full run over the floor.
#   tests/benchmarks/fleet_scale.sh [SIZES...]   (default: 1 2 4 8)
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

# run LOG PLAYBOOK N: wall seconds of one run on the first N nodes, N forks.
run() {
  local log=$1 playbook=$2 n=$3 start end
  start=$(date +%s.%N)
  ansible-playbook -i "$out/molecule/inventory" --limit "$(seq -f 'scale-fleet-%g' 1 "$n" | paste -sd,)" \
    --forks "$n" "$playbook" >"$out/$log" 2>&1 || { tail -30 "$out/$log" >&2; echo "failed: $out/$log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$start $end" | awk '{printf "%.2f", $2 - $1}'
}
median() {
  local prefix=$1 playbook=$2 n=$3 i
  for i in 1 2 3; do run "$prefix-$i.log" "$playbook" "$n"; echo; done | sort -n | sed -n 2p
}

printf '%-6s %10s %12s %7s\n' nodes floor_s full_s ratio
for n in "$@"; do
  floor=$(median "floor-$n" "$out/floor.yml" "$n")
  full=$(median "full-$n" "$scenario/converge.yml" "$n")
  for log in "$out/full-$n"-?.log; do
    if grep -E '^scale-fleet-[0-9]+ *: ' "$log" | grep -vq ' changed=0 '; then
      echo "WARNING: a re-run changed something: $log" >&2
    fi
  done
  printf '%-6s %10s %12s %7s\n' "$n" "$floor" "$full" "$(echo "$full $floor" | awk '{printf "%.1f", $1 / $2}')"
done
