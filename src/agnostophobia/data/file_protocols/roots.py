"""The folders a protocol from files names, checked before anything is read: the root, and
each class folder the config lists (``folders``: under every split; ``imagefolder``: under the
root). A missing root is named as such (not as one missing folder per class), and a class name
that is not a folder gets the closest folder names as "did you mean". Reads folder names only,
so a command refuses a typo in a second, before any image or library is loaded."""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import List, Optional

from agnostophobia.data.file_protocols.spec import FOLDER_TYPES, FileProtocolSpec


def missing_root(spec: FileProtocolSpec) -> Optional[str]:
    """The one problem of a root that is not a folder, or None."""
    if spec.root.is_dir():
        return None
    what = "is a file, not a folder" if spec.root.exists() else "does not exist"
    return f"{spec.root}: the protocol's root folder (protocol.root) {what}"


def did_you_mean(name: str, folder: Path) -> str:
    """`` (did you mean 'X'?)`` for the closest names of the folders in ``folder``, or ""."""
    try:
        present = [entry.name for entry in folder.iterdir() if entry.is_dir() and not entry.name.startswith(".")]
    except OSError:
        return ""
    close = difflib.get_close_matches(name, present, n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def missing_class_folder(parent: Path, name: str) -> Optional[str]:
    """The one problem of a class folder ``parent/name`` that the config names and that is not a
    folder (with the closest names present), or None."""
    if (parent / name).is_dir():
        return None
    return f"{parent / name}: the class folder named in the config does not exist{did_you_mean(name, parent)}"


def folder_problems(spec: FileProtocolSpec) -> List[str]:
    """Every missing folder a ``folders`` or ``imagefolder`` protocol names: its root alone when
    the root is missing; a missing split folder once (``folders``); else each missing class."""
    if spec.type not in FOLDER_TYPES or spec.reads_csv:
        return []
    root = missing_root(spec)
    if root:
        return [root]
    classes = [*spec.known, *spec.negative, *spec.unknown]
    if spec.type == "imagefolder":
        return [p for p in (missing_class_folder(spec.root, c) for c in classes) if p]
    problems = []
    for split, names in (("train", [*spec.known, *spec.negative]), ("test", spec.unknown)):
        folder = spec.root / split
        if not folder.is_dir():
            problems.append(f"{folder}: missing {split} folder (expected ROOT/{split}/<class>/<image>)")
            continue
        problems += [p for p in (missing_class_folder(folder, c) for c in names) if p]
    return problems

