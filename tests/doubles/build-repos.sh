#!/usr/bin/env bash
# Build signed local apt repositories that stand in for the vendor ones (the kernel
# doubles of packages/kernel go into cuda and neuron both):
#   cuda                  flat repo, like developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
#                         and .../repos/debian13/x86_64/ (the same packages under both)
#   libnvidia-container   flat repo, like nvidia.github.io/libnvidia-container/stable/deb/amd64/
#   neuron                suite repo, like apt.repos.neuron.amazonaws.com bookworm main
#                         and trixie main (the same packages in both suites)
# Each repo is signed with its own throwaway key generated here, so the roles'
# signed-by keyring and fingerprint checks run for real. The packages are the
# test doubles under tests/doubles/packages/<repo>/<package>/ (see README.md),
# except nvidia-container-toolkit and nvidia-container-toolkit-base in the
# libnvidia-container repo: those are the real packages of every toolkit
# version in toolkit_versions below, built from the vendor's source by
# tests/rig/toolkit-debs.sh (cached; ACCEL_TOOLKIT_SRC says where the source
# comes from). The libnvidia-container doubles are built once per toolkit
# version from one tree: @VERSION@ in their files becomes that version, so a
# node pinning the four packages to either version gets a consistent set
# (1.20.0's toolkit wants libnvidia-container-tools (= 1.20.0-1) exactly).
# Beside the repositories, tools/ holds binaries that the nodes run from the
# mount itself: the real, static crictl of tests/rig/crictl.sh (cached, from the
# same ACCEL_TOOLKIT_SRC).
#
# Usage: build-repos.sh [OUTDIR]   (default build/repos; rebuilt only when
# tests/doubles, the toolkit packages or crictl change). Prints OUTDIR. Layout of OUTDIR:
#   keys/<repo>.asc, keys/<repo>.fingerprint
#   cuda/debian12/x86_64/, cuda/debian13/x86_64/, libnvidia-container/stable/deb/amd64/,
#   neuron/dists/bookworm/..., neuron/dists/trixie/..., neuron/pool/main/
#   tools/crictl (cri-tools 1.36.0, static; /srv/accel-repos/tools/crictl on a Molecule node)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/../../build/repos}")
toolkit_versions=(1.17.8 1.20.0)
toolkit_debs=()
for v in "${toolkit_versions[@]}"; do toolkit_debs+=("$("$here/../rig/toolkit-debs.sh" "$v")"); done
crictl=$("$here/../rig/crictl.sh")
stamp=$( (cd "$here" && find . -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
  for d in "${toolkit_debs[@]}"; do cat "$d/SHA256SUMS"; done
  cat "$crictl/SHA256SUMS") | sha256sum | cut -c1-16)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$out"
  exit 0
fi
command -v apt-ftparchive >/dev/null || { apt-get update -qq && apt-get install -y -qq apt-utils >&2; }
command -v gpg >/dev/null || { apt-get update -qq && apt-get install -y -qq gnupg >&2; }

# Build beside OUTDIR, then swap the contents in: the directory itself stays, so
# node containers that bind-mount it keep seeing it. The signing keys stay too
# (in OUTDIR.gnupg), so keyrings already installed on a node remain valid.
final=$out
out=$(mktemp -d "$final.new.XXXXXX")
mkdir -p "$out/keys"
work=$(mktemp -d)
gnupg=$final.gnupg
trap 'gpgconf --homedir "$gnupg" --kill all 2>/dev/null || true; rm -rf "$work" "$out"' EXIT

