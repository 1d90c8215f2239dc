"""One command at a time on a run directory.

Two commands writing into one run (a second ``reproduce`` started while the first trains,
or ``evaluate`` during training) would interleave checkpoints, outputs and reports. The
command that owns a run holds an exclusive ``flock`` on ``RUN/.lock`` for as long as it
works; a second one stops at once with a message naming the run and the holder.

The lock is the operating system's, not the file's existence: it ends with the process
that holds it, so a lock left by a killed process (SIGKILL, power loss) never blocks the
next run. It belongs to the command that owns the run (the parent process; rank 0 under
DDP), never to each worker: workers started by the owner run inside its lock.

Commands that only read a run (``plot``, ``predict``, ``export``) take a *shared* lock
(:func:`run_read_lock`) on the same file: any number of them read at once, none while a
writer holds the exclusive lock, so a reader never sees a half-updated run. A reader opens
the lock file read-only and writes nothing: on a run the user cannot write it creates no
lock file either, as no writer can be working in such a run without having created one.

Where ``fcntl`` is missing (Windows) runs are not locked; that platform is not supported
for concurrent commands.
"""
from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path

from agnostophobia._atomic import remove_stale_temporaries
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import LOCK, RunDir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

LOCK_NAME = LOCK


class RunInUse(AgnostophobiaError):
    """Another process is working on the same run directory."""


def run_is_writable(run_dir) -> bool:
    """Whether this process may create and replace files in ``run_dir`` (False on a read-only
    directory or file system)."""
    return os.access(run_dir, os.W_OK | os.X_OK)


def _in_use(run_dir: Path, fd: int) -> RunInUse:
    holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process (a command reading it)"
    return RunInUse(f"run {run_dir} is in use by {holder}; wait for it to finish or stop it, "
                    f"then run this command again")


def _lock_at_once(run_dir: Path, fd: int, operation: int) -> None:
    """Take the ``flock`` (``LOCK_EX`` or ``LOCK_SH``) on ``fd`` without waiting: a command never
    queues behind another; it stops with :class:`RunInUse`, naming the holder."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(run_dir, fd) from None


def _command_line() -> str:
    return " ".join(["agnostophobia", *sys.argv[1:]]) if sys.argv else "agnostophobia"


@contextlib.contextmanager
def run_lock(run_dir, command: str | None = None, create: bool = True):
    """Hold the run's lock for the ``with`` block; raise :class:`RunInUse` if another holds it.

    Creates ``run_dir`` if needed and ``create`` is set (a command that only reads and adds
    to a run passes ``create=False`` and gets an error for a missing one). ``command``
    (default: this process's command line) is written into the lock file so that a refused
    command can say who holds the run.
    """
    run_dir = Path(run_dir)
    if create:
        run_dir.mkdir(parents=True, exist_ok=True)
    elif not run_dir.is_dir():
        raise AgnostophobiaError(f"run directory {run_dir} does not exist")
    if fcntl is None:  # pragma: no cover
        yield
        return
    try:
        # never through a link: a planted .lock linking to another file would be truncated
        fd = RunDir(run_dir).open_in_place(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise AgnostophobiaError(f"run {run_dir}: this user may not write it, and {command or _command_line()} "
                                 f"writes into it") from None
    try:
        _lock_at_once(run_dir, fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} ({command or _command_line()})\n".encode(), 0)
        RunDir(run_dir).undo_unfinished()  # what a command killed part-way changed is put back first
        RunDir(run_dir).check_tree()  # nothing under the run is followed through a link, nor changed under two names
        remove_stale_temporaries(run_dir, recursive=True)  # safe: no other process can be writing now
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # the holder's line names a live writer only (a reader may block the next one)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def run_read_lock(run_dir):
    """Hold a shared lock on the run for the ``with`` block: no writer (:func:`run_lock`) works
    in it meanwhile; raise :class:`RunInUse`, naming the writer, if one holds it now.

    Writes nothing into the run: the lock file is opened read-only, and created (empty) only
    where the user may write the run, so that a writer starting later waits for this reader.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AgnostophobiaError(f"run directory {run_dir} does not exist")
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = run_dir / LOCK_NAME
    try:
        fd = RunDir(run_dir).open_in_place(path, os.O_RDONLY | (os.O_CREAT if run_is_writable(run_dir) else 0))
    except FileNotFoundError:  # a run this user cannot write, never locked: no writer can be in it
        yield
        return
    except PermissionError:
        raise AgnostophobiaError(f"{path}: this user may not read the run's lock file, so cannot tell whether a "
                                 f"command is writing the run; ask its owner to make it readable") from None
    try:
        _lock_at_once(run_dir, fd, fcntl.LOCK_SH)
        RunDir(run_dir).check_tree()  # a link or a FIFO under the run is not read as the run's own
        yield
    finally:
        os.close(fd)
