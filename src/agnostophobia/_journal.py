"""The undo journal of an all-or-nothing command: what it changed in a run, so that a command
stopped part-way is put back byte for byte (:meth:`agnostophobia.rundir.RunDir.all_or_nothing`).

``RUN/.undo/journal`` is a file this project writes, one JSON object a line, appended (and
flushed to the disk) *before* each change it records:

* the header ``{"project": "agnostophobia", "undo_journal": 1}``;
* ``{"keep": NAME, "size": N, "sha256": H}``: the run's file ``NAME`` is about to be replaced;
  its old version (of that size and hash) is kept under ``.undo/old/NAME`` by a second name
  (a hard link: no copy, so a full disk still allows it);
* ``{"new": NAME}``: ``NAME`` is about to be created;
* ``{"wrote": NAME, "size": N, "sha256": H}``: this content is about to be renamed into place.

Undoing acts on the names the journal lists and on nothing else, and only after every one of
them is verified (:func:`plan_undo`): the kept version has the recorded size and hash, and the
file now at the name is either the old version or one the command wrote. A journal that cannot
be verified (no header, a name that leaves the run, a link, a file changed since) is refused in
one line, with nothing changed: what lies under ``.undo`` is never trusted as it is found
(a link planted as ``.undo/new`` once led the undo into a user's folder and emptied it). Every
path is reached through :class:`agnostophobia._runpath.RunTree`, never through a link.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from agnostophobia._runpath import RunTree, UnsafeRunPath, relative_parts
from agnostophobia.errors import RecordError

UNDO = ".undo"                # an all-or-nothing command's journal, until it finishes
UNDO_DONE = ".undo-done"      # a finished command's journal, renamed away in one step, then removed
JOURNAL = "journal"
OLD = "old"
HEADER = {"project": "agnostophobia", "undo_journal": 1}
_CHUNK = 1 << 20


def digest(fd: int) -> Tuple[int, str]:
    """``(size, sha256)`` of the open file ``fd``, read from its start."""
    sha, size = hashlib.sha256(), 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return size, sha.hexdigest()
        sha.update(chunk)
        size += len(chunk)


def file_digest(tree: RunTree, parts, allowed=()) -> Tuple[int, str]:
    fd = tree.open(parts, os.O_RDONLY, allowed=allowed)
    try:
        return digest(fd)
    finally:
        os.close(fd)


class UnverifiableJournal(RecordError):
    """An undo record that is not this project's, or whose files changed since it was written."""


def _refuse(tree: RunTree, folder: str, why: str) -> UnverifiableJournal:
    return UnverifiableJournal(f"{tree.path((folder,))}: the run's undo folder cannot be verified ({why}); nothing "
                               f"was changed. Look at what it holds, move it out of the run, then run the command "
                               f"again")


@dataclass
class NameRecord:
    """What the journal says of one name of the run."""

    kept: Optional[Tuple[int, str]] = None      # the old version's (size, sha256), when it was replaced
    new: bool = False                            # the name did not exist before the command
    wrote: List[Tuple[int, str]] = field(default_factory=list)  # what the command wrote there


def read_journal(tree: RunTree, folder: str = UNDO) -> Optional[Dict[Tuple[str, ...], NameRecord]]:
    """The names ``RUN/<folder>/journal`` records, by their parts; None where the folder holds
    no journal begun (a command killed before its first record: nothing was changed). Refuses
    (:class:`UnverifiableJournal`) anything but this project's journal."""
    try:
        found = tree.lstat((folder, JOURNAL))
        entries = sorted(parts for parts, _ in tree.walk((folder,)))
    except UnsafeRunPath as exc:
        raise _refuse(tree, folder, str(exc).split(": ", 1)[-1].split(";")[0]) from None
    if found is None:
        if entries:
            raise _refuse(tree, folder, f"it holds {tree.path((folder,) + entries[0])} but no journal")
        return None
    try:
        text = tree.read_bytes((folder, JOURNAL))
    except UnsafeRunPath:
        raise _refuse(tree, folder, "its journal is not a regular file of its own") from None
    lines = text.split(b"\n")
    complete, partial = lines[:-1], lines[-1]  # a last line without its newline was never acted on
    if not complete:
        if partial and not json.dumps(HEADER).encode().startswith(partial):
            raise _refuse(tree, folder, "its journal is not this project's")
        return None
    try:
        records = [json.loads(line) for line in complete]
    except ValueError:
        raise _refuse(tree, folder, "its journal is not JSON lines") from None
    if records[0] != HEADER:
        raise _refuse(tree, folder, "its journal is not this project's")
    return _names(tree, folder, records[1:])


