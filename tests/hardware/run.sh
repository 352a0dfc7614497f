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
# PARTS_DIR is one of split.sh's folders: some or all of node-root.sh's parts, and
# whatever else SHA256SUMS lists there (payload.tar.zst, k8s.tar.zst); they are kept
# under $ACCEL_HW_CACHE (default /var/tmp/accel-hw) until all are there, so the root
# and the payload can travel over several calls. With pieces missing, the script says
# which and stops (exit 3). PAYLOAD_DIR, where it holds payload.tar.zst (and
# k8s.tar.zst), is used instead of those pieces; `-` names none.
# Without k8s.tar.zst (crictl and NVIDIA's device plugin, issue 26) the CRI layer and
# the device-plugin test (allocate.sh) are left out, and the summary says so.
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
# The pieces SHA256SUMS lists: every file but the whole root, which travels in parts.
pieces() { awk '$2 != "root.tar.zst" {sub(/^\*/, "", $2); print $2}' "$1"; }
if [ -f "$parts_in/SHA256SUMS" ]; then
  # Another build's SHA256SUMS: the pieces kept from it are of no use now.
  if [ -f "$cache/parts/SHA256SUMS" ] && ! cmp -s "$parts_in/SHA256SUMS" "$cache/parts/SHA256SUMS"; then
    log "SHA256SUMS differs from the one kept under $cache/parts: starting the pieces again"
    rm -rf "$cache/parts" && mkdir -p "$cache/parts"
  fi
  cp "$parts_in/SHA256SUMS" "$cache/parts/"
  for p in $(pieces "$parts_in/SHA256SUMS"); do
    if [ -f "$parts_in/$p" ] && [ ! -f "$cache/parts/$p" ]; then cp "$parts_in/$p" "$cache/parts/$p.new" && mv "$cache/parts/$p.new" "$cache/parts/$p"; fi
  done
fi
[ -f "$cache/parts/SHA256SUMS" ] || { log "no SHA256SUMS yet under $cache/parts"; exit 3; }
missing=$(cd "$cache/parts" && for p in $(pieces SHA256SUMS); do [ -f "$p" ] || echo "$p"; done)
if [ -n "$missing" ]; then
  log "pieces still missing: $(echo "$missing" | tr '\n' ' ')(kept: $(cd "$cache/parts" && pieces SHA256SUMS | while read -r p; do [ ! -f "$p" ] || printf '%s ' "$p"; done))"
  exit 3
