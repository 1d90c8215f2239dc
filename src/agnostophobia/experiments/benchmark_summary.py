"""What a benchmark's report says in words (:mod:`agnostophobia.experiments.benchmark_report`'s
paragraph "What the data says"), computed from ``benchmark.json``'s numbers alone: the best row
where validation singles one out (else the rows tied for it), how far validation's order agrees with
test's, what each family of tests decided, the smallest difference it resolves and what it decides
at other margins, where the linear OSCR area sits at its ceiling, which rows score below chance,
which networks did not converge (and which converged with single seeds below the threshold) and
where ties decide."""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
from scipy import stats

from agnostophobia.experiments.benchmark_comparisons import (ALPHA, AT_CEILING, BELOW_MARGIN, BEYOND_MARGIN, MARGIN,
                                                             marks, present_families)
from agnostophobia.experiments.benchmark_ranking import BEATS_SAID, declared_said, ranked_group, validation_choice
from agnostophobia.experiments.benchmark_rows import (CEILING_GAP, convergence_said, interval_over_seeds, is_at_ceiling,
                                                      papers_rows, seeds_said)
from agnostophobia.metrics import BETTER, EQUIVALENT, NOT_RESOLVED, TIE_FLAG, WORSE, PairedDifference, decide

#: The margins each family is decided at again, beside the declared one (:data:`MARGIN`): half, twice
#: and four times it, so that a reader sees how much of a page's verdicts the margin's choice carries.
MARGINS_AGAIN = (MARGIN / 2, MARGIN, 2 * MARGIN, 4 * MARGIN)


def _resolution_said(resolution: Dict) -> str:
    smallest = resolution["smallest_resolved"]
    said = f"With its median standard error ({resolution['median_se']:.4f}) it resolves differences from "
    if smallest >= 1:  # an area difference lies in [-1, 1]
        return said + f"{smallest:.2f} up: none of areas in [0, 1]; more seeds are needed."
    return said + f"{smallest:.4f} up."


def _decisions_said(result: Dict) -> List[str]:
    """One sentence per family of tests: what was decided, and the smallest difference it resolves."""
    lines = []
    seeds = result["seeds"]
    for family in present_families(result):  # as the run named them (its reference approach), in the declared order
        said = result["families"][family]
        kind, compares, tests = said["kind"], said["compares"], result["tests"][family]
        kind = kind[:1].upper() + kind[1:]  # not str.capitalize, which would lower "FPR"
        if not tests:
            lines.append(f"{kind} family, {compares}: nothing to test (no pair of converged rows on "
                         f"two seeds or more: an approach it compares is not in this run, not converged, or on "
                         f"one seed).")
            continue
        named = {verdict: [t["row"] for t in tests if t["decision"] == verdict] for verdict in (BETTER, WORSE)}
        counts = {verdict: sum(t["decision"] == verdict for t in tests) for verdict in (EQUIVALENT, NOT_RESOLVED)}
        resolution = result["families"][family]["resolution"]
        # non-zero after Holm but below the margin, and not shown inside it: said apart, since "not resolved"
        # alone reads as "more seeds would decide", where the margin is what keeps them from a verdict
        small = [t["row"] for t in tests if t["decision"] == NOT_RESOLVED and t["p_holm"] < ALPHA]
        lines.append(f"{kind} family, {compares}: {len(tests)} test{'s' if len(tests) != 1 else ''}, "
                     f"Holm's correction within this family at {ALPHA}, margin {MARGIN}: {len(named[BETTER])} better "
                     f"({', '.join(named[BETTER]) or 'none'}), {len(named[WORSE])} worse "
                     f"({', '.join(named[WORSE]) or 'none'}), {counts[EQUIVALENT]} equivalent (within "
                     f"±{MARGIN}, each pair at {ALPHA}, not adjusted), {counts[NOT_RESOLVED]} not resolved at "
                     f"{seeds} seeds"
                     + (f" ({len(small)} of them {'differs' if len(small) == 1 else 'differ'} from 0 after Holm's "
                        f"correction by less than the margin, without being shown within it: {', '.join(small)})"
                        if small else "")
                     + ". " + _resolution_said(resolution))
    lines += _margins_said(result)
    if any(result["tests"].values()):
        bootstrap = result.get("sample_bootstrap")
        lines.append(f"Standard errors: the seeds' spread of each paired difference and a paired bootstrap over the "
                     f"shared test samples ({bootstrap['resamples']} resamples), added in quadrature." if bootstrap else
                     "Standard errors: the seeds' spread alone (no per-sample scores were read for the bootstrap "
                     "over the test samples), so a difference that barely moves between seeds may be called resolved.")
    return lines


