"""``agnostophobia data check``: where each dataset was found, its counts and label
histograms, and whether its files are sound.

Exit policy: datasets named explicitly must be present and sound (missing = failure).
With no names every registered dataset is reported; an absent one is listed as
missing with the fetch hint but only a *present but broken* file fails the check,
because several datasets (CIFAR-100, SVHN, the letter substitutes) are optional.
A data directory that does not exist, or is not a folder, fails in one line.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.data.datasets import DATASETS, SplitUnavailable, load_dataset
from agnostophobia.data.paths import PathLike, data_dir as resolve_data_dir
from agnostophobia.data.preprocess import border_mean


@dataclass
class DatasetStatus:
    name: str
    status: str                        # "ok", "missing" or "error"
    message: str = ""                  # one line: problem and how to get the data
    source: str = ""
    format: str = ""
    splits: Dict[str, dict] = field(default_factory=dict)  # split -> {count, histogram, ...}
    notes: List[str] = field(default_factory=list)


def check_dataset(name: str, data_dir: Optional[PathLike] = None) -> DatasetStatus:
    """Whether a registered dataset is present and loads, split by split (``agnostophobia data
    check NAME``): each split's size, image shape, class histogram and, for glyphs, the median
    border pixel (about 0 for white on black).

    Args:
        name: the registered dataset.
        data_dir: the datasets' folder; default: as for :func:`data_dir`.

    Returns:
        Its status, ``ok``, ``missing`` (with how to get it) or ``error`` (with the problem).

    Examples:
        >>> import tempfile
        >>> from agnostophobia.data import check_dataset
        >>> with tempfile.TemporaryDirectory() as empty:
        ...     status = check_dataset("mnist", data_dir=empty)
        ...
        >>> status.status
        'missing'
    """
    info = DATASETS.get(name)
    root = resolve_data_dir(data_dir)
    if info.find(root) is None:
        note = ["optional: not needed by the default LeNet++ experiment"] if info.optional else []
        return DatasetStatus(name, "missing", f"{name} not found in {root}; {info.fetch_hint()}", notes=note)
    st = DatasetStatus(name, "ok")
    for split in info.splits:
        try:
            ds = load_dataset(name, split, root)
        except SplitUnavailable as exc:
            if split in info.required_splits:
                return DatasetStatus(name, "error", str(exc))
            st.notes.append(f"split {split!r} not present")
            continue
        except DataError as exc:
            return DatasetStatus(name, "error", str(exc))
        if not st.source:
            st.source, st.format = ds.source, ds.format
        entry = {"count": len(ds), "image_shape": list(ds.images.shape[1:]),
                 "histogram": ds.histogram().tolist(), "source": ds.source, "format": ds.format}
        if info.kind == "glyph":  # polarity evidence: about 0 for white glyphs on black
            entry["median_border_pixel"] = round(float(np.median(border_mean(ds.images))), 2)
        st.splits[split] = entry
        st.notes.extend(n for n in ds.notes if n not in st.notes)
        del ds
    return st


def check(names: Sequence[str] = (), data_dir: Optional[PathLike] = None) -> dict:
    """Report for ``names`` (all registered datasets when empty); ``report["ok"]``
    follows the exit policy in the module docstring.

    Args:
        names: registered datasets; empty: every one.
        data_dir: the datasets' folder; default: as for :func:`data_dir`.

    Returns:
        ``{"data_dir", "ok", "datasets": {name: status}, "failures": [message, ...]}``.

    Raises:
        ~agnostophobia.errors.ConfigError: an unknown dataset name.
        ~agnostophobia.errors.DataError: the data directory does not exist.

    Examples:
        >>> import tempfile
        >>> from agnostophobia.data import check
        >>> with tempfile.TemporaryDirectory() as empty:
        ...     report = check(["mnist"], data_dir=empty)
        ...
        >>> report["ok"], sorted(report["datasets"])
        (False, ['mnist'])
    """
    explicit = bool(names)
    for n in names:
        DATASETS.get(n)  # unknown names are an error before any work
    root = resolve_data_dir(data_dir)
    if not root.exists():  # a mistyped --data-dir, or nothing fetched yet: nothing to check
        raise DataError(f"data directory {root} does not exist; `agnostophobia data fetch "
                        f"{' '.join(names) or 'NAME ...'}` downloads datasets into it")
    statuses = [check_dataset(n, root) for n in (names or DATASETS.names())]
    failed = [s for s in statuses if s.status == "error" or (explicit and s.status == "missing")]
    return {"data_dir": str(root), "ok": not failed,
            "datasets": {s.name: {k: v for k, v in asdict(s).items() if k != "name"} for s in statuses},
            "failures": [s.message for s in failed]}


def format_report(report: dict) -> str:
    lines = [f"data directory: {report['data_dir']}"]
    for name, st in report["datasets"].items():
        if st["status"] != "ok":
            lines.append(f"{name:22s} {st['status']:8s} {st['message']}")
            lines.extend(f"    note: {n}" for n in st["notes"])
            continue
        lines.append(f"{name:22s} ok")
        for split, e in st["splits"].items():
            extra = f"  median border {e['median_border_pixel']:g}" if "median_border_pixel" in e else ""
            lines.append(f"    {split:5s} {e['count']:7d} x {tuple(e['image_shape'])}{extra}  ({e['format']}: {e['source']})")
            lines.append(f"          histogram: {' '.join(map(str, e['histogram']))}")
        lines.extend(f"    note: {n}" for n in st["notes"])
    return "\n".join(lines)
