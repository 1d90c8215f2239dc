"""Atomic file writes: a reader sees the old file or the whole new one, never half of one.

Used by checkpoints, stored outputs, reports, data caches and checksum files alike, so
that a run killed mid-write loses nothing the user had. A file it writes gets the
permissions a plain ``open(path, "w")`` would give (the umask's, or an existing file's
own), and an error names the file the user asked for, never the temporary one.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

from agnostophobia._killpoints import kill_point


TMP_SUFFIX = ".tmp"
#: Where Linux reports a process's umask (the ``Umask:`` line, since Linux 4.7).
PROC_STATUS = "/proc/self/status"


def remove_stale_temporaries(directory, names=None, recursive: bool = False) -> None:
    """Delete temporary files that a killed :func:`atomic_write` left in ``directory``.

    They never replaced their target, so nothing is lost. Call this only where no other
    process can be writing (under the run lock, or at the start of a run): ``names``
    limits it to the temporaries of those target file names.
    """
    directory = Path(directory)
    patterns = [f".{name}.*{TMP_SUFFIX}" for name in names] if names else [f".*{TMP_SUFFIX}"]
    for pattern in patterns:
        for tmp in (directory.rglob(pattern) if recursive else directory.glob(pattern)):
            if tmp.is_file():
                tmp.unlink(missing_ok=True)


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


def atomic_write(path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then rename it over ``path``.

    The temporary file lies in the same directory (so the rename is atomic) and is
    removed if ``write`` fails. ``tmp_path`` ends in ``.tmp``: writers that add their own
    suffix to a file name (``np.save``, ``np.savez``) must be given an open file instead.
    The file gets the mode of :func:`new_file_mode`; an ``OSError`` names ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    except OSError as exc:  # its message would name the temporary file
        raise naming_target(exc, path, exc.filename) from exc
    os.close(fd)
    try:
        write(tmp)
        kill_point(f"write:{path.name}")
        os.chmod(tmp, mode)  # after write(), in case a writer made the file anew
        os.replace(tmp, path)
    except OSError as exc:
        raise naming_target(exc, path, tmp) from exc
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
