#!/usr/bin/env bash
# Build the real NVIDIA Container Toolkit packages, nvidia-container-toolkit and
# nvidia-container-toolkit-base, of one release from the upstream source with the
# vendor's own packaging/debian metadata, and print the directory that holds the
# two .debs (and their SHA256SUMS).
#
#   tests/rig/toolkit-debs.sh [1.17.8|1.20.0]      (default 1.17.8)
#
# Needs Docker: the build runs in the Debian 13 build root of
# tests/rig/build-root.sh (`docker run --rm --network none`, the source archive
# and an output directory bind-mounted), so the host needs no Go and no
# packaging tools.
#
# Environment:
#   ACCEL_TOOLKIT_SRC    where the source comes from (default: upstream git):
#                        - "git": clone tag v<version> of github.com/NVIDIA/nvidia-container-toolkit,
#                          check that it is the pinned commit below and `git archive` it, which
#                          reproduces the release archive byte for byte;
#                        - a file: nvidia-container-toolkit-<version>.tar.gz;
#                        - a directory that holds that file (offline CI: ../shared/vendor-src).
#                        In every case the archive's SHA-256 must be the pinned one below.
#   ACCEL_TOOLKIT_CACHE  where built packages are kept (default /var/cache/accel-nodes/nvidia-container-toolkit),
#                        in <cache>/<source sha256>-<recipe hash>/, where the recipe is this script
#                        and tests/rig/build-root.sh. A complete entry is reused; a missing or
#                        partial one is rebuilt.
#
# The build follows the vendor's docker/Dockerfile.debian and Makefile of the tag:
#   make PREFIX=$DIST_DIR cmds; cp -r packaging/debian $DIST_DIR/debian;
#   (1.20.0: cp deployments/systemd/* $DIST_DIR: the units and env file of the -base .install list)
#   dch --create ...; debuild -eDISTRIB -eSECTION [-eLIBNVIDIA_CONTAINER_TOOLS_VERSION] -eVERSION=<v>-1
#     --dpkg-buildpackage-hook='sh debian/prepare' -i -us -uc -b
# What we adapted, and why:
#   - Go: Debian's golang-1.26-go from trixie-backports (the build root), not the tarball
#     from go.dev or storage.googleapis.com that the Dockerfile fetches (no machine of
#     ours reaches it). go.mod says `go 1.22` (1.17.8) and `go 1.25.0` (1.20.0); a newer
#     toolchain builds both, and keeps the language and GODEBUG defaults of that go line.
#     Modules are vendored: GOFLAGS=-mod=vendor GOTOOLCHAIN=local, and no network at all.
#   - Only the four commands the two packages install (nvidia-ctk, nvidia-container-runtime,
#     nvidia-cdi-hook, nvidia-container-runtime-hook, from the *.install lists) are built, with
#     the Makefile's own flags, plus -trimpath so that the build path does not show. The
#     nvidia-container-toolkit-operator-extensions package (GPU Operator only) is not built:
#     dpkg-buildpackage -b builds every package of debian/control, so we drop that stanza
#     from the copy of control.
#   - debian/changelog: written here with the two entries `dch` would write, instead of
#     installing devscripts for dch and debuild; dpkg-buildpackage and debhelper do the rest
#     exactly as in the vendor's build (debian/prepare fills in @VERSION@ etc.; 1.20.0's
#     rules run `dh $@ --with systemd`, which adds the deb-systemd-helper snippets).
#   - DISTRIB is the build root's codename (trixie), as `lsb_release -cs` gives it in the
#     vendor's build image.
#   - SOURCE_DATE_EPOCH is the tag's commit time (git archive stamps every entry with it), so
#     the packages are reproducible.
# After the build the script checks that each .deb carries the maintainer scripts of
# packaging/debian and every file of its .install list, and, where it ships systemd units,
# debhelper's deb-systemd-helper snippets.
# What 1.20.0's packages show, from the vendor's metadata and not from us:
#   - -base ships /lib/systemd/system/nvidia-cdi-refresh.{service,path} and the conffile
#     /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env; its postinst enables both units
#     and starts them where systemd runs (dh_systemd_enable/dh_systemd_start, compat 9);
#     its preinst, postinst, prerm and postrm run dpkg-maintscript-helper rm_conffile (.maintscript).
#   - nvidia-container-toolkit Depends: libnvidia-container-tools (= 1.20.0-1); dpkg-gencontrol
#     drops control's libnvidia-container-tools (<< 2.0.0), which the exact version implies.
#   - rules' override_dh_fixperms runs `chmod 644 debian/$(shell dh_listpackages)/lib/...`,
#     which with several packages chmods debian/nvidia-container-toolkit itself: that
#     package's "./" entry is drw-r--r--. dpkg leaves an existing / alone (checked: / stays 755).
# Measured on the 2-core rig host (2026-11-27, Go 1.26.11, a CI run beside it): 1.17.8 in
# 146 s, 1.20.0 in 131 s; a second 1.20.0 build gave byte-identical packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:-1.17.8}
revision=1
case $version in
  1.17.8)
    commit=f202b80a9b9d0db00d9b1d73c0128c8962c55f4d
    sha256=bca05154a9740d454a740dffddba7fabd9b6f2f696ba3b73bf4be3fe877c12a9
    changelog_url=https://gitlab.com/nvidia/container-toolkit/container-toolkit/-/blob/$commit/CHANGELOG.md
    ;;
  1.20.0)
    commit=5505e2f94d9aaa08561490db974ba3cd676af209
    sha256=b16ce83597fe3d477b220bd743a341c79fc98ff794be6299e72d3a4802ab1137
    changelog_url=https://github.com/NVIDIA/nvidia-container-toolkit/blob/$commit/CHANGELOG.md
    ;;
  *)
    echo "usage: $0 [1.17.8|1.20.0]: no pins for toolkit version '$version'" >&2
    exit 2
    ;;
