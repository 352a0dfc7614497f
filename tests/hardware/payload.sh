#!/usr/bin/env bash
# Pack what the real-GPU tier brings besides the node root (tests/hardware/README.md):
# ansible-core (unpacked from its wheel, pure Python), the community collections this
# collection uses and ansible.posix for its profile_tasks callback, which times each
# task of the runs (from the pinned `ansible` package in .venv), the NVIDIA Container
# Toolkit debs built from source (tests/rig/toolkit-debs.sh), both versions the
# rig builds (debs/<version>/), the runc of Debian 12 (for the daemon-reload trap,
# trap.sh), and two small validation images, with and without an ld cache.
# Beside it, k8s.tar.zst (issue 26): crictl 1.36.0 (tests/rig/crictl.sh), for the
# validation's CRI layer, and NVIDIA's device plugin v0.20.0 with the device-plugin
# api.proto (tests/rig/device-plugin.sh), for allocate.sh; run.sh unpacks it into
# /opt/accel-nodes (bin/crictl, device-plugin/). An archive of its own, so that
# split.sh can send it in whichever call has room. ACCEL_HW_K8S=0 leaves it out.
#   tests/hardware/payload.sh NODE_ROOT_PARTS_DIR OUTDIR
# The rig scripts' sources: ACCEL_TOOLKIT_SRC where set, else ../shared/vendor-src
# beside the checkout where it is there (device-plugin.sh builds from no other).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
parts=$(realpath "$1") out=$(realpath -m "$2")
site=$top/.venv/lib/python3.11/site-packages
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ansible-core, the version requirements/dev.txt pins; its dependencies are Debian's,
# installed in the node root.
core=$(sed -n 's/^ansible-core==//p' "$top/requirements/dev.txt")
"$top/.venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$work/whl" "ansible-core==$core"
mkdir -p "$work/payload/python"
(cd "$work/payload/python" && python3 -m zipfile -e "$work"/whl/ansible_core-*.whl .)
mkdir -p "$work/payload/collections/ansible_collections/community"
cp -a "$site/ansible_collections/community/docker" "$site/ansible_collections/community/general" \
  "$work/payload/collections/ansible_collections/community/"
mkdir -p "$work/payload/collections/ansible_collections/ansible"
cp -a "$site/ansible_collections/ansible/posix" "$work/payload/collections/ansible_collections/ansible/"

# The toolkit, built from the vendor's source with the vendor's packaging.
for version in 1.17.8 1.20.0; do
  debs=$("$top/tests/rig/toolkit-debs.sh" "$version")
  mkdir -p "$work/payload/debs/$version"
  cp "$debs"/nvidia-container-toolkit*.deb "$work/payload/debs/$version/"
done
# runc 1.1.5, Debian 12's (runc's own binary, static but for libseccomp): the trap
# runs the same toolkit with it and with the node's runc.
mkdir -p "$work/payload/runc-1.1"
(cd "$work" && apt-get download -q runc=1.1.5+ds1-1+deb12u1 >/dev/null && dpkg-deb -x runc_*.deb runc-deb)
cp "$work/runc-deb/usr/sbin/runc" "$work/payload/runc-1.1/runc"

# Validation images: glibc, a shell and ldconfig from the node root, so that the
# toolkit's injected nvidia-smi runs. One has /etc/ld.so.cache, one has none (the
# case the validation must explain).
img=$work/img
mkdir -p "$img"
cat "$parts"/root.tar.zst.part-* | zstd -dc | tar -C "$img" -x \
  ./usr/lib/x86_64-linux-gnu/libc.so.6 ./usr/lib/x86_64-linux-gnu/libm.so.6 \
  ./usr/lib/x86_64-linux-gnu/libdl.so.2 ./usr/lib/x86_64-linux-gnu/libpthread.so.0 \
  ./usr/lib/x86_64-linux-gnu/librt.so.1 ./usr/lib/x86_64-linux-gnu/libgcc_s.so.1 \
  ./usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 ./usr/lib64/ld-linux-x86-64.so.2 \
  ./usr/bin/dash ./usr/bin/ls ./usr/bin/cat ./usr/sbin/ldconfig \
  ./usr/lib/x86_64-linux-gnu/libselinux.so.1 ./usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 \
  ./etc/ld.so.conf ./etc/ld.so.conf.d ./bin ./lib ./lib64 ./sbin
ln -s dash "$img/usr/bin/sh"
mkdir -p "$img"/{dev,proc,sys,tmp,etc} && chmod 1777 "$img/tmp"
tar -C "$img" --numeric-owner -c . >"$work/payload/image-no-ldcache.tar"
ldconfig -r "$img"
tar -C "$img" --numeric-owner -c . >"$work/payload/image.tar"

tar -C "$work/payload" -c . | zstd -q -19 -T0 >"$out/payload.tar.zst"
du -sh "$out/payload.tar.zst" >&2

if [ "${ACCEL_HW_K8S:-1}" = 1 ]; then
  vendor_src=$(realpath -m "$top/../shared/vendor-src")
  [ -n "${ACCEL_TOOLKIT_SRC:-}" ] || [ ! -d "$vendor_src" ] || export ACCEL_TOOLKIT_SRC=$vendor_src
  crictl=$("$top/tests/rig/crictl.sh")
  plugin=$("$top/tests/rig/device-plugin.sh")
  (cd "$crictl" && sha256sum -c --quiet SHA256SUMS) && (cd "$plugin" && sha256sum -c --quiet SHA256SUMS)
  mkdir -p "$work/k8s/bin" "$work/k8s/device-plugin"
  install -m 0755 "$crictl/crictl" "$work/k8s/bin/crictl"
  install -m 0755 "$plugin/nvidia-device-plugin" "$work/k8s/device-plugin/nvidia-device-plugin"
  install -m 0644 "$plugin/api.proto" "$work/k8s/device-plugin/api.proto"
  tar -C "$work/k8s" --numeric-owner --owner=0 --group=0 -c . | zstd -q -19 -T0 >"$out/k8s.tar.zst"
  du -sh "$out/k8s.tar.zst" >&2
fi
echo "$out"
