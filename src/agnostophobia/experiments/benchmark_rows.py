"""The rows of a benchmark (:mod:`agnostophobia.experiments.benchmark`): each (approach, detector)
row's numbers over seeds with their intervals, its network's closed-set accuracy, its OSCR area
averaged over the unknown-unknown (D_a) sets, the reference rows, and which rows count: each
approach with its paper's detector, and the rows that may be ranked and tested."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from agnostophobia.data.protocols import unknown_set  # the registered protocols declare their sets there
from agnostophobia.metrics import seed_interval

#: The reference of the approach families (the primary one: each approach with its paper's
#: detector against this approach with its paper's; the secondary one: the same detector) and of
#: the detector family (same network).
REFERENCE_APPROACH = "entropic"
REFERENCE_DETECTOR = "softmax"
#: The per-set statistics each cell of ``benchmark.json`` gives with its interval over seeds.
CELL_STATISTICS = ("oscr", "oscr_log", "auroc", "ccr_at_lowest_fpr", "fpr_at_95tpr", "aupr_in", "aupr_out")


def interval_over_seeds(values: Sequence[Optional[float]]) -> Optional[Dict]:
    """Mean and 95 % t interval over seeds, the interval cut to [0, 1] (every statistic here is a
    rate or an area in it; with few seeds a t interval reaches past both ends). None: a seed lacks it."""
    if not values or any(v is None for v in values):
        return None
    interval = seed_interval(values)
    return {"mean": interval.estimate, "low": float(np.clip(interval.low, 0, 1)),
            "high": float(np.clip(interval.high, 0, 1)), "seeds": interval.n}


def network_accuracy(rows: List[Dict], approach: str, split: str = "test") -> Optional[List[float]]:
    """Per seed, the closed-set accuracy of the approach's network on the test knowns (``split="val"``:
    on the validation knowns, what convergence is judged on): its arg-max class, read from the
    max-softmax row (any row of the approach where that one is missing)."""
    mine = [r for r in rows if r["approach"] == approach and (r.get("val") if split == "val" else r["test"])]
    mine.sort(key=lambda r: r["detector"] != REFERENCE_DETECTOR)
    if not mine:
        return None
    numbers = mine[0]["val"] if split == "val" else next(iter(mine[0]["test"].values()))
    values = numbers["per_seed"]["closed_set_accuracy"]
    return None if None in values else values


def unknown_unknowns(row: Dict) -> List[str]:
    """The row's test sets of unknown unknowns (D_a); all of them where none is declared so."""
    sets = [name for name in row["test"] if not unknown_set(name).known_unknowns]
    return sets or list(row["test"])


def mean_oscr(row: Dict, statistic: str = "oscr") -> Optional[List[float]]:
    """Per seed, the OSCR area averaged over the row's D_a test sets: what rows are ranked and tested
    on (``statistic="oscr_log"``: the area over the log FPR axis, shown beside it). None where a set
    or a seed lacks it."""
    sets = unknown_unknowns(row)
    values = [row["test"][name]["per_seed"][statistic] for name in sets]
    if not sets or any(v is None or None in v for v in values):
        return None
    return [float(v) for v in np.mean(values, axis=0)]


def cells(numbers: Dict) -> Dict:
    """A test set's cell of ``benchmark.json``: each of :data:`CELL_STATISTICS` and the CCR at each
    FPR with its interval over seeds, the share ties decide (mean over seeds) and the negatives."""
    per_seed = numbers["per_seed"]
    return {**{key: interval_over_seeds(per_seed.get(key)) for key in CELL_STATISTICS},
            "ccr_at_fpr": {key: interval_over_seeds(values) for key, values in per_seed["ccr_at_fpr"].items()},
            "tied_share": float(np.mean(per_seed["tied_share"])), "num_negative": numbers["num_negative"]}


def papers_detector(approach: str) -> str:
    """The detector the paper of ``approach`` thresholds: its loss's ``default_detector``."""
    from agnostophobia.losses import LOSSES

    return LOSSES.get(approach).default_detector


def is_papers_detector(approach: str, detector: str) -> bool:
    """Whether ``detector`` is the score the paper of ``approach`` thresholds (its loss's
    ``default_detector``): the training methods compared as published."""
    return detector == papers_detector(approach)


def papers_rows(rows: List[Dict]) -> List[Dict]:
    """The rows of each approach with its paper's detector (:func:`is_papers_detector`), ranked."""
    return [r for r in rows if is_papers_detector(r["approach"], r["detector"])]


def rankable(row: Dict) -> bool:
    """Converged (or no threshold), trained on every seed of the run (an approach whose other seeds
    are still to train would be ranked on fewer seeds than its rivals), and scored on a D_a set."""
    return row["converged"] is not False and row["complete"] and row["mean_oscr_per_seed"] is not None
