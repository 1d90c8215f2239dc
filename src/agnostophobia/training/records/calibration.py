"""``RUN/calibration.json``, the thresholds ``calibrate`` chose on validation data, checked. Its
writer is above this layer (``deploy.calibration``)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from agnostophobia._validation import FPR_RULE, is_rate
from agnostophobia.losses import LOSSES
from agnostophobia.rundir import RunDir
from agnostophobia.training.records._common import _fail, _is_count, _is_number, _is_strings, _read_format_1


def read_calibration(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/calibration.json``, checked (None when the run was not calibrated): ``format`` 1,
    ``class_names`` strings, every entry a known approach, a detector name, a seed >= 0, a
    target FPR in (0, 1] and a finite threshold, or null with a reason, and a ``score_scale``
    >= 1 where there is one (an entry written before it was recorded has none: scale 1)."""
    path = RunDir(run_dir).calibration
    data = _read_format_1(path)
    if data is None:
        return None
    names = data.get("class_names")
    if names is not None and not _is_strings(names):
        _fail(path, "must be a list of strings", "class_names")
    entries = data.get("entries")
    if not isinstance(entries, list):
        _fail(path, "must be a list", "entries")
    for i, entry in enumerate(entries):
        _check_entry(path, f"entries[{i}]", entry)
    return data


def _check_entry(path, where: str, entry) -> None:
    if not isinstance(entry, dict):
        _fail(path, "must be a mapping", where)
    for key in ("approach", "detector"):
        if not isinstance(entry.get(key), str):
            _fail(path, f"must be a name, got {entry.get(key)!r}", f"{where}.{key}")
    if entry["approach"] not in LOSSES:
        _fail(path, f"unknown approach {entry['approach']!r}", f"{where}.approach")
    seed = entry.get("seed")
    if not _is_count(seed, 0):
        _fail(path, f"must be an integer >= 0, got {seed!r}", f"{where}.seed")
    fpr = entry.get("target_fpr")
    if not is_rate(fpr):
        _fail(path, f"{FPR_RULE}, got {fpr!r}", f"{where}.target_fpr")
    threshold = entry.get("threshold")
    if threshold is None:
        if not isinstance(entry.get("reason"), str):
            _fail(path, "a null threshold needs a reason (a string)", f"{where}.reason")
    elif not _is_number(threshold):
        _fail(path, f"must be a finite number (or null with a reason), got {threshold!r}", f"{where}.threshold")
    for key in ("val_fpr", "val_ccr"):
        if entry.get(key) is not None and not _is_number(entry[key]):
            _fail(path, f"must be a finite number or null, got {entry[key]!r}", f"{where}.{key}")
    if "score_scale" in entry and not _is_count(entry["score_scale"], 1):  # absent: scale 1 (before it was recorded)
        _fail(path, f"must be an integer >= 1, got {entry['score_scale']!r}", f"{where}.score_scale")
