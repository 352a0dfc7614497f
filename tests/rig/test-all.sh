#!/usr/bin/env bash
# The stage functions are called through `stage`, which shellcheck cannot follow.
# shellcheck disable=SC2317
# The whole test suite: host set-up, virtual environments, unit tests on both
# supported ansible-core versions, lint, sanity, collection build, every
# Molecule scenario, and the chroot bake. Prints a timing summary per stage at
# the end.
#   tests/rig/test-all.sh [stage ...]     (default: all stages)
#   ACCEL_TEST_LANES=N ACCEL_TEST_ONLY=REGEX tests/rig/test-all.sh molecule
#     (how many jobs of the pool run at a time; which of them run, by label)
# When the stages include molecule, what it needs (tests/doubles/build-repos.sh,
# which builds the build root and the toolkit packages, then the node images of
# molecule and extra_runs) is built in the background from the first stage after
# host on, while the Python stages keep the CPU busy: the prebuild. Its log goes
# to build/prebuild.log and is printed when the first stage that needs it
# (molecule, interrupt or chroot) waits for it; its wall time has its own line in
# the summary. The scripts are cached and lock what they build, so a stage whose
# prebuild failed builds again itself, and shows the error there.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
export PATH="$top/.venv/bin:$PATH" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
# Nothing installed by hand may help a run: the Ansible tools find this
# collection only through build/collections, which the rig makes from the
# checkout, and keep their state in an ANSIBLE_HOME that this run creates. A
# copy under ~/.ansible/collections (or any other default path) is never read.
ansible_home=$(mktemp -d)
prebuild_pid=
trap 'rm -rf "$ansible_home"; [ -z "$prebuild_pid" ] || kill -- -"$prebuild_pid" 2>/dev/null' EXIT
export ANSIBLE_HOME=$ansible_home ANSIBLE_COLLECTIONS_PATH=$top/build/collections
tests/rig/collection-tree.sh

summary=()
passed=0
failed=0
stage() { # name command...
  local name=$1 start rc
  shift
  printf '\n===== %s =====\n' "$name"
  start=$(date +%s)
  "$@"
  rc=$?
  summary+=("$(printf '%-28s %5ss  %s' "$name" $(($(date +%s) - start)) "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc)")")")
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  return $rc
}

