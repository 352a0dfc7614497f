#!/usr/bin/env bash
# Build the "fresh EC2 node" image for Molecule: Debian from the Debian archive
# with debootstrap, systemd as PID 1, then `docker import`. The tag carries the
# image's name and a hash of this recipe, so the image is rebuilt only when the
# recipe changes. Prints the image reference on stdout.
#
#   tests/rig/node-image.sh [bookworm|trixie|forky-engines]      (default bookworm)
#
# forky-engines is the node with the newest engines Debian has: Debian 13
# (trixie), whose apt sources also offer Debian testing (forky), pinned so that
# docker.io, docker-cli, containerd, runc and tini come from forky (docker.io
# 28.5, containerd 2.1, runc 1.3 on 2026-11-27) and everything else from trixie,
# as operators take newer engines onto a stable release. Not forky itself: its
# systemd 262 refuses a cgroup v1 host (this rig's: "Detected unsupported legacy
# cgroup hierarchy"), and the roles support Debian 12 and 13, not testing. Its
# init mounts a cgroup v2 hierarchy where the node has a cgroup namespace of its
# own (Molecule's cgroupns_mode: private), so that systemd runs in unified mode
# and Docker and containerd use the systemd cgroup driver, as on current EC2
# images; the other images boot systemd on the host's hierarchy.
#
# forky moves: an image holds it as it was on the day it was built (rebuild it
# with `docker rmi` to move on). So that a run can say what it ran against,
# every image records its suites' index dates and the versions that the node's
# apt would install of the container engines the roles configure (docker.io,
# containerd, runc) and of python3 and golang-go: as image labels
# (accel.nodes.*; `docker image inspect`) and in /etc/accel-node-image.
set -euo pipefail

mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
name=${1:-bookworm}
case $name in
  bookworm | trixie) suite=$name ;;
  forky-engines) suite=trixie ;;
  *)
    echo "usage: $0 [bookworm|trixie|forky-engines]: no node image '$name'" >&2
    exit 2
    ;;
esac
# The same names in both suites (checked in their Packages indexes, 2026-11-27).
packages=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,gnupg,ca-certificates,iproute2,procps,kmod
recorded=(docker.io containerd runc python3 golang-go)
recipe_hash=$(sha256sum "$0" | cut -c1-12)
image=accel-nodes/node:${name}-${recipe_hash}

# One builder of an image at a time (test-all.sh's background prebuild, two
# runs): a second caller waits here, then finds the image built.
exec 9>"/var/tmp/accel-nodes-node-image-$name.lock"
flock -n 9 || { echo "node-image.sh: another build of node image $name runs; waiting for it" >&2; flock 9; }
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }

rootfs=$(mktemp -d /var/tmp/accel-node-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >&2

suites=("$suite")
if [ "$name" = forky-engines ]; then
  suites+=(forky)
  # The archive this rig reaches serves forky's index past its Valid-Until (a
  # testing index is valid for a week), which apt refuses unless told.
  printf '%s\n' 'Types: deb' "URIs: $mirror" 'Suites: forky' 'Components: main' \
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' 'Check-Valid-Until: no' \
    >"$rootfs/etc/apt/sources.list.d/forky.sources"
  printf '%s\n' '# The container engines from Debian testing (forky), the rest from trixie.' \
    'Package: *' 'Pin: release n=forky' 'Pin-Priority: 100' '' \
    'Package: docker.io docker-cli containerd runc tini' 'Pin: release n=forky' 'Pin-Priority: 990' \
    >"$rootfs/etc/apt/preferences.d/accel-node-forky-engines"
  cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
  chroot "$rootfs" apt-get update -qq >&2
  : >"$rootfs/etc/resolv.conf"
fi

# The node's init: on forky-engines with a cgroup namespace of its own, systemd
# on a cgroup v2 hierarchy mounted over the one Docker gave it; else systemd.
unified=$([ "$name" = forky-engines ] && echo 1 || echo 0)
printf '%s\n' '#!/bin/sh' '# tests/rig/node-image.sh: the init of a test node.' \
  "if [ $unified = 1 ] && grep -qx '0::/' /proc/self/cgroup; then" \
  '  umount -R /sys/fs/cgroup 2>/dev/null' \
  '  mount -t cgroup2 cgroup2 /sys/fs/cgroup || { echo "accel-node-init: cannot mount cgroup2" >&2; exit 1; }' \
  'fi' 'exec /lib/systemd/systemd' >"$rootfs/usr/local/sbin/accel-node-init"
chmod 0755 "$rootfs/usr/local/sbin/accel-node-init"

# A container has no consoles, disks or kernel to manage: keep systemd from
# waiting for them.
for unit in getty.target console-getty.service systemd-remount-fs.service \
    systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
    sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
: >"$rootfs/etc/machine-id"
# Keep the package lists, as cloud images do, so check mode can resolve names.
rm -f "$rootfs"/var/cache/apt/archives/*.deb

# What the suites' indexes offered when the image was built (from the lists kept
# above), and the version of each recorded package that apt would install.
labels=("accel.nodes.image=$name")
{
  echo "image=$name"
  for s in "${suites[@]}"; do
    d=$(sed -n 's/^Date: //p' "$rootfs"/var/lib/apt/lists/*_dists_"${s}"_InRelease | head -1)
    echo "index_date_$s=$d"
    labels+=("accel.nodes.index-date.$s=\"$d\"")
  done
  for p in "${recorded[@]}"; do
    v=$(chroot "$rootfs" apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p' | head -1)
    echo "$p=${v:-none}"
    labels+=("accel.nodes.candidate.$p=${v:-none}")
  done
} >"$rootfs/etc/accel-node-image"
cat "$rootfs/etc/accel-node-image" >&2
# apt-cache left its caches (some 70 MB); apt rebuilds them from the lists when needed.
rm -f "$rootfs"/var/cache/apt/*.bin

tar -C "$rootfs" -c . | docker import \
  -c 'ENV container=docker' \
  -c "LABEL ${labels[*]}" \
  -c 'CMD ["/usr/local/sbin/accel-node-init"]' \
  - "$image" >&2
echo "$image"
