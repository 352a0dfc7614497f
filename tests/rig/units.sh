#!/usr/bin/env bash
# Unit tests: tests/rig/units.sh [--core-2.18] [pytest args...]
# The default venv carries ansible-core 2.19; --core-2.18 uses a small venv with
# the oldest ansible-core we support.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
venv="$top/.venv"
if [ "${1:-}" = --core-2.18 ]; then
  shift
  venv="$top/.venv-core-2.18"
  "$top/tests/rig/venv.sh" "$venv" "$top/requirements/core-2.18.txt" >&2
fi
"$top/tests/rig/collection-tree.sh"
cd "$top"
PYTHONPATH="$top/build/collections" exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@"
