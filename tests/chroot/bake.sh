#!/usr/bin/env bash
# Bake images through a real chroot, as Packer's amazon-chroot builder or a
# "mount the volume, chroot, provision" script does (issue 16), and check that
# the image is baked for ITS kernels and for the TARGET instance type, never
# for the build host's kernel or devices.
#
#   tests/chroot/bake.sh [CASE ...]      (default: g5 inf2)
#
# Cases (target instance type / what the build host shows / connection):
#   g5         g5.xlarge on a build host with 8 V100s (facts fixture p3.16xlarge),
#              -c community.general.chroot: open kernel modules, nvidia-open.
#   inf2       inf2.xlarge on a build host with Inf1 devices (fixture inf1.6xlarge),
#              -c chroot: the current driver 2.31.7.0, not the Inf1 pin 2.24.*.
#   g5-nodev, inf2-nodev
#              the same targets on a build host without accelerators; when a
#              case and its -nodev twin both ran, their images must match.
#
# Each case: a fresh copy of the cached root (tests/chroot/root.sh: bookworm
# with two real Debian kernels, none of them this machine's), the mounts of
# amazon-chroot's defaults, the fixture's sys tree over /sys, the repository
# doubles at /srv/accel-repos; then bake.yml in check mode (no managed file
# may change), for real, and again (changed=0); then the image is checked.
# Every mount is undone on exit, also on failure.
#
# Environment:
#   ACCEL_CHROOT_LOGS      where the logs go (default build/chroot/logs)
#   ACCEL_CHROOT_CLEANUPS  check (default) or warn: the leftovers of issue 16
#                          item 5 fail the run, or are only reported
#   ACCEL_CHROOT_EXTRA_ARGS  more ansible-playbook arguments for every run, for
#                          trying things out (for example -e neuron_driver_kernel_version=...)
# ok only prints, so "test && ok || fail" never runs both; dpkg-query's
# formats are meant for dpkg-query, not the shell.
# shellcheck disable=SC2015,SC2016
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
export PATH="$top/.venv/bin:$PATH" PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
# As tests/rig/test-all.sh: the collection comes only from this checkout, and
# Ansible keeps its state in a home of its own.
if [ -z "${ANSIBLE_HOME:-}" ]; then
  ANSIBLE_HOME=$(mktemp -d)
  own_ansible_home=$ANSIBLE_HOME
fi
export ANSIBLE_HOME ANSIBLE_COLLECTIONS_PATH=$top/build/collections
export ANSIBLE_PIPELINING=true ANSIBLE_INTERPRETER_PYTHON=auto_silent ANSIBLE_CALLBACK_RESULT_FORMAT=yaml

logs=$(realpath -m "${ACCEL_CHROOT_LOGS:-$top/build/chroot/logs}")
cleanups_mode=${ACCEL_CHROOT_CLEANUPS:-check}
prefix=/var/tmp/accel-chroot-bake.
fixtures=$top/tests/fixtures/facts/roots
host_kernel=$(uname -r)

[ "$(id -u)" -eq 0 ] || { echo "bake.sh: chroot and mount need root" >&2; exit 2; }
[ $# -gt 0 ] || set -- g5 inf2
for c in "$@"; do
  case $c in g5 | inf2 | g5-nodev | inf2-nodev) ;; *) echo "bake.sh: unknown case $c" >&2; exit 2 ;; esac
done

failures=()
warnings=()
fail() { failures+=("$case: $*"); echo "FAIL: $case: $*"; }
warn() { warnings+=("$case: $*"); echo "WARN: $case: $*"; }
ok() { echo "ok: $case: $*"; }