def _names(tree: RunTree, folder: str, records) -> Dict[Tuple[str, ...], NameRecord]:
    names: Dict[Tuple[str, ...], NameRecord] = {}
    for record in records:
        kind = next(iter(record), None) if isinstance(record, dict) else None
        if kind not in ("keep", "new", "wrote") or not isinstance(record[kind], str):
            raise _refuse(tree, folder, f"its journal holds a record it does not write: {str(record)[:80]}")
        try:
            parts = relative_parts(tree.root, record[kind])
        except UnsafeRunPath:
            parts = ()
        if not parts or parts[0] in (UNDO, UNDO_DONE):
            raise _refuse(tree, folder, f"its journal names {record[kind]!r}, which is not a file of the run")
        entry = names.setdefault(parts, NameRecord())
        if kind == "new":
            entry.new = True
            continue
        if not isinstance(record.get("size"), int) or not isinstance(record.get("sha256"), str):
            raise _refuse(tree, folder, f"its journal's record of {record[kind]!r} has no size and hash")
        if kind == "keep":
            entry.kept = (record["size"], record["sha256"])
        else:
            entry.wrote.append((record["size"], record["sha256"]))
    return names


@dataclass
class Step:
    """One verified step of an undo: put the kept version back, or remove what was new."""

    parts: Tuple[str, ...]
    restore: bool   # True: rename .undo/old/NAME over NAME; False: remove NAME


def plan_undo(tree: RunTree) -> Optional[List[Step]]:
    """Every step that puts the run back, each verified before any is taken (None: no journal
    begun). Refuses the whole journal when one name does not verify."""
    names = read_journal(tree)
    if names is None:
        return None
    steps = []
    for parts, record in sorted(names.items()):
        step = _verified_step(tree, parts, record)
        if step is not None:
            steps.append(step)
    return steps


def _verified_step(tree: RunTree, parts, record: NameRecord) -> Optional[Step]:
    shown = "/".join(parts)
    kept = _kept_digest(tree, parts, record) if record.kept else None
    now = tree.lstat(parts)
    if now is not None:
        if not stat.S_ISREG(now.st_mode):
            raise _refuse(tree, UNDO, f"{shown} is no longer a regular file")
        old = tree.lstat((UNDO, OLD) + tuple(parts)) if kept else None
        allowed = {(old.st_dev, old.st_ino)} if old is not None else ()
        current = file_digest(tree, parts, allowed)
        if current not in [*record.wrote, *([record.kept] if record.kept else [])]:
            raise _refuse(tree, UNDO, f"{shown} has changed since the command that recorded it")
    if kept:
        return Step(parts, restore=True)
    if record.kept:  # never linked: the command stopped before it replaced the file
        if now is None or file_digest(tree, parts) != record.kept:
            raise _refuse(tree, UNDO, f"the old version of {shown} is gone")
        return None
    if record.new and now is not None:
        return Step(parts, restore=False)
    if not record.new:
        raise _refuse(tree, UNDO, f"{shown} is written but neither kept nor new")
    return None


def _kept_digest(tree: RunTree, parts, record: NameRecord) -> bool:
    """Whether the old version of ``parts`` is kept under ``.undo/old`` as recorded (refused
    where something else is there)."""
    kept_parts = (UNDO, OLD) + tuple(parts)
    found = tree.lstat(kept_parts)
    if found is None:
        return False
    if not stat.S_ISREG(found.st_mode):
        raise _refuse(tree, UNDO, f"{'/'.join(kept_parts)} is not a regular file")
    now = tree.lstat(parts)
    same = {(found.st_dev, found.st_ino)} if now is not None and os.path.samestat(found, now) else ()
    if file_digest(tree, kept_parts, same) != record.kept:
        raise _refuse(tree, UNDO, f"{'/'.join(kept_parts)} is not the version it recorded")
    return True


