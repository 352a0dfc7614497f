#!/usr/bin/env bash
# Build the node root for the real-GPU tier (tests/hardware/README.md): a Debian
# root with systemd, Debian's docker.io, the Python that ansible-core needs and the
# gRPC modules of kubelet_stub.py,
# packed as zstd tar parts small enough for the GPU machine's transfer limit.
#   tests/hardware/node-root.sh OUTDIR [PART_MIB] [NODE]
# NODE is bookworm (Debian 12, docker.io 20.10; the default) or forky-engines:
# Debian 13 with the newest engines Debian has, docker.io, containerd and runc
# from Debian testing (forky), pinned as tests/rig/node-image.sh pins them.
# OUTDIR gets root.tar.zst.part-NN and SHA256SUMS (of the whole archive and of
# each part). The toolkit, ansible-core and the collections travel separately
# (tests/hardware/payload.sh), so the root is rebuilt only when this recipe changes.
set -euo pipefail
out=$(realpath -m "$1") part_mib=${2:-40} node=${3:-bookworm}
mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
case $node in
  bookworm) suite=bookworm engines=docker.io ;;
  forky-engines) suite=trixie engines= ;;
  *) echo "usage: $0 OUTDIR [PART_MIB] [bookworm|forky-engines]" >&2; exit 2 ;;
esac
recipe=$( (sha256sum "$0"; echo "$node") | sha256sum | cut -c1-12)
[ "$(cat "$out/RECIPE" 2>/dev/null)" = "$recipe" ] && { echo "$out"; exit 0; }
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }
command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd >&2; }

root=$(mktemp -d /var/tmp/accel-hw-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
# docker.io without its Recommends (needrestart, apparmor, git...): the node reaches
# no network and must stay small. python3-apt: ansible's apt and package_facts.
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,python3,python3-apt,python3-yaml,python3-jinja2,python3-cryptography,python3-cffi-backend,python3-packaging,python3-resolvelib,python3-requests,kmod,procps,iproute2,ca-certificates,gnupg${engines:+,$engines} \
  "$suite" "$root" "$mirror" >&2
# python3-grpcio, python3-grpc-tools and python3-protobuf: kubelet_stub.py, the stand-in
# for kubelet's device manager in allocate.sh (issue 26). Through apt in the root, not
# debootstrap's --include, whose configure pass fails on python3-grpcio.
extra=(python3-grpcio python3-grpc-tools python3-protobuf)
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod 0755 "$root/usr/sbin/policy-rc.d"
if [ "$node" = forky-engines ]; then
  # The engines from forky, the rest from trixie; forky's index, as this rig's
  # archive serves it, is past its Valid-Until (tests/rig/node-image.sh).
  printf '%s\n' 'Types: deb' "URIs: $mirror" 'Suites: forky' 'Components: main' \
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' 'Check-Valid-Until: no' \
    >"$root/etc/apt/sources.list.d/forky.sources"
  printf '%s\n' 'Package: *' 'Pin: release n=forky' 'Pin-Priority: 100' '' \
    'Package: docker.io docker-cli containerd runc tini' 'Pin: release n=forky' 'Pin-Priority: 990' \
    >"$root/etc/apt/preferences.d/accel-node-forky-engines"
  # docker.io only recommends docker-cli, the docker command, from Debian 13 on.
  extra+=(docker.io docker-cli)
fi
chroot "$root" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "${extra[@]}" >&2
chroot "$root" python3 -c 'import grpc, grpc_tools, google.protobuf' >&2
rm -f "$root/usr/sbin/policy-rc.d"
: >"$root/etc/resolv.conf"
chroot "$root" dpkg-query -W docker.io containerd runc systemd python3 >"$root/etc/accel-hw-node" 2>/dev/null || :
cat "$root/etc/accel-hw-node" >&2

# What a container cannot use: consoles, udev, kernel config and debug mounts.
for unit in getty.target console-getty.service systemd-remount-fs.service \
    systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
    sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
    systemd-networkd.service systemd-resolved.service systemd-timesyncd.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
: >"$root/etc/machine-id"
chmod 0755 "$root" # a mktemp root is 0700, which breaks dbus in the node
# The GPU machine reaches no network: Docker gets no bridge and no iptables rules,
# and vfs storage works on any file system. The roles merge their keys into this.
mkdir -p "$root/etc/docker"
cat >"$root/etc/docker/daemon.json" <<'JSON'
{
  "bridge": "none",
  "iptables": false,
  "ip6tables": false,
  "storage-driver": "vfs"
}
JSON
# apt's caches and the indexes (the node reaches no archive; the roles install nothing there).
rm -rf "$root"/usr/share/{doc,man,info,locale}/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
  "$root"/var/lib/apt/lists/*_Packages "$root"/var/lib/apt/lists/*_Translation-*
mkdir -p "$out"
rm -f "$out"/root.tar.zst.part-* "$out/SHA256SUMS"
tar -C "$root" --numeric-owner -c . | zstd -q -19 -T0 | split -b "${part_mib}M" -d - "$out/root.tar.zst.part-"
(cd "$out" && sha256sum root.tar.zst.part-* >SHA256SUMS && cat root.tar.zst.part-* | sha256sum | sed 's/-$/root.tar.zst/' >>SHA256SUMS)
echo "$recipe" >"$out/RECIPE"
du -sh "$out"/* >&2
echo "$out"
