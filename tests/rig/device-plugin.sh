#!/usr/bin/env bash
# Build the real NVIDIA device plugin for Kubernetes, k8s-device-plugin v0.20.0
# (NVIDIA/k8s-device-plugin, commit 1b826acc6af3079d8923bac395c3124b8861a9a6), from
# the upstream source with the vendor Makefile's flags, and print the directory that
# holds the binary `nvidia-device-plugin`, the device-plugin API it serves
# (`api.proto`, for a test harness's gRPC stubs) and their SHA256SUMS. Only
# ./cmd/nvidia-device-plugin is built. For the real-GPU hardware tier, not CI: the
# plugin needs NVML (libnvidia-ml.so.1, from the driver) once it starts.
#
#   tests/rig/device-plugin.sh
#
# Needs Docker: the build runs in the Debian 13 build root of
# tests/rig/build-root.sh (`docker run --rm --network none`, the source archive
# and an output directory bind-mounted), so the host needs no Go and no gcc.
#
# Environment:
#   ACCEL_TOOLKIT_SRC  where the source comes from; the same variable as
#                      tests/rig/toolkit-debs.sh, since CI sets only that one:
#                      - a file: k8s-device-plugin-0.20.0.tar.gz;
#                      - a directory that holds that file (offline CI: ../shared/vendor-src);
#                      - "git" (the default) is refused: the pinned archive leaves out the
#                        upstream tests/ tree (../shared/vendor-src/README.md), so a `git archive`
#                        of the tag cannot have its SHA-256.
#                      The archive's SHA-256 must be the pinned one below.
#   ACCEL_DEVICE_PLUGIN_CACHE  where the build is kept (default /var/cache/accel-nodes/k8s-device-plugin),
#                      in <cache>/<source sha256>-<recipe hash>/, where the recipe is this script
#                      and tests/rig/build-root.sh. A complete entry is reused; a missing or
#                      partial one (a killed build) is rebuilt.
#
# The build is the vendor's `make cmd-nvidia-device-plugin` (k8s-device-plugin-0.20.0/):
#   versions.mk:16     MODULE := github.com/NVIDIA/k8s-device-plugin
#   versions.mk:20     VERSION ?= v0.20.0
#   versions.mk:27     GIT_COMMIT ?= $(shell git describe --match="" --dirty --long --always --abbrev=40 ...)
#   Makefile:40-45     CLI_VERSION = $(VERSION); CLI_VERSION_PACKAGE = github.com/NVIDIA/k8s-device-plugin/internal/info
#   Makefile:52        EXTLDFLAGS = -Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files (not Darwin)
#   Makefile:56        BUILDFLAGS = -ldflags "-s -w '-extldflags=$(EXTLDFLAGS)'
#                        -X $(CLI_VERSION_PACKAGE).gitCommit=$(GIT_COMMIT) -X $(CLI_VERSION_PACKAGE).version=$(CLI_VERSION)"
#   Makefile:61-62     cmd-%: go build $(BUILDFLAGS) $(COMMAND_BUILD_OPTIONS) $(MODULE)/cmd/$(*)
#   deployments/container/Dockerfile:15,41  builds it in golang:1.26.6 with `make PREFIX=/artifacts cmds`
# cgo is on (CGO_ENABLED=1, Go's default where gcc is, as in the golang image; the
# Makefile does not set it): go-nvml's dl package is cgo
# (vendor/github.com/NVIDIA/go-nvml/pkg/dl/dl.go:25-28, `#cgo LDFLAGS: -ldl`, `import "C"`).
# What we adapted, and why:
#   - VERSION and GIT_COMMIT are passed as v0.20.0 (versions.mk:20) and the pinned commit:
#     `git describe` needs a git checkout; on the tag it gives the full commit hash.
#   - Go: Debian's golang-1.26-go from trixie-backports (the build root), not golang:1.26.6;
#     go.mod says `go 1.26.0`. GOTOOLCHAIN=local, GOFLAGS=-mod=vendor and GOPROXY=off come
#     from the build root, and there is no network. gcc is the build root's (Debian 13's).
#   - -trimpath is added, as tests/rig/toolkit-debs.sh does, so that the build path does not show.
#   - api.proto is copied from vendor/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/ (k8s.io/kubelet
#     v0.36.3, vendor/modules.txt:675), the device-plugin API the binary serves and registers with.
# After the build the script checks that `nvidia-device-plugin --version` prints v0.20.0 and the
# commit ("NVIDIA Device Plugin version v0.20.0" and "commit: <hash>": cmd/nvidia-device-plugin/main.go:54-56,
# internal/info/version.go:29-42, vendor/github.com/urfave/cli/v2/help.go:317-318); it runs
# without NVML, which is loaded only when the plugin starts. The binary needs only libc.so.6,
# at symbol versions up to GLIBC_2.34 (objdump -T), so it runs on Debian 12 (glibc 2.36) too.
# Measured on the 2-core rig host (2026-11-27, Go 1.26.11, a cold Go cache each time): 196 s and
# 129 s, with other builds beside it both times; both gave the same binary, 20.5 MB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=v0.20.0
commit=1b826acc6af3079d8923bac395c3124b8861a9a6
sha256=083b7d8925a9e337063cfeb7acb318fae2fb902b28802a75c6555548fd52f3c3
archive_name=k8s-device-plugin-${version#v}.tar.gz
src=${ACCEL_TOOLKIT_SRC:-git}
cache_root=${ACCEL_DEVICE_PLUGIN_CACHE:-/var/cache/accel-nodes/k8s-device-plugin}
recipe=$(cat "$0" "$here/build-root.sh" | sha256sum | cut -c1-12)
entry=$cache_root/$sha256-$recipe
files=(nvidia-device-plugin api.proto)

complete() {
  local f
  for f in "${files[@]}"; do [ -s "$entry/$f" ] || return 1; done
  [ -f "$entry/SHA256SUMS" ] && [ -f "$entry/.complete" ]
}
if complete; then
  echo "$entry"
  exit 0
fi

# Get the archive and check it.
case $src in
  git)
    echo "ACCEL_TOOLKIT_SRC=git: not supported for $archive_name, whose pinned archive leaves out the" \
      "upstream tests/ tree; set ACCEL_TOOLKIT_SRC to the archive or to a directory holding it" \
      "(offline: ../shared/vendor-src)" >&2
    exit 1
    ;;
  *)
    if [ -d "$src" ]; then archive=$src/$archive_name; else archive=$src; fi
    [ -f "$archive" ] || { echo "ACCEL_TOOLKIT_SRC=$src: no $archive_name there" >&2; exit 1; }
    ;;
