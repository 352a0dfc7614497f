#!/usr/bin/env bash
# Share node-root.sh's parts, and any other files the run needs (payload.sh's
# payload.tar.zst and k8s.tar.zst), between carry folders of at most
# ACCEL_HW_CARRY_MIB (default 56) each, every folder with the whole SHA256SUMS:
#   tests/hardware/split.sh PARTS_DIR OUT_A [OUT_B ...] [-- FILE ...]
# The FILEs' checksums are added to SHA256SUMS, so that run.sh waits for them as it
# waits for the parts, whichever call brings them. The first folder also gets this
# machine's zstd (tools/), counted against its limit. Largest first, each into the
# first folder with room: small parts (node-root.sh PART_MIB 8) fill the folders
# best. Each folder then travels alone in one call of the GPU machine (64 MiB with
# the working tree, about 6 MiB).
set -euo pipefail
parts=$1
shift
outs=() extras=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do outs+=("$1"); shift; done
if [ $# -gt 0 ]; then shift; extras=("$@"); fi
[ ${#outs[@]} -gt 0 ] || { echo "usage: $0 PARTS_DIR OUT_A [OUT_B ...] [-- FILE ...]" >&2; exit 2; }
limit=$((${ACCEL_HW_CARRY_MIB:-56} * 1024 * 1024))
for f in "${extras[@]}"; do
  [ -f "$f" ] || { echo "no file $f" >&2; exit 2; }
  case $(basename "$f") in
    root.tar.zst* | SHA256SUMS) echo "$f: that name is the node root's" >&2; exit 2 ;;
  esac
done
sums=$(mktemp)
trap 'rm -f "$sums"' EXIT
cp "$parts/SHA256SUMS" "$sums"
for f in "${extras[@]}"; do (cd "$(dirname "$f")" && sha256sum "$(basename "$f")") >>"$sums"; done
used=()
for o in "${outs[@]}"; do rm -rf "$o" && mkdir -p "$o" && cp "$sums" "$o/SHA256SUMS" && used+=(0); done
# zstd and its library from this machine, for a GPU host that has none.
mkdir -p "${outs[0]}/tools"
cp "$(command -v zstd)" "${outs[0]}/tools/"
cp -L "$(ldconfig -p | awk '/libzstd.so.1 .*x86-64/ {print $NF; exit}')" "${outs[0]}/tools/"
used[0]=$(du -sb "${outs[0]}" | cut -f1)
# Largest first, first fit.
while read -r size path; do
  placed=
  for i in "${!outs[@]}"; do
    if [ $((used[i] + size)) -le "$limit" ]; then
      cp "$path" "${outs[$i]}/"
      used[i]=$((used[i] + size)) placed=1
      break
    fi
  done
  [ -n "$placed" ] || { echo "$(basename "$path") ($size bytes) fits in none of the ${#outs[@]} folders: name more" >&2; exit 1; }
done < <(for p in "$parts"/root.tar.zst.part-* "${extras[@]}"; do echo "$(stat -c %s "$p") $p"; done | sort -rn)
for i in "${!outs[@]}"; do
  [ "${used[i]}" -gt 0 ] || echo "${outs[$i]} holds nothing: one folder fewer would do" >&2
  printf '%s %s MiB: %s\n' "${outs[$i]}" "$((used[i] / 1024 / 1024))" "$(cd "${outs[$i]}" && echo *)" >&2
done
