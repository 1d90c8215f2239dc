"""Named places where a test may kill the process, chosen by name rather than by timing.

A crash-safety test sets ``AGNOSTOPHOBIA_KILL_AT=NAME`` (or ``NAME:K`` for the K-th time the
point is reached, counting from 1) and runs a command in a subprocess; when the process
reaches that point it sends itself SIGKILL, exactly as an out-of-memory killer or a
pulled plug would: no ``finally`` block, no atexit handler runs. Unset (always, outside
tests), :func:`kill_point` costs one dictionary lookup.

Points: ``train-step`` (after an optimiser step), ``epoch-end`` (after an epoch's
checkpoint), ``write:<file name>`` (a file's temporary copy is complete but not yet renamed
into place; see :mod:`agnostophobia._atomic`). A point reached in a process forked from the
command (a figure-drawing process) kills the command too, as a pulled plug would; its other
forked processes then end with it (``training.concurrent.die_with_parent``).

``AGNOSTOPHOBIA_DISK_FULL_AT`` names a point the same way; there the process gets
``OSError(ENOSPC)``, as a write to a full disk would (at ``write:<file name>``: the file's
bytes did not fit).
"""
from __future__ import annotations

import errno
import os
import signal
from collections import Counter

ENV = "AGNOSTOPHOBIA_KILL_AT"
#: The same points, where a test makes the disk full: ``OSError(ENOSPC)`` is raised instead.
DISK_FULL_ENV = "AGNOSTOPHOBIA_DISK_FULL_AT"
#: A file each point reached is appended to (one name a line), for a test to list a command's points.
POINTS_LOG_ENV = "AGNOSTOPHOBIA_POINTS_LOG"
_reached: Counter = Counter()
_COMMAND = os.getpid()  # the process that imported this module; a forked process inherits the number


def kill_point(name: str) -> None:
    log = os.environ.get(POINTS_LOG_ENV)
    if log:  # a test lists the points a command reaches, to kill it at each
        with open(log, "a", encoding="utf-8") as points:
            points.write(name + "\n")
    if _reached_nth(ENV, name):
        if os.getpid() != _COMMAND:  # forked from the command: the command is what gets killed
            os.kill(_COMMAND, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if _reached_nth(DISK_FULL_ENV, name):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _reached_nth(env: str, name: str) -> bool:
    """Whether ``name`` is the point ``$env`` names (``NAME`` or ``NAME:K``), reached the K-th time."""
    spec = os.environ.get(env)
    if not spec:
        return False
    target, _, nth = spec.rpartition(":") if spec.rpartition(":")[2].isdigit() else (spec, "", "1")
    if name != target:
        return False
    _reached[env, name] += 1
    return _reached[env, name] == int(nth)
