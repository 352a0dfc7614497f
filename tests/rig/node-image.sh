#!/usr/bin/env bash
# Build the "fresh EC2 node" image for Molecule: Debian bookworm from the
# Debian archive with debootstrap, systemd as PID 1, then `docker import`.
# The tag carries a hash of this recipe, so the image is rebuilt only when the
# recipe changes. Prints the image reference on stdout.
set -euo pipefail

mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
packages=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,gnupg,ca-certificates,iproute2,procps,kmod
recipe_hash=$(sha256sum "$0" | cut -c1-12)
image=accel-nodes/node:${suite}-${recipe_hash}

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }

rootfs=$(mktemp -d /var/tmp/accel-node-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >&2

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

tar -C "$rootfs" -c . | docker import \
  -c 'ENV container=docker' \
  -c 'CMD ["/lib/systemd/systemd"]' \
  - "$image" >&2
echo "$image"
