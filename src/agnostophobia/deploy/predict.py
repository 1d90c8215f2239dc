"""``agnostophobia predict RUN INPUT...``: one row per image, ``source, label, score, threshold``,
with ``label`` a class name or ``unknown`` (score below the validation-chosen threshold).

Inputs are image files, folders (every image below them, in sorted path order) and ``.npz``
files (array order), read by :mod:`agnostophobia.data.inputs` and prepared by the function
that prepared the training data, with the run's input spec; each is listed and its files'
headers checked before any model is loaded, and a problem is one line naming the file. Images
are decoded ``eval_batch_size`` at a time (the run's), so memory does not grow with a folder.
"""
from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from agnostophobia._atomic import atomic_write
from agnostophobia.data.inputs import model_input, open_image_input
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning, DataError
from agnostophobia.rundir import RunDir
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.records import check_run

from .best import best_model
from .calibration import calibration_entry, check_target, resolve_model
from .classifier import OpenSetClassifier
from .request import ModelRequest
from agnostophobia._log import log_info

COLUMNS = ("source", "label", "score", "threshold")
OUTPUT_SUFFIXES = (".csv", ".json")


def predict_files(request: ModelRequest, inputs: Sequence[str], log=log_info) -> List[Dict]:
    """Rows ``{source, label, score, threshold}`` for every image of ``inputs``, in order, by the
    one model ``request`` chooses (:meth:`OpenSetClassifier.from_run
    <agnostophobia.deploy.OpenSetClassifier.from_run>`: ``approach``, ``detector``, ``seed``,
    ``fpr``, ``data_dir``, ``device``)."""
    run_dir = request.run
    check_run(run_dir).warn_versions(stacklevel=2)  # broken records stop here; other library versions are named
    request = best_model(request, log)  # detector "best": the top of compare's ranking
    model, approach, detector = resolve_model(run_dir, request.approach, request.detector, request.seed)
    if request.fpr is None:
        calibration_entry(run_dir, approach, detector, request.seed)  # stop before reading anything without a threshold
    else:
        check_target(request.fpr)
    config = load_checkpoint(model.best)["config"]
    sources = [open_image_input(spec) for spec in inputs]  # every input listed and checked before any model
    if not any(len(source) for source in sources):
        raise _none_readable(inputs, sources)
    classifier = OpenSetClassifier.from_run(request.but(approach=approach, detector=detector), log=log)
    rows = []
    for source in sources:  # at most one batch of decoded images at a time, whatever the input holds
        for images in source.batches(classifier.trained.batch_size):
            labels, scores = classifier.decide(model_input(images, config))
            rows += [{"source": sample, "label": name, "score": float(score), "threshold": classifier.threshold}
                     for sample, name, score in zip(images.samples, classifier.label_names(labels), scores)]
    if not rows:
        raise _none_readable(inputs, sources)
    for source in sources:  # each on its own line; the other images are classified
        for problem in source.unreadable:
            warnings.warn(f"not classified: {problem}", AgnostophobiaWarning, stacklevel=2)
    return rows


def _none_readable(inputs, sources) -> DataError:
    problems = [problem for source in sources for problem in source.unreadable]
    return DataError(f"no image of {', '.join(map(str, inputs))} can be read ({len(problems)} unreadable); the "
                     f"first: {problems[0]}")


def check_output(out: Optional[Path], run_dir=None) -> None:
    """``--out`` ends in .csv or .json, and names no file of the run ``run_dir`` predict reads."""
    if out is not None and Path(out).suffix.lower() not in OUTPUT_SUFFIXES:
        raise AgnostophobiaError(f"--out {out}: must end in .csv or .json")
    if out is not None and run_dir is not None:
        RunDir(run_dir).check_output(out)


def write_rows(rows: List[Dict], out: Path) -> None:
    """``rows`` as CSV (``source,label,score,threshold``) or JSON (a list of such objects)."""
    out = Path(out)
    check_output(out)
    if out.suffix.lower() == ".json":
        text = json.dumps(rows, indent=1)
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: repr(v) if isinstance(v, float) else v for k, v in row.items()} for row in rows)
        text = buffer.getvalue()
    atomic_write(out, lambda tmp: Path(tmp).write_text(text))


def format_table(rows: List[Dict]) -> str:
    """An aligned plain-text table of ``rows`` for the terminal."""
    cells = [list(COLUMNS)] + [[row["source"], row["label"], f"{row['score']:.6g}", f"{row['threshold']:.6g}"]
                               for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells)