build_debs() { # repo destdir [version]
  local pkg
  mkdir -p "$2"
  for pkg in "$here/packages/$1"/*/; do
    [ -f "$pkg/DEBIAN/control" ] || continue
    # The tree may lose modes in git; maintainer scripts and bin/ must run.
    cp -a "$pkg" "$work/pkg"
    # A versioned repo's doubles carry @VERSION@ where the version goes.
    [ -z "${3:-}" ] || { grep -rlZF @VERSION@ "$work/pkg" || :; } | xargs -0r sed -i "s/@VERSION@/$3/g"
    find "$work/pkg" -type d -exec chmod 0755 {} +
    find "$work/pkg" -type f -exec chmod 0644 {} +
    # DKMS runs a module's PRE_INSTALL/POST_INSTALL/POST_REMOVE scripts only when executable.
    find "$work/pkg/DEBIAN" "$work/pkg"/usr/bin "$work/pkg"/usr/sbin "$work/pkg"/usr/local/bin "$work/pkg"/opt/*/*/bin \
      "$work/pkg"/usr/src/*/preinstall "$work/pkg"/usr/src/*/postinstall "$work/pkg"/usr/src/*/postremove \
      -type f ! -name control ! -name conffiles ! -name triggers -exec chmod 0755 {} + 2>/dev/null || :
    dpkg-deb --root-owner-group -Zgzip --build "$work/pkg" "$2/" >/dev/null
    rm -rf "$work/pkg"
  done
}

sign() { # repo dir-with-Release
  gpg --homedir "$gnupg" --batch --yes -u "$1" --clearsign -o "$2/InRelease" "$2/Release"
  gpg --homedir "$gnupg" --batch --yes -u "$1" -abs -o "$2/Release.gpg" "$2/Release"
}

[ -d "$gnupg" ] || mkdir -m 0700 "$gnupg"
for repo in cuda libnvidia-container neuron; do
  gpg --homedir "$gnupg" --list-keys "$repo@doubles.invalid" >/dev/null 2>&1 ||
    gpg --homedir "$gnupg" --batch --passphrase '' \
      --quick-gen-key "accel.nodes test double $repo <$repo@doubles.invalid>" ed25519 sign never 2>/dev/null
  gpg --homedir "$gnupg" --armor --export "$repo@doubles.invalid" >"$out/keys/$repo.asc"
  gpg --homedir "$gnupg" --with-colons --fingerprint "$repo@doubles.invalid" |
    awk -F: '/^fpr:/ {print $10; exit}' >"$out/keys/$repo.fingerprint"
done

flat_index() { # repo dir: index and sign the .debs already in dir
  (cd "$2" && apt-ftparchive packages . >Packages && gzip -9kf Packages &&
    apt-ftparchive -o APT::FTPArchive::Release::Origin="accel.nodes double of $1" release . >Release)
  sign "$1@doubles.invalid" "$2"
}

# The kernel doubles (packages/kernel) stand for the distribution's archive, which
# both driver repositories' nodes need; each repository carries a copy. One flat
# repo per Debian release, as NVIDIA lays them out; the doubles are the same.
build_debs cuda "$out/cuda/debian12/x86_64"
build_debs kernel "$out/cuda/debian12/x86_64"
flat_index cuda "$out/cuda/debian12/x86_64"
mkdir -p "$out/cuda/debian13"
cp -a "$out/cuda/debian12/x86_64" "$out/cuda/debian13/"

lnc=$out/libnvidia-container/stable/deb/amd64
mkdir -p "$lnc"
for i in "${!toolkit_versions[@]}"; do
  cp "${toolkit_debs[$i]}"/*.deb "$lnc/"
  build_debs libnvidia-container "$lnc/" "${toolkit_versions[$i]}"
done
flat_index libnvidia-container "$lnc"

neuron=$out/neuron
build_debs neuron "$neuron/pool/main"
build_debs kernel "$neuron/pool/main"
for suite in bookworm trixie; do
  mkdir -p "$neuron/dists/$suite/main/binary-amd64"
  (cd "$neuron" && apt-ftparchive packages pool/main >"dists/$suite/main/binary-amd64/Packages" &&
    gzip -9kf "dists/$suite/main/binary-amd64/Packages" &&
    apt-ftparchive -o APT::FTPArchive::Release::Origin="accel.nodes double of neuron" \
      -o APT::FTPArchive::Release::Suite="$suite" -o APT::FTPArchive::Release::Codename="$suite" \
      -o APT::FTPArchive::Release::Components=main -o APT::FTPArchive::Release::Architectures=amd64 \
      release "dists/$suite" >"dists/$suite/Release.tmp" && mv "dists/$suite/Release.tmp" "dists/$suite/Release")
  sign "neuron@doubles.invalid" "$neuron/dists/$suite"
done

install -D -m 0755 "$crictl/crictl" "$out/tools/crictl"

chmod -R a+rX "$out"
echo "$stamp" >"$out/.stamp"
mkdir -p "$final"
find "$final" -mindepth 1 -delete
cp -a "$out/." "$final/"
echo "$final"
