#!/usr/bin/env bash
# Build the real NVIDIA Container Toolkit 1.17.8-1 packages, nvidia-container-toolkit
# and nvidia-container-toolkit-base, from the upstream source with the vendor's own
# packaging/debian metadata, and print the directory that holds the two .debs.
#
#   tests/rig/toolkit-debs.sh            (needs root: it installs build packages)
#
# Environment:
#   ACCEL_TOOLKIT_SRC    where the source comes from (default: upstream git):
#                        - "git": clone tag v1.17.8 of github.com/NVIDIA/nvidia-container-toolkit,
#                          check that it is commit f202b80a9b9d0db00d9b1d73c0128c8962c55f4d and
#                          `git archive` it, which reproduces the release archive byte for byte;
#                        - a file: nvidia-container-toolkit-1.17.8.tar.gz;
#                        - a directory that holds that file (offline CI: ../shared/vendor-src).
#                        In every case the archive's SHA-256 must be the pinned one below.
#   ACCEL_TOOLKIT_CACHE  where built packages are kept (default /var/cache/accel-nodes/nvidia-container-toolkit),
#                        in <cache>/<source sha256>-<recipe hash>/. A complete entry is reused; a
#                        missing or partial one is rebuilt.
#
# The build follows the vendor's docker/Dockerfile.debian and Makefile (tag v1.17.8):
#   make PREFIX=$DIST_DIR cmds; cp -r packaging/debian $DIST_DIR/debian; dch --create ...;
#   debuild -eDISTRIB -eSECTION -eLIBNVIDIA_CONTAINER_TOOLS_VERSION -eVERSION=1.17.8-1
#     --dpkg-buildpackage-hook='sh debian/prepare' -i -us -uc -b
# What we adapted, and why:
#   - Go: Debian's golang-1.22-go from bookworm-backports, not the tarball from
#     storage.googleapis.com that the Dockerfile fetches (no machine of ours reaches it).
#     go.mod says `go 1.22`; modules are vendored, so GOFLAGS=-mod=vendor builds offline.
#   - Only the four commands the two packages install (nvidia-ctk, nvidia-container-runtime,
#     nvidia-cdi-hook, nvidia-container-runtime-hook, from the *.install lists) are built, with
#     the Makefile's own flags. nvidia-container-toolkit-operator-extensions (GPU Operator only)
#     is not built: dpkg-buildpackage --no-check-builddeps -b builds every package of
#     debian/control, so we drop that stanza from the copy of control.
#   - debian/changelog: written here with the two entries `dch` would write, instead of
#     installing devscripts for dch and debuild; dpkg-buildpackage and debhelper do the rest
#     exactly as in the vendor's build (debian/prepare fills in @VERSION@ etc.).
#   - SOURCE_DATE_EPOCH is the tag's commit time (git archive stamps every entry with it), so
#     the packages are reproducible.
set -euo pipefail
version=1.17.8
revision=1
commit=f202b80a9b9d0db00d9b1d73c0128c8962c55f4d
sha256=bca05154a9740d454a740dffddba7fabd9b6f2f696ba3b73bf4be3fe877c12a9
archive_name=nvidia-container-toolkit-$version.tar.gz
src=${ACCEL_TOOLKIT_SRC:-git}
cache_root=${ACCEL_TOOLKIT_CACHE:-/var/cache/accel-nodes/nvidia-container-toolkit}
recipe=$(sha256sum "$0" | cut -c1-12)
entry=$cache_root/$sha256-$recipe
debs=("nvidia-container-toolkit_${version}-${revision}_amd64.deb" "nvidia-container-toolkit-base_${version}-${revision}_amd64.deb")

complete() {
  local d
  for d in "${debs[@]}"; do [ -s "$entry/$d" ] || return 1; done
  [ -f "$entry/.complete" ]
}
if complete; then
  echo "$entry"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Get the archive and check it.
case $src in
  git)
    command -v git >/dev/null || { apt-get update -qq && apt-get install -y -qq git >&2; }
    git clone -q --depth 1 --branch "v$version" https://github.com/NVIDIA/nvidia-container-toolkit "$work/git" >&2
    got=$(git -C "$work/git" rev-parse HEAD)
    [ "$got" = "$commit" ] || { echo "tag v$version is commit $got, expected $commit" >&2; exit 1; }
    git -C "$work/git" archive --format=tar.gz --prefix="nvidia-container-toolkit-$version/" HEAD >"$work/$archive_name"
    archive=$work/$archive_name
    ;;
  *)
    if [ -d "$src" ]; then archive=$src/$archive_name; else archive=$src; fi
    [ -f "$archive" ] || { echo "ACCEL_TOOLKIT_SRC=$src: no $archive_name there" >&2; exit 1; }
    ;;