esac
archive=$(realpath "$archive")
echo "$sha256  $archive" | sha256sum -c --quiet - >&2 ||
  { echo "$archive: SHA-256 is not the pinned $sha256 of $archive_name (tag $version)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work" "$entry.new.$$"' EXIT

# Runs in the build root, as root, with the archive at /src/$archive_name and the
# results going to /out. Variables: version commit archive_name.
build_in_root() {
  set -euo pipefail
  mkdir -p /build
  tar -xzf "/src/$archive_name" -C /build
  cd "/build/k8s-device-plugin-${version#v}"
  local info=github.com/NVIDIA/k8s-device-plugin/internal/info ldflags said
  ldflags="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'"
  ldflags+=" -X $info.gitCommit=$commit -X $info.version=$version"
  export CGO_ENABLED=1 GOCACHE=/build/gocache GOPATH=/build/gopath
  go version
  go build -trimpath -ldflags "$ldflags" -o /out/nvidia-device-plugin \
    github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin
  cp vendor/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto /out/api.proto
  said=$(/out/nvidia-device-plugin --version)
  echo "$said"
  [ "$said" = "$(printf 'NVIDIA Device Plugin version %s\ncommit: %s' "$version" "$commit")" ] ||
    { echo "nvidia-device-plugin --version does not say $version, commit $commit" >&2; exit 1; }
  readelf -dW /out/nvidia-device-plugin | grep NEEDED
}

root_image=$("$here/build-root.sh")
mkdir -m 0755 "$work/out"
SECONDS=0
echo "building nvidia-device-plugin $version in $root_image" >&2
docker run --rm --network none --name "accel-build-device-plugin-$$" \
  -v "$archive:/src/$archive_name:ro" -v "$work/out:/out" \
  -e version="$version" -e commit="$commit" -e archive_name="$archive_name" \
  "$root_image" bash -c "$(declare -f build_in_root); build_in_root" >&2
echo "built nvidia-device-plugin $version in ${SECONDS}s" >&2

# Fill the entry beside it and move it into place, so a reader never sees half of one.
mkdir -p "$cache_root"
rm -rf "$entry" "$entry.new.$$"
mkdir "$entry.new.$$"
install -m 0755 "$work/out/nvidia-device-plugin" "$entry.new.$$/nvidia-device-plugin"
install -m 0644 "$work/out/api.proto" "$entry.new.$$/api.proto"
(cd "$entry.new.$$" && sha256sum "${files[@]}" >SHA256SUMS)
touch "$entry.new.$$/.complete"
mv "$entry.new.$$" "$entry"
echo "$entry"
