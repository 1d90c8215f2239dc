"""Download the official files of a dataset, verified and atomically.

torchvision's ``download_url`` writes straight to the final path, so an interrupted
download leaves a half file that looks present. Here each file is streamed into a
temporary file in the destination directory while its md5 and sha256 are computed,
the byte count is checked against Content-Length, the checksum is verified, and only
then is the file moved into place with ``os.replace``; on any failure the temporary
file is removed. Files are kept in their official format and read in place by the
loaders (no extraction, no conversion).

How a file is downloaded (from where, what is accepted, how long the server is waited for,
what is shown) is a :class:`Downloader`, handed down whole from the command to each file.
``AGNOSTOPHOBIA_MIRROR`` (or ``Downloader(mirror=...)``) replaces every official URL with
``MIRROR/<filename>``, for offline mirrors and for tests.

:func:`fetch_missing` is what ``agnostophobia reproduce`` calls on a fresh run: it
refuses, before downloading anything, what it cannot fetch unattended (a read-only data
directory, files without a published checksum unless ``allow_unverified``), turns an
unreachable network into the usual "not found; get them with ..." line, and returns one
record per file (dataset, file, url, sha256, verified) that the run stores in
``RUN/data_fetched.json``. A source that answers with a login (HTTP 401) or a web page
instead of the file is reported as such, with where to save a copy downloaded by hand.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import stat
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from agnostophobia import __version__
from agnostophobia._atomic import (TMP_SUFFIX, atomic_write, fsync_directory, naming_target, new_file_mode,
                                   remove_stale_temporaries, temporary_prefix)
from agnostophobia.errors import DataError
from agnostophobia.rundir import DATA_FETCHED, RunDir
from agnostophobia.data.datasets import DATASETS, DatasetInfo, Resource, SplitUnavailable, load_dataset
from agnostophobia.data.formats import md5_file, sha256_file
from agnostophobia.data.paths import MIRROR_ENV, PathLike, data_dir as resolve_data_dir
from agnostophobia._log import log_info

SUMS_FILE = "SHA256SUMS"
_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError)


class LoginRequired(DataError):
    """The source answered with a login (HTTP 401) or a web page instead of the file."""


@dataclass(frozen=True)
class FetchedFile:
    """One official file of a dataset as it is in the data directory after a fetch."""

    dataset: str
    file: str
    path: str
    url: Optional[str]      # None: it was already present and kept
    sha256: str
    verified: bool          # matched a published checksum (False: only its sha256 is known)


@dataclass(frozen=True)
class Downloader:
    """How official files are downloaded, the same for every file of a command: from where, what
    is accepted, how long the server is waited for, and what is shown.

    Examples:
        >>> from agnostophobia.data import Downloader
        >>> Downloader(mirror="file:///srv/mirror", progress=False).timeout
        60.0
    """

    # a base URL that replaces every official URL with MIRROR/<filename>; None:
    # $AGNOSTOPHOBIA_MIRROR, else the official URLs
    mirror: Optional[str] = None
    allow_unverified: bool = False  # download a file without a published checksum, and record its sha256
    progress: Optional[bool] = None  # show a progress bar (None: where the output is a terminal)
    timeout: float = 60.0  # seconds to wait for the server
    # receives one line per step (log_info by default: given per instance, not as a class attribute that
    # would read as a method, and left out of the repr, which signatures show)
    log: Callable[[str], None] = field(default_factory=lambda: log_info, repr=False)


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


def _verified(path: Path, res: Resource, sha256: str) -> bool:
    if res.sha256:
        return sha256 == res.sha256
    if res.md5:
        return md5_file(path) == res.md5
    return False


def _stream(url: str, tmp_fd: int, filename: str, progress: Optional[bool], timeout: float):
    """Write ``url`` into the open temp file; returns (md5, sha256, bytes)."""
    from tqdm import tqdm

    md5, sha = hashlib.md5(), hashlib.sha256()
    n = 0
    request = urllib.request.Request(url, headers={"User-Agent": f"agnostophobia/{__version__}"})
    with os.fdopen(tmp_fd, "wb") as out, _open(request, timeout) as resp:
        if _is_web_page(resp.headers):  # a login or landing page, never a dataset file
            raise LoginRequired(f"{url} answered with a web page instead of the file")
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


def _is_web_page(headers) -> bool:
    return (headers.get("Content-Type") or "").split(";")[0].strip().lower() in ("text/html", "application/xhtml+xml")


def _open(request: urllib.request.Request, timeout: float):
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 401 or (exc.code == 403 and _is_web_page(exc.headers)):
            raise LoginRequired(f"{request.full_url} asks for a login (HTTP {exc.code})") from None
        raise


def download(res: Resource, directory: PathLike, downloader: Downloader = Downloader()) -> Path:
    """Download one official file into ``directory`` (verified, atomic); returns its path.

    A file already present is kept when it matches the published checksum (or, for
    files without one, the sha256 recorded when it was fetched). Without a published
    checksum the download is refused unless ``downloader.allow_unverified``; then the sha256 it
    got is printed and recorded in ``directory/SHA256SUMS``.

    Args:
        res: the file's declaration (name, URLs, checksum).
        directory: the folder it goes into; made if missing.
        downloader: from where, and how (:class:`Downloader`); default: the official URLs
            (or ``$AGNOSTOPHOBIA_MIRROR``), verified files only.

    Returns:
        The path of the verified file in ``directory``.

    Raises:
        ~agnostophobia.errors.DataError: no published checksum (unless ``downloader.allow_unverified``),
            a checksum that does not match, or a failed download.

    Examples:
        >>> import hashlib
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import Downloader, Resource, download
        >>> mirror = Path(tempfile.mkdtemp())  # a local mirror stands in for the server
        >>> (mirror / "hello.txt").write_text("hello\\n")
        6
        >>> res = Resource("hello.txt", ("https://example.org/hello.txt",), md5=hashlib.md5(b"hello\\n").hexdigest(),
        ...                checksum_source="this example")
        >>> downloader = Downloader(mirror=mirror.as_uri(), progress=False, log=print)
        >>> target = Path(tempfile.mkdtemp())
        >>> path = download(res, target, downloader)
        downloading file:///.../hello.txt
        .../hello.txt: 6 bytes, checksum ok
        >>> path.read_text()
        'hello\\n'
        >>> import shutil; shutil.rmtree(mirror); shutil.rmtree(target)  # the example leaves nothing behind
    """
    return Path(fetch_file(res, directory, downloader).path)


def fetch_file(res: Resource, directory: PathLike, downloader: Downloader = Downloader(),
               dataset: str = "") -> FetchedFile:
    """:func:`download`, returning what was fetched (url, sha256, verified) with the path."""
    directory = Path(directory)
    target = directory / res.filename
    log = downloader.log
    if not res.verifiable and not downloader.allow_unverified:
        raise DataError(f"{res.filename}: no published checksum ({res.checksum_source}); "
                        f"rerun with --allow-unverified to download it and record its sha256")
    if target.exists():
        sha = sha256_file(target)
        if _verified(target, res, sha) or (not res.verifiable and read_sums(directory).get(res.filename) == sha):
            log(f"{target}: already present, checksum ok")
            return FetchedFile(dataset, res.filename, str(target), None, sha, res.verifiable)
        log(f"{target}: present but does not match its checksum; downloading again")
    top = _make_dir(directory)
    try:
        return _download_into(res, target, downloader, dataset)
    except BaseException:
        _remove_empty(directory, top)  # a failed fetch leaves no trace, not even empty folders
        raise


def _make_dir(directory: Path) -> Optional[Path]:
    """Create ``directory``; returns the top-most folder created (None if it existed).

    Read-only locations are refused by their mode bits: running as root would otherwise
    write into a read-only shared copy of the data.
    """
    read_only = read_only_ancestor(directory)
    if read_only is not None:
        raise DataError(f"{read_only}: read-only; fetch into a writable --data-dir")
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


def read_only_ancestor(directory: Path) -> Optional[Path]:
    """The nearest existing folder at or above ``directory`` when its mode bits forbid
    writing (None when writable): checked by mode, not by access, so root is refused too."""
    existing = Path(directory)
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    return None if existing.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) else existing


def _remove_empty(directory: Path, top: Optional[Path]) -> None:
    if top is None:
        return
    path = directory
    while path.is_dir() and not any(path.iterdir()):
        path.rmdir()
        if path == top:
            break
        path = path.parent


def _download_into(res: Resource, target: Path, downloader: Downloader, dataset: str) -> FetchedFile:
    directory, log = target.parent, downloader.log
    failures, logins = [], []
    remove_stale_temporaries(directory, [res.filename])  # what a killed earlier download of this file left
    for url in _urls(res, downloader.mirror):
        try:  # named as every atomic write's temporary is: for its file and this process
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=temporary_prefix(res.filename), suffix=TMP_SUFFIX)
        except OSError as exc:
            raise DataError(f"{directory}: not writable ({naming_target(exc, target, exc.filename)})") from None
        try:
            os.fchmod(fd, new_file_mode(target))  # mkstemp's 0o600 would hide a shared data folder from its users
            log(f"downloading {url}")
            md5, sha, n = _stream(url, fd, res.filename, downloader.progress, downloader.timeout)
            if res.md5 and md5 != res.md5:
                raise DataError(f"md5 {md5} does not match the published {res.md5}")
            if res.sha256 and sha != res.sha256:
                raise DataError(f"sha256 {sha} does not match the published {res.sha256}")
            os.replace(tmp, target)
            fsync_directory(directory)  # the rename survives a crash, as every atomic write's does
        except LoginRequired as exc:
            logins.append(str(exc))
            continue
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
        return FetchedFile(dataset, res.filename, str(target), url, sha, res.verifiable)
    if logins:  # a person can get past a login; say where the file they download goes
        raise LoginRequired(f"{res.filename}: {'; '.join(logins)}: the source needs a login; download it by hand "
                            f"(logged in) from {res.urls[0]} and save it as {target}, then run the command again")
    raise DataError(f"{res.filename}: download failed: " + " | ".join(failures))


def _fetch_source(name: str) -> DatasetInfo:
    """The entry whose files ``fetch name`` downloads (``devanagari`` fetches ``nhcd``)."""
    info = DATASETS.get(name)
    return DATASETS.get(info.fetch_as) if info.fetch_as else info


def fetch_dataset(name: str, data_dir: Optional[PathLike] = None, downloader: Downloader = Downloader(),
                  force: bool = False, records: Optional[List[FetchedFile]] = None) -> List[Path]:
    """Fetch the official files of a registered dataset into ``DATA/<directory>/`` and
    check that the result loads (``agnostophobia data fetch NAME``).

    Args:
        name: the registered dataset.
        data_dir: the datasets' folder; default: as for :func:`data_dir`.
        downloader: as for :func:`download`.
        force: download the official files even where a prepared ``.npz`` is present.
        records: a list that receives a ``FetchedFile`` (URL, sha256, verified) for each file.

    Returns:
        The paths of the files (empty where a prepared file made fetching unnecessary).

    Raises:
        ~agnostophobia.errors.DataError: the dataset has no official download, or a file
            cannot be fetched or verified.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> data = Path(tempfile.mkdtemp()); (data / "mnist").mkdir()
        >>> rng = np.random.default_rng(0)  # a stand-in for the real file: 20 + 10 random digits
        >>> np.savez(data / "mnist" / "mnist.npz", x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        ...          y_train=np.arange(20) % 10, x_test=rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
        ...          y_test=np.arange(10))
        >>> from agnostophobia.data import fetch_dataset
        >>> from agnostophobia.data import Downloader
        >>> fetch_dataset("mnist", data_dir=data, downloader=Downloader(log=print))  # prepared: nothing downloaded
        mnist: prepared file .../mnist/mnist.npz is present; nothing to fetch (--force downloads the official files)
        []
        >>> import shutil; shutil.rmtree(data)  # the example leaves nothing behind
    """
    info: DatasetInfo = DATASETS.get(name)
    source = _fetch_source(name)
    root = resolve_data_dir(data_dir)
    if not source.resources:
        raise DataError(f"{name} has no official download; prepare it as described in docs/data.md")
    prepared = root / source.candidates[0]
    if prepared.suffix == ".npz" and prepared.exists() and not force:
        downloader.log(f"{name}: prepared file {prepared} is present; nothing to fetch (--force downloads the official files)")
        return []
    if not downloader.allow_unverified:  # refuse before downloading anything
        for res in source.resources:
            if not res.verifiable:
                download(res, root / source.directory)
    fetched = [fetch_file(res, root / source.directory, downloader, source.name) for res in source.resources]
    if records is not None:
        records.extend(fetched)
    paths = [Path(f.path) for f in fetched]
    for split in info.splits:
        try:
            ds = load_dataset(name, split, root)
        except SplitUnavailable:
            continue
        downloader.log(f"{name} {split}: {len(ds)} images {ds.images.shape[1:]} loaded from {ds.source}")
    return paths


def fetch(names: Sequence[str], **kwargs) -> Dict[str, List[Path]]:
    """Fetch several datasets; stops at the first failure (a DataError).

    Args:
        names: registered datasets; an unknown one fails before any download.
        **kwargs: as for :func:`fetch_dataset`.

    Returns:
        Each dataset's file paths, by name.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> data = Path(tempfile.mkdtemp()); (data / "mnist").mkdir()
        >>> rng = np.random.default_rng(0)  # a stand-in for the real file: 20 + 10 random digits
        >>> np.savez(data / "mnist" / "mnist.npz", x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        ...          y_train=np.arange(20) % 10, x_test=rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
        ...          y_test=np.arange(10))
        >>> from agnostophobia.data import Downloader, fetch
        >>> fetch(["mnist"], data_dir=data, downloader=Downloader(log=print))
        mnist: prepared file .../mnist/mnist.npz is present; nothing to fetch (--force downloads the official files)
        {'mnist': []}
        >>> import shutil; shutil.rmtree(data)  # the example leaves nothing behind
    """
    for name in names:
        DATASETS.get(name)  # unknown names fail before any download
    return {name: fetch_dataset(name, **kwargs) for name in names}


def fetch_missing(names: Sequence[str], data_dir: Optional[PathLike], explanation: str,
                  downloader: Downloader = Downloader()) -> List[FetchedFile]:
    """Fetch the missing datasets ``names`` for a run, or raise one :class:`DataError` line.

    ``explanation`` is the "not found; get them with ..." line the caller would raise
    without fetching; it is raised, with the reason appended, when the data cannot be
    fetched unattended: a dataset without an official download, a read-only data
    directory, or an unreachable or failing source. Files without a published checksum
    are refused before anything is downloaded unless ``downloader.allow_unverified``. A source that
    needs a login raises :class:`LoginRequired`, which says where to save the file.
    """
    root = resolve_data_dir(data_dir)
    sources = {_fetch_source(n).name: _fetch_source(n) for n in names}
    if any(not info.resources for info in sources.values()):
        raise DataError(explanation)
    read_only = read_only_ancestor(root)
    if read_only is not None:
        raise DataError(f"{explanation}; nothing downloaded: {read_only} is read-only")
    unverified = [(info.name, res.filename) for info in sources.values() for res in info.resources
                  if not res.verifiable]
    if unverified and not downloader.allow_unverified:
        files = ", ".join(f"{f} ({n})" for n, f in unverified)
        one = len(unverified) == 1
        raise DataError(f"{explanation}; {files} {'has' if one else 'have'} no published checksum: rerun with "
                        f"--allow-unverified to download {'it' if one else 'them'} anyway (the sha256 received is "
                        f"recorded in the run's {DATA_FETCHED}); nothing was downloaded")
    records: List[FetchedFile] = []
    for name in sources:
        try:
            fetch_dataset(name, root, downloader, records=records)
        except LoginRequired:
            raise
        except DataError as exc:
            raise DataError(f"{explanation}; automatic download failed: {exc}") from None
    return records


def require_datasets(names, data_dir: Optional[PathLike] = None, needed_by: str = "", fetch: bool = False,
                     downloader: Downloader = Downloader()) -> List[FetchedFile]:
    """Make sure every dataset of ``names`` is in the data directory.

    Without ``fetch``, raise one :class:`DataError` naming every absent dataset, with the
    single ``agnostophobia data fetch`` command that gets them all. With ``fetch``, download
    them instead, as ``downloader`` says (:func:`~agnostophobia.data.fetch.fetch_missing`; that line is still
    raised when they cannot be fetched). Returns the records of the files fetched.
    """
    root = resolve_data_dir(data_dir)
    missing = [DATASETS.get(n) for n in names if DATASETS.get(n).find(root) is None]
    if not missing:
        return []
    targets = " ".join(dict.fromkeys(info.fetch_as or info.name for info in missing))
    if len(missing) == 1:
        message = f"{missing[0].name} not found in {root}; {missing[0].fetch_hint()}"
    else:
        message = (f"{', '.join(i.name for i in missing[:-1])} and {missing[-1].name} not found in {root}; "
                   f"get them with `agnostophobia data fetch {targets}`")
    message += f" ({needed_by})" if needed_by else ""
    if not fetch:
        raise DataError(message)
    return fetch_missing([i.name for i in missing], root, message, downloader)


def write_fetch_record(run_dir: PathLike, records: Sequence[FetchedFile]) -> Path:
    """``RUN/data_fetched.json``: ``{"files": [{dataset, file, url, sha256, verified}, ...]}``."""
    run = RunDir(run_dir)
    path = run.data_fetched
    rows = [{k: v for k, v in asdict(r).items() if k != "path"} for r in records]
    run.write(path, lambda tmp: Path(tmp).write_text(json.dumps({"files": rows}, indent=1)))
    return path


def read_fetch_record(run_dir: PathLike) -> List[Dict]:
    """The files ``RUN/data_fetched.json`` records ([] when absent), checked: each with
    ``dataset``, ``file``, ``sha256`` (strings), ``url`` (a string, or null: already present)
    and ``verified`` (true or false); a :class:`DataError` naming the file and entry otherwise."""
    path = RunDir(run_dir).data_fetched
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: not a readable fetch record ({type(exc).__name__}: {exc})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise DataError(f"{path}: files: must be a list of fetched files")
    for i, row in enumerate(files):
        strings = isinstance(row, dict) and all(isinstance(row.get(key), str) for key in ("dataset", "file", "sha256"))
        if not strings or not isinstance(row.get("url"), (str, type(None))) or not isinstance(row.get("verified"), bool):
            raise DataError(f"{path}: files[{i}]: must hold dataset, file and sha256 (strings), url (a string or "
                            f"null) and verified (true or false)")
    return files


def fetch_record_lines(run_dir: PathLike) -> List[str]:
    """Markdown list items for a report: the files fetched for the run, with their sha256."""
    return [f"- {r['dataset']}: `{r['file']}` " + (f"from {r['url']}" if r["url"] else "(already present)") +
            f", sha256 `{r['sha256']}`" + ("" if r["verified"] else " — **unverified**: no published checksum")
            for r in read_fetch_record(run_dir)]
