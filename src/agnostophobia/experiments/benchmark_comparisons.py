"""The comparisons of a benchmark (:mod:`agnostophobia.experiments.benchmark`): its families of
paired comparisons of the mean D_a OSCR area, four on the linear area and one on the area over a log
FPR axis (each difference's standard error: the seeds' spread and a paired bootstrap over the shared
test samples, added in quadrature), each decided against the declared margin with Holm's correction
within its family, and what a family resolves at the run's seeds."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable, Collection, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.detectors import DETECTORS
from agnostophobia.experiments.benchmark_rows import (KNOWNS_ONLY_REFERENCE, REFERENCE_DETECTOR, REFERENCE_NAMES,
                                                      in_primary_family, papers_detector, rankable, ranked_sets,
                                                      rows_at_ceiling, saw_negatives, seeds_said)
from agnostophobia.metrics import (EQUIVALENT, NOT_RESOLVED, PairedDifference, auroc_resamples, beyond_margin,
                                   ccr_at_fpr_resamples, decide, oscr_area_resamples, paired_difference,
                                   resample_weights, resampled_se, smallest_resolved_difference,
                                   smallest_supported_fpr)

#: The level of each family's tests: Holm's correction holds it within a family, not across them.
ALPHA = 0.05
#: The margin: a difference of mean D_a OSCR area smaller than this does not matter, and one shown to
#: lie within it (its 90 % interval inside +-MARGIN) is "equivalent". Half a point of area, below which
#: no reader ranks one method above another (the tables print three decimals). Declared after the
#: 3-seed reports were published and before any rerun was read (docs/guide/benchmark.md says so).
MARGIN = 0.005
#: What an *equivalent* test of two rows at their ceiling (:data:`~agnostophobia.experiments.benchmark_rows.CEILING_GAP`)
#: adds to its mark: there the area compares the closed-set accuracies, not how the rows reject unknowns.
AT_CEILING = "(at ceiling)"
#: What a better or worse test adds to its mark where the minimum-effect test
#: (:func:`~agnostophobia.metrics.beyond_margin`, Holm over its family) puts the difference beyond the margin.
BEYOND_MARGIN = "(beyond margin)"
#: A not-resolved test's mark where Holm's correction puts its difference away from 0 while its observed
#: mean is below the margin (and its 90 % interval is not inside it): real, too small to be called better
#: or worse, and not something more seeds would turn into a verdict of its sign.
BELOW_MARGIN = "differs, below margin"
#: Resamples and seed of the paired bootstrap over the test samples whose share adds to each difference's
#: standard error (the same resamples for every network, detector and seed: paired).
BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_SEED = 55
#: The families of comparisons (``benchmark.json``'s ``tests``), each Holm-adjusted on its own:
#: (its name in the report, what is compared with what; ``{reference}``: the reference approach,
#: :func:`~agnostophobia.experiments.benchmark_rows.reference_approach`).
FAMILIES = {
    "primary": ("primary", "each approach with its paper's detector against {reference} with its paper's, "
                           "{reference_detector}, and any other score a paper reports as a row of its own (Scaled "
                           "Objectosphere)"),
    "knowns": ("secondary: knowns only", "each approach trained on the known classes alone (no negatives, no "
                                         "outlier data) with its paper's detector against softmax with max-softmax, "
                                         "the baseline it could replace"),
    "approaches": ("secondary: approaches", "each approach against {reference} with the same detector, for "
                                            "the pairs the primary family does not compare"),
    "detectors": ("secondary: detectors", "each detector against max-softmax on the same network"),
    "log_area": ("secondary: log-FPR area", "the primary family's pairs on the mean D_a OSCR area over a log "
                                            "FPR axis, from the smallest FPR each set resolves (10 / its size) "
                                            "to 1, which reads the low-FPR end the linear area hardly weighs"),
}
#: The family that tests the log-FPR area (the others test the linear one): a test of the low-FPR end,
#: where the linear area sits at the closed-set accuracy (Sec. 4.1 and Table 2 read CCR down to 10⁻⁴).
LOG_AREA = "log_area"


def present_families(result: Dict) -> List[str]:
    """The families of :data:`FAMILIES` that ``result`` (a ``benchmark.json``) holds, in the declared
    order: a report written before a family was declared (format 3 has no ``knowns``) lacks it."""
    return [family for family in FAMILIES if family in result.get("tests", {})]


def bounded_sample_se(first_vs_reference: float, second_vs_reference: float) -> float:
    """An upper bound of the test samples' standard error of ``first - second`` from the stored ones of
    ``first - reference`` and ``second - reference``, where all three share the reference's networks
    and the resamples: per resample, ``first - second`` is the difference of the two, so its standard
    deviation over resamples is at most the sum of theirs (Minkowski's inequality). For a report
    that kept the two but not the replicates; the bound errs on the cautious side."""
    return float(first_vs_reference) + float(second_vs_reference)


def families(reference: str) -> Dict[str, Tuple[str, str]]:
    """:data:`FAMILIES` with the reference approach and its paper's detector named (the detector by
    its registered title): ``{family: (kind, what it compares)}``."""
    names = {"reference": REFERENCE_NAMES[reference][0],
             "reference_detector": DETECTORS.get(papers_detector(reference)).title}
    return {family: (kind, compares.format(**names)) for family, (kind, compares) in FAMILIES.items()}


def _bootstrap_weights(split: str, n: int) -> np.ndarray:
    """The resamples of a test split of ``n`` samples: seeded by its name and size, so the same for
    every network, detector and seed that shares the split (a paired bootstrap)."""
    return resample_weights(n, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED + zlib.crc32(f"{split}:{n}".encode()))


class SampleReplicates(NamedTuple):
    """Each row's mean D_a OSCR area on the paired bootstrap's resamples (:func:`sample_replicates`),
    of the linear area and of the area over a log FPR axis, and its validation ranking metrics on the
    resamples of the validation samples (:class:`ValidationBootstrap`, ``{metric: {(approach,
    detector): {seed: array}}}``); None: the seeds' spread alone."""
    linear: Optional[Dict] = None
    log: Optional[Dict] = None
    val: Optional[Dict] = None