esac
archive_name=nvidia-container-toolkit-$version.tar.gz
src=${ACCEL_TOOLKIT_SRC:-git}
cache_root=${ACCEL_TOOLKIT_CACHE:-/var/cache/accel-nodes/nvidia-container-toolkit}
recipe=$(cat "$0" "$here/build-root.sh" | sha256sum | cut -c1-12)
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
archive=$(realpath "$archive")
echo "$sha256  $archive" | sha256sum -c --quiet - >&2 ||
  { echo "$archive: SHA-256 is not the pinned $sha256 of $archive_name (tag v$version)" >&2; exit 1; }

# Runs in the build root, as root, with the archive at /src/$archive_name and the
# results going to /out. Variables: version revision commit changelog_url archive_name.
build_in_root() {
  set -euo pipefail
  mkdir -p /build
  tar -xzf "/src/$archive_name" -C /build
  local tree=/build/nvidia-container-toolkit-$version
  local dist=/build/dist/nvidia-container-toolkit-$version
  local commit_time cmd ldflags info distrib pkg script deb listing file dir
  commit_time=$(stat -c %Y "$tree")
  mkdir -p "$dist"

  # The Makefile's cmd-% rule: go build -ldflags "-s -w '-extldflags=$(EXTLDFLAGS)'
  #   -X $(CLI_VERSION_PACKAGE).gitCommit=$(GIT_COMMIT) -X $(CLI_VERSION_PACKAGE).version=$(CLI_VERSION)"
  info=github.com/NVIDIA/nvidia-container-toolkit/internal/info
  ldflags="-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy'"
  ldflags+=" -X $info.gitCommit=$commit -X $info.version=$version"
  export CGO_ENABLED=1 GOCACHE=/build/gocache GOPATH=/build/gopath SOURCE_DATE_EPOCH=$commit_time
  go version
  for cmd in nvidia-ctk nvidia-container-runtime nvidia-cdi-hook nvidia-container-runtime-hook; do
    (cd "$tree" && go build -trimpath -ldflags "$ldflags" -o "$dist/$cmd" "./cmd/$cmd")
  done

  cp -r "$tree/packaging/debian" "$dist/debian"
  # Dockerfile.debian of 1.20.0 has `COPY deployments/systemd/ .` into the build
  # directory; that of 1.17.8 has no such line (and no such directory).
  if grep -qx 'COPY deployments/systemd/ \.' "$tree/docker/Dockerfile.debian"; then
    cp -r "$tree/deployments/systemd/." "$dist/"
  fi
  # Drop the operator-extensions stanza (see above) and its install list.
  perl -e 'local $/; my $s = <STDIN>; $s =~ s/\s+\z//;
    print join("\n\n", grep { !/^Package: nvidia-container-toolkit-operator-extensions\n/ } split /\n\n/, $s), "\n"' \
    <"$tree/packaging/debian/control" >"$dist/debian/control"
  rm -f "$dist/debian/nvidia-container-toolkit-operator-extensions.install"
  # What `dch --create --package=nvidia-container-toolkit --newversion <v>-1 ...;
  # dch --append ...; dch -r ""` writes, with DEBFULLNAME/DEBEMAIL of the Dockerfile.
  cat >"$dist/debian/changelog" <<EOF
nvidia-container-toolkit ($version-$revision) UNRELEASED; urgency=medium

  * See $changelog_url for the changelog
  * Bump libnvidia-container dependency to $version-$revision

 -- NVIDIA CORPORATION <cudatools@nvidia.com>  $(date -u -R -d "@$commit_time")
EOF
  # debian/prepare, with what the vendor's docker.mk and Dockerfile.debian pass it:
  # SECTION="", VERSION=$PKG_VERS-$PKG_REV, DISTRIB=$(lsb_release -cs), and for 1.17.8
  # LIBNVIDIA_CONTAINER_TOOLS_VERSION=$(LIB_VERSION)-1 (1.20.0's prepare no longer reads it:
  # its control pins libnvidia-container-tools to @VERSION@).
  distrib=$(sed -n "s/^VERSION_CODENAME=//p" /etc/os-release)
  (cd "$dist" && SECTION="" LIBNVIDIA_CONTAINER_TOOLS_VERSION="$version-1" VERSION="$version-$revision" \
    DISTRIB=$distrib sh debian/prepare)
  (cd "$dist" && dpkg-buildpackage -i -us -uc -b >/build/build.log 2>&1) ||
    { tail -40 /build/build.log; exit 1; }
  grep -E '^(dh |   dh_|dpkg-deb: building)' /build/build.log || :

  # The packages must carry what the vendor's metadata says they carry.
  for pkg in nvidia-container-toolkit nvidia-container-toolkit-base; do
    deb=/build/dist/${pkg}_$version-${revision}_amd64.deb
    for script in preinst postinst prerm postrm; do
      [ ! -f "$tree/packaging/debian/$pkg.$script" ] || dpkg-deb -I "$deb" "$script" >/dev/null ||
        { echo "$deb: no $script, though packaging/debian/$pkg.$script exists" >&2; exit 1; }
    done
    listing=$(dpkg-deb -c "$deb")
    while read -r file dir || [ -n "$file" ]; do
      [ -n "$file" ] || continue
      grep -q " \./${dir#/}/*$file\$" <<<"$listing" || { echo "$deb: no $dir/$file (see $pkg.install)" >&2; exit 1; }
      case $file in
        *.service | *.path)
          for script in postinst prerm postrm; do
            grep -q "deb-systemd-helper\|deb-systemd-invoke" <<<"$(dpkg-deb -I "$deb" "$script")" ||
              { echo "$deb: its $script has no deb-systemd-helper snippet for $file" >&2; exit 1; }
          done
          ;;
      esac
    done <"$tree/packaging/debian/$pkg.install"
    cp "$deb" /out/
  done
}

root_image=$("$here/build-root.sh")
mkdir -m 0755 "$work/out"
SECONDS=0
echo "building nvidia-container-toolkit $version-$revision in $root_image" >&2
docker run --rm --network none --name "accel-build-toolkit-$version-$$" \
  -v "$archive:/src/$archive_name:ro" -v "$work/out:/out" \
  -e version="$version" -e revision="$revision" -e commit="$commit" \
  -e changelog_url="$changelog_url" -e archive_name="$archive_name" \
  "$root_image" bash -c "$(declare -f build_in_root); build_in_root" >&2
echo "built nvidia-container-toolkit $version-$revision in ${SECONDS}s" >&2

# Fill the entry beside it and move it into place, so a reader never sees half of one.
mkdir -p "$cache_root"
rm -rf "$entry" "$entry.new.$$"
mkdir "$entry.new.$$"
for d in "${debs[@]}"; do cp "$work/out/$d" "$entry.new.$$/$d"; done
(cd "$entry.new.$$" && sha256sum "${debs[@]}" >SHA256SUMS)
touch "$entry.new.$$/.complete"
mv "$entry.new.$$" "$entry"
echo "$entry"