# ----- mounts ---------------------------------------------------------------
work=
mounts=()
mnt() { # mount ARGS... TARGET: mount, and remember the target for undoing
  mount "$@"
  mounts+=("${!#}")
}
under_work() { [ -n "$work" ] && awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts; }
unmount_all() {
  local i left
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || :
  done
  mounts=()
  # Anything mounted below the work directory by someone else (a package
  # script, a binfmt handler): lazily, deepest first.
  while read -r left; do
    [ -z "$left" ] || umount -l "$left" 2>/dev/null || :
  done < <(under_work | sort -r)
}
remove_work() {
  [ -n "$work" ] && [ -d "$work" ] || return 0
  if [ -n "$(under_work)" ]; then
    echo "bake.sh: mounts remain under $work, not removing it:" >&2
    under_work >&2
    return 1
  fi
  rm -rf --one-file-system "$work"
  work=
}
on_exit() {
  local rc=$?
  unmount_all
  remove_work || rc=1
  [ -z "${own_ansible_home:-}" ] || rm -rf "$own_ansible_home"
  exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# One run at a time on a machine: a second one waits. Under the lock, a work
# directory that exists is one a killed run left: undo its mounts, remove it.
exec 9>"${prefix}lock"
flock -n 9 || { echo "bake.sh: another chroot bake runs on this machine; waiting for it"; flock 9; }
for stale in "$prefix"*; do
  [ -d "$stale" ] || continue
  work=$stale
  unmount_all
  remove_work || exit 1
done

# ----- what every case needs ------------------------------------------------
tests/rig/collection-tree.sh
repos=$(tests/doubles/build-repos.sh)
tarball=$(tests/chroot/root.sh)
mkdir -p "$logs"

# The inventory variables of molecule/bake (and accel_test_repos of the shared
# Molecule config), so the chroot bake points the roles at the same doubles.
# The kernel ones are left out (*_kernel_version, *_kernel_headers_package):
# they stand in for a kernel the Molecule node lacks, and this image has real
# kernels, which the roles must find by themselves.
# The lookups in them read ACCEL_REPOS_DIR and MOLECULE_PROJECT_DIRECTORY.
export ACCEL_REPOS_DIR=$repos MOLECULE_PROJECT_DIRECTORY=$top
group_vars=$(python - <<'EOF'
import yaml
shared = yaml.safe_load(open('.config/molecule/config.yml'))
bake = yaml.safe_load(open('molecule/bake/molecule.yml'))
merged = dict(shared['provisioner']['inventory']['group_vars']['all'])
merged.update(bake['provisioner']['inventory']['group_vars']['all'])
for key in [k for k in merged if k.endswith(('_kernel_version', '_kernel_headers_package'))]:
    del merged[key]
print(yaml.safe_dump(merged, default_flow_style=False, sort_keys=True, width=1000))
EOF
)

# ----- one case -------------------------------------------------------------
chroot_mounts() { # root sys-tree
  local root=$1 sys=$2
  # amazon-chroot's default chroot_mounts, in its order (packer-plugin-amazon,
  # docs/builders/chroot.mdx, "Chroot Mounts").
  mnt -t proc proc "$root/proc"
  mnt -t sysfs sysfs "$root/sys"
  mnt --bind /dev "$root/dev"
  mnt -t devpts devpts "$root/dev/pts"
  if mount -t binfmt_misc binfmt_misc "$root/proc/sys/fs/binfmt_misc" 2>/dev/null; then
    mounts+=("$root/proc/sys/fs/binfmt_misc")
  else
    echo "note: binfmt_misc cannot be mounted on this machine; the bake does not use it"
  fi
  # The build host's devices: the facts fixture's sys tree over the chroot's
  # /sys, read-only, so the roles see 8 V100s or 4 Inferentia devices where a
  # real build host would show its own.
  mnt --bind "$sys" "$root/sys"
  mount -o remount,bind,ro "$root/sys"
  # The repository doubles, where Molecule's nodes have them.
  mkdir -p "$root/srv/accel-repos"
  mnt --bind "$repos" "$root/srv/accel-repos"
  mount -o remount,bind,ro "$root/srv/accel-repos"
}

snapshot() { # root: what --check must not touch
  (cd "$1" && find etc usr var/lib opt -xdev -printf '%p\t%y\t%s\t%T@\t%m\t%l\n' 2>/dev/null | sort) || :
}

# Processes whose root directory is the chroot: anything the bake started.
chroot_processes() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$1" ] && echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
  done
  return 0
}

recap() { # log: "changed failed unreachable" of the PLAY RECAP line
  awk '/^PLAY RECAP/ {r = 1; next} r && /ok=/ {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    print v["changed"], v["failed"], v["unreachable"]; exit }' "$1"
}

