#!/usr/bin/env bash
# Build the image root that tests/chroot/bake.sh bakes through a chroot: Debian
# bookworm from the Debian archive with debootstrap, as an AMI's root volume
# holds it, with REAL Debian kernels whose versions differ from any CI host's:
#   - linux-image-cloud-amd64 + linux-headers-cloud-amd64 of bookworm and
#     bookworm-security (6.1.0-<abi>-cloud-amd64),
#   - the same pair from bookworm-backports (6.12.<n>+deb12-cloud-amd64),
# both kept installed (apt-mark manual), so "every installed kernel" is two.
# initramfs-tools stays in and builds both initramfs images, as on a real
# image: it costs a minute here, once, and the bake then meets the same
# kernel hooks (/etc/kernel/*.d) a real image has.
#
# The root is cached as a tarball whose name carries a hash of this recipe, so
# a CI machine builds it once (like tests/rig/node-image.sh). The kernels are
# whatever the archive carries when it is built; bake.sh reads their versions
# from the root, never from this file. Prints the tarball's path.
#   ACCEL_CHROOT_CACHE           cache directory (default /var/cache/accel-nodes/chroot)
#   ACCEL_DEBIAN_MIRROR          Debian mirror (default http://deb.debian.org/debian)
#   ACCEL_DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security)
set -euo pipefail

mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${ACCEL_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
cache=${ACCEL_CHROOT_CACHE:-/var/cache/accel-nodes/chroot}
# What a cloud image has that minbase lacks, and what Ansible needs in the root.
packages=systemd,systemd-sysv,dbus,python3,python3-apt,gnupg,ca-certificates,kmod,procps,initramfs-tools
recipe_hash=$(sha256sum "$0" | cut -c1-12)
tarball=$cache/$suite-$recipe_hash.tar.zst

if [ -s "$tarball" ]; then
  echo "$tarball"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }
command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd >&2; }
mkdir -p "$cache"

rootfs=$(mktemp -d /var/tmp/accel-chroot-root.XXXXXX)
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || :
  done
  if grep -qF " $rootfs/" /proc/mounts; then
    echo "root.sh: mounts left under $rootfs, not removing it" >&2
  else
    rm -rf "$rootfs"
  fi
  rm -f "$tarball.tmp"
}
trap cleanup EXIT

debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >&2

cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SOURCES
cat >"$rootfs/etc/apt/sources.list.d/backports.list" <<SOURCES
deb $mirror $suite-backports main
SOURCES

for m in proc sys dev; do
  case $m in
    proc) mount -t proc proc "$rootfs/proc" ;;
    sys) mount -t sysfs sysfs "$rootfs/sys" ;;
    dev) mount --bind /dev "$rootfs/dev" ;;
  esac
  mounts+=("$rootfs/$m")
done
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"

in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
in_root apt-get update -qq >&2
in_root apt-get install -y -qq --no-install-recommends linux-image-cloud-amd64 linux-headers-cloud-amd64 >&2
# Keep the 6.1 kernel when the backports metapackage moves on to 6.12.
in_root sh -c "dpkg-query -W -f '\${db:Status-Abbrev} \${Package}\n' 'linux-image-[0-9]*' 'linux-headers-[0-9]*' |
  awk '/^ii/ {print \$2}' | xargs apt-mark manual" >&2
in_root apt-get install -y -qq --no-install-recommends -t "$suite-backports" \
  linux-image-cloud-amd64 linux-headers-cloud-amd64 >&2
# An image keeps only what its own sources serve; the bake must not pull
# anything from backports.
rm -f "$rootfs/etc/apt/sources.list.d/backports.list"
in_root apt-get update -qq >&2

kernels=$(find "$rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort)
[ "$(wc -l <<<"$kernels")" -ge 2 ] || { echo "root.sh: expected two kernels in the root, got: $kernels" >&2; exit 1; }
for k in $kernels; do
  # build is an absolute link into the root's /usr/src: look from inside.
  in_root test -d "/lib/modules/$k/build/include" || {
    echo "root.sh: no headers for $k" >&2
    in_root dpkg-query -W 'linux-*' >&2
    ls -la "$rootfs/lib/modules/$k" >&2
    exit 1
  }
done
echo "root.sh: kernels in the root: $(tr '\n' ' ' <<<"$kernels")" >&2

for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}"; done
mounts=()
# As a cloud image: no downloaded packages and no resolver of this host; keep
# the package lists, so check mode can resolve names.
rm -f "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin
: >"$rootfs/etc/resolv.conf"

tar -C "$rootfs" --numeric-owner --xattrs -c . | zstd -q -T0 -3 -o "$tarball.tmp"
mv "$tarball.tmp" "$tarball"
# Roots of earlier recipes are never used again.
find "$cache" -maxdepth 1 -name "$suite-*.tar.zst" ! -name "${tarball##*/}" -delete
echo "$tarball"
