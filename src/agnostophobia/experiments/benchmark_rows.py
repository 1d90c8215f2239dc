"""The rows of a benchmark (:mod:`agnostophobia.experiments.benchmark`): each (approach, detector)
row's numbers over seeds with their intervals, its network's closed-set accuracy, its OSCR area
averaged over the unknown-unknown (D_a) sets it is ranked on (the near ones, where a protocol also
has far ones, which are averaged apart), the reference rows, and which rows count: each
approach with its paper's detector, and the rows that may be ranked and tested."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from agnostophobia.data.protocol_types import FAR
from agnostophobia.data.protocols import unknown_set  # the registered protocols declare their sets there
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.metrics import paired_difference, seed_interval

#: The reference of the approach families (the primary one: each approach with its paper's
#: detector against this approach with its paper's; the secondary one: the same detector) and of
#: the detector family (same network).
REFERENCE_APPROACH = "entropic"
REFERENCE_DETECTOR = "softmax"
#: The reference where Entropic Open-Set trained on an outside set the other approaches never saw (the
#: literature's splits, docs/osr-splits.md): a comparison against it would weigh the outside data, not
#: the method, so the approaches are compared with the knowns-only baseline those papers compare with.
KNOWNS_ONLY_REFERENCE = "softmax"
#: How the tables name each reference approach: (in words, in a column header).
REFERENCE_NAMES = {REFERENCE_APPROACH: ("Entropic Open-Set", "EOS"), KNOWNS_ONLY_REFERENCE: ("softmax", "softmax")}


#: The convergence rule with an interval, for reruns of the approaches a protocol's threshold leaves
#: untested (docs: How the benchmark decides, "What the convergence threshold costs"): validation
#: accuracy not worse than softmax's by a margin or more (``benchmark --accuracy-margin``,
#: :func:`converged_by_rule`). The margin is derived from the validation set, not chosen against any
#: accuracy (:func:`accuracy_margin_for`): this many binomial standard errors of one network's accuracy.
ACCURACY_MARGIN_SES = 2


def accuracy_margin_for(threshold: float, num_known: int) -> float:
    """The margin of the convergence rule with an interval: :data:`ACCURACY_MARGIN_SES` binomial
    standard errors of one network's accuracy at the protocol's ``threshold`` on ``num_known``
    validation knowns, ``2 sqrt(t (1 - t) / n)``: what one validation set alone lets one network's
    accuracy move. The rule reads a paired difference on the same images, whose sampling error is
    smaller (``sqrt(d / n)`` for a share ``d`` of images the two networks classify differently), so
    this is a declared tolerance, a lenient one, not the paired reading's noise (review 1206a, m2).
    A review found the first margin (0.01) chosen where it reproduced the published verdicts; this one
    reads no accuracy.

    Examples:
        >>> from agnostophobia.experiments.benchmark_rows import accuracy_margin_for
        >>> round(accuracy_margin_for(0.90, 2000), 4)  # the CIFAR split
        0.0134
    """
    if not 0 < threshold < 1 or num_known < 1:
        raise ValueError(f"a threshold in (0, 1) and at least one validation known, got {threshold}, {num_known}")
    return float(ACCURACY_MARGIN_SES * np.sqrt(threshold * (1 - threshold) / num_known))


def accuracy_not_worse(accuracy: Sequence[float], baseline: Sequence[float], margin: float,
                       alpha: float = 0.05) -> bool:
    """Whether per-seed validation accuracies are not worse than ``baseline``'s (the same seeds, in
    the same order) by ``margin`` or more: the low end of the 1 - 2 alpha paired t interval of the
    difference (one-sided at alpha) lies above -``margin`` (a non-inferiority test). Where every
    seed differs alike (accuracies move in steps of one image), the interval has no width and the
    difference itself is read.

    Examples:
        >>> from agnostophobia.experiments.benchmark_rows import accuracy_not_worse
        >>> accuracy_not_worse([0.902, 0.899, 0.905], [0.904, 0.903, 0.906], margin=0.0134)
        True
        >>> accuracy_not_worse([0.880, 0.893, 0.885], [0.904, 0.903, 0.906], margin=0.0134)
        False
    """
    difference = paired_difference(accuracy, baseline)
    if difference.se == 0:
        return difference.difference > -margin
    return difference.interval(1 - 2 * alpha).low > -margin


def converged_by_rule(val_accuracy: Dict[str, Optional[List[float]]], min_accuracy: Optional[float],
                      accuracy_margin: Optional[float] = None) -> Dict[str, Optional[bool]]:
    """Each approach's convergence from its per-seed validation accuracies (the same seeds in the
    same order for every approach): None for all without a threshold; by the threshold, the mean
    over seeds at least ``min_accuracy``; with ``accuracy_margin``, softmax by the threshold and
    every other approach by :func:`accuracy_not_worse` than softmax at that margin (none converged
    where softmax is not: the budget is too short).

    Examples:
        >>> from agnostophobia.experiments.benchmark_rows import converged_by_rule
        >>> accuracy = {"softmax": [0.904, 0.903, 0.906], "arpl": [0.898, 0.897, 0.899]}
        >>> converged_by_rule(accuracy, 0.90)
        {'softmax': True, 'arpl': False}
        >>> converged_by_rule(accuracy, 0.90, accuracy_margin=0.01)
        {'softmax': True, 'arpl': True}
    """
    baseline = val_accuracy.get(KNOWNS_ONLY_REFERENCE)
    check_accuracy_rule(min_accuracy, accuracy_margin, list(val_accuracy), None if baseline is None else len(baseline))
    if min_accuracy is None:
        return {approach: None for approach in val_accuracy}
    by_threshold = {approach: values is not None and bool(np.mean(values) >= min_accuracy)
                    for approach, values in val_accuracy.items()}
    if accuracy_margin is None:
        return by_threshold
    if not by_threshold[KNOWNS_ONLY_REFERENCE]:
        return {approach: False for approach in val_accuracy}
    return {approach: True if approach == KNOWNS_ONLY_REFERENCE else
            (values is not None and len(values) == len(baseline) and accuracy_not_worse(values, baseline,
                                                                                        accuracy_margin))
            for approach, values in val_accuracy.items()}


def check_accuracy_rule(min_accuracy: Optional[float], accuracy_margin: Optional[float], approaches: Sequence[str],
                        seeds: Optional[int] = None) -> None:
    """Refuse, with :class:`~agnostophobia.errors.AgnostophobiaError`, a run :func:`converged_by_rule`
    cannot decide with ``accuracy_margin``: no threshold for softmax, no softmax among
    ``approaches``, or fewer than two ``seeds`` (None: not known yet). Nothing without a margin."""
    if accuracy_margin is None:
        return
    said = f"--accuracy-margin {accuracy_margin}"
    if min_accuracy is None:
        raise AgnostophobiaError(f"{said}: the rule needs a threshold for {KNOWNS_ONLY_REFERENCE}, and none is "
                                 f"declared: give --min-accuracy")
    if KNOWNS_ONLY_REFERENCE not in approaches:
        raise AgnostophobiaError(f"{said}: the rule compares each approach's validation accuracy with "
                                 f"{KNOWNS_ONLY_REFERENCE}'s, and {KNOWNS_ONLY_REFERENCE} is not among the "
                                 f"approaches: add it")
    if seeds is not None and seeds < 2:
        raise AgnostophobiaError(f"{said}: the rule reads a paired interval over seeds: it needs two seeds or more")


def convergence_said(min_accuracy: Optional[float], accuracy_margin: Optional[float] = None) -> str:
    """The convergence rule of :func:`converged_by_rule` in words, as the reports print it."""
    if min_accuracy is None:
        return "no threshold declared (--min-accuracy): every row counts"
    if accuracy_margin is None:
        return f"closed-set accuracy of the validation knowns, mean over seeds, at least {min_accuracy}"
    return (f"{KNOWNS_ONLY_REFERENCE}'s closed-set accuracy of the validation knowns, mean over seeds, at least "
            f"{min_accuracy}, and every other approach's not worse than {KNOWNS_ONLY_REFERENCE}'s by "
            f"{accuracy_margin} or more (the low end of the paired 90 % t interval over seeds above "
            f"-{accuracy_margin})")


def reference_approach(approaches: Sequence[str], extra_data: Sequence[str] = ()) -> str:
    """The approach the approach families compare with: Entropic Open-Set where the run trained it
    on the protocol's own negatives; else (a protocol whose negatives are an outside set, where
    ``extra_data`` names the approaches trained on them, or a run without Entropic Open-Set) the
    knowns-only softmax."""
    if extra_data or REFERENCE_APPROACH not in approaches:
        return KNOWNS_ONLY_REFERENCE
    return REFERENCE_APPROACH


def reference_of(result: Dict) -> str:
    """The reference approach of a ``benchmark.json`` (Entropic Open-Set in one written before the
    reference was recorded)."""
    return result.get("reference", REFERENCE_APPROACH)


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


def ranked_sets(names: Sequence[str]) -> List[str]:
    """Of a run's unknown test sets, those the rows are ranked and tested on: the unknown unknowns
    (D_a) that are not declared far, where there are any (the near ones: the CIFAR-10 split's dog and
    truck), else every D_a set (LeNet++'s, all far), else every set."""
    unknown_unknowns = [name for name in names if not unknown_set(name).known_unknowns]
    near = [name for name in unknown_unknowns if unknown_set(name).proximity != FAR]
    return near or unknown_unknowns or list(names)


def far_sets(names: Sequence[str]) -> List[str]:
    """Of a run's unknown test sets, the far D_a sets reported apart from the ranked ones
    (:func:`ranked_sets`): none where every D_a set is far (they are then the ranked ones)."""
    ranked = ranked_sets(names)
    return [name for name in names if not unknown_set(name).known_unknowns and name not in ranked]


def mean_oscr(row: Dict, statistic: str = "oscr", far: bool = False) -> Optional[List[float]]:
    """Per seed, the OSCR area averaged over the row's ranked D_a test sets (:func:`ranked_sets`):
    what rows are ranked and tested on (``statistic="oscr_log"``: the area over the log FPR axis,
    shown beside it; ``far``: over the far sets reported apart, :func:`far_sets`). None where there
    is no such set, or a set or a seed lacks it."""
    sets = far_sets(list(row["test"])) if far else ranked_sets(list(row["test"]))
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


def in_primary_family(approach: str, detector: str) -> bool:
    """Whether the benchmark's primary family tests ``approach`` with ``detector``: its paper's
    detector (:func:`is_papers_detector`), or another score its paper reports as a row of its own
    (its loss's ``papers_other_detectors``, e.g. Scaled Objectosphere)."""
    from agnostophobia.losses import LOSSES

    return is_papers_detector(approach, detector) or detector in LOSSES.get(approach).papers_other_detectors


def papers_rows(rows: List[Dict]) -> List[Dict]:
    """The rows of each approach with its paper's detector (:func:`is_papers_detector`), ranked."""
    return [r for r in rows if is_papers_detector(r["approach"], r["detector"])]


#: A mean D_a OSCR this close to the closed-set accuracy (its ceiling: the linear area under the OSCR
#: curve, paper Sec. 4 Eq. 3, never exceeds the accuracy) reads little beyond the accuracy.
CEILING_GAP = 0.001


def is_at_ceiling(row: Dict) -> bool:
    """Whether ``row``'s mean D_a OSCR over seeds lies within :data:`CEILING_GAP` of its closed-set
    accuracy: a test of such rows compares their accuracies, not how they reject the unknowns."""
    values, accuracy = row.get("mean_oscr_per_seed"), row["closed_set_accuracy"].get("mean")
    if not values or None in values or accuracy is None:
        return False
    return accuracy - float(np.mean(values)) < CEILING_GAP


def rows_at_ceiling(rows: Sequence[Dict]) -> List[str]:
    """The names of the rows of converged networks at the ceiling (:func:`is_at_ceiling`)."""
    return [r["row"] for r in rows if r["converged"] is not False and is_at_ceiling(r)]


def saw_negatives(row: Dict) -> bool:
    """Whether ``row``'s network trained on negatives: those of the protocol (D_b') or of an outside
    set (``extra_data``). A benchmark's validation negatives are held-out images of that same set,
    so on them such a row is scored on its training distribution (near its ceiling, where detectors
    tie) and is ranked apart from the rows trained on the known classes only."""
    return bool(row.get("extra_data") or row.get("negatives"))


def rankable(row: Dict) -> bool:
    """Converged (or no threshold), trained on every seed of the run (an approach whose other seeds
    are still to train would be ranked on fewer seeds than its rivals), and scored on a D_a set."""
    return row["converged"] is not False and row["complete"] and row["mean_oscr_per_seed"] is not None


def seeds_said(count) -> str:
    """``1 seed``, ``5 seeds``."""
    return f"{count} seed" + ("" if count == 1 else "s")
