#!/usr/bin/env python
"""Write a one-layer container image archive from a root file system directory, in
the format of `docker save` (docker-archive: manifest.json, the image config and
the layer tar), which `ctr images import` reads on every containerd the rig's
nodes carry (1.6, 1.7, 2.1).

    image-archive.py ROOTFS OUT.tar NAME [--cmd ARG ...] [--env K=V ...]

Why it exists: the Molecule nodes reach no registry and have no Docker where
only containerd runs, yet the CRI runs pods only from images in containerd's
store: the validation image (busybox) and the pod sandbox ("pause") image that
containerd's config names. This writes them on the node itself, with the
standard library. Test rig only.

The format is Docker's image spec v1.2 archive (moby image/spec/v1.2.md,
"Combined Image JSON + Filesystem Changeset Format"; the manifest.json that
`docker save` writes, moby image/tarexport/save.go). The image config follows
the OCI image spec's config (opencontainers/image-spec config.md: architecture,
os, config.Env/Cmd, rootfs.diff_ids = the sha256 of the uncompressed layer).
"""
import argparse
import hashlib
import io
import json
import os
import platform
import tarfile

_ARCH = {'x86_64': 'amd64', 'aarch64': 'arm64'}


def layer(rootfs: str) -> bytes:
    """The root file system as an uncompressed tar, owned by root, with fixed times (reproducible)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = 'root'
                info.mtime = 0
                if info.isreg():
                    with open(path, 'rb') as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('rootfs')
    parser.add_argument('out')
    parser.add_argument('name', help='the image reference, for example docker.io/accel-test/busybox:1')
    parser.add_argument('--cmd', nargs='+', default=None)
    parser.add_argument('--env', nargs='+', default=['PATH=/usr/local/bin:/usr/bin:/bin'])
    args = parser.parse_args()
    blob = layer(args.rootfs)
    diff_id = 'sha256:' + hashlib.sha256(blob).hexdigest()
    config = {'architecture': _ARCH.get(platform.machine(), platform.machine()), 'os': 'linux',
              'config': {'Env': args.env, 'Cmd': args.cmd},
              'rootfs': {'type': 'layers', 'diff_ids': [diff_id]}, 'history': [{'created_by': 'tests/rig/image-archive.py'}]}
    config_json = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_json).hexdigest() + '.json'
    manifest = [{'Config': config_name, 'RepoTags': [args.name], 'Layers': ['layer.tar']}]
    with tarfile.open(args.out, 'w') as tar:
        for name, data in ((config_name, config_json), ('layer.tar', blob),
                           ('manifest.json', json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


if __name__ == '__main__':
    main()
