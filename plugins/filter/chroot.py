# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Whether a play works on a chroot, the one test every role and bake.yml
share. Documented in chroot_connection.yml next to this file."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

# The chroot connection plugin by its two names: "-c chroot" and
# "ansible_connection: chroot" resolve to the same plugin as
# community.general.chroot, but the variable keeps the name as written.
CHROOT_CONNECTIONS = frozenset(('chroot', 'community.general.chroot'))


def chroot_connection(connection: t.Any, switch: t.Any = None) -> bool:
    """True when the play works on a chroot: the switch when it is set (true
    or false), otherwise whether the connection is the chroot plugin."""
    if switch is not None and switch != '':
        try:
            return boolean(switch, strict=True)
        except TypeError as e:
            raise AnsibleFilterError(
                'accel_nodes_chroot must be true or false (or unset to follow the connection), got %r' % (switch,)
            ) from e
    return str(connection or '').strip() in CHROOT_CONNECTIONS


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'chroot_connection': chroot_connection}
