#!/usr/bin/env bash
# Build the real crictl of cri-tools v1.36.0 (kubernetes-sigs/cri-tools, commit
# 88d8ad9d40f82726fda53c2d271e6172b4c619c9) from the upstream source with the
# vendor Makefile's flags, and print the directory that holds the static binary
# `crictl` (and its SHA256SUMS). One build serves every node image: no cgo.
#
#   tests/rig/crictl.sh
#
# Needs Docker: the build runs in the Debian 13 build root of
# tests/rig/build-root.sh (`docker run --rm --network none`, the source archive
# and an output directory bind-mounted), so the host needs no Go.
#
# Environment:
#   ACCEL_TOOLKIT_SRC   where the source comes from (default: upstream git); the same
#                       variable as tests/rig/toolkit-debs.sh, since CI sets only that one:
#                       - "git": clone tag v1.36.0 of github.com/kubernetes-sigs/cri-tools,
#                         check that it is the pinned commit below and `git archive` it
#                         (../shared/vendor-src/README.md: the archive was made that way);
#                       - a file: cri-tools-1.36.0.tar.gz;
#                       - a directory that holds that file (offline CI: ../shared/vendor-src).
#                       In every case the archive's SHA-256 must be the pinned one below.
#   ACCEL_CRICTL_CACHE  where the binary is kept (default /var/cache/accel-nodes/crictl), in
#                       <cache>/<source sha256>-<recipe hash>/, where the recipe is this script
#                       and tests/rig/build-root.sh. A complete entry is reused; a missing or
#                       partial one (a killed build) is rebuilt.
#
# The build is the vendor's `make crictl` (cri-tools-1.36.0/Makefile):
#   Makefile:27     GO_BUILD = GO111MODULE=on GOARCH=$(GOARCH) GOOS=$(GOOS) go build -mod=vendor
#   Makefile:37     VERSION ?= $(shell git describe --tags --dirty --always | sed 's/^v//')
#   Makefile:38-39  CGO_ENABLED ?= 0, GOFLAGS ?= -trimpath
#   Makefile:40     GO_LDFLAGS := -X $(PROJECT)/pkg/version.Version=$(VERSION), PROJECT sigs.k8s.io/cri-tools (:34)
#   Makefile:110-114  CGO_ENABLED=$(CGO_ENABLED) $(GO_BUILD) -o $@ -ldflags '$(GO_LDFLAGS)' $(GOFLAGS) $(PROJECT)/cmd/crictl
# hack/release.sh:54,67-70 builds the release binaries with the same -ldflags and CGO_ENABLED=0.
# What we adapted, and why:
#   - VERSION is passed as 1.36.0: `git describe` needs a git checkout, and on the tag it
#     gives v1.36.0, which Makefile:37 strips to 1.36.0 (crictl --version: "crictl version 1.36.0",
#     pkg/version/version.go:20 and cmd/crictl/main.go:189).
#   - Go: Debian's golang-1.26-go from trixie-backports (the build root), not the vendor's
#     toolchain; go.mod says `go 1.26.2`, which build-root.sh checks. GOTOOLCHAIN=local,
#     GOFLAGS=-mod=vendor and GOPROXY=off come from the build root, and there is no network.
# After the build the script checks that `crictl --version` says 1.36.0 and that the binary
# is static (no PT_INTERP program header, no NEEDED entry).
# Measured on the 2-core rig host (2026-11-27, Go 1.26.11, a cold Go cache each time): 66 s, and
# 287 s with other builds beside it (load average 8 to 11); both gave the same binary, 39.8 MB
# (the Makefile passes no -s -w).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=1.36.0
commit=88d8ad9d40f82726fda53c2d271e6172b4c619c9
sha256=aac5aaf303eadb2a525899e59ca58c8e545fe6643384d82606284d8743a32a06
archive_name=cri-tools-$version.tar.gz
src=${ACCEL_TOOLKIT_SRC:-git}
cache_root=${ACCEL_CRICTL_CACHE:-/var/cache/accel-nodes/crictl}
recipe=$(cat "$0" "$here/build-root.sh" | sha256sum | cut -c1-12)
entry=$cache_root/$sha256-$recipe

if [ -x "$entry/crictl" ] && [ -f "$entry/SHA256SUMS" ] && [ -f "$entry/.complete" ]; then
  echo "$entry"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work" "$entry.new.$$"' EXIT

# Get the archive and check it.
case $src in
  git)
    command -v git >/dev/null || { apt-get update -qq && apt-get install -y -qq git >&2; }
    git clone -q --depth 1 --branch "v$version" https://github.com/kubernetes-sigs/cri-tools "$work/git" >&2
    got=$(git -C "$work/git" rev-parse HEAD)
    [ "$got" = "$commit" ] || { echo "tag v$version is commit $got, expected $commit" >&2; exit 1; }
    git -C "$work/git" archive --format=tar.gz --prefix="cri-tools-$version/" HEAD >"$work/$archive_name"
    archive=$work/$archive_name
    ;;
  *)
    if [ -d "$src" ]; then archive=$src/$archive_name; else archive=$src; fi
    [ -f "$archive" ] || { echo "ACCEL_TOOLKIT_SRC=$src: no $archive_name there" >&2; exit 1; }
    ;;
esac
archive=$(realpath "$archive")
echo "$sha256  $archive" | sha256sum -c --quiet - >&2 ||
  { echo "$archive: SHA-256 is not the pinned $sha256 of $archive_name (tag v$version)" >&2; exit 1; }

# Runs in the build root, as root, with the archive at /src/$archive_name and the
# binary going to /out. Variables: version archive_name.
build_in_root() {
  set -euo pipefail
  mkdir -p /build
  tar -xzf "/src/$archive_name" -C /build
  cd "/build/cri-tools-$version"
  export GO111MODULE=on CGO_ENABLED=0 GOCACHE=/build/gocache GOPATH=/build/gopath
  go version
  go build -mod=vendor -o /out/crictl -ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=$version" \
    -trimpath sigs.k8s.io/cri-tools/cmd/crictl
  local said
  said=$(/out/crictl --version)
  echo "$said"
  [ "$said" = "crictl version $version" ] || { echo "crictl --version says '$said', not $version" >&2; exit 1; }
  if readelf -lW /out/crictl | grep -q INTERP || readelf -dW /out/crictl | grep -q NEEDED; then
    echo "crictl is not static:" >&2
    readelf -lW /out/crictl | grep INTERP >&2 || :
    readelf -dW /out/crictl >&2
    exit 1
  fi
}

root_image=$("$here/build-root.sh")
mkdir -m 0755 "$work/out"
SECONDS=0
echo "building crictl $version in $root_image" >&2
docker run --rm --network none --name "accel-build-crictl-$$" \
  -v "$archive:/src/$archive_name:ro" -v "$work/out:/out" \
  -e version="$version" -e archive_name="$archive_name" \
  "$root_image" bash -c "$(declare -f build_in_root); build_in_root" >&2
echo "built crictl $version in ${SECONDS}s" >&2

# Fill the entry beside it and move it into place, so a reader never sees half of one.
mkdir -p "$cache_root"
rm -rf "$entry" "$entry.new.$$"
mkdir "$entry.new.$$"
install -m 0755 "$work/out/crictl" "$entry.new.$$/crictl"
(cd "$entry.new.$$" && sha256sum crictl >SHA256SUMS)
touch "$entry.new.$$/.complete"
mv "$entry.new.$$" "$entry"
echo "$entry"
