"""The ranking of a benchmark (:mod:`agnostophobia.experiments.benchmark`), read from validation
data only: the candidates for the ranking metric, the declared rule that chooses
among them (each candidate's separation of the converged approaches in seed half-widths), the rank
of the rows by the chosen metric, and the choices made on it (the best row, each approach's best
detector), each made only where the validation numbers single one row out."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from agnostophobia.experiments.benchmark_comparisons import (ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MARGIN,
                                                             row_replicates)
from agnostophobia.experiments.benchmark_rows import papers_rows, rankable, saw_negatives
from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES, check_ranking_metric  # noqa: F401
from agnostophobia.metrics import holm, paired_seed_test, resampled_se, seed_interval
# the test side's difference with the samples' share (this module's paired_difference is the recipe trials')
from agnostophobia.metrics import paired_difference as difference_with_samples

#: The metric ranked by where the rule cannot decide (fewer than two converged approaches): the paper's.
DEFAULT_RANKING_METRIC = "oscr"
#: The rule that chooses the ranking metric (after the 3-seed LeNet++ report showed the linear area
#: saturating): a metric that separates the converged methods by more than their seeds' noise. It reads
#: validation numbers only; :data:`RANKING_RULE_HISTORY` says when it was declared and amended.
RANKING_RULE = ("the candidate with the largest median separation, over every pair of converged approaches (each "
                "with its paper's detector, trained on every seed, and trained on the known classes only: the "
                "validation negatives are held-out images of the set the others trained on, on which they would "
                "be scored), of their mean validation values in units of "
                "the pair's mean 95 % t half-width over seeds; ties go to the earlier candidate (linear OSCR area, "
                "log-FPR OSCR area, AUROC, CCR at the lowest resolved FPR), and with fewer than two such approaches "
                "the linear OSCR area (the paper's)")

#: When the rule was declared and amended, as each report prints it (git log names the commits).
RANKING_RULE_HISTORY = ("declared 2026-11-29, after the 3-seed reports since withdrawn; amended 2026-12-01 and "
                        "2026-12-02 in which rows it reads, never in the metric it chose on a published run "
                        "(Comparing methods, \"Choosing the ranking metric\", says what each amendment changed)")


def rank_rows(rows: List[Dict], metric: str) -> List[Dict]:
    """Rows best first by the validation ``metric`` (mean over seeds), through ``compare``'s ranking
    (:func:`~agnostophobia.deploy.compare.rank`: ties to the higher validation AUROC, then the
    registry's order of approaches and the detector's name). The rows of networks trained on
    negatives (:func:`saw_negatives`) are ranked apart, after the others, their ranks counted
    among themselves, as OpenOOD separates the methods trained with outliers; the rows not ranked
    (not converged, incomplete) follow in the same order, without a rank. No test number is read.
    An order is not a choice: :func:`validation_choice` says where the numbers single a row out."""
    from agnostophobia.deploy.compare import rank

    ranked = [row for seen in (False, True)
              for row in rank([r for r in rows if rankable(r) and saw_negatives(r) == seen], None, by=metric)]
    others = rank([r for r in rows if not rankable(r)], None, by=metric)
    return [*ranked, *({**row, "rank": None} for row in others)]


def half_width(values: Sequence[float]) -> float:
    """The 95 % t interval's half-width over seeds (0 where the seeds agree)."""
    interval = seed_interval(values)
    return float(interval.high - interval.estimate)


def _separation(a: Tuple[float, float], b: Tuple[float, float]) -> float:
    """|mean a - mean b| in units of the two half-widths' mean; inf where both are 0 and the means
    differ, 0 where they agree."""
    difference, half = abs(a[0] - b[0]), (a[1] + b[1]) / 2
    return difference / half if half > 0 else (np.inf if difference > 0 else 0.0)


