# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""Test-only callback of tests/interrupt/kill.py: stops the controller at the start of a task.

Where ACCEL_KILL_AT_TASK names a task or handler, or the start of its name (and
ACCEL_KILL_AT_PLAY, if set, its play), the callback writes ACCEL_KILL_MARKER when that task starts, before
any host runs it, and stops the controller's main process there (SIGSTOP), so
that kill.py kills the controller's whole tree at exactly that point. With
ACCEL_KILL_AT_DELAY the run goes on, and kill.py kills it that many seconds
later, while the task runs. It is never installed with the collection.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: kill_at
type: aggregate
short_description: Stop the controller at the start of a named task (accel.nodes interrupt tests only)
description:
  - See the module docstring; used by tests/interrupt/kill.py.
requirements:
  - enabled in callbacks_enabled
"""

import os
import signal

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kill_at'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._task = os.environ.get('ACCEL_KILL_AT_TASK', '')
        self._play_wanted = os.environ.get('ACCEL_KILL_AT_PLAY', '')
        self._marker = os.environ.get('ACCEL_KILL_MARKER', '')
        self._delay = os.environ.get('ACCEL_KILL_AT_DELAY', '')
        self._play = ''
        self._done = False

    def v2_playbook_on_play_start(self, play) -> None:
        self._play = play.get_name()

    def _start(self, task) -> None:
        # Role tasks read "<role> : <name>"; a templated name is matched by its start.
        name = task.get_name().split(' : ', 1)[-1].strip()
        if self._done or not self._task or not name.startswith(self._task):
            return
        if self._play_wanted and self._play != self._play_wanted:
            return
        self._done = True
        with open(self._marker, 'w') as handle:
            handle.write('%s\n%s\n' % (self._play, task.get_name()))
        if not self._delay:
            os.kill(os.getpid(), signal.SIGSTOP)

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self._start(task)
