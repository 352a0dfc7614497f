#!/usr/bin/env bash
# The real-GPU tier, on the GPU host (tests/hardware/README.md). Runs a Debian 12
# node with systemd as its PID 1 where the host's PID 1 is not systemd, binds the
# host's GPU devices and driver root into it, and runs the collection's own
# playbooks there with the local connection:
#   site.yml --check on the fresh node, site.yml (first configuration, with the
#   opt-in state record), site.yml again as by default (full re-run, every role:
#   must report changed=0), site.yml with the state record again (unchanged
#   re-run), validate.yml, and a facts-only play.
# Prints each run's changed count and wall time and the validation report, and
# writes them under OUTDIR.
#
#   tests/hardware/run.sh PARTS_DIR PAYLOAD_DIR OUTDIR [VARS_FILE]
#
# PARTS_DIR holds some or all of node-root.sh's parts; they are kept under
# $ACCEL_HW_CACHE (default /var/tmp/accel-hw) until all are there, so the root can
# travel over several calls. With parts missing, the script says which and stops.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
parts_in=$1 payload_in=$2 out=$3 vars_file=${4:-$repo/tests/hardware/vars.yml}
cache=${ACCEL_HW_CACHE:-/var/tmp/accel-hw}
root=$cache/root
node=accel-gpu-node
logs=$cache/logs
rm -rf "$logs" && mkdir -p "$cache/parts" "$out" "$logs/cuda"
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$out/summary.txt" >&2; }

# -- the node root, possibly over several calls -----------------------------------
# A GPU host without zstd uses the one split.sh puts beside the first parts.
if [ -d "$parts_in/tools" ]; then cp -r "$parts_in/tools" "$cache/"; fi
if ! command -v zstd >/dev/null; then
  zstd() { LD_LIBRARY_PATH=$cache/tools "$cache/tools/zstd" "$@"; }
fi
if [ -d "$parts_in" ]; then cp -n "$parts_in"/root.tar.zst.part-* "$parts_in/SHA256SUMS" "$cache/parts/" 2>/dev/null || :; fi
[ -f "$cache/parts/SHA256SUMS" ] || { log "no SHA256SUMS yet under $cache/parts"; exit 3; }
missing=$(cd "$cache/parts" && grep -o 'root.tar.zst.part-[0-9]*' SHA256SUMS | while read -r p; do [ -f "$p" ] || echo "$p"; done)
if [ -n "$missing" ]; then
  log "node root parts still missing: $(echo "$missing" | tr '\n' ' ')(kept: $(cd "$cache/parts" && echo root.tar.zst.part-*))"
  exit 3
fi
want=$(awk '/ root.tar.zst$/ {print $1}' "$cache/parts/SHA256SUMS")
if [ "$(cat "$root.sha256" 2>/dev/null)" != "$want" ]; then
  (cd "$cache/parts" && grep part- SHA256SUMS | sha256sum -c --quiet)
  rm -rf "$root" && mkdir -p "$root" && chmod 0755 "$root"
  cat "$cache"/parts/root.tar.zst.part-* | zstd -dc | tar -C "$root" -x
  echo "$want" >"$root.sha256"
  log "node root unpacked ($(du -sh "$root" | cut -f1))"
fi

# -- what travels with the checkout: ansible-core, collections, toolkit, images -----
rm -rf "$root/opt/accel-nodes" && mkdir -p "$root/opt/accel-nodes/src"
zstd -dc "$payload_in/payload.tar.zst" | tar -C "$root/opt/accel-nodes" -x
ln -sfn /opt/accel-nodes/src "$root/opt/accel-nodes/collections/ansible_collections/accel"/nodes 2>/dev/null ||
  { mkdir -p "$root/opt/accel-nodes/collections/ansible_collections/accel" &&
    ln -sfn /opt/accel-nodes/src "$root/opt/accel-nodes/collections/ansible_collections/accel/nodes"; }
cp "$vars_file" "$root/opt/accel-nodes/vars.yml"
echo "$node" >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$node" >"$root/etc/hosts"

