"""Per-sample outputs of a trained run, stored so that every number and figure can be
recomputed without retraining.

Layout of a run directory::

    RUN/seed<k>/<approach>/outputs.npz   # one file per trained approach and seed
        <split>__logits    float32 (N, C or C+1)
        <split>__features  float32 (N, D)       deep features F that feed the logit layer
        <split>__labels    int64   (N,)         known class, or -1 for unknown samples
    splits: "known" (D_c, the known test set) and one entry per unknown set
    ("letters" = D_b, "devanagari", "notmnist", "cifar10", ... = D_a)
    RUN/seed<k>/softmax/fit_outputs.npz   # split "train": the training knowns' outputs,
                                          # which OpenMax is fitted on
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, Tuple

import numpy as np

from agnostophobia._atomic import atomic_write

SplitOutputs = Dict[str, np.ndarray]  # keys: logits, features, labels
_FIELDS = ("logits", "features", "labels")


def save_outputs(path: Path, outputs: Dict[str, SplitOutputs]) -> None:
    """Write ``{split: {"logits":..., "features":..., "labels":...}}`` atomically."""
    arrays = {}
    for split, fields in outputs.items():
        if "__" in split:
            raise ValueError(f"split name {split!r} must not contain '__'")
        for field in _FIELDS:
            arrays[f"{split}__{field}"] = np.asarray(fields[field])
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
            np.savez(fh, **arrays)

    atomic_write(path, write)


def load_outputs(path: Path) -> Dict[str, SplitOutputs]:
    """Read a file written by :func:`save_outputs`."""
    with np.load(path) as data:
        result: Dict[str, SplitOutputs] = {}
        for key in data.files:
            split, field = key.split("__", 1)
            result.setdefault(split, {})[field] = data[key]
    return result


FIT_OUTPUTS = "fit_outputs.npz"


def load_fit_outputs(model_dir: Path):
    """The training outputs stored beside ``outputs.npz`` (for OpenMax), or None."""
    path = Path(model_dir) / FIT_OUTPUTS
    return load_outputs(path)["train"] if path.exists() else None


def iter_run_outputs(run_dir: Path) -> Iterator[Tuple[int, str, Dict[str, SplitOutputs]]]:
    """Yield ``(seed, approach, outputs)`` for every ``seed<k>/<approach>/outputs.npz``."""
    for path in sorted(Path(run_dir).glob("seed*/*/outputs.npz")):
        match = re.fullmatch(r"seed(\d+)", path.parent.parent.name)
        if match:
            yield int(match.group(1)), path.parent.name, load_outputs(path)