def what_the_data_says(result: Dict) -> List[str]:
    """A few sentences from the numbers: the best row, what the tests decided, what was not
    converged, where ties decide."""
    rows = result["rows"]
    lines = []
    ranking = result["ranking"]
    for seen in (False, True):
        ranked = ranked_group(rows, seen)
        if ranked:
            lines.append(_best_said(ranked, ranking, _group_said(ranked) if seen else ""))
    lines += _separation_said(ranking) + _agreement_said(result)
    lines += _decisions_said(result)
    lines += _ceiling_said(result) + _below_chance_said(result)
    loose = sorted({r["approach"] for r in rows if r["converged"] is False})
    if loose:
        per_seed = {r["approach"]: r.get("accuracy_per_seed", {}).get("val") for r in rows}
        acc = ", ".join(_accuracy_said(result["accuracy"].get(a), a, per_seed.get(a)) for a in loose)
        rule = (f"closed-set accuracy on the validation knowns below {result['min_accuracy']}"
                if result.get("accuracy_margin") is None else
                f"by the rule: {convergence_said(result['min_accuracy'], result['accuracy_margin'])}")
        lines.append(f"Not converged ({rule}), so neither ranked nor tested: {acc}.")
    lines += _seeds_below_said(result)
    if not loose and result["min_accuracy"] is None:
        lines.append("No convergence threshold is declared for this protocol (--min-accuracy): every row is ranked, "
                     "whatever its closed-set accuracy.")
    partial = {r["approach"]: len(r["seeds"]) for r in rows if not r["complete"]}
    if partial:
        lines.append(f"Trained on fewer seeds than the run's {result['seeds']} (the rest still to train), so neither "
                     f"ranked nor tested: " + ", ".join(f"{a} ({n} of {result['seeds']})" for a, n in partial.items())
                     + ".")
    tied = sorted({r["row"] for r in rows for cell in r["test"].values() if cell["tied_share"] > TIE_FLAG})
    if tied:
        lines.append(f"More than {TIE_FLAG:.0%} of the samples tie across the kinds (known and unknown) in: "
                     f"{', '.join(tied)} (marked †).")
    return lines


def stored_differences(tests: List[Dict]) -> List[PairedDifference]:
    """A family's differences as ``benchmark.json`` stores them (:func:`~agnostophobia.experiments.
    benchmark_comparisons.compare_family`'s fields), to decide them again at another margin."""
    def finite(value: Optional[float]) -> float:
        return float("nan") if value is None else float(value)
    return [PairedDifference(t["difference"], t["se"], t["se_seeds"], t["se_samples"] or 0.0, t["seeds"] - 1,
                             finite(t["p"]), t["seeds"]) for t in tests]


def verdicts_at(tests: List[Dict], margin: float) -> Dict[str, int]:
    """How many of a family's ``tests`` are better or worse, equivalent and not resolved at ``margin``
    (:func:`~agnostophobia.metrics.decide`, Holm within the family as the run decided them)."""
    verdicts = [d.verdict for d in decide(stored_differences(tests), margin, ALPHA)]
    return {"resolved": sum(v in (BETTER, WORSE) for v in verdicts), EQUIVALENT: verdicts.count(EQUIVALENT),
            NOT_RESOLVED: verdicts.count(NOT_RESOLVED)}