# -- the driver root, seen from the node ----------------------------------------------
driver_root=${ACCEL_HW_DRIVER_ROOT:-}
if [ -z "$driver_root" ]; then
  for d in /usr/local/nvidia /usr; do [ -x "$d/bin/nvidia-smi" ] && { driver_root=$d; break; }; done
fi
[ -n "$driver_root" ] || { log "no nvidia-smi under /usr/local/nvidia or /usr: no driver on this host"; exit 2; }
log "host: $(uname -r); driver root $driver_root; $("$driver_root/bin/nvidia-smi" -L | head -8 | tr '\n' ';')"

# -- a cgroup of its own, and systemd as PID 1 of new namespaces ----------------------
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
cg=/sys/fs/cgroup/accel-node
stop_node() { # every process of the node, in every cgroup under its own (cgroup.kill, Linux 5.14)
  [ -d "$cg" ] || return 0
  echo 1 >"$cg/cgroup.kill" 2>/dev/null || :
  for _ in $(seq 50); do [ -z "$(cat "$cg/cgroup.procs" 2>/dev/null)" ] && break; sleep 0.1; done
  find "$cg" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || :
}
stop_node # a node left from an earlier call
trap 'stop_node; tar -C "$cache" -czf "$out/logs.tar.gz" logs' EXIT
trap 'exit 143' TERM INT
mkdir -p "$cg"
read -ra controllers </sys/fs/cgroup/cgroup.controllers
for c in "${controllers[@]}"; do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || :; done

cat >"$cache/node-init.sh" <<INIT
#!/bin/bash
# PID 1 of the node's namespaces until systemd replaces it.
set -e
mount --make-rprivate /
# The node's / must be a mount point: Docker remounts it when it unpacks a layer.
mount --bind "$root" "$root"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount --bind "$cg" "$root/sys/fs/cgroup"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir -p "$root$driver_root"
[ "$driver_root" = /usr ] || mount --rbind "$driver_root" "$root$driver_root"
mount --bind "$repo" "$root/opt/accel-nodes/src"
hostname $node
exec env -i container=docker TERM=dumb "$(command -v chroot)" "$root" /lib/systemd/systemd --log-target=console --log-level=notice
INIT
chmod +x "$cache/node-init.sh"
echo $$ >"$cg/cgroup.procs"
setsid unshare --pid --fork --mount --uts --ipc --cgroup "$cache/node-init.sh" \
  >"$cache/systemd.log" 2>&1 </dev/null &
unshare_pid=$!
echo $$ >/sys/fs/cgroup/cgroup.procs 2>/dev/null || : # this shell goes back
pid=
for _ in $(seq 50); do # the forked child of unshare becomes systemd
  pid=$(pgrep -P "$unshare_pid" | head -1 || :)
  [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = systemd ] && break
  sleep 0.2
done
[ -n "$pid" ] || { log "systemd did not start"; cat "$cache/systemd.log" >&2; exit 1; }
in_node() { timeout "${ACCEL_HW_STEP_TIMEOUT:-120}" nsenter -t "$pid" -a -r -w "$@"; }
state=
for _ in $(seq 90); do
  state=$(in_node systemctl is-system-running 2>/dev/null || :)
  case $state in running | degraded) break ;; esac
  [ -e /proc/"$pid" ] || { log "systemd exited"; cat "$cache/systemd.log" >&2; exit 1; }
  sleep 1
done
log "node systemd (host pid $pid): $state"
if [ "$state" = degraded ]; then in_node systemctl --failed --no-legend | tee -a "$out/summary.txt" >&2 || :; fi
for _ in $(seq 60); do in_node docker info >/dev/null 2>&1 && break; sleep 1; done
log "docker in the node: $(in_node docker version --format '{{.Server.Version}}' 2>&1 | head -1)"