playbook() { # step log-name ARGS...
  local step=$1 log=$logs/$case-$1.log rc
  shift
  echo "----- $case: ansible-playbook $* ($step)"
  set +e
  # shellcheck disable=SC2086 # ACCEL_CHROOT_EXTRA_ARGS is a list of words
  ansible-playbook -i "$inventory" -c "$connection" playbooks/bake.yml \
    -e accel_nodes_bake_instance_type="$instance_type" ${ACCEL_CHROOT_EXTRA_ARGS:-} "$@" >"$log" 2>&1
  rc=$?
  set -e
  read -r changed failed unreachable < <(recap "$log"; echo)
  echo "----- $case $step: rc=$rc changed=${changed:-?} failed=${failed:-?} unreachable=${unreachable:-?} (log: $log)"
  # What the roles decided, and why.
  awk '/^TASK \[.*Show the decision/ {d = 1; next} d && /^ *msg:/ {m = 1}
       m && /^$/ {d = m = 0} m {sub(/^ */, ""); printf "%s ", $0} END {if (m) print ""}' "$log" |
    sed 's/^/decision: /;s/ $//' || :
  echo
  if [ "$rc" -ne 0 ]; then
    grep -E -A12 '^(fatal|failed):' "$log" | head -40 || :
  fi
  # Nothing the bake started may outlive it: a daemon of the image would run
  # on the build host. (Counting dockerd on the host says nothing on a machine
  # whose Molecule nodes run Docker of their own.)
  local procs
  procs=$(chroot_processes "$root")
  [ -z "$procs" ] && ok "$step left no process running in the chroot" || fail "$step left processes running in the chroot: $procs"
  [ "$rc" -eq 0 ] && [ "${failed:-1}" = 0 ] && [ "${unreachable:-1}" = 0 ]
}

in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# The version of an installed package, held ("hi", as the roles leave them) or not.
package_version() { in_root dpkg-query -W -f '${db:Status-Abbrev}${Version}' "$1" 2>/dev/null | sed -n 's/^[hi]i *//p' || :; }

