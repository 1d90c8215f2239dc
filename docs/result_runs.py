"""The published runs as the hand-written benchmark pages read them (``result_facts`` and the modules
it gathers numbers from): each run's committed ``benchmark.json`` (:data:`result_pages.PAGES`), its rows
and tests, and the formats the pages print numbers in."""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
from scipy import stats

from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN, marks
from agnostophobia.experiments.benchmark_report import format_cell
from agnostophobia.experiments.benchmark_rows import interval_over_seeds, papers_rows
from agnostophobia.metrics import seed_interval, smallest_resolved_difference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from result_pages import DOCS, PAGES, published  # noqa: E402

#: The parts of the CIFAR-10 split, each its own published run, in the order they were run (and published).
#: The table numbers the parts in this order, as the overview lists them; a run that measures something
#: else with the same networks (`measures`: another machine) is not a part.
CIFAR_PARTS = tuple(label for label in published() if label.startswith("bench-cifar-5") and not PAGES[label].measures)
#: The parts whose decisions the overview reads: those no later part asked again.
DECIDING_PARTS = tuple(label for label in CIFAR_PARTS if not PAGES[label].superseded_by)
#: The deciding part whose families and ranking the pages cite for the split: the one holding the
#: most approaches trained on the knowns only (softmax, ARPL, CAC), where the ranking rule has rows to read.
CIFAR_REPORT = "bench-cifar-5-arpl-cac"
FINE_TUNE_PARTS = {"bench-cifar-5-ft": "outlier-exposure-ft", "bench-cifar-5-energy-ft": "energy-regularized-ft",
                   "bench-cifar-5-mixoe-ft": "mixoe-ft"}


@lru_cache(maxsize=None)
def run(label: str) -> Dict:
    """The committed benchmark.json of published run ``label``."""
    return json.loads((DOCS / PAGES[label].results).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def run_marks(label: str) -> Dict[str, Dict[str, str]]:
    """Every test's printed mark in published run ``label``, by family and row
    (:func:`~agnostophobia.experiments.benchmark_comparisons.marks`)."""
    return marks(run(label))


def row(label: str, name: str) -> Dict:
    """Row ``name`` ("approach" for its paper's detector, else "approach/detector") of run ``label``."""
    matches = [r for r in run(label)["rows"] if r["row"] == name]
    if len(matches) != 1:
        raise KeyError(f"{label}: no single row {name!r}")
    return matches[0]


def paper_row(label: str, approach: str) -> Dict:
    """Run ``label``'s row of ``approach`` with its paper's detector."""
    return next(r for r in papers_rows(run(label)["rows"]) if r["approach"] == approach)


def near_da(label: str, name: str) -> float:
    """The mean over seeds of a row's mean OSCR area over the D_a sets its tests read."""
    return float(np.mean(row(label, name)["mean_oscr_per_seed"]))


def comparison(label: str, family: str, name: str, against: str) -> Dict:
    """The comparison of row ``name`` with ``against`` in ``family`` of run ``label``."""
    return next(t for t in run(label)["tests"][family] if t["row"] == name and t["against"] == against)


def val_accuracy(label: str, approach: str) -> float:
    """An approach's closed-set accuracy on the validation knowns, mean over seeds."""
    return run(label)["accuracy"][approach]["val"]["mean"]


def seed_accuracies(label: str, approach: str, split: str = "val") -> List[float]:
    """An approach's closed-set accuracy on ``split`` per seed."""
    return paper_row(label, approach)["accuracy_per_seed"][split]


def num(x: float, digits: int = 3) -> str:
    """``x`` as the page prints it, with a true minus sign."""
    return f"{x:.{digits}f}".replace("-", "−")


def signed(x: float, digits: int = 3) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def bound(x: float) -> str:
    """An interval's end to 4 decimals, or to its first significant digit where 4 decimals would print
    a non-zero end as ±0.0000 (an interval that excludes 0 by a hair must say so)."""
    if x != 0 and round(x, 4) == 0:
        return signed(float(f"{x:.1g}"), int(-np.floor(np.log10(abs(x)))))
    return signed(x, 4)


def span(values: Sequence[float], digits: int = 3) -> str:
    return f"{num(min(values), digits)}-{num(max(values), digits)}"


def t_interval(differences: Sequence[float]) -> str:
    """The 95 % t interval over seeds of the mean of ``differences``, as ``[low, high]``."""
    interval = seed_interval(differences)
    return f"[{num(interval.low)}, {num(interval.high)}]"


def paired(label_a: str, name_a: str, label_b: str, name_b: str) -> np.ndarray:
    """Per seed, row ``name_a`` of run ``label_a`` minus row ``name_b`` of ``label_b`` (near D_a OSCR)."""
    a, b = row(label_a, name_a), row(label_b, name_b)
    if a["seeds"] != b["seeds"]:
        raise ValueError(f"{label_a}/{name_a} and {label_b}/{name_b} hold different seeds")
    return np.asarray(a["mean_oscr_per_seed"]) - np.asarray(b["mean_oscr_per_seed"])


def cell(values: Sequence[float]) -> str:
    """Mean over seeds [95 % t interval], as the generated pages print a cell."""
    return format_cell(interval_over_seeds(values))


def equivalence_se(seeds: int) -> float:
    """The largest standard error at which a difference of 0 is shown equivalent within the margin over
    ``seeds`` seeds: the 90 % t interval's half-width equal to the margin."""
    return MARGIN / stats.t.ppf(1 - ALPHA, seeds - 1)


def test_said(label: str, family: str, name: str, against: str) -> str:
    """The test of row ``name`` against ``against`` in ``family`` of run ``label`` as the overview cites
    it, with the mark its page prints (:func:`~agnostophobia.experiments.benchmark_comparisons.marks`):
    ``−0.0042 [−0.0062, −0.0022], *differs, below margin (5 seeds)*``."""
    test = comparison(label, family, name, against)
    low, high = test["interval"]
    return (f"{signed(test['difference'], 4)} [{bound(low)}, {bound(high)}], "
            f"*{marks(run(label))[family][test['row']]}*")


def projected_resolution(label: str, family: str, seeds: int) -> float:
    """The smallest difference a family of a 3-seed run would resolve at ``seeds`` seeds: each test's
    seeds' part of the standard error scaled by sqrt(3 / seeds), its test samples' part kept, at the
    family's median (:func:`~agnostophobia.metrics.smallest_resolved_difference`)."""
    tests = run(label)["tests"][family]
    se = np.median([np.hypot(t["se_seeds"] * np.sqrt(run(label)["seeds"] / seeds), t["se_samples"]) for t in tests])
    return smallest_resolved_difference(se, seeds, family_size=len(tests), margin=MARGIN)