# The toolkit is installed but not configured, as on the Deep Learning AMI. Its
# nvidia-container-toolkit package depends on libnvidia-container-tools, which we
# cannot build (tests/doubles/README.md); CDI mode does not use it.
toolkit=${ACCEL_HW_TOOLKIT:-1.20.0}
in_node sh -c "dpkg -i --ignore-depends=libnvidia-container-tools /opt/accel-nodes/debs/$toolkit/nvidia-container-toolkit-base_*.deb \
  /opt/accel-nodes/debs/$toolkit/nvidia-container-toolkit_*.deb" >"$logs/node-setup.log" 2>&1 || { tail "$logs/node-setup.log" >&2; exit 1; }
log "node: $(in_node cat /etc/accel-hw-node 2>/dev/null | awk '{printf "%s %s; ", $1, $2}')"
# In CDI mode the toolkit mounts the driver's files at their host paths, here under
# /usr/local/nvidia: the images put its bin on PATH, as NVIDIA's CUDA base images do
# (ENV PATH /usr/local/nvidia/bin:...). Libraries come through the CDI ld cache hook.
image_path="ENV PATH=$driver_root/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
in_node docker import -c "$image_path" /opt/accel-nodes/image.tar accel-hw/validation:ldcache >>"$logs/node-setup.log"
in_node docker import -c "$image_path" /opt/accel-nodes/image-no-ldcache.tar accel-hw/validation:no-ldcache >>"$logs/node-setup.log"
log "toolkit $(in_node nvidia-ctk --version | head -1) installed, validation images imported"
# The host's dynamic loader finds the driver's libraries in its driver root; so must
# the node's, as on a host whose driver was installed there.
if [ "$driver_root" != /usr ]; then
  grep -lsr "^$driver_root" /etc/ld.so.conf.d/ | xargs -r cat >"$root/etc/ld.so.conf.d/000-accel-hw-driver.conf"
  [ -s "$root/etc/ld.so.conf.d/000-accel-hw-driver.conf" ] || echo "$driver_root/lib64" >"$root/etc/ld.so.conf.d/000-accel-hw-driver.conf"
  in_node ldconfig
  log "driver libraries in the node's ld cache: $(in_node ldconfig -p | grep -c "$driver_root")"
fi

# -- the runs ----------------------------------------------------------------------------
cat >"$root/opt/accel-nodes/inventory.yml" <<INV
all:
  hosts:
    $node:
      ansible_connection: local
      ansible_python_interpreter: /usr/bin/python3
INV
play() { # name playbook args...
  local name=$1 book=$2 start end rc recap
  shift 2
  start=$(date +%s.%N)
  set +e
  ACCEL_HW_STEP_TIMEOUT=240 in_node env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    PYTHONPATH=/opt/accel-nodes/python ANSIBLE_COLLECTIONS_PATH=/opt/accel-nodes/collections \
    ANSIBLE_HOME=/root/.ansible ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 ANSIBLE_STDOUT_CALLBACK=default \
    ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ANSIBLE_PIPELINING=1 ANSIBLE_DIFF_ALWAYS=1 \
    ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=all \
    PROFILE_TASKS_SORT_ORDER=none \
    python3 -m ansible.cli.playbook -i /opt/accel-nodes/inventory.yml -e @/opt/accel-nodes/vars.yml \
    "$book" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  set -e
  end=$(date +%s.%N)
  recap=$(grep -A3 '^PLAY RECAP' "$logs/$name.log" | grep "$node" | sed 's/  */ /g' || echo 'no recap')
  log "$(printf '%-22s rc=%-3s %6.1f s  %s' "$name" "$rc" "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" "$recap")"
  echo "$name $(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" >>"$logs/times.txt"
}
median() { # name prefix: the median wall time of the runs whose names start with it
  awk -v p="$1" 'index($1, p) == 1 {print $2}' "$logs/times.txt" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}