fi
(cd "$cache/parts" && grep -v ' \*\{0,1\}root.tar.zst$' SHA256SUMS | sha256sum -c --quiet) || { log "a piece under $cache/parts does not match SHA256SUMS"; exit 1; }
want=$(awk '/ root.tar.zst$/ {print $1}' "$cache/parts/SHA256SUMS")
if [ "$(cat "$root.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$root" && mkdir -p "$root" && chmod 0755 "$root"
  cat "$cache"/parts/root.tar.zst.part-* | zstd -dc | tar -C "$root" -x
  echo "$want" >"$root.sha256"
  log "node root unpacked ($(du -sh "$root" | cut -f1))"
fi

# -- what travels with the checkout: ansible-core, collections, toolkit, images -----
payload=$cache/parts/payload.tar.zst k8s=$cache/parts/k8s.tar.zst
if [ -f "$payload_in/payload.tar.zst" ]; then payload=$payload_in/payload.tar.zst; fi
if [ -f "$payload_in/k8s.tar.zst" ]; then k8s=$payload_in/k8s.tar.zst; fi
[ -f "$payload" ] || { log "no payload.tar.zst: neither in $payload_in nor among the pieces (split.sh ... -- .hw-payload/payload.tar.zst)"; exit 2; }
rm -rf "$root/opt/accel-nodes" && mkdir -p "$root/opt/accel-nodes/src"
zstd -dc "$payload" | tar -C "$root/opt/accel-nodes" -x
# crictl and NVIDIA's device plugin (issue 26): crictl where kubeadm and EKS put it,
# so that the validation's CRI layer runs, from the first site.yml on, as on a
# Kubernetes node. ACCEL_HW_CRI=0 leaves both out (the runs of before issue 26).
rm -f "$root/usr/local/bin/crictl"
cri=
if [ "${ACCEL_HW_CRI:-1}" != 1 ]; then
  log "CRI layer and device-plugin test left out: ACCEL_HW_CRI=${ACCEL_HW_CRI}"
elif [ ! -f "$k8s" ]; then
  log "CRI layer and device-plugin test left out: no k8s.tar.zst carried (payload.sh writes it; split.sh ... -- .hw-payload/k8s.tar.zst)"
elif zstd -dc "$k8s" | tar -C "$root/opt/accel-nodes" -x && mkdir -p "$root/usr/local/bin" &&
    install -m 0755 "$root/opt/accel-nodes/bin/crictl" "$root/usr/local/bin/crictl"; then
  cri=1
else
  log "CRI layer and device-plugin test left out: k8s.tar.zst did not unpack"
fi
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
# cgroup v2 hands a controller to child cgroups only from a cgroup without
# processes of its own: where this machine's processes sit in the root of its
# cgroup namespace, enabling cpu there fails, and the node's pods, whose
# sandboxes always get CPU shares, fail with "cpu.weight: no such file". The
# processes move to a leaf first, as moby's hack/dind does for Docker in Docker.
read -ra controllers </sys/fs/cgroup/cgroup.controllers
if [ -n "$(cat /sys/fs/cgroup/cgroup.procs)" ] && ! grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control; then
  mkdir -p /sys/fs/cgroup/accel-host
  xargs -rn1 </sys/fs/cgroup/cgroup.procs >/sys/fs/cgroup/accel-host/cgroup.procs 2>/dev/null || :
fi
for c in "${controllers[@]}"; do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || :; done
log "cgroup v2 controllers for the node: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
# containerd's overlayfs snapshotter (the CRI's images, issue 26) needs a file system
# that can hold an overlay's upper directory: not an overlay (a host that is itself a
# container) nor most network or FUSE ones. Elsewhere /var/lib/containerd gets a
# tmpfs, which always can. ACCEL_HW_CONTAINERD_TMPFS=1 or 0 decides it instead.
root_fs=$(stat -f -c %T "$root")
containerd_tmpfs=${ACCEL_HW_CONTAINERD_TMPFS:-auto}
if [ "$containerd_tmpfs" = auto ]; then
  case $root_fs in ext2/ext3 | xfs | btrfs | tmpfs) containerd_tmpfs=0 ;; *) containerd_tmpfs=1 ;; esac
fi
[ -n "$cri" ] || containerd_tmpfs=0

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
if [ "$containerd_tmpfs" = 1 ]; then mkdir -p "$root/var/lib/containerd" && mount -t tmpfs -o mode=0711 tmpfs "$root/var/lib/containerd"; fi
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
{ echo $$ >/sys/fs/cgroup/accel-host/cgroup.procs || echo $$ >/sys/fs/cgroup/cgroup.procs; } 2>/dev/null || : # this shell goes back
pid=
for _ in $(seq 50); do # the forked child of unshare becomes systemd
  pid=$(pgrep -P "$unshare_pid" | head -1 || :)
  [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = systemd ] && break
  sleep 0.2
