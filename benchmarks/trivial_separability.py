"""How far a protocol's unknown test sets are told from its test knowns by statistics no network
learns: the images' mean and spread of intensity, their share of bright ("ink") pixels, and the ink
in their border. A review asked why every approach trained with negatives sits at its ceiling on
LeNet++ (the OSCR area at the closed-set accuracy on every D_a set): if a trivial statistic already
separates a set, the set measures little of what an open-set method adds.

For each unknown test set, against the test knowns, as the networks see them (the protocol's own
preparation): the AUROC of each statistic alone, oriented so that 0.5 is chance and 1 perfect
(max(AUROC, 1 - AUROC)), and of a logistic regression on the four together, each sample scored by a
model fitted on the other folds (5-fold cross-validation, stratified: every score is read on images
the model never saw). Nothing is trained but that regression; no test output of any network is
read::

    python benchmarks/trivial_separability.py lenet++ docs/results/trivial-separability-lenet.json \\
        --max-test-per-set 10000    # as the converged budget reads the test sets

The JSON holds the numbers, the code's commit, the processor and the libraries' versions;
``docs/result_facts.py`` reads it for the benchmark's pages."""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict

import numpy as np
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from agnostophobia.data import build_protocol
from agnostophobia.training.device import cpu_model
from agnostophobia.training.records import code_version, library_versions

#: The width in pixels of the frame whose ink is counted: the frame a centred glyph leaves empty.
BORDER = 4


def _ink(images: np.ndarray) -> np.ndarray:
    """Each image's bright pixels (``images`` in floats): above the middle of its own intensity range
    (a glyph's strokes on its background, whichever way round the preparation puts them)."""
    flat = images.reshape(len(images), -1)
    low, high = flat.min(axis=1, keepdims=True), flat.max(axis=1, keepdims=True)
    return (images > ((low + high) / 2).reshape(-1, 1, 1, 1)).astype(np.float64)


def statistics(images: np.ndarray) -> Dict[str, np.ndarray]:
    """The four trivial statistics of each image."""
    images = images.astype(np.float64)  # a protocol's images are uint8, where low + high would wrap at 256
    flat = images.reshape(len(images), -1)
    ink = _ink(images)
    frame = np.ones(images.shape[-2:], dtype=bool)
    frame[BORDER:-BORDER, BORDER:-BORDER] = False
    return {"mean intensity": flat.mean(axis=1), "intensity spread": flat.std(axis=1),
            "ink share": ink.reshape(len(images), -1).mean(axis=1),
            "ink in the border": ink[..., frame].reshape(len(images), -1).mean(axis=1)}


def oriented_auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUROC with the statistic's better sign: 0.5 chance, 1 perfectly separated either way."""
    auroc = roc_auc_score(labels, scores)
    return float(max(auroc, 1 - auroc))


def separability(known: np.ndarray, unknown: np.ndarray, seed: int = 0) -> Dict[str, float]:
    """Each statistic's oriented AUROC, and the cross-validated AUROC of a logistic regression on all
    four (``linear on all four``), knowns labelled 0 and unknowns 1."""
    a, b = statistics(known), statistics(unknown)
    labels = np.r_[np.zeros(len(known)), np.ones(len(unknown))]
    table = np.stack([np.r_[a[name], b[name]] for name in a], axis=1)
    out = {name: oriented_auroc(labels, table[:, i]) for i, name in enumerate(a)}
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    scores = cross_val_predict(model, table, labels, cv=folds, method="predict_proba")[:, 1]
    out["linear on all four"] = float(roc_auc_score(labels, scores))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("protocol", help="a registered protocol, e.g. lenet++")
    parser.add_argument("out", type=Path, help="the JSON to write")
    parser.add_argument("--data-dir", default=None, help="the datasets' folder (default: AGNOSTOPHOBIA_DATA)")
    parser.add_argument("--max-test-per-set", type=int, default=None,
                        help="cap on the test knowns and on each unknown set, as a budget caps them (the data "
                             "seed 0 draws the subsample)")
    args = parser.parse_args(argv)
    protocol = build_protocol(args.protocol, data_dir=args.data_dir, max_test_per_set=args.max_test_per_set)
    known = protocol.test_known.images  # uint8 arrays, as every protocol split holds them
    sets = {}
    for name, split in protocol.test_unknowns.items():
        sets[name] = {"samples": len(split.images), **separability(known, split.images)}
        print(name, {k: round(v, 4) for k, v in sets[name].items()})
    record = {"protocol": args.protocol, "known_samples": len(known), "sets": sets, "border_pixels": BORDER,
              "cross_validation": "5-fold, stratified, shuffled with seed 0; standardised, logistic regression"}
    write_record(args.out, record, __file__, argv)
    return 0


def write_record(out: Path, record: Dict, script: str, argv=None) -> None:
    """``record`` with its ``meta`` (date, the code's commit, the processor, the libraries' versions and
    the command that made it, ``script`` run with ``argv``) written to ``out`` as JSON, whole or not at
    all: the last good file stays if anything fails."""
    command = " ".join(["python", f"benchmarks/{Path(script).name}",
                        *map(str, argv if argv is not None else sys.argv[1:])])
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "code": code_version(),
            "processor": cpu_model(), "versions": {**library_versions(), "scikit-learn": sklearn.__version__},
            "command": command}
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps({**record, "meta": meta}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(out)


if __name__ == "__main__":
    sys.exit(main())
