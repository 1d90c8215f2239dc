"""Bounded reads: every input file is a regular file, and every array it declares fits in memory.

A FIFO, socket or device given where a file is expected would block a command forever or
read without end, so each input (an image, an ``.npz``, a config, a protocol's files) is
checked with :func:`check_regular_file` before a byte of it is read. An array an input declares
(an ``.npz`` member's shape, an image's pixel count) is checked with :func:`check_declared_bytes`
from its header, before it is allocated.
"""
from __future__ import annotations

import os
import stat
from typing import Optional

from agnostophobia.errors import DataError

#: The most one declared array may take, whatever memory the machine has.
MAX_ARRAY_BYTES = 4 << 30
_MEMINFO = "/proc/meminfo"

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def check_regular_file(path, what: str = "", error: type = DataError) -> os.stat_result:
    """``os.stat(path)`` (through links) when ``path`` is a regular file; otherwise ``error``
    naming it and what it is. Nothing is opened, so a FIFO never blocks."""
    label = f"{what} {path}" if what else f"{path}"
    try:
        info = os.stat(path)
    except OSError as exc:
        raise error(f"{label}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise error(f"{label}: is {kind}, not a regular file; give a file")
    return info


def available_memory() -> Optional[int]:
    """Bytes the system can still hand out (MemAvailable of /proc/meminfo, or free pages by
    ``os.sysconf``); None where neither is known."""
    try:
        with open(_MEMINFO, encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def array_limit() -> int:
    """The most bytes one declared array may take: :data:`MAX_ARRAY_BYTES`, or half the
    available memory where that is less."""
    free = available_memory()
    return MAX_ARRAY_BYTES if free is None else min(MAX_ARRAY_BYTES, free // 2)


def check_declared_bytes(nbytes: int, what: str, error: type = DataError) -> None:
    """Refuse an array of ``nbytes`` (as its file declares it) before it is allocated."""
    limit = array_limit()
    if nbytes > limit:
        raise error(f"{what}: declares {nbytes / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB "
                    f"one input may take (4 GiB, or half the available memory); refused before reading it")


def read_input_bytes(path, what: str = "", error: type = DataError) -> bytes:
    """The bytes of the input file ``path``, after :func:`check_regular_file` and a size check.
    The file is opened without blocking and checked again once open, so that a file swapped
    for a FIFO in between is refused too, never waited on."""
    label = f"{what} {path}" if what else f"{path}"
    check_declared_bytes(check_regular_file(path, what, error).st_size, label, error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise error(f"{label}: cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{label}: is not a regular file any more; give a file")
        return handle.read()


def read_input_text(path, what: str = "", error: type = DataError, encoding: str = "utf-8") -> str:
    """:func:`read_input_bytes` decoded; undecodable text is ``error`` naming the file."""
    try:
        return read_input_bytes(path, what, error).decode(encoding)
    except UnicodeDecodeError:
        raise error(f"{what + ' ' if what else ''}{path}: not a {encoding} text file") from None


#: The deepest folder an input's folder walk descends to (a folder tree of images is a few levels
#: deep; one 1,100 deep ended in RecursionError).
MAX_FOLDER_DEPTH = 64


def _leads_to_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:  # a link loop: listed as a file, whose reading is the problem reported
        return False


def walk_files(root, what: str = "", error: type = DataError):
    """``(folder, file names)`` of ``root`` and every folder below it, sorted, without recursion
    and without following links to folders (as ``os.walk``); a tree deeper than
    :data:`MAX_FOLDER_DEPTH` is ``error`` in one line naming it."""
    pending = [(os.fspath(root), 0)]
    while pending:
        folder, depth = pending.pop()
        if depth > MAX_FOLDER_DEPTH:
            raise error(f"{what + ' ' if what else ''}{root}: folders nested more than {MAX_FOLDER_DEPTH} deep; "
                        f"an input is a few levels of folders")
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        folders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        yield folder, [e.name for e in entries if not _leads_to_folder(e)]
        pending += [(path, depth + 1) for path in reversed(folders)]