esac
echo "$sha256  $archive" | sha256sum -c --quiet - >&2 ||
  { echo "$archive: SHA-256 is not the pinned $sha256 of $archive_name (tag v$version)" >&2; exit 1; }

# Build tools: gcc for cgo (go-nvml's dl package), Go 1.22 from bookworm-backports,
# dpkg-dev and debhelper for the vendor's debian/rules (`dh $@`, compat 9).
need=()
[ -x /usr/lib/go-1.22/bin/go ] || need+=(golang-1.22-go/bookworm-backports)
# dpkg-buildpackage checks build-essential (gcc, libc6-dev, make) besides debian/control.
dpkg-query -W -f='${Status}' build-essential 2>/dev/null | grep -q 'ok installed' || need+=(build-essential)
command -v dpkg-buildpackage >/dev/null || need+=(dpkg-dev)
command -v dh >/dev/null || need+=(debhelper)
command -v fakeroot >/dev/null || need+=(fakeroot)
if [ ${#need[@]} -gt 0 ]; then
  if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      >/etc/apt/sources.list.d/accel-nodes-bookworm-backports.sources
  fi
  echo "installing build tools: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

tar -xzf "$archive" -C "$work"
commit_time=$(stat -c %Y "$work/nvidia-container-toolkit-$version")
tree=$work/nvidia-container-toolkit-$version
dist=$work/dist/nvidia-container-toolkit-$version
mkdir -p "$dist"

# The Makefile's cmd-% rule: go build -ldflags "-s -w '-extldflags=$(EXTLDFLAGS)'
#   -X $(CLI_VERSION_PACKAGE).gitCommit=$(GIT_COMMIT) -X $(CLI_VERSION_PACKAGE).version=$(CLI_VERSION)"
info=github.com/NVIDIA/nvidia-container-toolkit/internal/info
ldflags="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy'"
ldflags+=" -X $info.gitCommit=$commit -X $info.version=$version"
export PATH=/usr/lib/go-1.22/bin:$PATH CGO_ENABLED=1 GOFLAGS=-mod=vendor GOTOOLCHAIN=local \
  GOCACHE=$work/gocache GOPATH=$work/gopath SOURCE_DATE_EPOCH=$commit_time
for cmd in nvidia-ctk nvidia-container-runtime nvidia-cdi-hook nvidia-container-runtime-hook; do
  (cd "$tree" && go build -trimpath -ldflags "$ldflags" -o "$dist/$cmd" "./cmd/$cmd") >&2
done

cp -r "$tree/packaging/debian" "$dist/debian"
# Drop the operator-extensions stanza (see above) and its install list.
python3 - "$dist/debian/control" <<'EOF'
import sys
path = sys.argv[1]
stanzas = open(path).read().strip().split('\n\n')
keep = [s for s in stanzas if not s.startswith('Package: nvidia-container-toolkit-operator-extensions')]
open(path, 'w').write('\n\n'.join(keep) + '\n')
EOF
rm -f "$dist/debian/nvidia-container-toolkit-operator-extensions.install"
# What `dch --create --package=nvidia-container-toolkit --newversion 1.17.8-1 ...;
# dch --append ...; dch -r ""` writes, with DEBFULLNAME/DEBEMAIL of the Dockerfile.
cat >"$dist/debian/changelog" <<EOF
nvidia-container-toolkit ($version-$revision) UNRELEASED; urgency=medium

  * See https://gitlab.com/nvidia/container-toolkit/container-toolkit/-/blob/$commit/CHANGELOG.md for the changelog
  * Bump libnvidia-container dependency to $version-$revision

 -- NVIDIA CORPORATION <cudatools@nvidia.com>  $(date -u -R -d "@$commit_time")
EOF
# debian/prepare, with what the vendor's docker.mk and Dockerfile.debian pass it:
# SECTION="", LIBNVIDIA_CONTAINER_TOOLS_VERSION=$(LIB_VERSION)-1, VERSION=$PKG_VERS-$PKG_REV,
# DISTRIB=$(lsb_release -cs).
(cd "$dist" && SECTION="" LIBNVIDIA_CONTAINER_TOOLS_VERSION="$version-1" VERSION="$version-$revision" \
  DISTRIB=bookworm sh debian/prepare)
(cd "$dist" && dpkg-buildpackage -i -us -uc -b >"$work/build.log" 2>&1) ||
  { tail -40 "$work/build.log" >&2; exit 1; }

mkdir -p "$entry"
for d in "${debs[@]}"; do cp "$work/dist/$d" "$entry/$d"; done
(cd "$entry" && sha256sum "${debs[@]}" >SHA256SUMS)
touch "$entry/.complete"
echo "$entry"
