"""A model's stored outputs, ``outputs.npz``, ``fit_outputs.npz`` and ``val_outputs.npz``: their
writer (:func:`save_outputs`) and their checked reader (:func:`read_outputs`). What is predicted
into them is :mod:`agnostophobia.training.outputs`'s."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np

from agnostophobia.rundir import FIT_OUTPUTS, OUTPUTS, VAL_OUTPUTS, check_model_file, write_run_file
from agnostophobia.training.precision import PRECISIONS
from agnostophobia.training.records._common import _array, _fail, _open_npz

SplitOutputs = Dict[str, np.ndarray]  # keys: logits, features, labels
FIELDS = ("logits", "features", "labels")
#: The one split each stored-outputs file other than outputs.npz holds.
SPLIT_OF = {FIT_OUTPUTS: "train", VAL_OUTPUTS: "val"}


def save_outputs(path: Path, outputs: Dict[str, SplitOutputs]) -> None:
    """Write ``{split: {"logits":..., "features":..., "labels":...}}`` atomically."""
    arrays = {}
    for split, fields in outputs.items():
        if "__" in split:
            raise ValueError(f"split name {split!r} must not contain '__'")
        for field in FIELDS:
            arrays[f"{split}__{field}"] = np.asarray(fields[field])
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
            np.savez(fh, **arrays)

    write_run_file(path, write)


def read_outputs(path) -> Dict[str, Dict[str, np.ndarray]]:
    """A stored-outputs file (``outputs.npz``, ``fit_outputs.npz``, ``val_outputs.npz``):
    ``{split: {logits, features, labels}}``, checked: every split has all three arrays,
    float logits (N, C) and features (N, D) with finite values, integer labels (N,) below C,
    the same C and D in every split; ``outputs.npz`` holds the ``known`` split, the other two
    their one split, whose labels are training knowns (fit) or knowns and -1 (val)."""
    path = Path(path)
    check_model_file(path)  # not another model's file through a link
    with _open_npz(path) as data:
        result: Dict[str, Dict[str, np.ndarray]] = {}
        for key in data.files:
            split, sep, name = key.partition("__")
            if not sep or name not in FIELDS or not split:
                _fail(path, f"unexpected array (expected <split>__{{{','.join(FIELDS)}}})", key)
            result.setdefault(split, {})[name] = _array(data, path, key)
    expected = SPLIT_OF.get(path.name)
    # val_outputs.npz may add the same split computed in another arithmetic ("val_fp32", the deployed one)
    allowed = {expected} | ({f"val_{p}" for p in PRECISIONS if p != "auto"} if expected == "val" else set())
    # (a run calibrated before val_outputs.npz existed stores only the deployed arithmetic's split)
    required_missing = expected != "val" and expected not in result
    if expected is not None and (not result or not set(result) <= allowed or required_missing):
        _fail(path, f"must hold the split {expected!r}{' or val_<precision>' if expected == 'val' else ' alone'}, "
                    f"holds {sorted(result)}")
    if path.name == OUTPUTS and "known" not in result:
        _fail(path, "missing", "known (the known test set)")
    widths = {}
    for split, arrays in result.items():
        _check_split(path, split, arrays, widths)
    if expected == "train" and (result["train"]["labels"] < 0).any():
        _fail(path, "training knowns only: negative (unknown) labels found", "train__labels")
    return result


def _check_split(path, split: str, arrays: Dict[str, np.ndarray], widths: Dict[str, int]) -> None:
    for name in FIELDS:
        if name not in arrays:
            _fail(path, "missing", f"{split}__{name}")
    n = len(arrays["labels"])
    for name in ("logits", "features"):
        value = arrays[name]
        key = f"{split}__{name}"
        if value.ndim != 2 or not np.issubdtype(value.dtype, np.floating):
            _fail(path, f"must be a float array (N, width), got {value.dtype} {value.shape}", key)
        if len(value) != n:
            _fail(path, f"{len(value)} rows but {n} labels", key)
        if widths.setdefault(name, value.shape[1]) != value.shape[1]:
            _fail(path, f"{value.shape[1]} columns, other splits have {widths[name]}", key)
        if not np.isfinite(value).all():
            _fail(path, f"{int((~np.isfinite(value)).sum())} non-finite value(s)", key)
    labels = arrays["labels"]
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        _fail(path, f"must be integer labels (N,), got {labels.dtype} {labels.shape}", f"{split}__labels")
    if n and labels.max() >= arrays["logits"].shape[1]:
        _fail(path, f"label {int(labels.max())} but only {arrays['logits'].shape[1]} logit columns",
              f"{split}__labels")