def rule_values(rows: List[Dict], metric: str, split: str) -> List[Tuple[Dict, List[float], List[float]]]:
    """The rows :data:`RANKING_RULE` reads, with their per-seed ``metric`` and closed-set accuracy on
    ``split`` (``"val"``; ``"test"``: the mean over the D_a test sets): ``(row, values, accuracy)``
    for each converged approach with its paper's detector, trained on the known classes only, that
    has the metric on two seeds or more."""
    read = []
    for row in papers_rows(rows):
        if not rankable(row) or saw_negatives(row):
            continue
        values = row["val"]["per_seed"].get(metric) if split == "val" else row["mean_da_per_seed"].get(metric)
        accuracy = row["accuracy_per_seed"][split]
        if values and None not in values and len(values) >= 2 and accuracy:
            read.append((row, values, accuracy))
    return read


def candidate_numbers(rows: List[Dict], split: str) -> List[Dict]:
    """For each of :data:`RANKING_CANDIDATES`, on ``split`` (``"val"``: the validation knowns and
    negatives; ``"test"``: the mean over the D_a test sets), over the converged approaches each
    with its paper's detector, trained on every seed and on the known classes only: its median gap
    to closed-set accuracy (accuracy minus the metric, means over seeds; near 0: the metric says
    little beyond accuracy), the spread of the approaches' means (largest minus smallest), the median 95 % t
    half-width over seeds, and the median separation of the approaches' means over every pair in
    units of the pair's mean half-width (:func:`_separation`): what :data:`RANKING_RULE` reads.
    A statistic is None where fewer than two approaches have it on every seed. The rows trained on
    negatives (:func:`saw_negatives`) are not read: the validation negatives come from the set
    they trained on, so there they would be scored on their training distribution."""
    out = []
    for metric, title in RANKING_CANDIDATES.items():
        means, gaps = {}, []
        for row, values, accuracy in rule_values(rows, metric, split):
            means[row["approach"]] = (float(np.mean(values)), half_width(values))
            gaps.append(float(np.mean(accuracy) - np.mean(values)))
        names = list(means)
        pairs = [_separation(means[a], means[b]) for i, a in enumerate(names) for b in names[i + 1:]]
        enough = len(names) >= 2
        out.append({"metric": metric, "title": title, "split": split, "approaches": len(names),
                    "median_gap": float(np.median(gaps)) if enough else None,
                    "spread": float(max(m for m, _ in means.values()) - min(m for m, _ in means.values()))
                    if enough else None,
                    "median_half_width": float(np.median([h for _, h in means.values()])) if enough else None,
                    "median_separation": float(np.median(pairs)) if enough else None})
    return out


#: How a run says a metric was declared with the flag (``ranking["declared_by"]``; a run written before
#: protocols declared theirs has no such key and was declared with the flag).
BY_FLAG = "--ranking-metric"


def declared_said(ranking: Dict) -> str:
    """How a report says where ``ranking``'s declared metric came from: ``with --ranking-metric`` or
    ``for the protocol NAME`` (its registration, :attr:`~agnostophobia.data.protocol_types.ProtocolSpec.ranking_metric`)."""
    by = ranking.get("declared_by", BY_FLAG)
    return f"with {by}" if by == BY_FLAG else f"for the protocol {by}"