def take_steps(tree: RunTree, steps: List[Step]) -> None:
    """Put the run back: each kept version renamed over its name, each new file removed."""
    for step in steps:
        if step.restore:
            tree.rename((UNDO, OLD) + step.parts, step.parts)
        else:
            tree.unlink(step.parts)
    with tree.folder(()) as fd:
        os.fsync(fd)


class Journal:
    """The open journal of one all-or-nothing command (this process and those it forks)."""

    def __init__(self, tree: RunTree):
        self.tree = tree

    def begin(self) -> None:
        """Make ``.undo`` with its journal's header, flushed before the first change."""
        with self.tree.folder((), create=True) as root:
            os.mkdir(UNDO, 0o700, dir_fd=root)
        self._append(HEADER)

    def _append(self, record) -> None:
        fd = self.tree.open((UNDO, JOURNAL), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())  # one write: a killed process leaves whole lines
            os.fsync(fd)
        finally:
            os.close(fd)

    def recorded(self, parts) -> bool:
        """Whether ``parts`` was recorded before in this command (its first version is the one to
        put back): new, or kept and still linked."""
        record = (read_journal(self.tree) or {}).get(tuple(parts))
        if record is None:
            return False
        return record.new or (record.kept is not None and self.tree.lstat((UNDO, OLD) + tuple(parts)) is not None)

    def before_replace(self, parts) -> bool:
        """Record ``parts`` before it is first written: its old version kept (a second name under
        ``.undo/old``) or its name noted as new. Returns whether an old version was linked."""
        if self.recorded(parts):
            return False
        name = "/".join(parts)
        found = self.tree.lstat(parts)
        if found is None:
            self._append({"new": name})
            return False
        size, sha = file_digest(self.tree, parts)
        self._append({"keep": name, "size": size, "sha256": sha})
        self.tree.link(parts, (UNDO, OLD) + tuple(parts))
        return True

    def forget_kept(self, parts) -> None:
        """The write of ``parts`` failed and left the file as it was: drop its second name (the
        journal's keep record then verifies against the unchanged file)."""
        self.tree.unlink((UNDO, OLD) + tuple(parts))

    def wrote(self, parts, tmp_path) -> None:
        """Record the content about to replace ``parts`` (the whole temporary file ``tmp_path``)."""
        fd = os.open(tmp_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            size, sha = digest(fd)
        finally:
            os.close(fd)
        self._append({"wrote": "/".join(parts), "size": size, "sha256": sha})


def undo_unfinished(tree: RunTree) -> None:
    """Put back what a command stopped inside its all-or-nothing block changed, after every
    step is verified, then drop the journal; a finished command's leftover journal is removed.
    Safe to repeat."""
    if tree.lstat((UNDO_DONE,)) is not None:
        read_journal(tree, UNDO_DONE)  # this project's, finished: nothing to undo
        tree.remove_tree((UNDO_DONE,))
    found = _undo_folder(tree)
    if found is None:
        return
    steps = plan_undo(tree)
    if steps:
        take_steps(tree, steps)
    tree.remove_tree((UNDO,))


def _undo_folder(tree: RunTree) -> Optional[os.stat_result]:
    found = tree.lstat((UNDO,))
    if found is not None and not stat.S_ISDIR(found.st_mode):
        raise _refuse(tree, UNDO, "it is a link or a file, not the run's own undo folder")
    return found


def drop(tree: RunTree) -> None:
    """A finished command: its journal renamed away in one step (from here nothing is undone),
    then removed."""
    if tree.lstat((UNDO,)) is None:
        return
    tree.rename((UNDO,), (UNDO_DONE,))
    tree.remove_tree((UNDO_DONE,))