def _margins_said(result: Dict) -> List[str]:
    """Each family's verdicts at :data:`MARGINS_AGAIN`: how much of the page the margin's choice carries."""
    decided = {family: [verdicts_at(result["tests"][family], margin) for margin in MARGINS_AGAIN]
               for family in present_families(result) if result["tests"][family]}
    if not decided:
        return []
    margins = ", ".join(f"{m:g}" + (" (declared)" if m == MARGIN else "") for m in MARGINS_AGAIN)
    families = "; ".join(f"{result['families'][family]['kind']} "
                         + ", ".join(f"{c['resolved']}/{c[EQUIVALENT]}/{c[NOT_RESOLVED]}" for c in counts)
                         for family, counts in decided.items())
    return [f"The margin's weight: decided again at margins {margins}, each family calls (better or worse / "
            f"equivalent / not resolved; Holm's p do not depend on the margin): {families}."]


class Agreement(NamedTuple):
    """Validation's order of one group of ranked rows against test's (:func:`validation_test_agreement`)."""

    negatives: bool  # the group trained on negatives (else on the knowns only)
    rows: int  # how many ranked rows the group holds
    rho: float  # Spearman's rank correlation of their validation and test values
    first: str  # the group's first row on validation
    place: int  # where that row ranks on test, 1 the best


def validation_test_agreement(result: Dict) -> List[Agreement]:
    """How far validation's order of the ranked rows agrees with test's on the ranking metric (Spearman's
    rank correlation; test: the mean over seeds of the mean over the D_a sets the tests read), within
    each group the page ranks apart (trained on the knowns only, on negatives): pooled, the gap between
    the groups would make most of it. A group of fewer than 3 rows, or without spread, has none."""
    metric = result["ranking"]["chosen"]
    agreements = []
    for seen in (False, True):
        # in the page's order: its first row is the group's rank 1
        rows = [r for r in ranked_group(result["rows"], seen) if r["val"].get(metric) is not None]
        val = np.array([r["val"][metric] for r in rows])
        test = np.array([float(np.mean(r["mean_da_per_seed"][metric])) for r in rows])
        if len(rows) < 3 or np.ptp(val) == 0 or np.ptp(test) == 0:
            continue
        agreements.append(Agreement(seen, len(rows), float(stats.spearmanr(val, test).statistic),
                                    rows[0]["row"], int(np.sum(test > test[0])) + 1))
    return agreements


def _agreement_said(result: Dict) -> List[str]:
    """:func:`validation_test_agreement` in words, and where each group's first row stands on test: the
    ranks and bold marks are validation's choices, and this says how far they carry to the test sets'
    unknowns, which validation does not hold."""
    said = []
    for a in validation_test_agreement(result):
        ranked = ranked_group(result["rows"], a.negatives)
        group = _group_said(ranked) if a.negatives else " trained on the knowns only"
        said.append(f"{a.rows} rows{group}: {a.rho:.2f}, their first ({a.first}) {a.place} of {a.rows} on test")
    if not said:
        return []
    near = "near " if result.get("far_sets") else ""
    return [f"Validation's order against test's, by Spearman's rank correlation on the {result['ranking']['title']} "
            f"within each group ranked apart (validation: held-out knowns and negatives; test: the mean over the "
            f"{near}D_a sets the tests read), and where the group's first row ranks on test: {'; '.join(said)}. "
            f"The ranks and bold marks on this page are validation's choices; this says how far they carry to the "
            f"test sets' unknowns."]


