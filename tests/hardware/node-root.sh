#!/usr/bin/env bash
# Build the node root for the real-GPU tier (tests/hardware/README.md): a Debian 12
# root with systemd, Debian's docker.io and the Python that ansible-core needs,
# packed as zstd tar parts small enough for the GPU machine's transfer limit.
#   tests/hardware/node-root.sh OUTDIR [PART_MIB]
# OUTDIR gets root.tar.zst.part-NN and SHA256SUMS (of the whole archive and of
# each part). The toolkit, ansible-core and the collections travel separately
# (tests/hardware/payload.sh), so the root is rebuilt only when this recipe changes.
set -euo pipefail
out=$(realpath -m "$1") part_mib=${2:-40}
mirror=${ACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
recipe=$(sha256sum "$0" | cut -c1-12)
[ "$(cat "$out/RECIPE" 2>/dev/null)" = "$recipe" ] && { echo "$out"; exit 0; }
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >&2; }
command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd >&2; }

root=$(mktemp -d /var/tmp/accel-hw-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
# docker.io without its Recommends (needrestart, apparmor, git...): the node reaches
# no network and must stay small. python3-apt: ansible's apt and package_facts.
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,python3,python3-apt,python3-yaml,python3-jinja2,python3-cryptography,python3-cffi-backend,python3-packaging,python3-resolvelib,python3-requests,kmod,procps,iproute2,ca-certificates,gnupg,docker.io \
  bookworm "$root" "$mirror" >&2

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
rm -rf "$root"/usr/share/{doc,man,info,locale}/* "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*_Packages
mkdir -p "$out"
rm -f "$out"/root.tar.zst.part-* "$out/SHA256SUMS"
tar -C "$root" --numeric-owner -c . | zstd -q -19 -T0 | split -b "${part_mib}M" -d - "$out/root.tar.zst.part-"
(cd "$out" && sha256sum root.tar.zst.part-* >SHA256SUMS && cat root.tar.zst.part-* | sha256sum | sed 's/-$/root.tar.zst/' >>SHA256SUMS)
echo "$recipe" >"$out/RECIPE"
du -sh "$out"/* >&2
echo "$out"