done
[ -n "$pid" ] || { log "systemd did not start"; cat "$cache/systemd.log" >&2; exit 1; }
# unshare itself waits in the node's cgroup for its child; a cgroup with a process of
# its own hands no controller to its children (cgroup v2's no-internal-process
# rule), so the node's systemd could not give its slices cpu, and every pod sandbox
# of the CRI failed ("cpu.weight: no such file or directory", H100, 2026-11-27). It
# waits outside.
{ echo "$unshare_pid" >/sys/fs/cgroup/accel-host/cgroup.procs || echo "$unshare_pid" >/sys/fs/cgroup/cgroup.procs; } 2>/dev/null || :
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
# The CRI's images (issue 26): the node reaches no registry, so both validation
# images go from Docker into containerd's k8s.io namespace, and the sandbox (pause)
# image is built here under the exact name containerd's config gives (sandbox_image
# in 1.x, pinned_images.sandbox in 2.x, single-quoted in 2.x's dump): a sleep on
# the validation image's glibc (tests/rig/image-archive.py). A step that fails is
# logged; the validation's CRI layer then says what is missing.
if [ -n "$cri" ]; then
  # A pod sandbox lowers its OOM score to -998, which needs CAP_SYS_RESOURCE; where
  # the lent machine withholds it, runc fails ("can't get final child's PID from
  # pipe"), and containerd's restrict_oom_score_adj (containerd docs/cri/config.md,
  # for nodes inside containers) is the user's setting that fits. A real node
  # has the capability and needs none.
  capeff=$(in_node sed -n 's/^CapEff:[[:space:]]*//p' /proc/1/status)
  if [ $((0x${capeff:-0} >> 24 & 1)) = 0 ] && ! in_node grep -q restrict_oom_score_adj /etc/containerd/config.toml; then
    in_node sed -i 's/^\( *\)\[plugins\."io\.containerd\.grpc\.v1\.cri"\]$/&\n\1  restrict_oom_score_adj = true/' /etc/containerd/config.toml
    in_node systemctl restart containerd
    log "CRI: this machine withholds CAP_SYS_RESOURCE (CapEff $capeff): restrict_oom_score_adj = true in the node's /etc/containerd/config.toml ($(in_node grep -c restrict_oom_score_adj /etc/containerd/config.toml) line)"
  fi
  # What the node's systemd hands its slices: a pod sandbox always gets CPU shares.
  # shellcheck disable=SC2016 # expanded in the node
  in_node sh -c 'for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control; done' 2>/dev/null || :
  log "CRI: the node's cgroup root: controllers $(in_node cat /sys/fs/cgroup/cgroup.controllers), to its children $(in_node cat /sys/fs/cgroup/cgroup.subtree_control); PID 1 in $(in_node cat /proc/1/cgroup)"
  # runc's own entry with the systemd cgroup driver, as Kubernetes' guide to
  # container runtimes has it for containerd (kubernetes.io, docs/setup/
  # production-environment/container-runtimes, "Configuring the systemd cgroup
  # driver"): pods of the default handler get a systemd slice too.
  if ! in_node grep -q 'runtimes.runc.options' /etc/containerd/config.toml; then
    in_node sh -c 'printf "%s\n" "" "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]" \
      "  runtime_type = \"io.containerd.runc.v2\"" "  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]" \
      "    SystemdCgroup = true" >>/etc/containerd/config.toml && systemctl restart containerd'
    log "CRI: runc's SystemdCgroup = true in the node's /etc/containerd/config.toml, as on a kubeadm node"
  fi
  {
    for _ in $(seq 30); do in_node ctr version >/dev/null 2>&1 && break; sleep 1; done
    pause=$(in_node containerd config dump 2>/dev/null |
      sed -n "s/^ *sandbox_image = [\"']\(.*\)[\"']\$/\1/p; s/^ *sandbox = [\"']\(.*\)[\"']\$/\1/p" | head -1 || :)
    if [ -z "$pause" ]; then
      pause=registry.k8s.io/pause:3.10
      log "CRI: containerd config dump names no sandbox image; taking $pause"
    fi
    in_node sh -c "r=/var/tmp/accel-pause && rm -rf \$r \$r.tar && mkdir -p \$r && tar -C \$r -xf /opt/accel-nodes/image.tar &&
      cp /usr/bin/sleep \$r/usr/bin/sleep && python3 /opt/accel-nodes/src/tests/rig/image-archive.py \$r \$r.tar '$pause' --cmd /bin/sleep 2147483647 &&
      ctr -n k8s.io images import \$r.tar && rm -rf \$r \$r.tar" ||
      log "CRI: the sandbox image $pause was not imported (logs/node-setup.log)"
    in_node sh -c 'docker save accel-hw/validation:ldcache accel-hw/validation:no-ldcache | ctr -n k8s.io images import -' ||
      log "CRI: the validation images were not imported into containerd (logs/node-setup.log)"
  } >>"$logs/node-setup.log" 2>&1
  log "CRI: $(in_node crictl --version 2>&1 | head -1); containerd $(in_node containerd --version 2>&1 | awk '{print $3}'); /var/lib/containerd on $([ "$containerd_tmpfs" = 1 ] && echo tmpfs || echo the node root) (node root on $root_fs); sandbox image $pause; k8s.io images: $(in_node ctr -n k8s.io images ls -q 2>&1 | grep -v '^sha256:' | tr '\n' ' ')"
