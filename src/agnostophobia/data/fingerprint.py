"""What a protocol was built from, so that a command that rebuilds a run's split can tell
whether the data under a dataset's name is still the data the run was trained on.

A protocol's ``sources`` map what it read to a fingerprint:

* a registered dataset's split (``"mnist/train"``) read from one file (``.npz``, ``.mat``,
  a CIFAR archive member): the file's size and SHA-256 of its content. The same images
  shuffled, or another copy of the set under the dataset's name, change it; a copy of the
  same file elsewhere (another ``--data-dir``, another machine) does not;
* a dataset read from a folder (idx pairs), and a protocol from files (``csv``, ``folders``,
  ``imagefolder``): each file's path relative to its root, size and modification time,
  together with the content of the split lists (CSV files, the class-name file) -- stating
  tens of thousands of image files is cheap, hashing them is not.

Hashing a file costs about 1 s per GB; the digest is cached in the user's cache folder
(``data.paths.cache_dir``, never the data folder, which may be read-only) under the file's
real path, size, ``mtime_ns``, inode and ``ctime_ns``, so that a second command pays one ``stat``.
The inode and ``ctime`` are what a user cannot set back: a file rewritten in place with its old
size and modification time (``touch -d``) is hashed again. A cache that is not a regular file
(a FIFO, which would block the read) is ignored, with a warning.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Tuple

from agnostophobia._atomic import atomic_write
from agnostophobia._log import LOGGER
from agnostophobia._reading import read_input_bytes, walk_files
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning
from agnostophobia.data.paths import cache_dir

#: The cache of file digests, in :func:`~agnostophobia.data.paths.cache_dir`.
CACHE_NAME = "fingerprints.json"
_CHUNK = 1 << 20
#: The fields that identify data; ``path`` only says where it was read and may differ.
IDENTITY = ("sha256", "size", "files", "listing")


def _cache_path() -> Path:
    return cache_dir() / CACHE_NAME


def _read_cache() -> Dict[str, Dict]:
    """The digest cache; a missing or damaged one is empty (it only saves time), and one that is
    not a regular file is ignored with a warning (never opened: a FIFO would block)."""
    path = _cache_path()
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(read_input_bytes(path, "the fingerprint cache"))
    except FileNotFoundError:
        return {}
    except AgnostophobiaError as exc:
        warnings.warn(f"{exc}; ignored (data files are hashed again)", AgnostophobiaWarning, stacklevel=3)
        return {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(cache: Dict[str, Dict]) -> None:
    try:
        atomic_write(_cache_path(), lambda tmp: Path(tmp).write_text(json.dumps(cache)))
    except (OSError, AgnostophobiaError) as exc:  # (a cache that is not a regular file is not replaced)  # a read-only cache folder costs time, never the command
        LOGGER.debug("fingerprint cache not written (%s)", exc)


def file_fingerprint(path) -> Dict[str, object]:
    """``{"path", "size", "sha256"}`` of one file, its digest cached by (real path, size, mtime_ns,
    inode, ctime_ns)."""
    path = Path(path)
    st = os.stat(path)
    key = os.path.realpath(path)
    cache = _read_cache()
    entry = cache.get(key)
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "ctime_ns": st.st_ctime_ns}
    if not (isinstance(entry, dict) and all(entry.get(k) == v for k, v in stamp.items())
            and isinstance(entry.get("sha256"), str)):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
        entry = {**stamp, "sha256": digest.hexdigest()}
        cache[key] = entry
        _write_cache(cache)
    return {"path": str(path), "size": st.st_size, "sha256": entry["sha256"]}


def listing_fingerprint(root, files: Iterable, contents: Iterable = ()) -> Dict[str, object]:
    """``{"path", "files", "listing"}`` of a set of files under ``root``: each file's path
    (relative to ``root`` where it lies inside it), size and ``mtime_ns``, and the content of
    ``contents`` (the split lists), hashed in sorted order so that the walk's order is irrelevant."""
    root = Path(root)
    lines = []
    for path in set(map(Path, files)):
        st = os.stat(path)
        lines.append(f"{_relative(path, root)}\t{st.st_size}\t{st.st_mtime_ns}")
    for path in set(map(Path, contents)):
        lines.append(f"{_relative(path, root)}\tcontent\t{file_fingerprint(path)['sha256']}")
    listing = hashlib.sha256("\n".join(sorted(lines)).encode("utf-8", "surrogateescape")).hexdigest()
    return {"path": str(root), "files": len(lines), "listing": listing}


def source_fingerprint(path) -> Dict[str, object]:
    """A file's :func:`file_fingerprint`, or a folder's :func:`listing_fingerprint` over the
    regular files below it."""
    path = Path(path)
    if not path.is_dir():
        return file_fingerprint(path)
    files = [Path(folder) / name for folder, names in walk_files(path) for name in names
             if os.path.isfile(Path(folder) / name)]
    return listing_fingerprint(path, files)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def changed_source(recorded: Mapping[str, Mapping], current: Mapping[str, Mapping]) -> Optional[Tuple[str, str]]:
    """The first source whose data differs between a run's record and a rebuilt protocol:
    ``(what, why)`` naming the file now read, or None where all agree."""
    for what in sorted(set(recorded) | set(current)):
        old, new = recorded.get(what), current.get(what)
        if new is None:
            return what, f"the run was built from {old.get('path')} ({what}), which the protocol no longer reads"
        if old is None:
            return new["path"], f"the protocol now reads {what}, which the run was not built from"
        differs = [field for field in IDENTITY if old.get(field) != new.get(field)]
        if differs:
            return new["path"], (f"is not the {what} the run was built from ({_describe(old)}; now "
                                 f"{_describe(new)})")
    return None


def _describe(source: Mapping) -> str:
    if "sha256" in source:
        return f"{source.get('size')} bytes, sha256 {str(source.get('sha256'))[:12]}"
    return f"{source.get('files')} files, listing {str(source.get('listing'))[:12]}"
