#!/usr/bin/env bash
# Build the "fresh EC2 node" image for Molecule: Debian from the Debian archive
# with debootstrap, systemd as PID 1, then `docker import`. The tag carries the
# suite and a hash of this recipe, so the image is rebuilt only when the recipe
# changes. Prints the image reference on stdout.
#
#   tests/rig/node-image.sh [bookworm|trixie|forky]      (default bookworm)
#
# forky is Debian testing, which moves: an image holds the suite as it was on the
# day it was built (rebuild it with `docker rmi` to move on). So that a run can
# say what it ran against, every image records the suite's index date and the
# versions that the index offers of the container engines the roles configure
# (docker.io, containerd, runc) and of python3 and golang-go: as image labels
# (accel.nodes.*; `docker image inspect`) and in /etc/accel-node-image.
set -euo pipefail

mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${1:-bookworm}
case $suite in
  bookworm | trixie | forky) ;;
  *)
    echo "usage: $0 [bookworm|trixie|forky]: no node image for suite '$suite'" >&2
    exit 2
    ;;
esac
# The same names in all three suites (checked in their Packages indexes, 2026-11-27).
packages=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,gnupg,ca-certificates,iproute2,procps,kmod
recorded=(docker.io containerd runc python3 golang-go)
recipe_hash=$(sha256sum "$0" | cut -c1-12)
image=accel-nodes/node:${suite}-${recipe_hash}

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }

rootfs=$(mktemp -d /var/tmp/accel-node-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
# Debian 12's debootstrap has no script for forky; sid's serves every suite since bookworm.
script=/usr/share/debootstrap/scripts/$suite
[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" "$script" >&2

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

# What the suite's index offered when the image was built (from the lists kept above).
index_date=$(sed -n 's/^Date: //p' "$rootfs"/var/lib/apt/lists/*_dists_"${suite}"_InRelease | head -1)
labels=("accel.nodes.suite=$suite" "accel.nodes.index-date=\"$index_date\"")
{
  echo "suite=$suite"
  echo "index_date=$index_date"
  for p in "${recorded[@]}"; do
    v=$(chroot "$rootfs" apt-cache show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Version: //p' | head -1)
    echo "$p=${v:-none}"
    labels+=("accel.nodes.index.$p=${v:-none}")
  done
} >"$rootfs/etc/accel-node-image"
cat "$rootfs/etc/accel-node-image" >&2
# apt-cache left its caches (some 70 MB); apt rebuilds them from the lists when needed.
rm -f "$rootfs"/var/cache/apt/*.bin

tar -C "$rootfs" -c . | docker import \
  -c 'ENV container=docker' \
  -c "LABEL ${labels[*]}" \
  -c 'CMD ["/lib/systemd/systemd"]' \
  - "$image" >&2
echo "$image"