def _seeds_below_said(result: Dict) -> List[str]:
    """Approaches converged by the rule (the mean validation accuracy over seeds at least the threshold)
    with single seeds below it: how many of their seeds reach it, and the lowest, so that a reader who
    asks it of every seed can mark them."""
    threshold, said = result["min_accuracy"], {}
    for r in result["rows"]:
        per_seed = r.get("accuracy_per_seed", {}).get("val")
        if threshold is None or r["converged"] is not True or not per_seed or r["approach"] in said:
            continue
        reach = sum(a >= threshold for a in per_seed)
        if reach < len(per_seed):
            said[r["approach"]] = f"{r['approach']} {reach} of {len(per_seed)} (lowest {min(per_seed):.4f})"
    if not said:
        return []
    rule = (f"the mean closed-set accuracy over seeds on the validation knowns at least {threshold}"
            if result.get("accuracy_margin") is None else convergence_said(threshold, result["accuracy_margin"]))
    below = "it" if result.get("accuracy_margin") is None else str(threshold)
    return [f"Converged by the rule ({rule}), with single seeds below {below}; seeds at or above it: "
            f"{', '.join(said.values())}."]


def _group_said(ranked: List[Dict]) -> str:
    """How the best-row sentence names the rows of networks trained on negatives."""
    return " with extra data" if all(r.get("extra_data") for r in ranked) else " trained on negatives"


def _best_said(ranked: List[Dict], ranking: Dict, among: str) -> str:
    """The best of ``ranked`` (one group's ranked rows, best first) where the validation numbers single
    it out (:func:`~agnostophobia.experiments.benchmark_ranking.validation_choice`); else the rows tied
    for it, named, and that none is chosen."""
    metric, title = ranking["chosen"], ranking["title"]
    title += " (the ranking metric, " + (f"declared {declared_said(ranking)})" if ranking.get("declared") else
                                         "chosen on validation data)")
    chosen, tied = validation_choice(ranked, metric)
    top = ranked[0]
    if chosen is not None or not tied:
        value = top["val"].get(metric)
        lead = f", ahead of every other {BEATS_SAID}" if chosen is not None and len(ranked) > 1 else ""
        return (f"Best{among} by validation {title}: {top['row']} "
                f"({number(value)} on validation; its test mean D_a OSCR {np.mean(top['mean_oscr_per_seed']):.3f} "
                f"over {seeds_said(len(top['seeds']))}), of {len(ranked)} ranked rows{among}{lead}.")
    names = [r["row"] for r in tied[1:]]  # tied[0] is the first row itself
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"No best row{among} by validation {title}: the first, "
            f"{top['row']} ({number(top['val'].get(metric))} on validation), does not beat {len(names)} of the other "
            f"{len(ranked) - 1} ranked rows{among} {BEATS_SAID}; tied with it: {listed}. The validation data do not "
            f"single one out, and their order is the mean's or the tie-break's, not a finding.")


def _separation_said(ranking: Dict) -> List[str]:
    """How far the chosen ranking metric separates the converged approaches it reads (median over
    pairs of their mean difference in 95 % t half-widths over seeds, on validation), beside the best
    row; below one half-width, that the ranking then orders them within seed noise."""
    chosen = next((c for c in ranking.get("candidates", {}).get("val", []) if c["metric"] == ranking["chosen"]), None)
    if chosen is None or chosen["median_separation"] is None:
        return []
    separation = chosen["median_separation"]
    said = (f"The chosen metric separates the {chosen['approaches']} converged approaches it reads by a median "
            f"{separation:.2f} half-widths of their 95 % intervals over seeds, on validation")
    if separation >= 1:
        return [said + "."]
    return [f"No candidate metric separates the {chosen['approaches']} converged approaches it reads by more than "
            f"their seeds' noise: the chosen one by a median {separation:.2f} half-widths of their 95 % intervals. "
            f"Their ranks are an order within that noise, not a finding."]


def at_ceiling(result: Dict) -> Tuple[List[str], List[Dict]]:
    """The converged approaches whose mean D_a OSCR with their paper's detector lies within
    :data:`CEILING_GAP` of their closed-set accuracy, and the converged rows with their papers'
    detectors they were picked from."""
    rows = [r for r in papers_rows(result["rows"]) if r["converged"] is not False and r["mean_oscr_per_seed"]]
    return [r["approach"] for r in rows if is_at_ceiling(r)], rows


