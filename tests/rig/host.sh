#!/usr/bin/env bash
# Make sure this machine can run the test rig: Debian packages for the image,
# repo doubles and sanity tests, and a Docker daemon that answers. A daemon we
# start is left running for the next run; nothing is killed.
set -euo pipefail
need=()
for pair in dockerd:docker.io debootstrap:debootstrap apt-ftparchive:apt-utils gpg:gnupg \
    shellcheck:shellcheck git:git; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
# Debian's gRPC for Python, which the real-GPU tier's kubelet stand-in uses on its
# node (tests/hardware/kubelet_stub.py), so that its unit test runs with the same.
for pkg in python3-grpcio python3-grpc-tools python3-pytest; do
  dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd (log: /var/log/accel-nodes-dockerd.log)" >&2
  setsid dockerd >/var/log/accel-nodes-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/accel-nodes-dockerd.log >&2; exit 1; }
fi