def ranking_metric(rows: List[Dict], declared: Optional[str] = None, declared_by: str = BY_FLAG) -> Dict:
    """The metric rows are ranked by, chosen by :data:`RANKING_RULE` from the validation numbers of
    :func:`candidate_numbers` (the test's are computed beside them, shown, never read by the rule):
    ``{"chosen", "title", "rule", "why", "declared", "declared_by", "candidates": {"val": [...], "test": [...]}}``.
    ``declared``: a candidate fixed before the run, which ranks in the rule's place (the candidates are
    still shown); ``declared_by``: :data:`BY_FLAG` (``benchmark --ranking-metric``, as a
    pre-registration fixes one) or the name of the protocol that declares it."""
    candidates = {split: candidate_numbers(rows, split) for split in ("val", "test")}
    if declared is not None:
        check_ranking_metric(declared)
        flag = f" {declared}" if declared_by == BY_FLAG else f" ({BY_FLAG} overrides it)"
        said = declared_said({"declared_by": declared_by})
        return {"chosen": declared, "title": RANKING_CANDIDATES[declared], "rule": RANKING_RULE, "declared": True,
                "declared_by": declared_by,
                "why": f"declared {said}{flag} before the report was written, so the rule is not read",
                "split": "val", "candidates": candidates}
    best = largest_separation(candidates["val"])
    if best is not None:
        chosen = best["metric"]
        why = (f"the largest median separation on validation data: {best['median_separation']:.2f} half-widths "
               f"over {best['approaches']} converged approaches")
    else:
        chosen = DEFAULT_RANKING_METRIC
        why = ("fewer than two converged approaches trained on every seed on the known classes only (the rule "
               "does not read the rows trained on negatives): the paper's linear OSCR area")
    return {"chosen": chosen, "title": RANKING_CANDIDATES[chosen], "rule": RANKING_RULE, "why": why,
            "declared": False, "split": "val", "candidates": candidates}



def largest_separation(candidates: Sequence[Dict]) -> Optional[Dict]:
    """The candidate :data:`RANKING_RULE` chooses from ``candidates`` (each with a ``median_separation``,
    None where it could not be read): the largest, the earlier of equal ones; None where none was read."""
    decidable = [c for c in candidates if c["median_separation"] is not None]
    return max(decidable, key=lambda c: c["median_separation"]) if decidable else None  # max keeps the first


def pooled_candidates(runs: Sequence[List[Dict]]) -> List[Dict]:
    """Each of :data:`RANKING_CANDIDATES` on the validation numbers of several runs of one protocol
    (each run's ``benchmark.json`` rows), pooled: every pair of converged approaches trained on the
    known classes only, each with its paper's detector on every seed, within one run, in units of
    the pair's mean 95 % t half-width (:func:`_separation`), the rows :data:`RANKING_RULE` reads
    (the rows trained on negatives are scored there on held-out images of their own training set,
    near their ceiling, where tiny half-widths would inflate any separation). A pair of networks that
    two runs share (a part that reads the same networks again) counts once.

    Returns:
        Per candidate ``{"metric", "title", "pairs", "median_separation", "median_gap"}``: the
        number of pairs, their median separation and the median over the approaches read of
        validation accuracy minus the metric (means over seeds); None where no pair was read.
    """
    separations: Dict[str, List[float]] = {metric: [] for metric in RANKING_CANDIDATES}
    gaps: Dict[str, Dict[Tuple, float]] = {metric: {} for metric in RANKING_CANDIDATES}
    counted = set()
    for rows in runs:
        for metric in RANKING_CANDIDATES:
            means = {}
            for row, values, accuracy in rule_values(rows, metric, "val"):
                networks = (row["approach"], tuple(values))  # the same networks read again give the same values
                means[networks] = (float(np.mean(values)), half_width(values))
                gaps[metric][networks] = float(np.mean(accuracy) - np.mean(values))
            names = sorted(means)
            for i, first in enumerate(names):
                for second in names[i + 1:]:
                    if (metric, first, second) not in counted:
                        counted.add((metric, first, second))
                        separations[metric].append(_separation(means[first], means[second]))
    return [{"metric": metric, "title": title, "pairs": len(separations[metric]),
             "median_separation": float(np.median(separations[metric])) if separations[metric] else None,
             "median_gap": float(np.median(list(gaps[metric].values()))) if separations[metric] else None}
            for metric, title in RANKING_CANDIDATES.items()]