fi
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
  ACCEL_HW_STEP_TIMEOUT=240 in_node env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
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
# -- the CRI layer (issue 26) ------------------------------------------------------------
if [ -n "$cri" ]; then
  # What the layer adds to validate.yml: its task's time (profile_tasks' recap), and
  # validate.yml with and without the layer, three of each taken in turn.
  task_time() { # log task-name-start: the seconds profile_tasks' recap gives the task
    sed -n "s/^accel.nodes.accelerator_validation : $2.* -\{3,\} \([0-9.]*\)s\$/\1/p" "$logs/$1.log" 2>/dev/null | head -1 || :
  }
  for i in 1 2 3; do
    play "validate-nocri-$i" "$books/validate.yml" -e '{"accelerator_validation_layers": ["host", "runtime", "container"]}'
    play "validate-cri-$i" "$books/validate.yml"
  done
  cri_times=$(for n in validate validate-cri-1 validate-cri-2 validate-cri-3; do task_time "$n" 'Run the vendor tool in pods through the CRI'; done | tr '\n' ' ')
  probe_cri=$(for n in validate-cri-1 validate-cri-2 validate-cri-3; do task_time "$n" Discover; done | tr '\n' ' ')
  probe_nocri=$(for n in validate-nocri-1 validate-nocri-2 validate-nocri-3; do task_time "$n" Discover; done | tr '\n' ' ')
  with=$(median validate-cri-) without=$(median validate-nocri-)
  log "CRI layer: 'Run the vendor tool in pods through the CRI' took ${cri_times:-(no time: see logs/validate.log)}s (validate, validate-cri-1..3); the probe ${probe_cri}s with the layer, ${probe_nocri}s without"
  log "CRI layer: validate.yml median $with s with it, $without s without: it adds $(awk -v a="$with" -v b="$without" 'BEGIN {printf "%.2f", a - b}') s (issue 26: aim < 1.5 s on the H100)"
  # The CRI checks of the last report, validate-cri-3's.
  in_node python3 - /var/lib/accel-nodes/validation.json <<'PY' | while read -r line; do log "CRI layer: $line"; done || :
import json, sys
try:
    checks = json.load(open(sys.argv[1])).get('checks') or []
except (OSError, ValueError) as e:
    print('no report: %s' % e)
    sys.exit()
for c in checks:
    if c.get('layer') == 'cri':
        print('%s %s: %s' % (c.get('name'), c.get('status'), str(c.get('detail'))[:300]))
