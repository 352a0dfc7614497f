# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""site.yml's batch sizes (accel_nodes_serial), checked before the roll starts.
Documented in rolling_serial.yml next to this file.

It has a second job, which is why site.yml's play header calls it rather than taking the value as it is: the
play header is templated in the controller's own process, before any worker is forked. ansible-core loads a
collection's filter plugins (it compiles every file of plugins/filter anew, about 0.1 s here) in the first
process that needs one. Where that is a forked worker, the work is lost when the worker exits, and every later
task that uses one of this collection's filters pays it again: some twenty tasks of a converged re-run. Loaded
once in the controller, the workers inherit them (tests/benchmarks/README.md, "session 20").
"""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

# What ansible-core's pct_to_int (ansible.utils.helpers) reads: an integer, or an integer followed by %.
_BATCH = re.compile(r'^\s*[0-9]+\s*%?\s*$')


def _batch(value: t.Any) -> t.Union[int, str]:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    if isinstance(value, str) and _BATCH.match(value):
        text = value.replace(' ', '')
        return text if text.endswith('%') else int(text)
    raise ValueError(value)


def rolling_serial(value: t.Any) -> list[t.Union[int, str]]:
    """accel_nodes_serial as the play's serial takes it: a list of batch sizes, each a number of nodes or a
    percentage of the play's nodes; the last one repeats until every node had its turn. 0 or 100% is all nodes."""
    items = value if isinstance(value, (list, tuple)) else [value]
    try:
        if not items:
            raise ValueError(value)
        return [_batch(item) for item in items]
    except ValueError:
        raise AnsibleFilterError(
            'accel_nodes_serial must be a batch size (5), a percentage of the nodes ("10%%") or a list of them for '
            'canary batches ([1, "10%%", "100%%"]); got %r.' % (value,)) from None


class FilterModule(object):

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {'rolling_serial': rolling_serial}
