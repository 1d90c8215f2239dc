"""A model's detector caches, ``detector_scores.npz`` and ``fitted_detectors.npz``, checked. Their
writer is above this layer (``detectors.stored``, which owns what they cache)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

from agnostophobia.training.records._common import _array, _fail, _open_npz


def read_detector_scores(path) -> Dict[str, Any]:
    """``detector_scores.npz``, checked: ``{fingerprint, num_classes, notes, labels: {split},
    top: {detector: {split: (predicted, score)}}}`` with integer predictions below the number
    of classes, finite scores and one label per sample of every split."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    for key in ("__fingerprint", "__num_classes", "__notes"):
        if key not in arrays:
            _fail(path, "missing", key)
    num_classes = arrays["__num_classes"]
    if num_classes.shape != () or not np.issubdtype(num_classes.dtype, np.integer) or int(num_classes) < 1:
        _fail(path, f"must be one integer >= 1, got {num_classes!r}", "__num_classes")
    try:
        notes = json.loads(str(arrays["__notes"]))
    except ValueError:
        notes = None
    if not isinstance(notes, dict):
        _fail(path, "must be a JSON mapping", "__notes")
    labels, top = {}, {}
    for key, value in arrays.items():
        parts = key.split("__")
        if key.startswith("__"):
            continue
        if parts[0] == "labels" and len(parts) == 2:
            if value.ndim != 1 or not np.issubdtype(value.dtype, np.integer):
                _fail(path, f"must be integer labels (N,), got {value.dtype} {value.shape}", key)
            labels[parts[1]] = value
        elif len(parts) == 3 and parts[2] in ("predicted", "score"):
            top.setdefault(parts[0], {}).setdefault(parts[1], {})[parts[2]] = value
        else:
            _fail(path, "unexpected array", key)
    pairs: Dict[str, Dict[str, Tuple[np.ndarray, np.ndarray]]] = {}
    for detector, splits in top.items():
        for split, got in splits.items():
            key = f"{detector}__{split}"
            if set(got) != {"predicted", "score"} or split not in labels:
                _fail(path, "needs __predicted, __score and labels__<split>", key)
            predicted, score = got["predicted"], got["score"]
            n = len(labels[split])
            if predicted.shape != (n,) or not np.issubdtype(predicted.dtype, np.integer) \
                    or (n and not 0 <= predicted.min() <= predicted.max() < int(num_classes)):
                _fail(path, f"must be {n} class indices below {int(num_classes)}", f"{key}__predicted")
            if score.shape != (n,) or not np.issubdtype(score.dtype, np.floating) or not np.isfinite(score).all():
                _fail(path, f"must be {n} finite float scores", f"{key}__score")
            pairs.setdefault(detector, {})[split] = (predicted, score)
    return {"fingerprint": str(arrays["__fingerprint"]), "num_classes": int(num_classes), "notes": notes,
            "labels": labels, "top": pairs}


def read_fitted_detectors(path) -> Dict[str, Dict[str, Any]]:
    """``fitted_detectors.npz``, checked: ``{entry: {"meta": {detector, settings, fit, digest},
    "state": {attribute: array}}}`` from arrays named ``<entry>__meta`` (a JSON mapping) and
    ``<entry>__<attribute>``. Whether an entry's state is whole and belongs to its detector is
    checked where it is restored (``detectors.stored``)."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    entries: Dict[str, Dict[str, Any]] = {}
    for key, value in arrays.items():
        entry, sep, name = key.partition("__")
        if not sep or not entry or not name:
            _fail(path, "unexpected array (expected <entry>__meta or <entry>__<attribute>)", key)
        if value.dtype == object:
            _fail(path, "must be a numeric array", key)
        slot = entries.setdefault(entry, {"meta": None, "state": {}})
        if name == "meta":
            try:
                meta = json.loads(str(value))
            except ValueError:
                meta = None
            if not isinstance(meta, dict) or not isinstance(meta.get("detector"), str) \
                    or not isinstance(meta.get("settings"), dict) or not isinstance(meta.get("fit"), str) \
                    or not isinstance(meta.get("digest"), str):
                _fail(path, "must be a JSON mapping with detector, settings, fit and digest", key)
            slot["meta"] = meta
        else:
            slot["state"][name] = value
    for entry, slot in entries.items():
        if slot["meta"] is None:
            _fail(path, "missing", f"{entry}__meta")
    return entries