books=/opt/accel-nodes/src/playbooks
# Check mode must write nothing: every path whose size or modification time the
# check run changed, or that it created or removed, outside what Ansible, Docker,
# systemd and logging write for themselves, and the controller's own code (ansible-core
# and the collections under /opt/accel-nodes, where Python writes their bytecode).
snapshot() {
  in_node find / -xdev \( -path /root/.ansible -o -path /var/log -o -path /var/lib/docker -o -path /opt/accel-nodes \
    -o -path /var/lib/containerd -o -path /var/lib/systemd -o -path /var/cache \) -prune \
    -o -printf '%p %s %T@ %m\n' | LC_ALL=C sort
}
# The image of the chroot bake below: the node as set up, before any play, without the
# toolkit that was installed by hand (its unmet libnvidia-container-tools would stop apt).
image=/var/tmp/accel-bake-image
if [ "${ACCEL_HW_BAKE:-1}" = 1 ]; then
  in_node sh -c "rm -rf $image && mkdir -p $image && tar -C / --one-file-system --exclude=./var/tmp --exclude=./opt/accel-nodes \
    --exclude=./var/lib/docker --exclude=./root/.ansible -c . | tar -C $image -x &&
    chroot $image dpkg --purge nvidia-container-toolkit nvidia-container-toolkit-base" >"$logs/bake-setup.log" 2>&1
fi
snapshot >"$logs/check-before.txt"
play check-fresh "$books/site.yml" --check
snapshot >"$logs/check-after.txt"
LC_ALL=C comm -3 "$logs/check-before.txt" "$logs/check-after.txt" >"$logs/check-fresh-writes.txt" || :
log "site.yml --check changed $(grep -c . "$logs/check-fresh-writes.txt") path(s) outside the controller's, Ansible's, Docker's, systemd's and the logs' own (logs/check-fresh-writes.txt)"
rm -f "$logs/check-before.txt" "$logs/check-after.txt"
play site-first "$books/site.yml" -e accel_nodes_state_record=true
cat >"$root/opt/accel-nodes/facts.yml" <<'FACTS'
- name: Facts only, the floor a re-run is measured against
  hosts: all
  gather_facts: true
  tasks: []
FACTS
# accel_nodes_skip_unchanged=false makes the same full run of a collection from
# before the state record became opt-in, for a before-and-after on one host.
full=(-e accel_nodes_state_record=false -e accel_nodes_skip_unchanged=false)
# Five of each, for medians: one run on a shared host moves by a second, and the
# facts-only floor by half a second. Each full re-run is followed by a floor, so
# that the host's drift over the two minutes weighs on both alike.
for i in 1 2 3 4 5; do
  play "site-full-rerun-$i" "$books/site.yml" "${full[@]}"
  play "facts-only-$i" /opt/accel-nodes/facts.yml
done
full_median=$(median site-full-rerun) floor_median=$(median facts-only)
log "full re-run median $full_median s, facts-only median $floor_median s: $(awk -v a="$full_median" -v b="$floor_median" 'BEGIN {printf "%.1f", a / b}') times (issue 17: at most 5)"
play site-unchanged "$books/site.yml" -e accel_nodes_state_record=true
report=$root/var/lib/accel-nodes/validation.json
play validate "$books/validate.yml"
cp "$report" "$out/validation.json" 2>/dev/null || log "validate.yml wrote no report"
play validate-no-ldcache "$books/validate.yml" -e accelerator_validation_image=accel-hw/validation:no-ldcache
cp "$report" "$out/validation-no-ldcache.json" 2>/dev/null || log "validate.yml wrote no report"
# Where the re-run's time goes (profile.yml, profile.sh): each module twice, the
# programs the roles run, and cProfile of the costliest modules.
if [ "${ACCEL_HW_PROFILE:-0}" = 1 ]; then
  play profile /opt/accel-nodes/src/tests/hardware/profile.yml
  in_node env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash /opt/accel-nodes/src/tests/hardware/profile.sh >"$logs/profile.txt" 2>&1 || :
  cp "$logs/profile.txt" "$out/profile.txt"
fi

# What a container sees, by the paths users type.
{
  echo "\$ nvidia-ctk cdi list"
  in_node nvidia-ctk cdi list 2>&1 || :
  echo "\$ grep -E 'containerPath: .*/(bin|sbin)/' /etc/cdi/nvidia.yaml"
  in_node grep -E 'containerPath: .*/(bin|sbin)/' /etc/cdi/nvidia.yaml 2>&1 || :
  for args in "--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all" "--gpus all" "--gpus 1" "--gpus device=0" \
      "--device nvidia.com/gpu=all"; do
    echo "\$ docker run --rm --network none $args accel-hw/validation:ldcache nvidia-smi -L"
    # shellcheck disable=SC2086
    in_node docker run --rm --network none $args accel-hw/validation:ldcache nvidia-smi -L 2>&1 || echo "(rc $?)"
  done
} >"$out/containers.txt"
cat "$out/containers.txt" >&2

