#!/usr/bin/env bash
# Build the Debian 13 "trixie" build root in which the rig builds vendor sources
# (tests/rig/toolkit-debs.sh), and print its image reference. Debian 12 has no
# Go new enough for the newer vendor archives in ACCEL_TOOLKIT_SRC: the toolkit
# 1.20.0 needs go >= 1.25, cri-tools v1.36.0 go 1.26.2 and k8s-device-plugin
# v0.20.0 go 1.26.0 (their go.mod); golang-1.25-go and golang-1.26-go are only
# in trixie-backports.
#
#   tests/rig/build-root.sh
#
# Like node-image.sh: debootstrap from the Debian archive (no registry), then
# `docker import`; the tag carries a hash of this recipe, so the image is
# rebuilt only when the recipe changes. Use it with `docker run --rm
# --network none`: GOTOOLCHAIN=local and GOFLAGS=-mod=vendor are set, so
# nothing is downloaded.
#
# What it holds:
#   - golang-1.26-go from trixie-backports, as /usr/lib/go-1.26/bin on PATH;
#     the build fails if its version is below 1.26.2 (cri-tools' go.mod);
#   - build-essential (gcc for cgo), dpkg-dev, debhelper and fakeroot from
#     trixie itself, for the vendor's debian/rules (1.20.0: `dh $@ --with
#     systemd`, compat 9, Build-Depends debhelper (>= 9.20160709)). debhelper
#     provides the systemd sequence itself since 9.20160709 (dh-systemd was
#     folded into it), so nothing else is needed. trixie-backports' debhelper
#     14 is not taken: trixie's 13 is the one Debian 13 packages build with.
# Got on 2026-11-27 (labels accel.nodes.go and accel.nodes.debhelper, and
# /etc/accel-build-root/versions, say what an image holds):
#   golang-1.26-go 1.26.11-1~bpo13+1 (go1.26.11), debhelper 13.24.2,
#   dpkg-dev 1.22.22, gcc 4:14.2.0-1.
set -euo pipefail

mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
go_series=1.26
go_package=golang-$go_series-go
go_dir=/usr/lib/go-$go_series
go_minimum=1.26.2
packages=build-essential,dpkg-dev,debhelper,fakeroot,ca-certificates
recipe_hash=$(sha256sum "$0" | cut -c1-12)
image=accel-nodes/build-root:${suite}-${recipe_hash}

# One builder at a time (as node-image.sh): a second caller waits, then finds it built.
exec 9>"/var/tmp/accel-nodes-build-root-$suite.lock"
flock -n 9 || { echo "build-root.sh: another build of the build root runs; waiting for it" >&2; flock 9; }
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }

rootfs=$(mktemp -d /var/tmp/accel-build-root.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
chmod 0755 "$rootfs" # mktemp made it 0700, which keeps apt's _apt user out of the chroot
# An older debootstrap (Debian 12's) may lack a script for a newer suite; sid's serves.
script=/usr/share/debootstrap/scripts/$suite
[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" "$script" >&2

# Only the root's own apt sources get trixie-backports, never the host's.
rm -f "$rootfs/etc/apt/sources.list"
printf '%s\n' 'Types: deb' "URIs: $mirror" "Suites: $suite $suite-updates $suite-backports" \
  'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
  >"$rootfs/etc/apt/sources.list.d/debian.sources"
in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get update -qq >&2
in_root apt-get install -y -qq --no-install-recommends -t "$suite-backports" "$go_package" >&2

go_version=$(in_root dpkg-query -W -f="\${Version}" "$go_package")
go_upstream=${go_version%%-*}
if ! dpkg --compare-versions "$go_upstream" ge "$go_minimum"; then
  echo "$go_package in $suite-backports is $go_version; the vendor sources need go >= $go_minimum" >&2
  exit 1
fi
# Without /proc the go command cannot find its own GOROOT; in a container it can.
go_reported=$(in_root GOROOT="$go_dir" "$go_dir/bin/go" version)
debhelper_version=$(in_root dpkg-query -W -f="\${Version}" debhelper)
mkdir -p "$rootfs/etc/accel-build-root"
{
  echo "suite=$suite"
  echo "$go_package=$go_version"
  echo "go=$go_reported"
  for p in debhelper dpkg-dev gcc fakeroot; do echo "$p=$(in_root dpkg-query -W -f="\${Version}" "$p")"; done
} >"$rootfs/etc/accel-build-root/versions"
cat "$rootfs/etc/accel-build-root/versions" >&2

in_root apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
: >"$rootfs/etc/machine-id"

tar -C "$rootfs" -c . | docker import \
  -c "ENV PATH=$go_dir/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  -c 'ENV GOTOOLCHAIN=local GOFLAGS=-mod=vendor GOPROXY=off LANG=C.UTF-8' \
  -c "LABEL accel.nodes.suite=$suite accel.nodes.go=$go_version accel.nodes.debhelper=$debhelper_version" \
  -c 'CMD ["/bin/bash"]' \
  - "$image" >&2
echo "$image"