#: Below this, a difference of means is the margin itself, not short of it (floating-point rounding).
_ROUNDING = 1e-12
def reaches_margin(difference: float) -> bool:
    """Whether a mean difference reaches :data:`MARGIN`, a difference at the margin but for
    floating-point rounding included."""
    return difference >= MARGIN - _ROUNDING


#: How the reports say that one row beats another on validation (:func:`beaten_in_group`).
BEATS_SAID = (f"by the margin ({MARGIN}) or more, and by a paired t-test over seeds whose p, Holm-adjusted over "
              f"every pair of the rows compared, is below {ALPHA}")


def validation_choice(ranked: List[Dict], metric: str) -> Tuple[Optional[Dict], List[Dict]]:
    """The row a choice on validation data picks from ``ranked`` (rows best first by the mean
    validation ``metric``, :func:`rank_rows`), and the rows tied for it. The first row is chosen only
    where it beats every other (:func:`beaten_in_group`, :data:`BEATS_SAID`): ``(row, [row])``. Else the numbers do not single a row out, whatever the
    tie-break order says: ``(None, tied)``, the first row and those it does not beat. ``(None, [])``
    where nothing is ranked or the first row has no value."""
    if not ranked or _per_seed(ranked[0], metric) is None:
        return None, []
    beaten = beaten_in_group(ranked, metric)
    tied = [ranked[0], *(row for j, row in enumerate(ranked) if j and (0, j) not in beaten)]
    return (ranked[0] if len(tied) == 1 else None), tied


def ranked_group(rows: List[Dict], negatives: bool) -> List[Dict]:
    """The ranked rows of one group ranked apart (trained on negatives, :func:`saw_negatives`, or not), in
    ``rows``' order."""
    return [row for row in rows if row["rank"] is not None and saw_negatives(row) == negatives]


def resolved_ranks(ranked: List[Dict], metric: str) -> List[Optional[Tuple[int, int]]]:
    """Per row of ``ranked`` (:func:`rank_rows`' order): the ranks its validation numbers allow it,
    ``(best, worst)``: one more than the rows of its group (ranked apart: :func:`saw_negatives`) that
    beat it, and the group's size less the rows it beats, each pair read simultaneously over the
    group (:func:`beaten_in_group`); None for a row not ranked. Where the two differ, validation does
    not place the row (a review found a table ordering 65 rows by validation means that validation
    did not resolve read as a finding, that a lone lower bound put noisy rows first, and that
    unadjusted intervals over thousands of pairs made the ranges too narrow). A run of one seed
    resolves nothing: each row may rank anywhere in its group."""
    out: Dict[int, Tuple[int, int]] = {}
    for negatives in (False, True):
        group = ranked_group(ranked, negatives)
        beaten = beaten_in_group(group, metric)
        for i, row in enumerate(group):
            beaten_by = sum((j, i) in beaten for j in range(len(group)))
            out[id(row)] = (1 + beaten_by, len(group) - sum((i, j) in beaten for j in range(len(group))))
    return [out.get(id(row)) for row in ranked]


def beaten_in_group(group: List[Dict], metric: str) -> Set[Tuple[int, int]]:
    """The ordered pairs ``(i, j)`` of ``group`` where row i beats row j on the validation ``metric``,
    read simultaneously over the group (:func:`group_tests`): a mean paired difference of at least
    :data:`MARGIN` and a Holm-adjusted p below :data:`ALPHA`. A row without the value is beaten by
    every row with it. Each pair's standard error adds the validation samples' share where the run
    stored it (:func:`with_validation_se`), else the seeds' noise alone."""
    values = [_per_seed(row, metric) for row in group]
    beaten = {(i, j) for i, mine in enumerate(values) for j, theirs in enumerate(values)
              if mine is not None and theirs is None}
    return beaten | {(i, j) for i, j, difference, p_holm in group_tests(group, metric)
                     if reaches_margin(difference) and p_holm < ALPHA}