# -- toolkit 1.18 and later (issue 25) ------------------------------------------------------
# The single-quoted commands are the node's, expanded there.
# shellcheck disable=SC2016
if [ "$toolkit" != 1.17.8 ] && [ "${ACCEL_HW_TOOLKIT_NEW:-1}" = 1 ]; then
  cdi_lists() { # label: every CDI device, and those of each spec directory (a device in both is defined twice)
    log "$1: nvidia-ctk cdi list: $(in_node nvidia-ctk cdi list 2>/dev/null | tr '\n' ' ')"
    log "$1:   in /etc/cdi: $(in_node nvidia-ctk cdi list --spec-dir /etc/cdi 2>/dev/null | tr '\n' ' ')"
    log "$1:   in /var/run/cdi: $(in_node nvidia-ctk cdi list --spec-dir /var/run/cdi 2>/dev/null | tr '\n' ' ')"
  }
  record=/var/lib/accel-nodes/nvidia-container-toolkit/cdi-driver-version
  cdi_lists "role keeps the spec"
  # A driver change: the record names another driver, as after an upgrade; the
  # next run must generate the spec again.
  in_node sh -c "cp $record /tmp/record && sed -i '1s/.*/1.0.0/' $record && stat -c %Y /etc/cdi/nvidia.yaml >/tmp/spec-mtime"
  sleep 1
  play driver-change "$books/site.yml" "${full[@]}"
  log "driver change: spec regenerated: $(in_node sh -c '[ $(stat -c %Y /etc/cdi/nvidia.yaml) -gt $(cat /tmp/spec-mtime) ] && echo yes || echo no'); record: $(in_node head -1 $record)"
  # NVIDIA's refresh units keep the spec where their conditions hold: a packaged
  # driver's nvidia-smi in /usr/bin and nvidia.ko in the running kernel's
  # modules.dep, as for a DKMS driver. This host's driver lives in its driver root
  # and not in /lib/modules; in the node, a link and modules.dep say it is
  # installed so, and the units then run against the real driver.
  [ "$driver_root" = /usr ] || in_node sh -c "ln -sfn $driver_root/bin/nvidia-smi /usr/bin/nvidia-smi"
  in_node sh -c 'mkdir -p /lib/modules/$(uname -r) && echo "updates/dkms/nvidia.ko:" >>/lib/modules/$(uname -r)/modules.dep'
  play vendor-first "$books/site.yml" "${full[@]}"
  play vendor-rerun "$books/site.yml" "${full[@]}"
  log "vendor: units $(in_node systemctl is-enabled nvidia-cdi-refresh.path nvidia-cdi-refresh.service | tr '\n' ' '); /etc/cdi/nvidia.yaml $(in_node test -e /etc/cdi/nvidia.yaml && echo present || echo gone); /var/run/cdi/nvidia.yaml $(in_node test -e /var/run/cdi/nvidia.yaml && echo present || echo missing)"
  cdi_lists "vendor keeps the spec"
  # A driver change under the units: modules.dep changes, the path unit starts the service.
  in_node sh -c 'stat -c %Y /var/run/cdi/nvidia.yaml >/tmp/spec-mtime; sleep 1.1; echo >>/lib/modules/$(uname -r)/modules.dep; sleep 4'
  log "vendor: driver change: spec rewritten by the units: $(in_node sh -c '[ $(stat -c %Y /var/run/cdi/nvidia.yaml) -gt $(cat /tmp/spec-mtime) ] && echo yes || echo no')"
  {
    for args in "--gpus all" "--device nvidia.com/gpu=all" "--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all"; do
      echo "\$ docker run --rm --network none $args accel-hw/validation:ldcache nvidia-smi -L   # vendor's spec"
      # shellcheck disable=SC2086
      in_node docker run --rm --network none $args accel-hw/validation:ldcache nvidia-smi -L 2>&1 || echo "(rc $?)"
    done
  } >>"$out/containers.txt"
  play validate-vendor "$books/validate.yml"
  cp "$report" "$out/validation-vendor.json" 2>/dev/null || :
  # The default mode: mode auto, which 1.18 and later resolve to jit-cdi in the
  # runtime, no spec of the role's; nvidia the default runtime, so that --gpus
  # goes through it (the hook's legacy path needs nvidia-container-cli, from
  # libnvidia-container, which cannot be built here).
  default=(-e nvidia_container_toolkit_mode=auto -e nvidia_container_toolkit_cdi=false
           -e nvidia_container_toolkit_default_runtime=true)
  play default-mode "$books/site.yml" "${full[@]}" "${default[@]}"
  play default-mode-rerun "$books/site.yml" "${full[@]}" "${default[@]}"
  play validate-default "$books/validate.yml" "${default[@]}"
  cp "$report" "$out/validation-default.json" 2>/dev/null || :
  # The daemon-reload trap (why did 1.20 keep the GPU where 1.17.8 lost it?), by
  # toolkit, runc and mode, each else the same: the node's runc and Debian 12's
  # 1.1.5, as config.toml names the runtime the nvidia runtime runs.
  config=/etc/nvidia-container-runtime/config.toml
  trap_run() { # name toolkit runc-or-empty mode
    local name=$1 version=$2 runc=$3 mode=$4
    in_node sh -c "dpkg -i --ignore-depends=libnvidia-container-tools /opt/accel-nodes/debs/$version/nvidia-container-toolkit-base_*.deb \
      /opt/accel-nodes/debs/$version/nvidia-container-toolkit_*.deb" >>"$logs/trap-setup.log" 2>&1
    in_node sed -i -e "s|^\\( *\\)runtimes = .*|\\1runtimes = [\"${runc:-runc}\"]|" \
      -e "s|^\\( *\\)mode = .*|\\1mode = \"$mode\"|" "$config"
    in_node env PATH="$driver_root/bin:/usr/sbin:/usr/bin:/sbin:/bin" nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml \
      >>"$logs/trap-setup.log" 2>&1
    in_node env ACCEL_TRAP_RUNC="${runc:-runc}" bash /opt/accel-nodes/src/tests/hardware/trap.sh "$name" \
      accel-hw/validation:ldcache --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all 2>&1 | tee -a "$out/trap.txt" "$out/summary.txt" >&2
  }
  in_node cp /opt/accel-nodes/runc-1.1/runc /usr/local/sbin/runc-1.1
  log "daemon-reload trap: Docker's cgroup driver $(in_node docker info --format '{{.CgroupDriver}}'), $(in_node systemctl --version | head -1)"
  for runc in "" /usr/local/sbin/runc-1.1; do
    trap_run "trap toolkit 1.20.0, runc ${runc:-of the node}, cdi mode" 1.20.0 "$runc" cdi
    trap_run "trap toolkit 1.20.0, runc ${runc:-of the node}, auto (jit-cdi)" 1.20.0 "$runc" auto
    trap_run "trap toolkit 1.17.8, runc ${runc:-of the node}, cdi mode" 1.17.8 "$runc" cdi
  done
  trap_run "trap restored" "$toolkit" "" cdi >/dev/null 2>&1