def _ceiling_said(result: Dict) -> List[str]:
    """Where the linear OSCR area, which the tests and their margin read, sits at its ceiling (the
    closed-set accuracy) for two or more converged approaches with their paper's detector: between
    those, "equivalent" compares accuracies, and the low-FPR columns are where they differ."""
    capped, rows = at_ceiling(result)
    if len(capped) < 2:
        return []
    # the low-FPR metrics of the same rows: their largest gap to the accuracy says whether they can differ there
    gaps = {metric: max(r["closed_set_accuracy"]["mean"] - float(np.mean(r["mean_da_per_seed"][metric]))
                        for r in rows if r["approach"] in capped) for metric in ("oscr_log", "ccr_at_lowest_fpr")}
    low_end = (f"their low-FPR end is at it too: the log-FPR area lies within {gaps['oscr_log']:.4f} and CCR at the "
               f"lowest FPR each set resolves within {gaps['ccr_at_lowest_fpr']:.4f} of the accuracy, less than the "
               f"margin, so down to that FPR these networks reject the D_a unknowns before they misclassify a known, "
               f"and this protocol's D_a sets do not rank them" if max(gaps.values()) < MARGIN else
               f"the log-FPR area (up to {gaps['oscr_log']:.3f} below the accuracy) and CCR at the lowest resolved "
               f"FPR (up to {gaps['ccr_at_lowest_fpr']:.3f} below) read the low-FPR end, where they differ")
    return [f"At the ceiling: the mean D_a OSCR of {len(capped)} of the {len(rows)} converged approaches with their "
            f"paper's detector is within {CEILING_GAP} of their closed-set accuracy ({', '.join(capped)}). Between "
            f"them the linear area, which the tests and their margin read, compares closed-set accuracy: "
            f"*equivalent* there says the accuracies are within ±{MARGIN}, not that they reject the unknowns alike; "
            f"{low_end}."]


def _below_chance_said(result: Dict) -> List[str]:
    """The converged rows whose mean D_a OSCR lies under half their closed-set accuracy with its whole
    95 % t interval over seeds: a score that ignored the unknowns would lie at half (CCR = accuracy x
    FPR), so theirs puts the unknowns above the knowns; a test against such a row says the detector
    fails on that network. A row of one seed has no interval and is not named."""
    below, crossing = [], []
    for r in result["rows"]:
        values = r["mean_oscr_per_seed"]
        if r["converged"] is False or not values or len(values) < 2:
            continue
        interval = interval_over_seeds(values)
        if interval is None:
            continue
        half = 0.5 * r["closed_set_accuracy"]["mean"]
        if interval["high"] < half:
            below.append((r["row"], interval))
        elif interval["mean"] < half:
            crossing.append(r["row"])
    if not below and not crossing:
        return []
    named = f"{', '.join(crossing[:5])}{f' and {len(crossing) - 5} more' if len(crossing) > 5 else ''}."
    against = [t["row"] for tests in result["tests"].values() for t in tests
               if t["against"] in crossing and t["decision"] in (BETTER, WORSE)]
    if against:  # a verdict against a reference at chance says more of that reference than of the row
        named += (f" A *better* or *worse* against {'it' if len(crossing) == 1 else 'one of them'} reads a reference "
                  f"whose mean lies at or below chance: {', '.join(against)}.")
    if not below:  # none wholly below: the rows whose mean is, named all the same (a test against them reads it)
        return [f"Below chance, among the converged rows (the mean D_a OSCR under half the closed-set accuracy, where "
                f"a score blind to the unknowns lies): none with its whole 95 % interval over seeds; "
                f"{len(crossing)} with {'its' if len(crossing) == 1 else 'their'} mean: {named}"]
    more = (f" {len(crossing)} more converged {'row has' if len(crossing) == 1 else 'rows have'} a mean under it and "
            f"an interval that reaches above it: {named}" if crossing else "")
    return ["Below chance, among the converged rows (the mean D_a OSCR and its whole 95 % interval over seeds "
            "under half the closed-set accuracy, where a score blind to the unknowns lies, so the score puts the "
            "unknowns above the knowns): "
            + ", ".join(f"{row} {interval['mean']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"
                        for row, interval in below)
            + ". A *better* or *worse* against one of these says that detector fails on that network." + more]