def group_tests(group: List[Dict], metric: str) -> List[Tuple[int, int, float, float]]:
    """Every pair of ``group`` with two shared seeds or more on the validation ``metric``, as
    ``(i, j, difference, p_holm)``: row i the one ahead, ``difference`` the mean of i - j over the
    shared seeds, ``p_holm`` its two-sided p Holm-adjusted over the group's pairs
    (:func:`~agnostophobia.metrics.holm`). The p is the test side's
    (:func:`~agnostophobia.metrics.paired_difference`: the seeds' spread and the validation samples'
    share, :func:`validation_se`, in quadrature) where the run stored that share for the pair, so that
    two detectors on one network, which move together over seeds, are not resolved by the seeds'
    tiny spread alone; else the paired t-test over seeds (:func:`~agnostophobia.metrics.paired_seed_test`,
    the published runs' ranks, which stored none). A difference without any noise, to floating-point
    rounding, is no evidence and counts as p = 1."""
    values = [_per_seed(row, metric) for row in group]
    pairs, p_values = [], []
    for i, mine in enumerate(values):
        for j in range(i + 1, len(values)):
            shared = [seed for seed in (mine or {}) if seed in (values[j] or {})]
            if len(shared) < 2:
                continue
            first, second = [mine[seed] for seed in shared], [values[j][seed] for seed in shared]
            sample_se = validation_se(group[i], group[j], metric)
            test = (paired_seed_test(first, second) if sample_se is None else
                    difference_with_samples(first, second, sample_se=sample_se))
            pairs.append((i, j, test.difference) if test.difference >= 0 else (j, i, -test.difference))
            p_values.append(1.0 if np.isnan(test.p_value) else test.p_value)
    return [(*pair, float(p)) for pair, p in zip(pairs, holm(p_values) if p_values else [])]


#: The key of a row of ``benchmark.json`` holding the validation samples' share of its pairs' standard
#: errors (:func:`with_validation_se`): ``{metric: {later row of its group: se}}``.
VAL_SE_SAMPLES = "val_se_samples"


def with_validation_se(rows: List[Dict], metric: str, replicates: Optional[Dict]) -> List[Dict]:
    """``rows`` (ranked, :func:`rank_rows`) with, on each ranked row that has the validation bootstrap
    of ``metric`` on every seed (``replicates``: the ``val`` of
    :class:`~agnostophobia.experiments.benchmark_comparisons.SampleReplicates`), the validation
    samples' share of the standard error of its mean paired difference with every later row of its
    group on the same seeds (:func:`~agnostophobia.metrics.resampled_se`, as the test side's), under
    :data:`VAL_SE_SAMPLES`. One number a pair, stored once, is what lets the ranks be derived again
    from ``benchmark.json`` alone (the replicates, rows × seeds × resamples, are not kept); rows
    unchanged where ``replicates`` lack the metric."""
    by_row = (replicates or {}).get(metric)
    if not by_row:
        return rows
    stored: Dict[str, Dict] = {}
    for negatives in (False, True):
        group = ranked_group(rows, negatives)
        stacked = [row_replicates(row, by_row) for row in group]
        for i, (row, mine) in enumerate(zip(group, stacked)):
            if mine is not None:
                stored[row["row"]] = {metric: {other["row"]: resampled_se(mine, theirs)
                                               for other, theirs in zip(group[i + 1:], stacked[i + 1:])
                                               if theirs is not None and other["seeds"] == row["seeds"]}}
    return [{**row, VAL_SE_SAMPLES: stored[row["row"]]} if row["row"] in stored else row for row in rows]


def validation_se(first: Dict, second: Dict, metric: str) -> Optional[float]:
    """The validation samples' share of the standard error of ``first`` - ``second`` on ``metric``, as
    :func:`with_validation_se` stored it on either row; None where the run stored none for the pair."""
    for mine, theirs in ((first, second), (second, first)):
        value = mine.get(VAL_SE_SAMPLES, {}).get(metric, {}).get(theirs["row"])
        if value is not None:
            return float(value)
    return None


