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


def atomic_write(path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, then rename it over ``path``.

    The temporary file lies in the same directory (so the rename is atomic) and is
    removed if ``write`` fails. ``tmp_path`` ends in ``.tmp``: writers that add their own
    suffix to a file name (``np.save``, ``np.savez``) must be given an open file instead.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        kill_point(f"write:{path.name}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