def number(value: Optional[float], digits: int = 3) -> str:
    """``value`` to ``digits`` decimals; ``N/A`` for None."""
    return "N/A" if value is None else f"{value:.{digits}f}"


def _accuracy_said(accuracy: Optional[Dict], approach: str, per_seed: Optional[List[float]] = None) -> str:
    """``approach 0.983 (seeds 0.975-0.985; test 0.981)``: the validation accuracy convergence was judged
    on, its range over seeds (one seed far below the others is a collapse, not slow training), and the test's."""
    if not accuracy or not accuracy.get("val"):
        return f"{approach} (no validation accuracy)"
    test = accuracy.get("test")
    low, high = (f"{min(per_seed):.3f}", f"{max(per_seed):.3f}") if per_seed else ("", "")
    said = [f"seeds {low}-{high}"] if low != high else []
    said += [f"test {test['mean']:.3f}"] if test else []
    return f"{approach} {accuracy['val']['mean']:.3f}" + (f" ({'; '.join(said)})" if said else "")


def mean_said(result: Dict) -> str:
    """The name of the mean the rows are ranked and tested on: over the near D_a sets where far ones
    are averaged apart, else over every D_a set."""
    return "mean near D_a OSCR" if result.get("far_sets") else "mean D_a OSCR"


def _marks_said(result: Dict) -> str:
    """What "equivalent (at ceiling)", "(beyond margin)" and "differs, below margin" mean, where a test of the
    report carries them."""
    printed = [m for family in marks(result).values() for m in family.values()]
    said = ""
    if any(m.endswith(AT_CEILING) for m in printed):
        said += (f" **{EQUIVALENT} {AT_CEILING}**: equivalent, and both rows' {mean_said(result)} lies within "
                 f"{CEILING_GAP} of their closed-set accuracy, the area's ceiling: the test compares their accuracies, "
                 f"not how they reject the unknowns (the log-FPR and CCR columns read that).")
    if any(m.endswith(BEYOND_MARGIN) for m in printed):
        said += (f" **{BEYOND_MARGIN}**, after better or worse: the minimum-effect test, the difference's 95 % "
                 f"interval beyond ±{MARGIN}, Holm-adjusted within the family at {ALPHA}, so the difference itself, "
                 f"not only its mean, exceeds the margin; a better or worse call without it may be smaller.")
    if any(m.startswith(BELOW_MARGIN) for m in printed):
        said += (f" **{BELOW_MARGIN}**: not resolved, though Holm's correction puts the difference away from 0 at "
                 f"{ALPHA}: its observed mean is below the margin and its 90 % interval is not inside it, so it is "
                 f"real and too small to be called better or worse.")
    return said


def decision_rule(result: Dict) -> List[str]:
    """The report's paragraph on what its marks mean."""
    seeds = result["seeds"]
    return [f"Marks: each comparison of the {mean_said(result)} over seeds, decided against a margin declared in the code "
            f"before this run, after the project's withdrawn 3-seed reports had been read (±{MARGIN}): "
            f"**better**/**worse**, the difference is not 0 (Holm-adjusted p below {ALPHA} within its family) and "
            f"its observed mean is at least the margin (its interval may reach below the margin); **equivalent**, "
            f"the 90 % interval of the difference lies inside ±{MARGIN} (two one-sided tests at {ALPHA} for each "
            f"pair, not adjusted for the family); **not resolved ({seeds_said(seeds)})**, neither: these data do not "
            f"decide (each family's smallest resolved difference is stated under \"What the data says\"). The "
            f"standard error of a difference is the seeds' spread and a paired bootstrap over the shared test "
            f"samples, added in quadrature. "
            f"Families, each Holm-adjusted on its own at {ALPHA} (not the whole report): "
            + "; ".join(f"{result['families'][family]['kind']}, {result['families'][family]['compares']}"
                        for family in present_families(result))
            + "." + _marks_said(result)]
