# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

# Note that this module util is **PRIVATE** to the collection. It can have
# breaking changes at any time. Do not use it from other collections or
# standalone plugins/modules!

"""Tell whether a host is an EC2 instance and which instance type it is.

DMI costs nothing to read, so it decides whether the instance metadata
service is worth asking: a host that is not on EC2 never waits on the network.
"""

from __future__ import annotations

import re
import time

from ansible_collections.accel.nodes.plugins.module_utils import _rootfs

DMI_DIR = '/sys/class/dmi/id'
HYPERVISOR_UUID = '/sys/hypervisor/uuid'
EC2_VENDOR = 'Amazon EC2'

IMDS_ENDPOINT = 'http://169.254.169.254'
_TOKEN_PATH = '/latest/api/token'
_INSTANCE_TYPE_PATH = '/latest/meta-data/instance-type'
_TOKEN_TTL_SECONDS = '60'

_INSTANCE_TYPE_RE = re.compile(r'^[a-z][a-z0-9-]*\.[a-z0-9-]+$')


def read_dmi(root):
    """DMI identity and the Xen hypervisor UUID; None when none of it exists."""
    dmi = {
        'sys_vendor': _rootfs.read_value(root, DMI_DIR + '/sys_vendor'),
        'board_vendor': _rootfs.read_value(root, DMI_DIR + '/board_vendor'),
        'product_name': _rootfs.read_value(root, DMI_DIR + '/product_name'),
        'hypervisor_uuid': _rootfs.read_value(root, HYPERVISOR_UUID),
    }
    if not any(dmi.values()):
        return None
    return dmi


def looks_like_ec2(dmi):
    """Nitro instances name Amazon EC2 as the vendor; Xen ones (P3, older G)
    have a hypervisor UUID that starts with ec2."""
    if not dmi:
        return False
    if EC2_VENDOR in (dmi['sys_vendor'], dmi['board_vendor']):
        return True
    return (dmi['hypervisor_uuid'] or '').lower().startswith('ec2')


def valid_instance_type(text):
    return bool(text) and bool(_INSTANCE_TYPE_RE.match(text))


def dmi_instance_type(dmi):
    """On Nitro, DMI's product name is the instance type."""
    if not dmi or EC2_VENDOR not in (dmi['sys_vendor'], dmi['board_vendor']):
        return None
    name = dmi['product_name']
    return name if valid_instance_type(name) else None


def imds_instance_type(timeout, endpoint=None):
    """Ask IMDSv2 (a PUT for a token, then a GET) within timeout seconds in all.

    Returns (instance type or None, status) with status 'ok', 'unreachable',
    or a short description of what went wrong.
    """
    # Imported here: urllib.request costs tens of milliseconds to import and
    # only EC2 hosts get this far.
    import socket
    from urllib import error as urlerror
    from urllib import request as urlrequest

    endpoint = endpoint or IMDS_ENDPOINT
    deadline = time.monotonic() + timeout
    # The metadata service is link-local: a proxy from the environment must not
    # be asked for it.
    opener = urlrequest.build_opener(urlrequest.ProxyHandler({}))

    def fetch(request):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('IMDS time budget spent')
        with opener.open(request, timeout=left) as response:
            return response.read().decode('utf-8', errors='replace').strip()

    try:
        token = fetch(urlrequest.Request(
            endpoint + _TOKEN_PATH, method='PUT',
            headers={'X-aws-ec2-metadata-token-ttl-seconds': _TOKEN_TTL_SECONDS}))
        value = fetch(urlrequest.Request(
            endpoint + _INSTANCE_TYPE_PATH, headers={'X-aws-ec2-metadata-token': token}))
    except urlerror.HTTPError as e:
        return None, 'HTTP %d from IMDS' % e.code
    except (urlerror.URLError, OSError, ValueError):
        return None, 'unreachable'
    if not valid_instance_type(value):
        return None, 'IMDS gave no instance type'
    return value, 'ok'
