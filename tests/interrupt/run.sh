#!/usr/bin/env bash
# The kill tier (issue 24): on the nodes of a Molecule scenario (site, unless
# the trials name another), converge is killed at the points of trials.json
# (kill.py), then converge, idempotence, the scenario's own side_effect and
# verify run as in the scenario: the run after the kills must pass, change
# nothing the second time, and leave nodes that pass verify.yml, or the
# scenario's verify-converged.yml where it has one (for site: dpkg finished,
# the engines running with the settings the roles manage, validation passed,
# no findings of diagnose).
#   tests/interrupt/run.sh [TRIAL_OR_CHAIN...]     (default: the chain ci)
# Needs what tests/rig/test-all.sh's molecule stage exports (ACCEL_NODE_IMAGE,
# ACCEL_REPOS_DIR, ANSIBLE_COLLECTIONS_PATH). The nodes are named kill-*, apart
# from the scenario's own.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
names=("${@:-ci}")
export ACCEL_NODE_PREFIX=kill ACCEL_KILL_TRIALS="${names[*]}"
read -r scenario own_side_effect < <(python3 tests/interrupt/kill.py --scenario "${names[@]}")
mol() { molecule -c .config/molecule/config.yml "$@" -s "$scenario"; }
steps=(create prepare kill converge idempotence)
[ "$own_side_effect" = 1 ] && steps+=(side-effect)
verify_config=
[ ! -f "molecule/$scenario/verify-converged.yml" ] || verify_config=tests/interrupt/verify-converged.yml
rc=0
mol destroy
for step in "${steps[@]}" verify; do
  case $step in
    # The side_effect step, with kill.yml for the scenario's (tests/interrupt/molecule.yml).
    kill) mol -c tests/interrupt/molecule.yml side-effect ;;
    verify) mol ${verify_config:+-c "$verify_config"} verify ;;
    *) mol "$step" ;;
  esac || { rc=$?; echo "kill tier: molecule $step failed" >&2; break; }
done
mol destroy || true
exit $rc