def sample_replicates(models: Sequence[Tuple[int, str, Path]], scores_of: Callable,
                      sets: Optional[Sequence[str]] = None) -> SampleReplicates:
    """Each row's mean D_a OSCR areas (over the sets it is ranked on, ``ranked_sets``, or over ``sets``
    where given: a second reading of the networks on other unknowns) on every resample of the paired
    bootstrap over the test samples, each area as ``{(approach, detector): {seed: (BOOTSTRAP_RESAMPLES,)
    array}}``: the linear one, and the one over a log FPR axis from the smallest FPR each set resolves,
    as the rows' ``mean_oscr_log_per_seed`` (none for a model with a set too small to resolve one).
    The knowns are resampled once for every set (D_c is shared) and each D_a set on its own
    (:func:`_bootstrap_weights`); each model's scores are read once for both areas.
    ``models``: the run's (seed, approach, model folder); ``scores_of(model_dir, approach)``: that
    model's :class:`~agnostophobia.detectors.stored.ModelScores`. Neither area where the models' test
    splits differ in their labels (they are then not the same samples: no pairing)."""
    linear: Dict[Tuple[str, str], Dict[int, np.ndarray]] = {}
    log: Dict[Tuple[str, str], Dict[int, np.ndarray]] = {}
    seen: Dict[str, np.ndarray] = {}
    for seed, approach, model_dir in models:
        scores = scores_of(model_dir, approach)
        for split, labels in scores.labels.items():
            if not np.array_equal(seen.setdefault(split, labels), labels):
                return SampleReplicates()
        if sets is not None and not set(sets) <= set(scores.unknown_sets):
            continue  # a model that did not score every asked set has no replicates of them
        on = ranked_sets(scores.unknown_sets) if sets is None else list(sets)
        if not on:
            continue
        known = _bootstrap_weights("known", len(scores.labels["known"]))
        unknown = {s: _bootstrap_weights(s, len(scores.labels[s])) for s in on}
        lowest = {s: smallest_supported_fpr(len(scores.labels[s])) for s in on}
        log_axis = all(f < 1 for f in lowest.values())
        for detector in scores.detectors:
            if any(s not in scores.top[detector] for s in ("known", *on)):
                continue
            both = {s: scores.known_vs_unknown(detector, s) for s in on}
            linear.setdefault((approach, detector), {})[seed] = np.mean(
                [oscr_area_resamples(*both[s], known, unknown[s]) for s in on], axis=0)
            if log_axis:
                log.setdefault((approach, detector), {})[seed] = np.mean(
                    [oscr_area_resamples(*both[s], known, unknown[s], log_fpr=True, min_fpr=lowest[s]) for s in on],
                    axis=0)
    return SampleReplicates(linear, log)


