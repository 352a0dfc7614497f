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
rc=0
PYTHONPATH="$top/build/collections" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@" || rc=$?
# The real-GPU tier's kubelet stand-in runs on its node with Debian's python3-grpcio
# (tests/hardware/kubelet_stub.py); its test runs here with the same packages
# (tests/rig/host.sh installs them), where the venv has no gRPC and skips it.
if [ "$venv" = "$top/.venv" ] && [ $# -eq 0 ]; then
  /usr/bin/python3 -m pytest -q -p no:cacheprovider --confcutdir=tests/unit/hardware tests/unit/hardware || rc=$?
fi
exit $rc