PY
  # NVIDIA's device plugin, its Allocate answer through the CRI (allocate.sh).
  dp_rc=0
  rm -rf "$root/var/tmp/accel-dp"
  ACCEL_HW_STEP_TIMEOUT=400 in_node env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    bash /opt/accel-nodes/src/tests/hardware/allocate.sh /opt/accel-nodes/device-plugin/nvidia-device-plugin \
    /opt/accel-nodes/device-plugin/api.proto accel-hw/validation:ldcache /var/tmp/accel-dp >"$logs/allocate.log" 2>&1 || dp_rc=$?
  rm -rf "$out/device-plugin"
  cp -r "$root/var/tmp/accel-dp" "$out/device-plugin" 2>/dev/null || mkdir -p "$out/device-plugin"
  cp "$logs/allocate.log" "$out/device-plugin/allocate.log"
  log "device plugin (allocate.sh, rc $dp_rc): $(in_node /opt/accel-nodes/device-plugin/nvidia-device-plugin --version 2>&1 | head -1)"
  if grep -q '^allocate.sh: ' "$out/device-plugin/summary.txt" 2>/dev/null; then
    while read -r line; do log "  $line"; done <"$out/device-plugin/summary.txt"
  else
    log "  no strategy ran: $(tail -3 "$logs/allocate.log" | tr '\n' ' ' | cut -c1-600)"
  fi
fi
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
  # Issue 28: accel.nodes.diagnose on the real GPU, whose spec NVIDIA's units
  # just wrote: no findings; then the same spec in /etc/cdi too (shadowed), that
  # copy naming another driver (stale), and the fix (the copy removed).
  diagnose() { # name: run accel.nodes.diagnose, keep its report and say its finding ids
    play "$1" "$books/diagnose.yml"
    in_node cat /var/lib/accel-nodes/diagnose.json >"$out/$1.json" 2>/dev/null || :
    log "$1: findings: $(in_node python3 -c 'import json, sys; print(" ".join(f["id"] for f in json.load(open(sys.argv[1]))["findings"]) or "none")' \
      /var/lib/accel-nodes/diagnose.json 2>/dev/null || echo 'no report')"
  }
  in_node cat /var/run/cdi/nvidia.yaml >"$out/cdi-vendor-nvidia.yaml" 2>/dev/null || :
  diagnose diagnose-vendor
  in_node cp /var/run/cdi/nvidia.yaml /etc/cdi/nvidia.yaml
  diagnose diagnose-shadowed
  in_node sh -c "sed -i \"s/\$(cat /sys/module/nvidia/version)/570.86.15/g\" /etc/cdi/nvidia.yaml"
  diagnose diagnose-stale
  in_node rm -f /etc/cdi/nvidia.yaml
  diagnose diagnose-fixed
  # The issue's other GPU faults, each made in the node (never on the host),
  # diagnosed, fixed as the finding says, and diagnosed again. The loader's
  # cache as it is, for the unit tests:
  in_node ldconfig -p >"$out/ldconfig-p.txt" 2>&1 || :
  # libcuda hidden from the loader: the driver root's directory out of ld.so.conf.d.
  in_node sh -c 'mv /etc/ld.so.conf.d/000-accel-hw-driver.conf /tmp/ && ldconfig'
  in_node ldconfig -p >"$out/ldconfig-p-hidden.txt" 2>&1 || :
  diagnose diagnose-libraries-hidden
  in_node sh -c 'mv /tmp/000-accel-hw-driver.conf /etc/ld.so.conf.d/ && ldconfig'
  diagnose diagnose-libraries-fixed
  # The nvidia runtime in daemon.json, but not in the running Docker: Docker
  # restarted without it, then the file put back without a restart. The
  # validation fails, and its report names the finding that explains it.
  in_node sh -c 'cp /etc/docker/daemon.json /tmp/daemon.json && python3 -c "
