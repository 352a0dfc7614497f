# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Install a repository signing key after checking its fingerprint.

This file is private to the accel.nodes collection: its interface may change
without notice, and code outside the collection must not import it.

Shared by accel.nodes.repo_key (the key alone, for dnf repositories and for
removal) and accel.nodes.package_repository (key, apt source and the removal of
conflicting files in one module run).
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any, Dict, List, Optional
from urllib.parse import urlparse

from ansible.module_utils.urls import fetch_url

from ansible_collections.accel.nodes.plugins.module_utils._files import write_atomic
from ansible_collections.accel.nodes.plugins.module_utils._openpgp import (
    OpenPGPError,
    armor,
    is_armored,
    normalize_fingerprint,
    read_keys,
)

# Key files are a few kilobytes. A larger answer is something else (an
# installer, an ISO), and is not read into memory.
MAX_KEY_BYTES = 4 * 1024 * 1024


def fetch(module, url: str, timeout: int) -> bytes:
    scheme = urlparse(url).scheme.lower()
    if scheme not in ('http', 'https', 'file'):
        module.fail_json(msg='url must start with https://, http:// or file://, not %r' % url)
    response, info = fetch_url(module, url, timeout=timeout)
    # urllib reports no status for file:// URLs; a missing file is an error
    # with no response.
    if response is None or (scheme != 'file' and info['status'] != 200):
        module.fail_json(
            msg='Could not download the key from %s: %s. Check the URL, and the proxy settings '
                'of the target if it reaches the internet through one.' % (url, info.get('msg')),
            status=info['status'])
    data = response.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        module.fail_json(msg='%s sent more than %d bytes: that is not a key file.' % (url, MAX_KEY_BYTES))
    return data


def read_src(module, path: str) -> bytes:
    if not os.path.isfile(path):
        module.fail_json(
            msg='src %s is not a file on the target. Copy the key there first, or give url instead.' % path)
    with open(path, 'rb') as handle:
        data = handle.read(MAX_KEY_BYTES + 1)
    if len(data) > MAX_KEY_BYTES:
        module.fail_json(msg='src %s is larger than %d bytes: that is not a key file.' % (path, MAX_KEY_BYTES))
    return data


def describe(content: Optional[bytes], path: Optional[str] = None) -> Dict[str, Any]:
    """What the diff shows of a keyring, with the mode of path if given: never its bytes."""
    if content is None:
        return {'state': 'absent'}
    try:
        fingerprints = read_keys(content)[1]
    except OpenPGPError as exc:
        fingerprints = ['(not an OpenPGP public key: %s)' % exc]
    summary = {
        'state': 'present',
        'format': 'armored' if is_armored(content) else 'binary',
        'fingerprints': fingerprints,
        'sha256': hashlib.sha256(content).hexdigest(),
    }  # type: Dict[str, Any]
    if path is not None:
        summary['mode'] = mode_of(path)
    return summary


def mode_of(path: str) -> str:
    return '%04o' % stat.S_IMODE(os.stat(path).st_mode)


def read_dest(module, dest: str) -> Optional[bytes]:
    if os.path.isdir(dest):
        module.fail_json(
            msg='dest %s is a directory: give the path of the keyring file, '
                'for example /etc/apt/keyrings/cuda.gpg.' % dest)
    if not os.path.exists(dest):
        return None
    with open(dest, 'rb') as handle:
        return handle.read()


def ensure_present(module, dest: str, result: Dict[str, Any], diff: Dict[str, Any], url: Optional[str],
                   src: Optional[str], fingerprint: List[str], fmt: str, mode: Any, timeout: int) -> bool:
    """Write the key from url or src to dest if every primary key in it is accepted; True if changed."""
    source = url or src
    try:
        expected = [normalize_fingerprint(value) for value in fingerprint]
    except OpenPGPError as exc:
        module.fail_json(msg='fingerprint: %s' % exc, **result)
    if not expected:
        module.fail_json(msg='fingerprint is empty: give the fingerprint the vendor publishes for its key.', **result)

    raw = fetch(module, url, timeout) if url else read_src(module, src)
    try:
        binary, found = read_keys(raw)
    except OpenPGPError as exc:
        module.fail_json(msg='%s is not a usable OpenPGP public key: %s.' % (source, exc), **result)
    result['fingerprints'] = found

    unexpected = [fpr for fpr in found if fpr not in expected]
    if unexpected:
        if len(found) == 1:
            what = 'The key at %s has fingerprint %s, which is not accepted' % (source, found[0])
        else:
            what = ('The key file at %s holds %d primary keys, %s; %s %s not accepted'
                    % (source, len(found), ', '.join(found), ', '.join(unexpected),
                       'is' if len(unexpected) == 1 else 'are'))
        module.fail_json(
            msg='%s (accepted: %s). Nothing was written to %s. Compare it with the fingerprint the vendor '
                'publishes; if the vendor has rotated its key, add the new fingerprint to the fingerprint option.'
                % (what, ', '.join(expected), dest),
            expected=expected, **result)

    content = binary if fmt == 'binary' else armor(binary)
    current = read_dest(module, dest)
    diff['before'] = describe(current, dest)
    diff['after'] = describe(content)

    changed = current != content
    if changed and not module.check_mode:
        write_atomic(module, dest, content, mode=None)
    mode_change = {}  # type: Dict[str, Any]
    if os.path.exists(dest):
        file_args = module.load_file_common_arguments(dict(module.params, mode=mode), path=dest)
        changed = module.set_fs_attributes_if_different(file_args, changed, diff=mode_change)
    if not module.check_mode:
        diff['after']['mode'] = mode_of(dest)
    else:
        # The mode the option would set, else the mode kept, else for a new
        # file the option as given (it may be symbolic).
        diff['after']['mode'] = (mode_change.get('after', {}).get('mode') or diff['before'].get('mode')
                                 or ('%04o' % mode if isinstance(mode, int) else str(mode)))
    return changed


def ensure_absent(module, dest: str, diff: Dict[str, Any]) -> bool:
    current = read_dest(module, dest)
    diff['before'] = describe(current, dest)
    diff['after'] = {'state': 'absent'}
    if current is None:
        return False
    if not module.check_mode:
        os.remove(dest)
    return True
