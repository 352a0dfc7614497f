#!/bin/sh
# TEST DOUBLE of the NVIDIA kernel module build. Not the real one: writes a
# placeholder text file per module instead of compiling anything.
set -e
for module in nvidia nvidia-uvm nvidia-modeset; do
  printf 'TEST DOUBLE of %s.ko (NVIDIA 580.95.05) for kernel %s. Not a kernel module.\n' "$module" "$1" >"$module.ko"
done