import json; d = json.load(open(\"/tmp/daemon.json\")); d.get(\"runtimes\", {}).pop(\"nvidia\", None)
d.pop(\"default-runtime\", None); json.dump(d, open(\"/etc/docker/daemon.json\", \"w\"), indent=2)" &&
    systemctl restart docker && cp /tmp/daemon.json /etc/docker/daemon.json'
  diagnose diagnose-runtime-not-loaded
  play validate-runtime-not-loaded "$books/validate.yml" -e accelerator_validation_fail=false
  cp "$report" "$out/validation-runtime-not-loaded.json" 2>/dev/null || :
  log "validate-runtime-not-loaded: $(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["status"], "; ".join("%s explained by %s" % (c["name"], ",".join(c.get("findings") or []) or "nothing")
                              for c in r["checks"] if c["status"] == "fail"))' "$out/validation-runtime-not-loaded.json" 2>&1)"
  in_node systemctl restart docker
  diagnose diagnose-runtime-restarted
  # /dev/char links of the NVIDIA device nodes removed (Docker's cgroup driver
  # decides whether that is a finding), then put back as the fix says.
  log "dev/char: Docker's cgroup driver $(in_node docker info --format '{{.CgroupDriver}}')"
  in_node sh -c "find /dev/char -maxdepth 1 -lname '*nvidia*' -delete"
  # The H200 run of 2026-11-28 had no finding here: say what the probe could see.
  log "dev/char: NVIDIA links left: $(in_node sh -c "find /dev/char -maxdepth 1 -lname '*nvidia*' | wc -l"); NVIDIA device nodes: $(in_node sh -c 'for f in /dev/nvidia* /dev/nvidia-caps/nvidia-*; do [ -c "$f" ] && echo "$f"; done | wc -l')"
  diagnose diagnose-dev-char-missing
  log "dev/char: NVIDIA links after the diagnosis: $(in_node sh -c "find /dev/char -maxdepth 1 -lname '*nvidia*' | wc -l")"
  in_node nvidia-ctk system create-dev-char-symlinks --create-all >/dev/null 2>&1 || :
  diagnose diagnose-dev-char-fixed
  # The toolkit's own faults (issue 28, 3 and 9), each with a container of the
  # nvidia runtime to show what it breaks: cdi mode without the spec (fix: the
  # vendor's refresh unit), a mode the toolkit does not know and a config.toml
  # that does not parse (fix: site.yml, after nvidia-ctk config default).
  gpu_run() { # label: a container of the nvidia runtime, its first line and exit status
    log "$1: docker run --runtime=nvidia: $(in_node docker run --rm --network none --runtime=nvidia \
      -e NVIDIA_VISIBLE_DEVICES=all accel-hw/validation:ldcache nvidia-smi -L 2>&1 | head -1; echo "rc ${PIPESTATUS[0]}")"
  }
  in_node mv /var/run/cdi/nvidia.yaml /tmp/vendor-nvidia.yaml || :
  gpu_run cdi-spec-missing
  diagnose diagnose-cdi-spec-missing
  in_node systemctl start nvidia-cdi-refresh.service || :
  gpu_run cdi-spec-refreshed
  diagnose diagnose-cdi-spec-refreshed
  in_node cp /etc/nvidia-container-runtime/config.toml /tmp/config.toml || :
  in_node nvidia-ctk config --in-place --set=nvidia-container-runtime.mode=cdi-jit || :
  gpu_run toolkit-mode-invalid
  diagnose diagnose-toolkit-mode-invalid
  play toolkit-mode-fix "$books/site.yml" "${full[@]}"
  diagnose diagnose-toolkit-mode-fixed
  in_node sed -i 's/^\[nvidia-container-runtime\]$/[nvidia-container-runtime/' /etc/nvidia-container-runtime/config.toml || :
  gpu_run toolkit-config-unreadable
  diagnose diagnose-toolkit-config-unreadable
  in_node nvidia-ctk config default --output=/etc/nvidia-container-runtime/config.toml >/dev/null 2>&1 || :
  play toolkit-config-fix "$books/site.yml" "${full[@]}"
  gpu_run toolkit-config-fixed
  diagnose diagnose-toolkit-config-fixed
  log "toolkit: config.toml after the fix, against the one before: $(in_node sh -c 'cmp -s /tmp/config.toml /etc/nvidia-container-runtime/config.toml && echo same || diff /tmp/config.toml /etc/nvidia-container-runtime/config.toml | grep -c "^[<>]"')"
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
