#!/usr/bin/env bash
# Present this checkout as ansible_collections/accel/nodes, where Ansible and
# its tools expect a collection to live.
#   build/collections  - a symlink, for imports in unit tests and for playbooks
#   build/sanity       - a copy of the tracked files, for ansible-test, which
#                        resolves symlinks and would find itself outside the tree.
#                        tests/fixtures stays out: it holds captured vendor files
#                        and fake sysfs trees whose names (PCI addresses) carry
#                        ':', which ansible-test rejects; like the built
#                        collection (build_ignore), sanity has nothing to check there.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$top/build/collections/ansible_collections/accel"
ln -sfn ../../../.. "$top/build/collections/ansible_collections/accel/nodes"
if [ "${1:-}" = --sanity ]; then
  dest="$top/build/sanity/ansible_collections/accel/nodes"
  rm -rf "$dest" && mkdir -p "$dest"
  (cd "$top" && git ls-files -co --exclude-standard -z -- . ':!tests/fixtures' | tar --null -T - -c) | tar -C "$dest" -x
  (cd "$dest" && git init -q . && git add -A >/dev/null)
  echo "$dest"
fi
