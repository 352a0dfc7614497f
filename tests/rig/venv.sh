#!/usr/bin/env bash
# venv.sh DIR REQUIREMENTS: create or refresh a virtual environment, only when
# the requirements file changed since it was last installed.
set -euo pipefail
venv=$1 reqs=$2
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs" >"$venv/pip.log" 2>&1 ||
  { grep -v '^WARNING: Location' "$venv/pip.log" >&2; exit 1; }
"$venv/bin/python" -c 'import ansible' # fail loudly if the install did not take
echo "$want" >"$stamp"