fi

# -- a chroot bake on this GPU host (issue 16) -------------------------------------------
# An AMI pipeline's build host with a GPU: the image is a copy of the node root, with
# amazon-chroot's mounts (this host's real /proc, /sys and /dev), baked from the node
# over the chroot connection for p3.8xlarge (V100: proprietary kernel modules), where
# this host's own GPU would pick the open ones. In check mode: the image has no kernel
# (the headers double's stands in, as in molecule/bake) and the node reaches no Debian
# archive for dkms; tests/chroot/ runs the real bake on fixture buses. The copy is
# taken before site.yml runs (below, where the runs start). It needs the signed local
# repositories (build/repos), carried with the checkout.
if [ "${ACCEL_HW_BAKE:-1}" = 1 ] && [ ! -d "$repo/build/repos" ]; then
  log "chroot bake left out: build/repos was not carried (tests/doubles/build-repos.sh)"
elif [ "${ACCEL_HW_BAKE:-1}" = 1 ]; then
  in_node sh -c "mount -t proc proc $image/proc && mount --rbind /sys $image/sys && mount --rbind /dev $image/dev &&
    mkdir -p $image/srv/accel-repos && mount --bind /opt/accel-nodes/src/build/repos $image/srv/accel-repos &&
    mkdir -p $image/var/lib/accel-test/dist && cp /opt/accel-nodes/src/tests/doubles/bin/oci-add-hooks $image/var/lib/accel-test/dist/" \
    >>"$logs/bake-setup.log" 2>&1
  in_node python3 - >"$root/opt/accel-nodes/bake-vars.yml" <<'PY'
