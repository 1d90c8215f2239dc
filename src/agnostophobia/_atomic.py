"""Atomic file writes: a reader sees the old file or the whole new one, never half of one.

Used by checkpoints, stored outputs, reports, data caches and checksum files alike, so
that a run killed mid-write loses nothing the user had. A file it writes gets the
permissions a plain ``open(path, "w")`` would give (the umask's, or an existing file's
own), and an error names the file the user asked for, never the temporary one.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

from agnostophobia._killpoints import kill_point
from agnostophobia.errors import AgnostophobiaError


TMP_SUFFIX = ".tmp"
#: A temporary file is ``.<target name>.agnostophobia-<pid>-<random>.tmp``: the name says which
#: process wrote it, so that a clean-up removes only this package's temporaries whose writer is
#: gone, never a user's own ``*.tmp`` files nor a live writer's.
TMP_TAG = "agnostophobia"
_OWNED = re.compile(rf"\.(?P<name>.+)\.{TMP_TAG}-(?P<pid>[0-9]+)-[^.]+{re.escape(TMP_SUFFIX)}")
#: Where Linux reports a process's umask (the ``Umask:`` line, since Linux 4.7).
PROC_STATUS = "/proc/self/status"


def temporary_prefix(target_name: str) -> str:
    """The start of this process's temporary file names for ``target_name`` (``mkstemp`` adds
    the random part and :data:`TMP_SUFFIX`)."""
    return f".{target_name}.{TMP_TAG}-{os.getpid()}-"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process; a number no pid has
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped: a killed command's worker (a figure's
    writer) whose parent died stays a zombie where nothing reaps orphans (a container's init);
    it answers signal 0 but writes nothing more. Where /proc is absent, a process is alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def remove_stale_temporaries(directory, names=None, recursive: bool = False) -> None:
    """Delete the temporary files a killed :func:`atomic_write` left in ``directory``: files of
    this package's naming (:data:`TMP_TAG`), for the target file ``names`` (default: any), whose
    writing process is no longer running. They never replaced their target, so nothing is lost;
    a user's own ``*.tmp`` files and a running writer's are left alone."""
    directory = Path(directory)
    patterns = [f".{glob.escape(name)}.{TMP_TAG}-*{TMP_SUFFIX}" for name in names] if names \
        else [f".*.{TMP_TAG}-*{TMP_SUFFIX}"]
    for pattern in patterns:
        for tmp in (directory.rglob(pattern) if recursive else directory.glob(pattern)):
            owned = _OWNED.fullmatch(tmp.name)
            if owned and tmp.is_file() and not tmp.is_symlink() and not _process_alive(int(owned["pid"])):
                tmp.unlink(missing_ok=True)


def fsync_file(path) -> None:
    """Flush ``path``'s bytes to the disk, so that a crash after a rename never leaves an empty
    or partial file under the target's name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory) -> None:
    """Flush ``directory``'s entries (a rename into it) to the disk; a file system that cannot
    (some network ones) is let be."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process's umask, read without changing it where the system reports it
    (:data:`PROC_STATUS`). Elsewhere ``os.umask`` is set and restored at once:
    it has no read-only form, and a file another thread creates in between would get 0o022."""
    try:
        with open(PROC_STATUS, encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(path) -> int:
    """The permission bits ``open(path, "w")`` leaves ``path`` with: an existing file keeps
    its own, a new one gets 0o666 less the umask (``mkstemp`` would give 0o600 whatever the
    umask, so that other users of a shared machine could not read runs or models)."""
    if os.path.isfile(path):
        return stat.S_IMODE(os.stat(path).st_mode)
    return 0o666 & ~current_umask()


def naming_target(exc: OSError, path, tmp: Optional[str] = None) -> OSError:
    """``exc`` as the user should read it: about ``path``, never about the temporary file
    ``tmp`` written in its place. An error about another file (a parent folder that cannot
    be made) is returned as it is."""
    if exc.filename is not None and not (tmp and str(exc.filename).startswith(tmp)):
        return exc
    if exc.errno is not None:  # OSError(errno, ...) is the matching subclass (PermissionError, ...)
        return OSError(exc.errno, exc.strerror, str(path))
    message = str(exc).replace(tmp, str(path)) if tmp else str(exc)
    return OSError(message if str(path) in message else f"{path}: {message}")


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def check_replaceable(path, option: str = "") -> None:
    """Refuse (one line naming it) to replace ``path`` unless it is new or a regular file (or a
    link to one): a FIFO, device, socket or folder named as an output is the user's, and a rename
    over it would replace ``/dev/null`` itself for root, or a pipe another program reads."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    for test, kind in _KINDS:
        if test(found.st_mode):
            raise AgnostophobiaError(f"{option + ' ' if option else ''}{path}: is {kind}, not a regular file; "
                                     f"an output is written only as a new file or over a regular one")


def atomic_write(path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then rename it over ``path``.

    The temporary file lies in the same directory (so the rename is atomic), is named for this
    process (:func:`temporary_prefix`) and is removed if ``write`` fails; one a killed process
    left for ``path`` is removed first (:func:`remove_stale_temporaries`). The file is flushed
    to the disk before the rename and the directory after it. ``tmp_path`` ends in ``.tmp``: writers that add their own
    suffix to a file name (``np.save``, ``np.savez``) must be given an open file instead.
    The file gets the mode of :func:`new_file_mode`; an ``OSError`` names ``path``.
    """
    path = Path(path)
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    remove_stale_temporaries(path.parent, [path.name])  # a killed earlier write of this file
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path.name), suffix=TMP_SUFFIX)
    except OSError as exc:  # its message would name the temporary file
        raise naming_target(exc, path, exc.filename) from exc
    os.close(fd)
    try:
        write(tmp)
        fsync_file(tmp)
        kill_point(f"write:{path.name}")
        os.chmod(tmp, mode)  # after write(), in case a writer made the file anew
        os.replace(tmp, path)
        fsync_directory(path.parent)  # the rename itself survives a crash
    except OSError as exc:
        raise naming_target(exc, path, tmp) from exc
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
