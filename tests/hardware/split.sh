#!/usr/bin/env bash
# Share node-root.sh's parts between carry folders of at most ACCEL_HW_CARRY_MIB
# (default 56) each, every folder with the whole SHA256SUMS:
#   tests/hardware/split.sh PARTS_DIR OUT_A OUT_B [OUT_C ...]
set -euo pipefail
parts=$1
shift
limit=$((${ACCEL_HW_CARRY_MIB:-56} * 1024 * 1024))
outs=("$@") i=0 used=0
for o in "${outs[@]}"; do rm -rf "$o" && mkdir -p "$o" && cp "$parts/SHA256SUMS" "$o/"; done
for p in "$parts"/root.tar.zst.part-*; do
  size=$(stat -c %s "$p")
  if [ $((used + size)) -gt "$limit" ]; then
    i=$((i + 1)) used=0
    [ "$i" -lt ${#outs[@]} ] || { echo "the parts need more than ${#outs[@]} folders" >&2; exit 1; }
  fi
  cp "$p" "${outs[$i]}/"
  used=$((used + size))
done
# zstd and its library from this machine, for a GPU host that has none.
mkdir -p "${outs[0]}/tools"
cp "$(command -v zstd)" "${outs[0]}/tools/"
cp -L "$(ldconfig -p | awk '/libzstd.so.1 .*x86-64/ {print $NF; exit}')" "${outs[0]}/tools/"
du -sh "${outs[@]}" >&2
