"""Atomic file writes: a reader sees the old file or the whole new one, never half of one.

Used by checkpoints, stored outputs, reports, data caches and checksum files alike, so
that a run killed mid-write loses nothing the user had.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

from agnostophobia._killpoints import kill_point


TMP_SUFFIX = ".tmp"


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


def atomic_write(path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then rename it over ``path``.

    The temporary file lies in the same directory (so the rename is atomic) and is
    removed if ``write`` fails. ``tmp_path`` ends in ``.tmp``: writers that add their own
    suffix to a file name (``np.save``, ``np.savez``) must be given an open file instead.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    os.close(fd)
    try:
        write(tmp)
        kill_point(f"write:{path.name}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
