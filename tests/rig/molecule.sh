#!/usr/bin/env bash
# Run one Molecule scenario with the rig set up:
#   tests/rig/molecule.sh SCENARIO [SUBCOMMAND [ARGS...]]   (default: test)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
scenario=$1
shift
[ $# -gt 0 ] || set -- test
export PATH="$top/.venv/bin:$PATH" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
export ANSIBLE_COLLECTIONS_PATH=$top/build/collections # never a copy installed by hand
ACCEL_NODE_IMAGE=$(tests/rig/node-image.sh)
ACCEL_REPOS_DIR=$(tests/doubles/build-repos.sh)
export ACCEL_NODE_IMAGE ACCEL_REPOS_DIR
tests/rig/collection-tree.sh
exec molecule "$1" -s "$scenario" "${@:2}"