def validation_bootstrap(rows: List[Dict], metric: str) -> Optional[Dict]:
    """What ``benchmark.json`` says of the validation bootstrap its ranks read (``val_bootstrap``): its
    resamples, seed and metric where a row stored the share (:func:`with_validation_se`), else None."""
    if not any(metric in row.get(VAL_SE_SAMPLES, {}) for row in rows):
        return None
    return {"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "metric": metric}


def rank_noise_said(result: Dict) -> str:
    """What a report says of the noise its ranks read: the seeds' spread and the validation samples'
    share where the run stored the validation bootstrap (``val_bootstrap``), else that the seeds'
    spread alone was read and why (the published runs stored none), computed from ``result``."""
    bootstrap = result.get("val_bootstrap")
    if not bootstrap:
        return ("ranks read the seeds' spread alone: this run stored no validation bootstrap, so the noise of "
                "the validation samples, which every seed shares, is left out")
    return (f"each pair's standard error adds the validation samples' share, from a paired bootstrap over them "
            f"({bootstrap['resamples']} resamples, the same for every row and seed), to the seeds' spread in "
            f"quadrature, as the tests do")


def paired_difference(mine: Dict[int, float], theirs: Dict[int, float]):
    """The mean of ``mine - theirs`` (``{seed: value}``) over the seeds both have, with its 95 % t
    interval (:func:`~agnostophobia.metrics.seed_interval`); None with fewer than two shared seeds."""
    shared = [seed for seed in mine if seed in theirs]
    return seed_interval([mine[seed] - theirs[seed] for seed in shared]) if len(shared) >= 2 else None


def clears_margin(difference) -> bool:
    """The rule of the CIFAR recipe trials (``benchmarks/recipe_curve.py``) for undoing a choice, on a
    :func:`paired_difference`: a mean of at least :data:`MARGIN` and a 95 % t interval above 0 (None,
    fewer than two shared seeds, clears nothing)."""
    return difference is not None and reaches_margin(difference.estimate) and difference.low > 0


def _per_seed(row: Dict, metric: str) -> Optional[Dict[int, float]]:
    """``{seed: value}`` of the row's validation ``metric``; None where it has none."""
    values = row["val"].get("per_seed", {}).get(metric)
    if not values or any(v is None for v in values):
        return None
    return dict(zip(row["seeds"], values))


def tied_with_the_row_above(ranked: List[Dict], metric: str) -> List[bool]:
    """Per row of ``ranked`` (best first): whether its mean validation ``metric`` equals the row above's
    in its group (:func:`saw_negatives`), so that a tie-break, not the metric, decided its rank
    (``compare``'s :func:`~agnostophobia.deploy.compare.ties_with_row_above`, on the key (group,
    value); an unranked row or one without the value ties with nothing)."""
    from agnostophobia.deploy.compare import ties_with_row_above

    return ties_with_row_above([(saw_negatives(row), row["val"][metric])
                                if row["rank"] is not None and row["val"].get(metric) is not None else None
                                for row in ranked])


def best_detectors(rows: List[Dict], metric: str) -> Dict[str, Optional[str]]:
    """``{approach: detector}`` for every approach with a ranked row: its best detector, the
    :func:`validation_choice` among its ranked rows on the validation ``metric``, or None where
    its first detector does not beat every other (tied: none is chosen). An approach
    without a ranked row (not converged, incomplete) is absent."""
    by_approach: Dict[str, List[Dict]] = {}
    for row in sorted((r for r in rows if r["rank"] is not None), key=lambda r: (saw_negatives(r), r["rank"])):
        by_approach.setdefault(row["approach"], []).append(row)
    return {approach: (chosen["detector"] if chosen else None)
            for approach, ranked in by_approach.items() for chosen in [validation_choice(ranked, metric)[0]]}
