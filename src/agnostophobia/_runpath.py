"""Paths inside a run, reached without following a link: the one way a command touches one.

A run folder is the user's, and so is everything outside it. A symbolic link planted inside a
run (by a hostile archive, a careless ``ln -s``, another tool) must never carry a write, a
rename or a removal out of it: round five's ``.lock`` link truncated an outside file, and an
undo record followed ``.undo/new`` into a user's folder and emptied it. So every component
below the run folder is opened relative to its parent's descriptor with ``O_NOFOLLOW``
(``openat``, component by component), never resolved as a whole path. Reaching the run folder
itself through a link keeps working: only what lies *under* it is walked this way.

What is refused, in one line naming the path (:class:`UnsafeRunPath`), and never followed,
removed or moved:

* a symbolic link anywhere under the run;
* a FIFO, socket or device (a read would hang on a FIFO, a write would reach the device);
* a file with more than one name (``st_nlink > 1``, a hard link), whose content a write in
  place would change under its other name too -- except the second names the caller made and
  recorded itself (the undo journal's kept versions), which it passes as ``allowed``.

Linux's ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` would do the walk in one
call, but Python has no binding for it; the component walk gives the same guarantee on every
POSIX system Python runs on. A shared helper: it imports only :mod:`agnostophobia.errors`.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Collection, Iterator, List, Optional, Tuple

from agnostophobia.errors import RecordError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Opening a folder below the run: read-only, a folder, never a link.
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class UnsafeRunPath(RecordError):
    """A path inside a run that a command must not follow, write, move or remove: a link, a
    FIFO, socket or device, a file with another name, or a name that leaves the run."""


def refusal(path, kind: str) -> UnsafeRunPath:
    """The one-line refusal of ``path``, found to be ``kind`` (``"a symbolic link"``, ...)."""
    return UnsafeRunPath(f"{path}: is {kind}; a run's files and folders must be its own (nothing in a run is "
                         f"followed through a link, nor read or written as a FIFO, socket or device, nor changed "
                         f"under a second name); move it out of the run, then run the command again")


def relative_parts(root, path) -> Tuple[str, ...]:
    """The components of ``path`` below the run folder ``root``, checked lexically: refused
    (one line) when ``path`` is not under ``root`` or names ``..`` on the way."""
    root, path = Path(os.path.abspath(root)), Path(path)
    relative = path if not path.is_absolute() else Path(os.path.abspath(path))
    if relative.is_absolute():
        try:
            relative = relative.relative_to(root)
        except ValueError:
            raise UnsafeRunPath(f"{path}: not a file of the run {root}") from None
    parts = tuple(part for part in PurePosixPath(relative.as_posix()).parts if part != ".")
    if any(part in ("..", "") or "/" in part for part in parts) or PurePosixPath(relative.as_posix()).is_absolute():
        raise UnsafeRunPath(f"{path}: a name inside the run {root} must not leave it ('..' or an absolute path)")
    return parts


def kind_of(found: os.stat_result, allow_folder: bool = False) -> Optional[str]:
    """What is wrong with an entry as ``lstat``/``fstat`` ``found`` it, or None: a link or a
    special file; a folder where a file is wanted (unless ``allow_folder``)."""
    for test, kind in _KINDS:
        if test(found.st_mode):
            return kind
    if stat.S_ISDIR(found.st_mode) and not allow_folder:
        return "a folder"
    return None


def check_entry(path, found: os.stat_result, allowed: Collection[Tuple[int, int]] = ()) -> None:
    """Refuse ``path`` unless ``found`` is a folder or a regular file with one name (or a second
    name the caller recorded: its ``(st_dev, st_ino)`` in ``allowed``)."""
    kind = kind_of(found, allow_folder=True)
    if kind:
        raise refusal(path, kind)
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1 and (found.st_dev, found.st_ino) not in allowed:
        raise refusal(path, f"hard-linked ({found.st_nlink} names share this file)")


class RunTree:
    """The run folder ``root`` and the one way to reach a path under it (:meth:`parent_fd`).

    ``root`` itself is opened as given (a link to a whole run is followed, on purpose);
    every component below it is opened with ``O_NOFOLLOW`` relative to its parent."""

    def __init__(self, root):
        self.root = Path(root)

    def path(self, parts) -> Path:
        return self.root.joinpath(*parts)

    @contextlib.contextmanager
    def folder(self, parts, create: bool = False) -> Iterator[Optional[int]]:
        """A descriptor of the folder ``root/parts`` (None where it, or a folder on the way, does
        not exist and ``create`` is not set). A link on the way is refused; ``create`` makes the
        missing folders (mode 0o777 less the umask, as ``mkdir -p``)."""
        try:
            fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except FileNotFoundError:
            if not create:
                yield None
                return
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for depth, part in enumerate(parts):
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        fd = -1
                        yield None
                        return
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    child = self._open_folder(fd, parts[:depth + 1])
                except OSError as exc:
                    raise self._refused_folder(fd, parts[:depth + 1], exc) from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)

    def _open_folder(self, parent: int, parts) -> int:
        try:
            return os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise self._refused_folder(parent, parts, exc) from None

    def _refused_folder(self, parent: int, parts, exc: OSError) -> Exception:
        """``exc`` of opening ``parts`` as a folder, as the user should read it: a link or a
        file where a folder was wanted is named as such; anything else is ``exc`` itself."""
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            return OSError(exc.errno, exc.strerror, str(self.path(parts)))
        try:
            found = os.lstat(parts[-1], dir_fd=parent)
        except OSError:
            return OSError(exc.errno, exc.strerror, str(self.path(parts)))
        return refusal(self.path(parts), kind_of(found) or "a file, not a folder")

    def lstat(self, parts) -> Optional[os.stat_result]:
        """The entry ``root/parts`` as ``lstat`` sees it, or None where it (or its folder) is absent."""
        with self.folder(parts[:-1]) as fd:
            if fd is None:
                return None
            try:
                return os.lstat(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                return None

    def open(self, parts, flags: int, mode: int = 0o666, allowed: Collection[Tuple[int, int]] = (),
             create_folders: bool = False) -> int:
        """``os.open`` of the file ``root/parts``, never through a link (``O_NOFOLLOW`` on every
        component) and never blocking on a FIFO; the opened file is checked with ``fstat``
        (:func:`check_entry`, and a regular file), so nothing swapped in after a check is used."""
        with self.folder(parts[:-1], create=create_folders) as fd:
            if fd is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.path(parts)))
            try:
                opened = os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, mode, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                    found = os.lstat(parts[-1], dir_fd=fd)
                    raise refusal(self.path(parts), kind_of(found) or "not a regular file") from None
                raise OSError(exc.errno, exc.strerror, str(self.path(parts))) from None
        try:
            found = os.fstat(opened)
            check_entry(self.path(parts), found, allowed)
            if not stat.S_ISREG(found.st_mode):
                raise refusal(self.path(parts), "a folder")
            os.set_blocking(opened, True)
        except BaseException:
            os.close(opened)
            raise
        return opened

    def read_bytes(self, parts, allowed: Collection[Tuple[int, int]] = ()) -> bytes:
        """The whole of the regular file ``root/parts``, read through :meth:`open`."""
        fd = self.open(parts, os.O_RDONLY, allowed=allowed)
        with os.fdopen(fd, "rb") as file:
            return file.read()

    def unlink(self, parts) -> None:
        """Remove the file ``root/parts`` (a name: the folder holding it is reached without a
        link, and a folder is never removed this way). Absent: nothing to do."""
        with self.folder(parts[:-1]) as fd:
            if fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parts[-1], dir_fd=fd)

    def rename(self, source, target) -> None:
        """Rename ``root/source`` to ``root/target`` (both under the run; the target's folders
        are made). The entry itself is moved, never what a link at it points to."""
        with self.folder(source[:-1]) as src, self.folder(target[:-1], create=True) as dst:
            if src is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.path(source)))
            os.rename(source[-1], target[-1], src_dir_fd=src, dst_dir_fd=dst)
            os.fsync(dst)

    def link(self, source, target) -> None:
        """Give the file ``root/source`` a second name ``root/target`` (a hard link, never through
        a symbolic one); the target's folders are made."""
        with self.folder(source[:-1]) as src, self.folder(target[:-1], create=True) as dst:
            if src is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.path(source)))
            os.link(source[-1], target[-1], src_dir_fd=src, dst_dir_fd=dst, follow_symlinks=False)
            os.fsync(dst)

    def remove_tree(self, parts) -> None:
        """Remove the folder ``root/parts`` and all it holds, descending by descriptors: a link
        inside is removed as a name, never followed (as ``shutil.rmtree`` does where the system
        has ``openat``). Absent: nothing to do."""
        with self.folder(parts[:-1]) as parent:
            if parent is not None:
                _remove_below(parent, parts[-1], self.path(parts))

    def walk(self, parts=(), skip: Collection[str] = ()) -> Iterator[Tuple[Tuple[str, ...], os.stat_result]]:
        """``(parts, lstat)`` of every entry below ``root/parts``, depth first, never descending
        through a link (a link is yielded as the entry it is). Top-level names in ``skip`` are
        passed over."""
        with self.folder(parts) as fd:
            if fd is None:
                return
            yield from _walk_below(fd, tuple(parts), skip)

    def check_tree(self, skip: Collection[str] = (), allowed: Collection[Tuple[int, int]] = ()) -> int:
        """Refuse (one line, the first found) a link, a FIFO, socket or device, or a file with a
        second name not in ``allowed``, anywhere under the run. Returns how many entries it read."""
        count = 0
        for parts, found in self.walk(skip=skip):
            check_entry(self.path(parts), found, allowed)
            count += 1
        return count


def _walk_below(fd: int, parts: Tuple[str, ...], skip: Collection[str]):
    with os.scandir(fd) as entries:
        listed: List[str] = sorted(entry.name for entry in entries)
    for name in listed:
        if not parts and name in skip:
            continue
        try:
            found = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:  # removed meanwhile
            continue
        yield parts + (name,), found
        if stat.S_ISDIR(found.st_mode):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # swapped for a link or removed since the lstat: yielded as it was
                continue
            try:
                yield from _walk_below(child, parts + (name,), skip)
            finally:
                os.close(child)


def _remove_below(parent: int, name: str, shown: Path) -> None:
    try:
        found = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    child = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        with os.scandir(child) as entries:
            names = [entry.name for entry in entries]
        for inner in names:
            _remove_below(child, inner, shown / inner)
    finally:
        os.close(child)
    os.rmdir(name, dir_fd=parent)