verify_image() { # bake-succeeded
  local kernels k mod_name mod_ver mod_file want_pkgs absent_pkgs p v wanted dkms link f
  kernels=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort)
  echo "----- $case: image kernels: $(tr '\n' ' ' <<<"$kernels")(build host: $host_kernel)"
  case $instance_type in
    g5.*)
      mod_name=nvidia-current-open mod_ver=580.95.05 mod_file='nvidia*.ko*'
      want_pkgs="nvidia-open=580.95.05-1 nvidia-kernel-open-dkms=580.95.05-1 nvidia-container-toolkit=1.20.0-1 docker.io=*"
      absent_pkgs="cuda-drivers nvidia-kernel-dkms"
      ;;
    inf2.*)
      mod_name=aws-neuronx mod_ver=2.31.7.0 mod_file='neuron.ko*'
      want_pkgs="aws-neuronx-dkms=2.31.7.0 aws-neuronx-tools=2.33.38.0 aws-neuronx-oci-hook=2.19.65.0 docker.io=*"
      absent_pkgs="aws-neuron-runtime-base"
      ;;
  esac

  # No module of the image is built for the build host's kernel (checked
  # even when the bake failed: a failed bake may have built one already).
  dkms=$(in_root dkms status 2>/dev/null || :)
  if grep -F ", $host_kernel," <<<"$dkms" >/dev/null; then fail "dkms lists a module for the build host's kernel $host_kernel"; fi
  if [ -e "$root/lib/modules/$host_kernel" ]; then
    fail "/lib/modules/$host_kernel (the build host's kernel) exists in the image: $(find "$root/lib/modules/$host_kernel" -type f | sed "s|^$root||" | tr '\n' ' ')"
  else
    ok "nothing under /lib/modules/$host_kernel"
  fi
  while read -r k; do
    grep -qxF "$k" <<<"$kernels" || fail "/lib/modules/$k belongs to no kernel of the image"
  done < <(find "$root/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n')

  if [ "$1" != true ]; then
    echo "----- $case: the bake failed; the image's contents are not checked"
    return 0
  fi

  # The driver flavour and the pins fit the target, not the build host.
  for p in $want_pkgs; do
    v=$(package_version "${p%%=*}")
    wanted=${p#*=}
    # shellcheck disable=SC2053 # wanted may be a glob
    if [ -n "$v" ] && [[ $v == $wanted ]]; then ok "${p%%=*} $v"; else fail "${p%%=*} is '${v:-not installed}', wanted $wanted"; fi
  done
  for p in $absent_pkgs; do
    v=$(package_version "$p")
    [ -z "$v" ] && ok "$p not installed" || fail "$p $v is installed: the build host's devices picked it"
  done

  # DKMS built the module for every kernel of the image, and for nothing else.
  echo "----- $case: dkms status in the image:"
  echo "$dkms"
  for k in $kernels; do
    if grep -qxF "$mod_name/$mod_ver, $k, x86_64: installed" <<<"$dkms"; then ok "dkms: $mod_name/$mod_ver installed for $k"; else fail "dkms: $mod_name/$mod_ver not installed for the image's kernel $k"; fi
    f=$(find "$root/lib/modules/$k/updates/dkms" -maxdepth 1 -name "$mod_file" 2>/dev/null | head -1 || :)
    [ -n "$f" ] && ok "module file ${f#"$root"}" || fail "no $mod_file under /lib/modules/$k/updates/dkms"
  done
  # The first-boot unit, enabled through its wants link; nothing of the build.
  link=$(readlink "$root/etc/systemd/system/multi-user.target.wants/accel-nodes-validate.service" || :)
  [ "$link" = /etc/systemd/system/accel-nodes-validate.service ] && ok "first-boot unit enabled" ||
    fail "wants link of accel-nodes-validate.service is '${link:-missing}'"
  [ -f "$root/etc/systemd/system/accel-nodes-validate.service" ] || fail "no accel-nodes-validate.service"
  [ "$(stat -c %a "$root/usr/local/libexec/accel-nodes-validate" 2>/dev/null)" = 755 ] || fail "no executable /usr/local/libexec/accel-nodes-validate"
  if [ -f "$root/etc/machine-id" ] && [ ! -s "$root/etc/machine-id" ]; then ok "machine-id empty"; else fail "/etc/machine-id is not an empty file"; fi
  for f in /var/lib/dbus/machine-id /var/lib/accel-nodes/validation.json /var/lib/accel-nodes/state.json \
    /etc/kubernetes/node-feature-discovery/features.d/accel-nodes /usr/sbin/policy-rc.d; do
    [ ! -e "$root$f" ] && ok "$f gone" || fail "$f is in the image"
  done
  f=$(find "$root/var/cache/apt/archives" -name '*.deb' -printf '%f ' | head -c 300 || :)
  [ -z "$f" ] || fail "downloaded packages stay in the image: $f"

  check_cleanups

  # What decides "the same image": packages, DKMS, module files.
  {
    in_root dpkg-query -W -f '${Package} ${Version}\n'
    echo "$dkms"
    (cd "$root" && find usr/lib/modules -path '*/updates/*' -type f | sort)
  } >"$logs/$case.manifest"
}

# ----- issue 16 item 5: leftovers of the build ------------------------------
# What playbooks/bake.yml promises (its header, "What the image keeps"):
# Ansible's working directory and needrestart's state are removed, needrestart
# is kept out of the image, and apt's and dpkg's logs stay as the image's own
# package history.
check_cleanups() {
  local f report=fail
  [ "$cleanups_mode" = check ] || report=warn
  for f in /root/.ansible/tmp /run/needrestart /etc/apt/preferences.d/accel-nodes-bake; do
    [ ! -e "$root$f" ] && ok "$f gone" || $report "leftover $f"
  done
  [ -z "$(package_version needrestart)" ] && ok "needrestart not installed" ||
    $report "needrestart is installed (a Recommends of docker.io): its dpkg hook looks at the build host's processes"
  [ -n "$(package_version apparmor)" ] && ok "apparmor installed (docker.io's other Recommends stay)" ||
    $report "apparmor is not installed: the bake dropped more Recommends of docker.io than needrestart"
}

run_case() {
  local sys changed failed unreachable before after fixture
  case $case in
    g5*) instance_type=g5.xlarge fixture=p3.16xlarge connection=community.general.chroot ;;
    inf2*) instance_type=inf2.xlarge fixture=inf1.6xlarge connection=chroot ;;
  esac
  echo
  echo "===== chroot bake $case: $instance_type, connection $connection, build host $([[ $case == *-nodev ]] && echo 'without accelerators' || echo "showing $fixture")"
  work=$(mktemp -d "${prefix}XXXXXX")
  root=$work/root
  mkdir "$root"
  rm -f "$logs/$case.manifest"
  zstd -q -d -c "$tarball" | tar -C "$root" --numeric-owner --xattrs -x

  if [[ $case == *-nodev ]]; then
    sys=$work/sys-without-accelerators
    mkdir -p "$sys/bus/pci/devices" "$sys/class"
  else
    sys=$fixtures/$fixture/sys
  fi

  # The image was booted before (its source AMI, or an earlier bake of it):
  # it has a machine-id, a D-Bus machine-id, a report and a state record.
  printf '%s\n' 0123456789abcdef0123456789abcdef >"$root/etc/machine-id"
  mkdir -p "$root/var/lib/dbus" "$root/var/lib/accel-nodes" "$root/etc/kubernetes/node-feature-discovery/features.d"
  for f in /var/lib/dbus/machine-id /var/lib/accel-nodes/validation.json /var/lib/accel-nodes/state.json \
    /etc/kubernetes/node-feature-discovery/features.d/accel-nodes; do
    echo "earlier boot's leftover" >"$root$f"
  done
  # oci_hook mode installs oci-add-hooks from a URL (molecule/bake's prepare
  # publishes the double the same way).
  install -D -m 0644 tests/doubles/bin/oci-add-hooks "$root/var/lib/accel-test/dist/oci-add-hooks"

  chroot_mounts "$root" "$sys"
  # amazon-chroot's copy_files default: the build host's resolver.
  cp /etc/resolv.conf "$root/etc/resolv.conf"

  inventory=$work/inventory
  mkdir -p "$inventory/group_vars"
  printf '[bake]\n%s\n' "$root" >"$inventory/hosts"
  echo "$group_vars" >"$inventory/group_vars/all.yml"

  before=$(snapshot "$root")
  if playbook check --check; then ok "check mode ran"; else fail "check mode failed (log: $logs/$case-check.log)"; fi
  after=$(snapshot "$root")
  if [ "$before" = "$after" ]; then
    ok "check mode changed no file under /etc /usr /var/lib /opt"
  else
    fail "check mode changed files: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | cut -f1 | sort -u | head -20 | tr '\n' ' ')"
  fi

  local bake_ok=false
  if playbook converge; then
    bake_ok=true
    ok "bake ran"
    if playbook idempotence; then
      read -r changed failed unreachable < <(recap "$logs/$case-idempotence.log"; echo)
      [ "$changed" = 0 ] && ok "second run changed=0" ||
        fail "second run changed=$changed: $(grep -E '^changed:' "$logs/$case-idempotence.log" -B2 | grep '^TASK' | tr '\n' ' ')"
    else
      fail "second run failed (log: $logs/$case-idempotence.log)"
    fi
  else
    fail "bake failed (log: $logs/$case-converge.log): $(grep -E -A12 '^fatal' "$logs/$case-converge.log" | grep -E -m1 '"msg"|^ *msg:' | sed 's/^ *//')"
  fi

  # The hardware comes from the target instance type (issue 16 item 3): the
  # bake says what it decided, and from where.
  local decision want
  case $instance_type in
    g5.*) want="$instance_type: NVIDIA driver branch 580, open kernel modules (instance type $instance_type has 1 NVIDIA A10G); the build host's PCI bus was not read" ;;
    inf2.*) want="$instance_type: aws-neuronx-dkms 2.31.7.0 (the current driver line); the build host's PCI bus was not read" ;;
  esac
  decision=$(awk '/^TASK \[Say what the image got\]/ {d = 1; next} d && /msg:/ {m = 1}
       m && /^$/ {exit} m {sub(/^ *(msg: *)?/, ""); printf "%s ", $0}' "$logs/$case-converge.log" 2>/dev/null |
    sed "s/ *\$//; s/^'//; s/'\$//; s/''/'/g" || :)
  echo "----- $case: the bake said: ${decision:-nothing}"
  if [ "$decision" = "$want" ]; then ok "decided from the catalog: $decision"; else fail "the bake's decision is '${decision:-missing}', wanted '$want'"; fi

  verify_image "$bake_ok"

  unmount_all
  remove_work
}

start=$(date +%s)
for case in "$@"; do
  run_case
done

# A bake on a build host with accelerators makes the same image as on one
# without them.
for case in g5 inf2; do
  # Both ran now, and both bakes got through (a failed one wrote no manifest).
  if [[ " $* " == *" $case "* && " $* " == *" $case-nodev "* ]] &&
    [ -f "$logs/$case.manifest" ] && [ -f "$logs/$case-nodev.manifest" ]; then
    if diff -u "$logs/$case-nodev.manifest" "$logs/$case.manifest" >"$logs/$case.manifest.diff"; then
      ok "same image as on a build host without accelerators"
    else
      fail "the image differs from the one baked without accelerators: $(grep '^[-+][^-+]' "$logs/$case.manifest.diff" | head -10 | tr '\n' ' ')"
    fi
  fi
done

echo
echo "===== chroot tier: $(($(date +%s) - start))s, ${#failures[@]} failures, ${#warnings[@]} warnings"
for f in "${failures[@]}"; do echo "FAIL: $f"; done
for f in "${warnings[@]}"; do echo "WARN: $f"; done
[ ${#failures[@]} -eq 0 ]