def validation_resamples(scores: np.ndarray, labels: np.ndarray, metrics: Sequence[str],
                         weights: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> Dict[str, np.ndarray]:
    """Each of ``metrics`` (the ranking candidates) of one detector's validation (N, C) ``scores`` on
    every resample of the paired bootstrap over the validation samples, what the ranks' tests add
    to the seeds' spread, as the test side's (:func:`sample_replicates`) adds to the comparisons':
    every seed of a run scores the same validation samples, so two detectors on one network move
    together over seeds and their spread alone overstates what the samples resolve. The knowns and
    the negatives are each resampled on their own (:func:`_bootstrap_weights`: the same resamples
    for every network, detector and seed, so paired), each metric read on the weights without
    drawing a resample (:func:`~agnostophobia.metrics.oscr_area_resamples` as the test side reads
    the areas, :func:`~agnostophobia.metrics.auroc_resamples`,
    :func:`~agnostophobia.metrics.ccr_at_fpr_resamples`): with every weight 1, the row's own
    number (:func:`~agnostophobia.deploy.compare.ranking_statistic`). A metric the negatives do not define (the log area or the CCR at 10/#negatives
    with too few) is left out. ``weights``: (knowns', negatives') weights of shape (B, count) in
    the bootstrap's place (all ones: the numbers themselves).

    Returns:
        ``{metric: (B,) array}``, B the resamples (:data:`BOOTSTRAP_RESAMPLES`).
    """
    labels = np.asarray(labels, dtype=np.int64)
    known, negative = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    both = weights if weights is not None else (
        _bootstrap_weights("val:known", len(known)), _bootstrap_weights("val:negatives", len(negative)))
    lowest = smallest_supported_fpr(len(negative))
    read = {"oscr": lambda: oscr_area_resamples(scores, labels, *both),
            "oscr_log": lambda: oscr_area_resamples(scores, labels, *both, log_fpr=True, min_fpr=lowest)
            if lowest < 1 else None,
            "auroc": lambda: auroc_resamples(scores, labels, *both),
            "ccr_at_lowest_fpr": lambda: ccr_at_fpr_resamples(scores, labels, *both, lowest) if lowest <= 1 else None}
    out = {}
    for metric in metrics:
        if metric not in read:
            raise ValueError(f"validation_resamples: a metric of {', '.join(read)}, got {metric!r}")
        values = read[metric]()
        if values is not None and np.isfinite(values).all():
            out[metric] = values
    return out


class ValidationBootstrap:
    """The validation ranking metrics of every (approach, detector) and seed on the resamples of the
    validation samples (:func:`validation_resamples`), gathered while ``compare`` scores them:
    called as its ``val_scores`` (:func:`~agnostophobia.deploy.compare.compare_models`), so nothing
    is scored twice. ``metrics``: those the ranks may read (the declared one, or every candidate
    where the rule chooses after the scoring). :attr:`replicates` is None where the models'
    validation labels differ: they are then not the same samples, and nothing is paired (as
    :func:`sample_replicates` does on the test splits)."""

    def __init__(self, metrics: Sequence[str]):
        self.metrics = list(metrics)
        self._by_metric: Dict[str, Dict[Tuple[str, str], Dict[int, np.ndarray]]] = {m: {} for m in self.metrics}
        self._labels: Optional[np.ndarray] = None
        self._paired = True

    def __call__(self, seed: int, approach: str, detector: str, scores: np.ndarray, labels: np.ndarray) -> None:
        """Add one model's detector: its validation (N, C) ``scores`` and their ``labels``."""
        if self._labels is None:
            self._labels = np.asarray(labels)
        self._paired = self._paired and np.array_equal(self._labels, labels)
        if not self._paired:
            return
        for metric, values in validation_resamples(scores, labels, self.metrics).items():
            self._by_metric[metric].setdefault((approach, detector), {})[seed] = values

    @property
    def replicates(self) -> Optional[Dict[str, Dict[Tuple[str, str], Dict[int, np.ndarray]]]]:
        """``{metric: {(approach, detector): {seed: (B,) array}}}`` (:attr:`SampleReplicates.val`);
        None where nothing was added or the models' validation samples differ."""
        return self._by_metric if self._paired and self._labels is not None else None


def family_pairs(rows: List[Dict], family: str, reference: str) -> List[Tuple[Dict, Dict]]:
    """(row, reference row) of each comparison of ``family`` (:data:`FAMILIES`), both rankable and
    on the same seeds, at least two (one seed, a split run in the literature's form: no test):
    ``primary``, each approach with its paper's detector against ``reference`` with its paper's;
    ``knowns``, each approach trained on the knowns alone with its paper's detector against
    ``KNOWNS_ONLY_REFERENCE`` (softmax) with its paper's (none where that is the reference: the
    primary family compares them);
    ``approaches``, each approach against ``reference`` with the same detector, less the pairs of
    ``primary``; ``detectors``, each detector against max-softmax on the same network; ``log_area``,
    the pairs of ``primary`` (on the other area, :func:`tested_per_seed`)."""
    if family == LOG_AREA:
        family = "primary"
    by_key = {(r["approach"], r["detector"]): r for r in rows if rankable(r)}
    primary_reference = by_key.get((reference, papers_detector(reference)))
    pairs = []
    for row in rows:
        if not rankable(row):
            continue
        if family == "primary":
            if row["approach"] == reference or not in_primary_family(row["approach"], row["detector"]):
                continue
            base = primary_reference
        elif family == "knowns":
            if (reference == KNOWNS_ONLY_REFERENCE or row["approach"] in (KNOWNS_ONLY_REFERENCE, reference)
                    or saw_negatives(row)
                    or not in_primary_family(row["approach"], row["detector"])):
                continue
            base = by_key.get((KNOWNS_ONLY_REFERENCE, papers_detector(KNOWNS_ONLY_REFERENCE)))
        elif family == "approaches":
            if row["approach"] == reference:
                continue
            base = by_key.get((reference, row["detector"]))
            if base is not None and base is primary_reference and in_primary_family(row["approach"], row["detector"]):
                continue  # the same comparison is in the primary family
        else:
            if row["detector"] == REFERENCE_DETECTOR:
                continue
            base = by_key.get((row["approach"], REFERENCE_DETECTOR))
        if base is not None and base["seeds"] == row["seeds"] and len(row["seeds"]) > 1:  # one seed: no test
            pairs.append((row, base))
    return pairs


def row_replicates(row: Dict, replicates: Optional[Dict]) -> Optional[np.ndarray]:
    """(seeds, B) bootstrap replicates of the row's statistic (``replicates``: ``{(approach,
    detector): {seed: (B,) array}}``, e.g. the mean D_a OSCR), in the row's seed order; None where
    any seed lacks them."""
    if not replicates:
        return None
    by_seed = replicates.get((row["approach"], row["detector"]))
    if not by_seed or any(seed not in by_seed for seed in row["seeds"]):
        return None
    return np.stack([by_seed[seed] for seed in row["seeds"]])


def _finite(value: float) -> Optional[float]:
    return float(value) if np.isfinite(value) else None


def tested_per_seed(family: str) -> str:
    """The rows' field of per-seed values that ``family`` tests: the mean log-FPR area for
    :data:`LOG_AREA`, the mean linear area for the others."""
    return "mean_oscr_log_per_seed" if family == LOG_AREA else "mean_oscr_per_seed"


def compare_family(rows: List[Dict], family: str, replicates: Optional[Dict], reference: str) -> List[Dict]:
    """Each comparison of ``family`` on the per-seed mean D_a OSCR: the mean paired difference over
    seeds, its standard error (the seeds' spread and the paired bootstrap over the test
    samples where ``replicates`` hold the two rows'), its 95 % t interval and p, and the decision
    against :data:`MARGIN` (:func:`~agnostophobia.metrics.decide`: Holm within this family).
    ``reference``: the approach the approach families compare with
    (:func:`~agnostophobia.experiments.benchmark_rows.reference_approach`)."""
    per_seed = tested_per_seed(family)
    tests, differences = [], []
    for row, base in family_pairs(rows, family, reference):
        if row.get(per_seed) is None or base.get(per_seed) is None:
            continue  # a report written before the family was declared, or a set too small for the log axis
        mine, theirs = row_replicates(row, replicates), row_replicates(base, replicates)
        sample_se = resampled_se(mine, theirs) if mine is not None and theirs is not None else None
        difference = paired_difference(row[per_seed], base[per_seed], sample_se=sample_se)
        interval = difference.interval(1 - ALPHA)
        differences.append(difference)
        tests.append({"row": row["row"], "approach": row["approach"], "detector": row["detector"],
                      "against": base["row"], "family": family, "difference": difference.difference,
                      "interval": [_finite(interval.low), _finite(interval.high)], "se": difference.se,
                      "se_seeds": difference.se_seeds, "se_samples": sample_se, "p": _finite(difference.p_value),
                      "seeds": difference.n})
    for test, decision in zip(tests, decide(differences, MARGIN, ALPHA)):
        test["p_holm"] = decision.p_holm
        test["equivalence_interval"] = [_finite(decision.equivalence.low), _finite(decision.equivalence.high)]
        test["decision"] = decision.verdict
    return tests


def compare_families(rows: List[Dict], reference: str, replicates: SampleReplicates) -> Dict[str, List[Dict]]:
    """Every family of :data:`FAMILIES` (:func:`compare_family`), each with the replicates of the
    area it tests: the log-FPR area's for :data:`LOG_AREA`, the linear area's for the others."""
    return {family: compare_family(rows, family, replicates.log if family == LOG_AREA else replicates.linear,
                                   reference)
            for family in FAMILIES}


def family_resolution(tests: List[Dict], seeds: int) -> Optional[Dict]:
    """What a family of ``tests`` over ``seeds`` seeds resolves: its median standard error and the
    smallest observed difference called better or worse at it
    (:func:`~agnostophobia.metrics.smallest_resolved_difference`, Holm's strictest step over the
    family's size, at least :data:`MARGIN`); None for an empty family."""
    if not tests or seeds < 2:
        return None
    se = float(np.median([t["se"] for t in tests]))
    return {"tests": len(tests), "median_se": se,
            "smallest_resolved": smallest_resolved_difference(se, seeds, ALPHA, len(tests), MARGIN)}


def rows_beyond_margin(family_tests: Sequence[Dict]) -> List[str]:
    """The rows of one family's stored tests whose difference lies beyond :data:`MARGIN` by the
    minimum-effect test (:func:`~agnostophobia.metrics.beyond_margin`, Holm over the family at
    :data:`ALPHA`), read from each test's mean difference, standard error and seeds."""
    differences = [PairedDifference(t["difference"], t["se"], t["se_seeds"], t["se_samples"], t["seeds"] - 1,
                                    float("nan") if t["p"] is None else t["p"], t["seeds"]) for t in family_tests]
    return [t["row"] for t, beyond in zip(family_tests, beyond_margin(differences, MARGIN, ALPHA)) if beyond]


def mark(test: Optional[Dict], at_ceiling: Collection[str] = (), beyond: Collection[str] = ()) -> str:
    """A test's decision as the tables print it: better, worse, equivalent, not resolved (n seeds);
    "differs, below margin (n seeds)" for a not-resolved test whose Holm-adjusted p is below
    :data:`ALPHA` (:data:`BELOW_MARGIN`); "equivalent (at ceiling)" where both its rows are among ``at_ceiling``, the rows whose area sits
    at their closed-set accuracy (:func:`~agnostophobia.experiments.benchmark_rows.rows_at_ceiling`);
    "better (beyond margin)" or "worse (beyond margin)" where its row is among ``beyond``, its
    family's :func:`rows_beyond_margin`."""
    if test is None:
        return ""
    if test["decision"] == NOT_RESOLVED:
        below = test.get("p_holm") is not None and test["p_holm"] < ALPHA
        return f"{BELOW_MARGIN if below else NOT_RESOLVED} ({seeds_said(test['seeds'])})"
    if test["decision"] == EQUIVALENT and test["row"] in at_ceiling and test["against"] in at_ceiling:
        return f"{EQUIVALENT} {AT_CEILING}"
    if test["decision"] != EQUIVALENT and test["row"] in beyond:
        return f"{test['decision']} {BEYOND_MARGIN}"
    return test["decision"]


def marks(result: Dict) -> Dict[str, Dict[str, str]]:
    """Every test's :func:`mark` in a ``benchmark.json``'s ``result``, by family and row: the rows at
    their ceiling read from ``result``'s rows, those beyond the margin from each family's tests."""
    ceiling = rows_at_ceiling(result["rows"])
    return {family: _family_marks(tests, ceiling) for family, tests in result["tests"].items()}


def _family_marks(tests: Sequence[Dict], ceiling: Collection[str]) -> Dict[str, str]:
    # One minimum-effect pass per family: Holm reads the whole family, so it is computed once,
    # not once per test.
    beyond = rows_beyond_margin(tests)
    return {t["row"]: mark(t, ceiling, beyond) for t in tests}
