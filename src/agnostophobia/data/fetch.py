"""Download the official files of a dataset, verified and atomically.

torchvision's ``download_url`` writes straight to the final path, so an interrupted
download leaves a half file that looks present. Here each file is streamed into a
temporary file in the destination directory while its md5 and sha256 are computed,
the byte count is checked against Content-Length, the checksum is verified, and only
then is the file moved into place with ``os.replace``; on any failure the temporary
file is removed. Files are kept in their official format and read in place by the
loaders (no extraction, no conversion).

``AGNOSTOPHOBIA_MIRROR`` (or ``mirror=``) replaces every official URL with
``MIRROR/<filename>``, for offline mirrors and for tests.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import stat
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from agnostophobia import __version__
from agnostophobia._atomic import atomic_write
from agnostophobia.errors import DataError
from agnostophobia.data.datasets import DATASETS, DatasetInfo, Resource, SplitUnavailable, load_dataset
from agnostophobia.data.formats import md5_file, sha256_file
from agnostophobia.data.paths import MIRROR_ENV, PathLike, data_dir as resolve_data_dir

SUMS_FILE = "SHA256SUMS"
_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError)


def _urls(res: Resource, mirror: Optional[str]) -> List[str]:
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    return [mirror.rstrip("/") + "/" + res.filename] if mirror else list(res.urls)


def read_sums(directory: Path) -> Dict[str, str]:
    """``{filename: sha256}`` recorded by earlier fetches in ``directory``."""
    sums = {}
    path = Path(directory) / SUMS_FILE
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                sums[parts[1].lstrip("*")] = parts[0]
    return sums


def _record_sum(directory: Path, filename: str, sha256: str) -> Path:
    sums = read_sums(directory)
    sums[filename] = sha256
    path = directory / SUMS_FILE
    text = "".join(f"{h}  {name}\n" for name, h in sorted(sums.items()))
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path


def _verified(path: Path, res: Resource) -> bool:
    if res.sha256:
        return sha256_file(path) == res.sha256
    if res.md5:
        return md5_file(path) == res.md5
    return False


def _stream(url: str, tmp_fd: int, filename: str, progress: Optional[bool], timeout: float):
    """Write ``url`` into the open temp file; returns (md5, sha256, bytes)."""
    from tqdm import tqdm

    md5, sha = hashlib.md5(), hashlib.sha256()
    n = 0
    request = urllib.request.Request(url, headers={"User-Agent": f"agnostophobia/{__version__}"})
    with os.fdopen(tmp_fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as resp:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        # disable=None: a bar on a terminal, silence in logs and tests.
        with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=filename,
                  disable=None if progress is None else not progress, leave=False) as bar:
            while True:
                chunk = resp.read(1 << 16)
                if not chunk:
                    break
                out.write(chunk)
                md5.update(chunk)
                sha.update(chunk)
                n += len(chunk)
                bar.update(len(chunk))
        if total is not None and n != total:
            raise DataError(f"incomplete download: got {n} of {total} bytes")
        out.flush()
        os.fsync(out.fileno())
    return md5.hexdigest(), sha.hexdigest(), n


def download(res: Resource, directory: PathLike, mirror: Optional[str] = None, allow_unverified: bool = False,
             progress: Optional[bool] = None, timeout: float = 60.0,
             log: Callable[[str], None] = print) -> Path:
    """Download one official file into ``directory`` (verified, atomic); returns its path.

    A file already present is kept when it matches the published checksum (or, for
    files without one, the sha256 recorded when it was fetched). Without a published
    checksum the download is refused unless ``allow_unverified``; then the sha256 it
    got is printed and recorded in ``directory/SHA256SUMS``.
    """
    directory = Path(directory)
    target = directory / res.filename
    if not res.verifiable and not allow_unverified:
        raise DataError(f"{res.filename}: no published checksum ({res.checksum_source}); "
                        f"rerun with --allow-unverified to download it and record its sha256")
    if target.exists():
        if _verified(target, res) or (not res.verifiable and read_sums(directory).get(res.filename) == sha256_file(target)):
            log(f"{target}: already present, checksum ok")
            return target
        log(f"{target}: present but does not match its checksum; downloading again")
    top = _make_dir(directory)
    try:
        return _download_into(res, directory, target, mirror, progress, timeout, log)
    except BaseException:
        _remove_empty(directory, top)  # a failed fetch leaves no trace, not even empty folders
        raise


def _make_dir(directory: Path) -> Optional[Path]:
    """Create ``directory``; returns the top-most folder created (None if it existed).

    Read-only locations are refused by their mode bits: running as root would otherwise
    write into a read-only shared copy of the data.
    """
    existing = directory
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise DataError(f"{existing}: read-only; fetch into a writable --data-dir")
    if directory.is_dir():
        return None
    top = directory
    while not top.parent.exists():
        top = top.parent
    try:
        directory.mkdir(parents=True)
    except OSError as exc:
        raise DataError(f"{directory}: cannot create the data directory ({exc})") from None
    return top


def _remove_empty(directory: Path, top: Optional[Path]) -> None:
    if top is None:
        return
    path = directory
    while path.is_dir() and not any(path.iterdir()):
        path.rmdir()
        if path == top:
            break
        path = path.parent


def _download_into(res: Resource, directory: Path, target: Path, mirror: Optional[str], progress: Optional[bool],
                   timeout: float, log: Callable[[str], None]) -> Path:
    failures = []
    for url in _urls(res, mirror):
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{res.filename}.", suffix=".part")
        except OSError as exc:
            raise DataError(f"{directory}: not writable ({exc})") from None
        try:
            log(f"downloading {url}")
            md5, sha, n = _stream(url, fd, res.filename, progress, timeout)
            if res.md5 and md5 != res.md5:
                raise DataError(f"md5 {md5} does not match the published {res.md5}")
            if res.sha256 and sha != res.sha256:
                raise DataError(f"sha256 {sha} does not match the published {res.sha256}")
            os.replace(tmp, target)
        except (DataError,) + _NETWORK_ERRORS as exc:
            failures.append(f"{url}: {exc}")
            continue
        finally:
            if os.path.exists(tmp):  # a failed or interrupted download leaves nothing behind
                os.remove(tmp)
        sums = _record_sum(directory, res.filename, sha)
        if res.verifiable:
            log(f"{target}: {n} bytes, checksum ok")
        else:
            log(f"{target}: {n} bytes, UNVERIFIED (no published checksum); sha256 {sha} recorded in {sums}")
            if res.size and n != res.size:
                log(f"warning: {res.filename} has {n} bytes, the documented size is {res.size}")
        return target
    raise DataError(f"{res.filename}: download failed: " + " | ".join(failures))


def fetch_dataset(name: str, data_dir: Optional[PathLike] = None, allow_unverified: bool = False,
                  mirror: Optional[str] = None, force: bool = False, progress: Optional[bool] = None,
                  log: Callable[[str], None] = print) -> List[Path]:
    """Fetch the official files of a registered dataset into ``DATA/<directory>/`` and
    check that the result loads. Returns the paths of the files."""
    info: DatasetInfo = DATASETS.get(name)
    source = DATASETS.get(info.fetch_as) if info.fetch_as else info
    root = resolve_data_dir(data_dir)
    if not source.resources:
        raise DataError(f"{name} has no official download; prepare it as described in docs/data.md")
    prepared = root / source.candidates[0]
    if prepared.suffix == ".npz" and prepared.exists() and not force:
        log(f"{name}: prepared file {prepared} is present; nothing to fetch (--force downloads the official files)")
        return []
    if not allow_unverified:  # refuse before downloading anything
        for res in source.resources:
            if not res.verifiable:
                download(res, root / source.directory, allow_unverified=False)
    paths = [download(res, root / source.directory, mirror, allow_unverified, progress, log=log)
             for res in source.resources]
    for split in info.splits:
        try:
            ds = load_dataset(name, split, root)
        except SplitUnavailable:
            continue
        log(f"{name} {split}: {len(ds)} images {ds.images.shape[1:]} loaded from {ds.source}")
    return paths


def fetch(names: Sequence[str], **kwargs) -> Dict[str, List[Path]]:
    """Fetch several datasets; stops at the first failure (a DataError)."""
    for name in names:
        DATASETS.get(name)  # unknown names fail before any download
    return {name: fetch_dataset(name, **kwargs) for name in names}
