#!/usr/bin/env bash
# Run one Molecule scenario with the rig set up, on one of the rig's nodes:
#   tests/rig/molecule.sh [--node NODE] SCENARIO [SUBCOMMAND [ARGS...]]   (default: test)
#   tests/rig/molecule.sh [--node NODE] SCENARIO test-without-check      (below)
# NODE is a node image of tests/rig/node-image.sh: bookworm (the default),
# trixie or forky-engines, optionally with :host or :private, its cgroup
# namespace (below); ARGS after -- go to ansible-playbook, for example
#   tests/rig/molecule.sh nvidia_container_toolkit test -- -e nvidia_container_toolkit_version=1.17.8-1
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
node=bookworm
if [ "${1:-}" = --node ]; then
  node=$2
  shift 2
fi
scenario=$1
shift
[ $# -gt 0 ] || set -- test
export PATH="$top/.venv/bin:$PATH" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
export ANSIBLE_COLLECTIONS_PATH=$top/build/collections # never a copy installed by hand
ACCEL_REPOS_DIR=$(tests/doubles/build-repos.sh)
# The forky-engines node runs systemd on a cgroup v2 hierarchy in a cgroup
# namespace of its own (node-image.sh, .config/molecule/config.yml), unless
# --node forky-engines:host puts it on the host's hierarchy like the others:
# containerd's CRI gives every pod sandbox CPU shares, and the rig's cgroup v2
# tree has no cpu controller (the host keeps it on its cgroup v1 hierarchy), so
# pods need the host's (tests/rig/test-all.sh, extra_runs).
# NODE:host or NODE:private says which.
case $node in
  *:*) ACCEL_NODE_CGROUPNS=${node#*:} node=${node%%:*} ;;
  *)
    ACCEL_NODE_CGROUPNS=host
    [ "$node" != forky-engines ] || ACCEL_NODE_CGROUPNS=private
    ;;
esac
ACCEL_NODE_IMAGE=$(tests/rig/node-image.sh "$node")
export ACCEL_NODE_IMAGE ACCEL_REPOS_DIR ACCEL_NODE_CGROUPNS
tests/rig/collection-tree.sh
# test-without-check: the scenario's test sequence without its check step, one
# molecule command a step, then destroy. The extra runs of tests/rig/test-all.sh
# use it: check mode on a fresh node reads no engine, and the run on the
# default node covers it.
if [ "$1" = test-without-check ]; then
  steps=$(python3 - "$scenario" <<'PY'
import sys, yaml
sequence = None
for path in ('molecule/%s/molecule.yml' % sys.argv[1], '.config/molecule/config.yml'):
    with open(path) as f:
        sequence = ((yaml.safe_load(f) or {}).get('scenario') or {}).get('test_sequence')
    if sequence:
        break
print(' '.join(step.replace('_', '-') for step in sequence if step != 'check'))
PY
  ) || exit 1
  rc=0
  for step in $steps; do
    echo "== molecule $step -s $scenario"
    molecule "$step" -s "$scenario" || { rc=$?; echo "molecule $step failed (rc $rc)" >&2; break; }
  done
  [ $rc -eq 0 ] || molecule destroy -s "$scenario" || :
  exit $rc
fi
exec molecule "$1" -s "$scenario" "${@:2}"