units() { tests/rig/units.sh "$@"; }
lint() {
  local rc=0
  yamllint -s . || rc=1
  ansible-lint --profile production --offline -f pep8 || rc=1
  tests/rig/role-readme.py --check roles/* || rc=1
  tests/rig/plugin-tables.py --check || rc=1
  return $rc
}
sanity() {
  local tree pip_version
  pip_version=$(python -c 'import re, ansible_test._internal.python_requirements as r, inspect
print(re.search(r"pip=.([0-9.]+).", inspect.getsource(r)).group(1))') &&
    mkdir -p ~/.ansible/test/cache &&
    cp tests/rig/get_pip.py ~/.ansible/test/cache/get_pip_"${pip_version//./_}".py &&
    tree=$(tests/rig/collection-tree.sh --sanity) &&
    (cd "$tree" && PIP_CERT=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} ansible-test sanity --python 3.11 --requirements --color no 2>&1 | grep -v '^WARNING: Location')
  return "${PIPESTATUS[0]}"
}
# The collection as Galaxy would ship it, its docs, and what AWX needs: the
# execution-environment metadata ansible-builder reads from the installed
# collection (introspect), the EE definition of extras/awx turned into a build
# context (create; building the image needs a registry), and the wrapper
# playbooks, which must resolve the collection's playbooks.
build() {
  local dest listing deps
  dest=$(mktemp -d) &&
    ansible-galaxy collection build --force --output-path build/dist . &&
    ansible-galaxy collection install --offline --no-deps --force -p "$dest" build/dist/accel-nodes-*.tar.gz &&
    listing=$(ANSIBLE_COLLECTIONS_PATH="$dest" ansible-doc -l accel.nodes) &&
    echo "$listing" && grep -q '^accel\.nodes\.' <<<"$listing" &&
    ANSIBLE_COLLECTIONS_PATH="$dest" ansible-doc -t callback accel.nodes.fleet_report >/dev/null &&
    antsibull-changelog lint &&
    deps=$(ansible-builder introspect --sanitize "$dest") && echo "$deps" &&
    grep -q "coreutils  # from collection accel.nodes" <<<"$deps" &&
    (cd extras/awx && ansible-builder create -f execution-environment.yml --context "$dest/ee-context") &&
    grep -q 'ansible-galaxy collection install .* -r requirements.yml' "$dest/ee-context/Dockerfile" &&
    ANSIBLE_COLLECTIONS_PATH="$dest" ansible-playbook --syntax-check -i localhost, extras/awx/site.yml extras/awx/validate.yml extras/awx/diagnose.yml
}
# Which scenario runs on which node (README, "What was run where"): every
# scenario on Debian 12 (docker.io 20.10, containerd 1.6) with the toolkit's
# default pin, and these besides: the toolkit scenario with the older pin; site
# on the node with the newest engines (docker.io 28.5, containerd 2.1, runc 1.3,
# cgroup v2; site on Debian 13, docker.io 26.1, runs by hand since 2026-11-28:
# tests/rig/molecule.sh --node trixie site test, to keep CI inside 90 minutes,
# tests/benchmarks/README.md); and the
# containerd scenario, with its pods through the CRI, on Debian 13 (containerd
# 1.7) and on the newest engines (containerd 2.1), there on the host's cgroup
# hierarchy: containerd gives every pod sandbox CPU shares, and the rig's
# cgroup v2 tree has no cpu controller (tests/rig/molecule.sh).
# "scenario node[:cgroupns] [ansible args]".
extra_runs=(
  "nvidia_container_toolkit bookworm -e nvidia_container_toolkit_version=1.17.8-1"
  "site forky-engines"
  "nvidia_container_toolkit_containerd trixie"
  "nvidia_container_toolkit_containerd forky-engines:host"
)
# The Molecule scenarios, the extra runs, the kill tier and the chroot bake run
# as jobs of a pool, ACCEL_TEST_LANES (default 2) at a time: one run of Ansible
# against its nodes leaves a core idle most of the time (it waits on the
# nodes' dpkg, systemd and Docker), and the suite must stay inside CI's 90
# minutes (tests/benchmarks/README.md, "The suite in lanes"). Each job has its
# own Molecule ephemeral directory and node-name prefix, so that two runs of
# one scenario never share nodes or an inventory. Its output goes to
# build/logs/JOB.log and is printed in whole when the job ends; the longest
# jobs start first.
pool=()     # "label|prefix|command ..." of the jobs to run
pool_add() { # label prefix command...
  local IFS=' '
  # ACCEL_TEST_ONLY, an extended regular expression, keeps the jobs whose label matches.
  [[ "$1" =~ ${ACCEL_TEST_ONLY:-.} ]] && pool+=("$1|$2|${*:3}")
}
molecule_jobs() {
  local s run args slug
  for s in molecule/*/molecule.yml; do
    s=$(basename "$(dirname "$s")")
    pool_add "molecule $s" accel tests/rig/molecule.sh "$s" test
  done
  for run in "${extra_runs[@]}"; do
    read -r -a args <<<"$run"
    slug=${args[1]%%:*}
    # Without ansible-playbook arguments, an extra run leaves out check mode on
    # the fresh node (tests/rig/molecule.sh test-without-check): it reads no
    # engine, and the scenario's run on bookworm covers it.
    if [ ${#args[@]} -gt 2 ]; then
      pool_add "molecule ${args[0]} @${args[1]} ${args[*]:2}" "${slug%%-*}" \
        tests/rig/molecule.sh --node "${args[1]}" "${args[0]}" test -- "${args[@]:2}"
    else
      pool_add "molecule ${args[0]} @${args[1]}" "${slug%%-*}" \
        tests/rig/molecule.sh --node "${args[1]}" "${args[0]}" test-without-check
    fi
  done
}
# The jobs that take longest, longest first, from the timing summary of a run
# of the suite (the README's test command); the others follow in the order added.
long_jobs=("chroot bake" "interrupted runs" "molecule site" "molecule site @forky-engines"
  "molecule fleet" "molecule neuron_device" "molecule nvidia_driver")
pool_sort() {
  local sorted=() rest=() job name
  for name in "${long_jobs[@]}"; do
    for job in "${pool[@]}"; do [ "${job%%|*}" != "$name" ] || sorted+=("$job"); done
  done
  for job in "${pool[@]}"; do
    [[ " $(printf '|%s|' "${long_jobs[@]}") " == *"|${job%%|*}|"* ]] || rest+=("$job")
  done
  pool=("${sorted[@]}" "${rest[@]}")
}
pool_run() {
  local lanes=${ACCEL_TEST_LANES:-2} logs=$top/build/logs next=0 running=0 pid job label prefix cmd slug
  local -A label_of start_of log_of
  mkdir -p "$logs"
  printf '\n===== pool: %s jobs, %s at a time (logs: %s) =====\n' "${#pool[@]}" "$lanes" "$logs"
  while [ "$next" -lt "${#pool[@]}" ] || [ "$running" -gt 0 ]; do
    while [ "$running" -lt "$lanes" ] && [ "$next" -lt "${#pool[@]}" ]; do
      IFS='|' read -r label prefix cmd <<<"${pool[$next]}"
      slug=$(tr -c 'A-Za-z0-9_.=-' _ <<<"$label")
      slug=${slug%_}
      mkdir -p "$ansible_home/molecule/$slug"
      # shellcheck disable=SC2086 # cmd is a list of words without spaces in them
      ACCEL_NODE_PREFIX=$prefix MOLECULE_EPHEMERAL_DIRECTORY=$ansible_home/molecule/$slug \
        $cmd >"$logs/$slug.log" 2>&1 </dev/null &
      pid=$!
      label_of[$pid]=$label start_of[$pid]=$(date +%s) log_of[$pid]=$logs/$slug.log
      echo "pool: started $label"
      next=$((next + 1)) running=$((running + 1))
    done
    wait -n -p pid
    rc=$?
    running=$((running - 1))
    printf '\n===== %s =====\n' "${label_of[$pid]}"
    cat "${log_of[$pid]}"
    summary+=("$(printf '%-28s %5ss  %s' "${label_of[$pid]}" $(($(date +%s) - ${start_of[$pid]})) "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc)")")")
    if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  pool=()
}
molecule_ready() {
  tests/rig/node-image.sh bookworm >/dev/null && tests/doubles/build-repos.sh >/dev/null && return 0
  summary+=("$(printf '%-28s %5s   %s' "molecule (image, repos)" - "FAILED: no scenario ran")")
  failed=$((failed + 1))
  return 1
}

# The kill tier (tests/interrupt/run.sh): converge runs killed at fixed points on
# the nodes of the scenario site, and the runs after them must finish the job.
interrupt() {
  local image repos
  image=$(tests/rig/node-image.sh) && repos=$(tests/doubles/build-repos.sh) || return 1
  ACCEL_NODE_IMAGE=$image ACCEL_REPOS_DIR=$repos tests/interrupt/run.sh
}

# The prebuild (see the top): in a session of its own, so that the EXIT trap can
# stop all of it if this script ends before waiting for it; niced, so that the
# stages beside it keep the CPU they need.
prebuild_log=$top/build/prebuild.log
prebuild_start() {
  local nodes=(bookworm) run args
  for run in "${extra_runs[@]}"; do
    read -r -a args <<<"$run"
    [[ " ${nodes[*]} " == *" ${args[1]%%:*} "* ]] || nodes+=("${args[1]%%:*}")
  done
  echo "prebuild: tests/doubles/build-repos.sh, node images ${nodes[*]}, in the background (log: $prebuild_log)"
  prebuild_started=$(date +%s)
  # shellcheck disable=SC2016 # the script's variables are its own
  setsid nice -n 10 bash -c 'rc=0
    tests/doubles/build-repos.sh || rc=$?
    for node; do tests/rig/node-image.sh "$node" || rc=$?; done
    echo "prebuild: done in $SECONDS s, rc $rc"
    exit $rc' prebuild "${nodes[@]}" >"$prebuild_log" 2>&1 </dev/null &
  prebuild_pid=$!
}
prebuild_wait() {
  local rc secs
  [ -n "$prebuild_pid" ] || return 0
  printf '\n===== prebuild (background) =====\n'
  wait "$prebuild_pid"
  rc=$?
  prebuild_pid=
  cat "$prebuild_log"
  secs=$(tail -n 1 "$prebuild_log" | sed -n 's/^prebuild: done in \([0-9]*\) s, rc [0-9]*$/\1/p')
  [ -n "$secs" ] || secs=$(($(date +%s) - prebuild_started))
  # Not counted as a stage: a stage that needs what failed here builds it again.
  summary+=("$(printf '%-28s %5ss  %s' "prebuild (background)" "$secs" \
    "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc; the stages that need it build again)")")")
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(host venv units units-2.18 lint sanity build molecule interrupt chroot)
prebuild=0
[[ " ${stages[*]} " == *" molecule "* ]] && prebuild=1
for s in "${stages[@]}"; do
  # The prebuild needs the host set up (Docker, debootstrap), not the venv.
  if [ "$prebuild" = 1 ] && [ "$s" != host ]; then
    prebuild=0
    prebuild_start
  fi
  case $s in molecule | interrupt | chroot) prebuild_wait ;; *) [ ${#pool[@]} -eq 0 ] || { pool_sort; pool_run; } ;; esac
  case $s in
    host) stage host tests/rig/host.sh ;;
    venv) stage venv tests/rig/venv.sh .venv requirements/dev.txt ;;
    units) stage "units (core 2.19)" units ;;
    units-2.18) stage "units (core 2.18)" units --core-2.18 ;;
    lint) stage lint lint ;;
    sanity) stage sanity sanity ;;
    build) stage "build + ansible-doc" build ;;
    # The pool's jobs (above) run together, once the stages before them ended.
    molecule) ! molecule_ready || molecule_jobs ;;
    interrupt) pool_add "interrupted runs" kill interrupt ;;
    # bake.yml through a real chroot (tests/chroot/README.md), on build hosts
    # with accelerators of another kind and without any: the images must match.
    chroot) pool_add "chroot bake" accel tests/chroot/bake.sh g5 g5-nodev inf2 inf2-nodev ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
done
[ ${#pool[@]} -eq 0 ] || { pool_sort; pool_run; }

printf '\n===== timing summary =====\n'
printf '%s\n' "${summary[@]}"
echo "stages: $passed passed, $failed failed"
[ $failed -eq 0 ]
