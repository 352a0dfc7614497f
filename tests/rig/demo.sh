#!/usr/bin/env bash
# The README's first command: set up the rig, build throwaway local nodes with
# SIMULATED hardware (the Molecule scenario molecule/site), run
# playbooks/site.yml on them and print what validation found.
#   tests/rig/demo.sh
# Run it again to re-run site.yml on the same nodes (nothing changes the
# second time). ACCEL_NODE_PREFIX (default accel) prefixes the node names.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
prefix=${ACCEL_NODE_PREFIX:-accel}
nodes=("$prefix-site-p3" "$prefix-site-inf1" "$prefix-site-gpu-missing")

banner() {
  printf '\n==== %s\n' "$1"
  shift
  [ $# -eq 0 ] || printf '     %s\n' "$@"
}

banner "SIMULATED HARDWARE. The nodes are containers on this machine, with no GPU and no Inferentia." \
  "Their accelerators are injected as facts (molecule/site/vars/hardware.yml) and the vendor" \
  "packages and tools are test doubles (tests/doubles/README.md). The playbooks and roles are the real ones."

tests/rig/host.sh
tests/rig/venv.sh .venv requirements/dev.txt

banner "Creating the nodes and running playbooks/site.yml on them (a few minutes the first time; log: build/demo.log)" \
  "${nodes[0]}: simulated p3.8xlarge, 4 x V100, the driver already loaded (as on a Deep Learning AMI)" \
  "${nodes[1]}: simulated inf1.6xlarge, 4 Inferentia, Neuron devices in containers through oci-add-hooks" \
  "${nodes[2]}: another simulated p3.8xlarge, which loses a GPU later (see the end)"
mkdir -p build
if ! tests/rig/molecule.sh site converge >build/demo.log 2>&1; then
  tail -40 build/demo.log
  banner "site.yml FAILED: see build/demo.log. Remove the nodes with: tests/rig/molecule.sh site destroy"
  exit 1
fi
# The last recap is site.yml's.
awk '/^PLAY RECAP/ { recap = "" } { recap = recap $0 "\n" } END { printf "%s", recap }' build/demo.log |
  sed -n '/^PLAY RECAP/,/^$/p'

banner "Validation reports (/var/lib/accel-nodes/validation.json on each node), SIMULATED hardware:"
for node in "${nodes[@]}"; do
  docker exec "$node" cat /var/lib/accel-nodes/validation.json |
    .venv/bin/python -c '
import json, sys
report = json.load(sys.stdin)
layers = ", ".join("%s %s" % (layer, report["layers"][layer]) for layer in ("host", "runtime", "container"))
print("\n%s: %s, simulated %s (%s)" % (report["host"], report["status"].upper(), report["instance_type"], layers))
for check in report["checks"]:
    print("  %-4s  %-32s %s" % (check["status"], check["name"], check["detail"]))
'
done

banner "Look around a node:    docker exec -it ${nodes[0]} bash" \
  "Catch a lost GPU:      tests/rig/molecule.sh site verify   (${nodes[2]} loses a GPU; validate.yml reports it)" \
  "Remove the nodes:      tests/rig/molecule.sh site destroy"