import yaml
src = '/opt/accel-nodes/src/'
shared = yaml.safe_load(open(src + '.config/molecule/config.yml'))
bake = yaml.safe_load(open(src + 'molecule/bake/molecule.yml'))
merged = dict(shared['provisioner']['inventory']['group_vars']['all'])
merged.update(bake['provisioner']['inventory']['group_vars']['all'])
print(yaml.safe_dump(merged, default_flow_style=False, width=1000))
PY
  bake() { # name instance-type args...
    local name=$1 type=$2
    shift 2
    in_node env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      PYTHONPATH=/opt/accel-nodes/python ANSIBLE_COLLECTIONS_PATH=/opt/accel-nodes/collections \
      ANSIBLE_HOME=/root/.ansible ANSIBLE_NOCOLOR=1 ANSIBLE_CALLBACK_RESULT_FORMAT=yaml ANSIBLE_PIPELINING=1 \
      ACCEL_REPOS_DIR=/opt/accel-nodes/src/build/repos MOLECULE_PROJECT_DIRECTORY=/opt/accel-nodes/src \
      python3 -m ansible.cli.playbook -c community.general.chroot -i "$image," -e @/opt/accel-nodes/bake-vars.yml \
      -e accel_nodes_bake_instance_type="$type" "$books/bake.yml" "$@" >"$logs/$name.log" 2>&1
  }
  said() { awk -v t="$2" 'index($0, "TASK [" t "]") == 1 {d = 1; next} d && /msg:/ {m = 1}
    m && /^$/ {exit} m {sub(/^ *(msg: *)?/, ""); printf "%s ", $0}' "$logs/$1.log" | sed "s/ *\$//; s/^'//; s/'\$//; s/''/'/g"; }
  bake_rc=0
  bake bake-chroot-p3 p3.8xlarge --check || bake_rc=$?
  log "chroot bake --check for p3.8xlarge on this host (rc $bake_rc): $(grep -A3 '^PLAY RECAP' "$logs/bake-chroot-p3.log" | grep -v RECAP | sed 's/  */ /g' | head -1)"
  log "  the bake read: $(said bake-chroot-p3 'Say what the image is for')"
  log "  the bake decided: $(said bake-chroot-p3 'Say what the image got')"
  log "  this host's own bus, as site.yml saw it: $(in_node nvidia-smi -L | head -1)"
  in_node sh -c "umount -R $image/srv/accel-repos $image/dev $image/sys $image/proc; rm -rf --one-file-system $image" >>"$logs/bake-setup.log" 2>&1 || :
fi

# The CUDA check module on the host itself: it must pass, and fail with a clear
# message for a GPU that does not exist and for a hidden libcuda (cuda_check.sh).
cuda_rc=0
PYTHONPATH=$root/opt/accel-nodes/python bash "$repo/tests/hardware/cuda_check.sh" "$logs/cuda" >"$logs/cuda/summary.txt" 2>&1 || cuda_rc=$?
log "cuda_check.sh on the host (rc $cuda_rc): $(tr '\n' ' ' <"$logs/cuda/summary.txt" | cut -c1-600)"
cat "$out/summary.txt"
