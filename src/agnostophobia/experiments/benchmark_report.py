"""The report of a benchmark (:mod:`agnostophobia.experiments.benchmark`), ``benchmark.md``,
written from ``benchmark.json``'s result alone: the paragraph of what the data says
(:mod:`~agnostophobia.experiments.benchmark_summary` writes it), the decision
rule, which split each choice used, the table the ranking metric is chosen from, the short table
of each approach with its paper's detector, the matrix of every approach with every detector, the
OSCR table, a table per test set and the tests."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.data.protocol_types import FAR
from agnostophobia.data.protocols import unknown_set  # the registered protocols declare their sets there
from agnostophobia.deploy.compare import TIE_MARK
from agnostophobia.experiments.benchmark_comparisons import MARGIN, marks, present_families
from agnostophobia.experiments.benchmark_ranking import (BEATS_SAID, BY_FLAG, RANKING_RULE_HISTORY, best_detectors,
                                                         declared_said, rank_noise_said, resolved_ranks,
                                                         tied_with_the_row_above)
from agnostophobia.experiments.benchmark_recipes import recipe_mark, recipes_section
from agnostophobia.experiments.benchmark_rows import (KNOWNS_ONLY_REFERENCE, REFERENCE_NAMES,
                                                      convergence_said, interval_over_seeds, papers_rows, reference_of,
                                                      saw_negatives, seeds_said)
from agnostophobia.experiments.benchmark_summary import decision_rule, mean_said, number
from agnostophobia.experiments.paper_numbers import TABLE2_FPRS
from agnostophobia.metrics import TIE_FLAG, fpr_keys


def format_cell(cell: Optional[Dict], digits: int = 3) -> str:
    """A cell of ``benchmark.json`` (:func:`~agnostophobia.experiments.benchmark_rows.interval_over_seeds`)
    as the pages print it: mean [95 % t interval], the mean alone for one seed, N/A where absent."""
    if cell is None:
        return "N/A"
    if cell["seeds"] < 2 or not np.isfinite(cell["low"]):
        return f"{cell['mean']:.{digits}f}"
    return f"{cell['mean']:.{digits}f} [{cell['low']:.{digits}f}, {cell['high']:.{digits}f}]"


def _set_name(name: str) -> str:
    """A test set's name with its role: ``letters (D_b)``, ``notmnist (D_a)``."""
    return f"{name} ({unknown_set(name).role})"


def _intro(result: Dict, run: str, code: bool = True) -> List[str]:
    """The run's line (``run``: its name as Markdown, code or a link; budget, seeds, device, precision,
    wall time, torch, the code that made it unless ``code`` is False, detector settings) and how to
    read a cell."""
    meta = result["meta"]
    return [f"Run {run}: budget {meta.get('budget')}, {seeds_said(meta.get('seeds'))}, device "
            f"{meta.get('device')}, precision {meta.get('precision')}, training wall time "
            f"{meta.get('wall_time_s', 0) / 60:.1f} min, torch {meta.get('versions', {}).get('torch', '?')}"
            f"{', code ' + meta['code'] if code and meta.get('code') else ''}. "
            f"Detector settings: {result['tuning']}.", "",
            "Each cell: mean over seeds [95 % t interval over seeds, cut to [0, 1]]. OSCR: area under the OSCR curve "
            "(CCR against FPR, linear FPR axis; at most the closed-set accuracy). Every number shown is a test "
            f"number unless its column says validation; rows are listed by the validation "
            f"{result['ranking']['title']}{_validation_fpr_said(result)} (mean over seeds), the ranking metric "
            + (f"declared {declared_said(result['ranking'])}" if result["ranking"].get("declared") else
               "the declared rule chose on validation data")
            + " (\"Choosing the ranking metric\"); a row's rank runs from one more than the rows of its group "
            f"that beat it there ({BEATS_SAID}) to the group's size less the rows it beats "
            f"({rank_noise_said(result)}): "
            "a range says where validation does not place the row, and "
            "rows whose ranges overlap are not resolved apart; '=' after a rank where the "
            "row's value equals the row above's (the tie-break ordered them); † more than 1 % of that "
            "set's samples tie with a sample of the other kind."
            + (" Rows marked (extra data) trained on negatives from an outside set the others never saw: "
               "they are ranked apart, after the others, E1 their first." if _has_extra(result) else "")
            + (" Rows ranked N1, N2, ... trained on the protocol's negatives (D_b'), of which the validation "
               "negatives are held-out images: they are ranked apart, after the rows trained on the known classes "
               "only, N1 their first." if _has_own_negatives(result) else "")]


def markdown(result: Dict, run_name: str) -> str:
    """``benchmark.md``: every section of the report, in reading order for a run folder."""
    meta = result["meta"]
    marks_of = marks(result)
    lines = [f"# Benchmark: {meta.get('experiment', run_name)}", "", *_intro(result, f"`{run_name}`"), "",
             *decision_rule(result), "", *choices_and_splits(result), "",
             "## What the data says", "", *[f"- {line}" for line in result["summary"]], ""]
    lines += _ranking_metric_section(result)
    lines += _papers_rows(result, list(result["test_sets"]), marks_of)
    lines += _beside_the_paper(result)
    lines += recipes_section(result)
    lines += _matrix(result)
    lines += _oscr_table(result, marks_of)
    for name in result["test_sets"]:
        lines += ["", *_set_table(result, name)]
    lines += ["", *_tests_table(result)]
    lines += _notes(result)
    for unknown, path in result.get("oscr_figures", {}).items():
        lines += ["", f"![OSCR curves on {unknown}]({path})"]
    lines += ["", "Figures of the paper's rows (Fig. 1, OSCR curves) and the paper's tables of this run: `report.md`.",
              ""]
    return "\n".join(lines)


def _oscr_table(result: Dict, marks: Dict) -> List[str]:
    """Every row, ranked: closed-set accuracies, the validation ranking metric, the OSCR on each set
    and the secondary families' marks."""
    sets, metric = list(result["test_sets"]), result["ranking"]["chosen"]
    header = ["rank", "approach/detector", "closed-set acc.", "val acc.",
              f"val {result['ranking']['title']}{_validation_fpr_said(result)} (ranked by)",
              *(f"{_set_name(s)} OSCR" for s in sets), f"vs {_reference_short(result)}, same detector (secondary)",
              "vs MSP (secondary)"]
    lines = ["## OSCR", "", _row_md(header), _rule(header)]
    rows = result["rows"]
    for tied, resolved, row in zip(tied_with_the_row_above(rows, metric), resolved_ranks(rows, metric), rows):
        cells = [_rank_cell(row, resolved) + (TIE_MARK if tied else ""), _label(result, row),
                 format_cell(row["closed_set_accuracy"]),
                 format_cell(row.get("val_closed_set_accuracy")), _val_cell(row, metric)]
        cells += [format_cell(row["test"].get(s, {}).get("oscr")) + _tie(row, s) for s in sets]
        cells += [marks["approaches"].get(row["row"], ""), marks["detectors"].get(row["row"], "")]
        lines.append(_row_md(cells))
    return lines


def _set_table(result: Dict, name: str) -> List[str]:
    """One test set's table: AUROC, FPR@95%TPR, AUPR-In/Out, CCR at each FPR and the tied share of
    every row scored on it. The CCR at the lowest FPR the set resolves (10/#unknowns) has a column
    of its own unless it is one of the columns' FPRs already."""
    keys = fpr_keys(result["fprs"])
    unknowns = result["test_sets"][name]
    own_column = not (unknowns and any(np.isclose(fpr, 10 / unknowns, rtol=1e-9, atol=0) for fpr in result["fprs"]))
    lowest = [f"CCR@{10 / unknowns:.2g} (10/#unknowns)" if unknowns else "CCR@10/n"] if own_column else []
    header = ["approach/detector", "AUROC", "FPR@95%TPR", "AUPR-In", "AUPR-Out", *lowest, *(f"CCR@{k}" for k in keys),
              "tied share"]
    lines = [f"## {name} ({unknown_set(name).role}, {unknowns:,} unknowns)", "",
             "FPR@95%TPR: the FPR on the unknowns at the highest threshold that accepts 95 % of the knowns; "
             "AUPR-In: average precision with the knowns positive, AUPR-Out: with the unknowns positive (ranked by "
             "the negated score); a tie group is taken whole.", "", _row_md(header), _rule(header)]
    for row in result["rows"]:
        cell = row["test"].get(name)
        if cell is None:
            continue
        lines.append(_row_md([_label(result, row), format_cell(cell["auroc"]), format_cell(cell.get("fpr_at_95tpr")),
                              format_cell(cell.get("aupr_in")), format_cell(cell.get("aupr_out")),
                              *([format_cell(cell.get("ccr_at_lowest_fpr"))] if own_column else []),
                              *(format_cell(cell["ccr_at_fpr"].get(k)) for k in keys),
                              f"{cell['tied_share']:.4f}"]))
    return lines


def _tests_table(result: Dict) -> List[str]:
    """Every comparison of every family: difference and interval, standard errors, p, Holm's p, the
    equivalence interval and the decision."""
    header = ["family", "row", "against", "difference [95 % interval, unadjusted]", "SE (seeds, samples)", "p",
              "p (Holm)", "90 % interval", "decision"]
    lines = ["## Tests", "", f"Difference: mean over seeds of the row's {mean_said(result)} minus the reference's; its "
             f"95 % interval is the pair's own, not adjusted for the family, so it may exclude 0 where Holm's "
             f"correction does not decide (the decision column is the family's). "
             f"SE: the seeds' standard error and the test samples' (paired bootstrap; '—' where not computed), "
             f"added in quadrature. Holm's correction within each family; the 90 % interval is what the equivalence test "
             f"reads against ±{MARGIN}.", "", _row_md(header), _rule(header)]
    marks_of = marks(result)
    for family in present_families(result):  # in the declared order (a published benchmark.json is sorted by key)
        kind = result["families"][family]["kind"]
        for t in result["tests"][family]:
            samples = "—" if t["se_samples"] is None else f"{t['se_samples']:.4f}"
            lines.append(_row_md([kind, t["row"], t["against"],
                                  f"{t['difference']:+.4f} {_bounds(t['interval'])}",
                                  f"{t['se']:.4f} ({t['se_seeds']:.4f}, {samples})", _p(t["p"]), _p(t["p_holm"]),
                                  _bounds(t["equivalence_interval"]), marks_of[family][t["row"]]]))
    return lines


#: A note of compare's about one model: ``background/vim (seed 0): not applicable: ...``.
_MODEL_NOTE = re.compile(r"^(?P<row>\S+) \(seed (?P<seed>\d+)\): (?P<why>.+)$")


def _notes(result: Dict) -> List[str]:
    """The notes of rows not scored, one line per reason: the rows and seeds it covers (ViM on a
    2-D feature space is one reason for every approach and seed, not 40 lines)."""
    if not result["notes"]:
        return []
    reasons: Dict[str, Dict[str, List[str]]] = {}
    lines = []
    for note in result["notes"]:
        match = _MODEL_NOTE.match(note)
        if match is None:
            lines.append(f"- {note}")
            continue
        reasons.setdefault(match["why"], {}).setdefault(match["row"], []).append(match["seed"])
    for why, rows in reasons.items():
        said = ", ".join(row + " (" + ("seeds " if len(seeds) > 1 else "seed ") + ", ".join(seeds) + ")"
                         for row, seeds in rows.items())
        lines.append(f"- {said}: {why}")
    return ["", "Not scored:", "", *lines]


#: A difference from the paper's CCR this large is named in the sentence under the table.
PAPER_GAP = 0.1


def _beside_the_paper(result: Dict) -> List[str]:
    """The paper's Table 2 beside this run's CCR, for the approaches the paper ran (each with its
    paper's detector) on the D_a sets both have, at the FPRs both read; the sets' sizes of both, and
    every difference of at least :data:`PAPER_GAP` named. Nothing where the run is not a paper
    experiment on its own protocol (``paper`` empty)."""
    paper = (result.get("paper") or {}).get("ccr") or {}
    sets = [s for s in result["test_sets"] if s in paper]
    if not sets:
        return []
    ours = {float(k): k for k in fpr_keys(result["fprs"])}
    lowest = {s: 10 / result["test_sets"][s] for s in sets if result["test_sets"][s]}

    def ours_at(row: Dict, s: str, fpr: str) -> Optional[Dict]:
        cell = row["test"].get(s, {})
        if float(fpr) in ours:
            return cell.get("ccr_at_fpr", {}).get(ours[float(fpr)])
        return cell.get("ccr_at_lowest_fpr") if np.isclose(float(fpr), lowest.get(s, -1)) else None

    columns = [(s, f) for s in sets for f in TABLE2_FPRS
               if float(f) in ours or np.isclose(float(f), lowest.get(s, -1))]
    rows = [r for r in papers_rows(result["rows"]) if any(r["approach"] in paper[s] for s in sets)]
    if not columns or not rows:
        return []
    header = ["approach", "detector", *(f"{s} CCR@{f}: here vs paper" for s, f in columns)]
    lines = ["## Beside the paper", "",
             "The paper's Table 2 (one network each) beside this run's CCR (mean [95 % t interval] over seeds) for "
             "the approaches the paper ran, each with its paper's detector, at the FPRs both read. Unknowns per set, "
             "here and in the paper: " + ", ".join(f"{s} {result['test_sets'][s]:,} and "
                                                   f"{result['paper']['sizes'].get(s, 0):,}" for s in sets)
             + ". The networks and their training differ too (\"Training recipes\"); what moves the numbers "
             "between the two is measured by `agnostophobia ablate lenet++` (the documentation's results, \"Why our "
             "numbers differ from the paper's\").", "",
             _row_md(header), _rule(header)]
    gaps = []
    for row in rows:
        cells = []
        for s, f in columns:
            theirs, here = paper[s].get(row["approach"], {}).get(f), ours_at(row, s, f)
            cells.append("N/A" if theirs is None or here is None else f"{format_cell(here)} vs {theirs:.3f}")
            if theirs is not None and here is not None and abs(here["mean"] - theirs) >= PAPER_GAP:
                gaps.append(f"{row['approach']} on {s} at {f}: {here['mean']:.3f} here, {theirs:.3f} in the paper")
        lines.append(_row_md([_label(result, row, "approach"), row["detector"], *cells]))
    if gaps:
        lines += ["", f"Differences of at least {PAPER_GAP}: " + "; ".join(gaps) + "."]
    return [*lines, ""]


def _papers_rows(result: Dict, sets: List[str], marks: Dict) -> List[str]:
    """The short table first: one row per approach, with its paper's detector and the mean OSCR
    over the unknown-unknown sets the ranking reads."""
    far = result.get("far_sets") or []
    near = "near " if far else ""
    ranked = result.get("ranked_sets") or []
    # A mean over one near set is that set's OSCR: its own column would repeat the mean's
    oscr_sets = [s for s in sets if not (far and ranked == [s])]
    header = ["approach", "detector", "closed-set acc.", "val acc.", f"mean {near}D_a OSCR",
              f"mean {near}D_a OSCR, log FPR", *(["mean far D_a OSCR"] if far else []),
              *(f"{_set_name(s)} OSCR" for s in oscr_sets), f"vs {_reference_short(result)} (primary)",
              *([f"vs {KNOWNS_ONLY_REFERENCE} (secondary: knowns only)"] if result["tests"].get("knowns") else [])]
    lines = ["## Each approach with its paper's detector", "",
             "OSCR, log FPR: the area under the same curve over a log FPR axis from the smallest FPR each set "
             "resolves (10/#unknowns) to 1, normalised to [0, 1]: it reads the low-FPR end, where networks "
             "that reject almost every unknown differ, which the linear area hardly weighs.", "",
             *_distances_said(result), _row_md(header), _rule(header)]
    for row in papers_rows(result["rows"]):
        mean = interval_over_seeds(row["mean_oscr_per_seed"]) if row["mean_oscr_per_seed"] else None
        mean_log = interval_over_seeds(row["mean_oscr_log_per_seed"]) if row["mean_oscr_log_per_seed"] else None
        far_mean = row.get("mean_far_oscr_per_seed")
        cells = [_label(result, row, "approach"),
                 row["detector"], format_cell(row["closed_set_accuracy"]),
                 format_cell(row.get("val_closed_set_accuracy")),
                 format_cell(mean), format_cell(mean_log),
                 *([format_cell(interval_over_seeds(far_mean) if far_mean else None)]
                                               if far else [])]
        cells += [format_cell(row["test"].get(s, {}).get("oscr")) + _tie(row, s) for s in oscr_sets]
        knowns = [marks["knowns"].get(row["row"], "")] if result["tests"].get("knowns") else []
        lines.append(_row_md([*cells, marks["primary"].get(row["row"], ""), *knowns]))
    keys = fpr_keys(result["fprs"])
    if keys:  # the low-FPR end, which the OSCR area on its linear axis weighs little
        header = ["approach", "detector", *(f"{_set_name(s)} CCR@{keys[0]}" for s in sets)]
        lines += ["", f"CCR at {keys[0]}, the smallest FPR of the report's columns, the same rows. "
                  f"{_columns_resolution(result)}", "", _row_md(header), _rule(header)]
        for row in papers_rows(result["rows"]):
            cells = [format_cell(row["test"].get(s, {}).get("ccr_at_fpr", {}).get(keys[0])) for s in sets]
            lines.append(_row_md([_label(result, row, "approach"), row["detector"], *cells]))
    return [*lines, ""]


def _distances_said(result: Dict) -> List[str]:
    """Which unknown sets the mean the rows are ranked and tested on reads, and which far ones are
    averaged apart (near and far unknowns, as OpenOOD reports them)."""
    ranked, far = result.get("ranked_sets"), result.get("far_sets")
    if not ranked:  # a report written before the sets were grouped by distance
        return []
    kinds = {unknown_set(name).proximity for name in ranked}
    lines = _known_unknowns_said(result)
    if far:
        one = ("; with one near set, the mean is that set's OSCR, so the set has no column of its own"
               if len(ranked) == 1 else "")
        lines += [f"Near and far unknowns apart: the mean near D_a OSCR ({', '.join(ranked)}) is what the tests "
                  f"read{one}; the far sets ({', '.join(far)}) are averaged apart, shown, and decide nothing.", ""]
    elif kinds == {FAR}:
        lines += [f"Every unknown-unknown set here is declared far from the knowns ({', '.join(ranked)}); the protocol "
                  f"declares no near unknowns, so the tests read them together (the documentation's Comparing "
                  f"methods, \"Near and far\", says where such a grouping departs from OpenOOD v1.5's).", ""]
    return lines


def _known_unknowns_said(result: Dict) -> List[str]:
    """What a D_b column is, and who trained on its classes: the test sets of the classes whose training
    images are the negatives, beside the D_a sets of classes never seen in training."""
    known = [name for name in result["test_sets"] if unknown_set(name).known_unknowns]
    if not known:
        return []
    trained = result.get("trained_on_negatives")
    who = f" ({', '.join(trained)})" if trained else ""
    return [f"D_b ({', '.join(known)}): test images of the classes whose training images are the negatives of the "
            f"approaches trained with negatives{who}, and whose held-out images are the validation negatives that "
            f"rank the rows; D_a: classes never seen in training. The {mean_said(result)}, the tests and their "
            f"decisions read the {'near ' if result.get('far_sets') else ''}D_a sets alone.", ""]


def _columns_resolution(result: Dict) -> str:
    """Where the CCR columns' FPRs come from, and what the test sets would resolve: the columns are
    the FPRs the validation negatives support (a CCR at FPR >= 10/#negatives), each test set resolves
    down to 10/#unknowns, which may be smaller."""
    negatives = result.get("val_negatives")
    validation = (f"the {negatives:,} validation negatives" if negatives else "the validation negatives")
    tests = ", ".join(f"{name} {10 / n:.2g}" for name, n in result["test_sets"].items() if n)
    return (f"The columns are the FPRs {validation} support (10/#negatives, rounded up to the series 1e-4, 2e-4, "
            f"5e-4, 1e-3, ...); each test set alone resolves down to 10/#unknowns: {tests}.")


def _matrix(result: Dict) -> List[str]:
    """Every approach (a line, in the order of the short table) with every detector (a column): the
    test mean D_a OSCR over seeds [95 % t interval], as every table prints a cell, so that two cells are
    read against the seeds' spread; in bold each approach's best detector by the validation ranking
    metric (:func:`~agnostophobia.experiments.benchmark_ranking.best_detectors`), none for an approach
    not ranked, which is marked as the tables mark it, nor for one whose detectors tie on validation
    (marked "tied on validation"); "—" where a detector does not apply to the approach or was not scored."""
    rows = result["rows"]
    approaches = list(dict.fromkeys(r["approach"] for r in papers_rows(rows) + rows))
    detectors = sorted({r["detector"] for r in rows})
    cell = {(r["approach"], r["detector"]): format_cell(interval_over_seeds(r["mean_oscr_per_seed"]))
            for r in rows if r["mean_oscr_per_seed"]}
    first = {row["approach"]: row for row in reversed(rows)}  # each approach's first row
    best = best_detectors(rows, result["ranking"]["chosen"])
    header = ["approach", *detectors]
    lines = [f"## Every approach with every detector ({mean_said(result)})", "",
             f"Test numbers: mean over seeds [95 % t interval], each cell's own (the tests compare pairs). In "
             f"bold, each approach's best detector by the validation {result['ranking']['title']} (the ranking "
             f"metric): chosen on validation data, not on these numbers, and only where it beats each of the "
             f"approach's other detectors there, {BEATS_SAID}; an approach where it does not is marked *tied on "
             f"validation* and has none, and so has an approach not converged or not trained on every seed, "
             f"which is marked.", "", _row_md(header), _rule(header)]
    for approach in approaches:
        texts = [("—" if (approach, d) not in cell else
                  f"**{cell[(approach, d)]}**" if best.get(approach) == d else cell[(approach, d)])
                 for d in detectors]
        tied = " (tied on validation)" if approach in best and best[approach] is None else ""
        lines.append(_row_md([_label(result, first[approach], "approach") + tied, *texts]))
    return [*lines, ""]


def _val_cell(row: Dict, metric: str) -> str:
    """The row's validation ``metric`` (mean over seeds [95 % t interval])."""
    values = row["val"]["per_seed"].get(metric)
    return format_cell(interval_over_seeds(values)) if values else "N/A"


def _validation_fpr_said(result: Dict) -> str:
    """" (FPR 10/4,000 = 0.0025 of the validation negatives)": the lowest FPR the validation negatives
    resolve, which the ranking's CCR reads (nothing where the ranking metric is not that CCR)."""
    negatives = result.get("val_negatives")
    if result["ranking"]["chosen"] != "ccr_at_lowest_fpr" or not negatives:
        return ""
    return f" (FPR 10/{negatives:,} = {10 / negatives:.2g} of the validation negatives)"


def choices_and_splits(result: Dict) -> List[str]:
    """Which split each choice of the report read: the benchmark's choices validation data, a recipe
    chosen on test images before the run named as such, the test sets read once, for the numbers
    reported and the tests."""
    ranking = result["ranking"]
    threshold = result["min_accuracy"]
    convergence = convergence_said(threshold, result.get("accuracy_margin"))
    if threshold is not None:
        convergence += ", after the budget's fixed epochs: a threshold reached, not a plateau"
    return ["## Which split each choice used", "",
            "| choice | split | how |", "|---|---|---|",
            f"| convergence (*not converged*: neither ranked, tested nor bold) | validation | {convergence} |",
            f"| each detector's settings | validation | {result.get('tuning', '')} |",
            f"| the ranking metric | {_declared_where(ranking)} | "
            f"{ranking['title']}: {ranking['why']} "
            f"(\"Choosing the ranking metric\") |",
            f"| rank | validation | the validation {ranking['title']}{_validation_fpr_said(result)}, mean over "
            f"seeds, through compare's ranking (equal means: the higher validation AUROC, then the registry's order "
            f"of approaches and the detector's name), orders the rows; a row's rank runs from one more than the "
            f"rows that beat it there ({BEATS_SAID}) to the group's size less the rows it beats; the rows trained "
            "on negatives apart |",
            "| best row, each approach's best detector (bold) | validation | the first by the rank's metric, only "
            "where it beats every other candidate, as a rank does; else none, and the rows it does not beat are "
            "named as tied |",
            *([f"| the network's recipe, before this run | test | {result['chosen_on_test_images']} |"]
              if result.get("chosen_on_test_images") else []),
            "| the numbers reported, the tests and their decisions | test | read once in this run, after every choice "
            "above: the OSCR areas, AUROC, FPR@95%TPR, AUPR, CCR and accuracies shown, and the families of "
            "comparisons |"]


def _declared_where(ranking: Dict) -> str:
    """The split column of "the ranking metric" in the table of choices."""
    if not ranking.get("declared"):
        return "validation"
    by = ranking.get("declared_by", BY_FLAG)
    return f"declared ({by})" if by == BY_FLAG else "declared (the protocol)"


def _declared_how(ranking: Dict) -> str:
    """Where a declared metric came from, in the ranking section's first words."""
    by = ranking.get("declared_by", BY_FLAG)
    return f"with `{by}`" if by == BY_FLAG else f"for the protocol `{by}` (`{BY_FLAG}` overrides it)"


def _ranking_metric_section(result: Dict) -> List[str]:
    """The table the ranking metric is chosen from: each candidate's gap to closed-set accuracy,
    spread across approaches and separation in seed half-widths, on validation data (what the
    rule reads) and on the test sets (shown, not read)."""
    ranking = result["ranking"]
    header = ["metric", "split", "approaches", "median gap to closed-set acc.", "spread of means",
              "median 95 % half-width", "median separation (half-widths)", ""]
    declared = bool(ranking.get("declared"))
    said = (f"Declared {_declared_how(ranking)}: **{ranking['title']}** (`--ranking-metric {ranking['chosen']}`); the rule "
            f"({ranking['rule']}) is not read, and the table shows what it would have read. " if declared else
            f"Rule ({RANKING_RULE_HISTORY}): {ranking['rule']}. Chosen: **{ranking['title']}**, {ranking['why']}. ")
    lines = ["## Choosing the ranking metric", "",
             said +
             "Gap: closed-set accuracy minus the metric (means over seeds; the linear OSCR area is at most the "
             "accuracy, so a gap near 0 says the metric reads little beyond accuracy). Separation: over every pair "
             "of converged approaches, each with its paper's detector, the difference of their means over the "
             "pair's mean 95 % t half-width over seeds. " +
             ("Test rows (mean over the D_a sets) are shown beside." if declared else
              "Validation rows decide; test rows (mean over the D_a sets) are shown beside and decide nothing."),
             "", _row_md(header), _rule(header)]
    for split, name in (("val", "validation"), ("test", "test (D_a mean)")):
        for c in ranking["candidates"][split]:
            chosen = ("declared" if declared else "chosen") if split == "val" and c["metric"] == ranking["chosen"] else ""
            separation = c["median_separation"]
            lines.append(_row_md([c["title"], name, str(c["approaches"]), number(c["median_gap"], 4),
                                  number(c["spread"], 4), number(c["median_half_width"], 4),
                                  "N/A" if separation is None else "∞" if np.isinf(separation) else f"{separation:.2f}",
                                  chosen]))
    return [*lines, ""]


def _label(result: Dict, row: Dict, name: str = "row") -> str:
    """``row[name]`` (its approach/detector; ``"approach"`` in the tables of one row per approach) with
    every mark the tables give the row (:func:`_marked`, the recipe's)."""
    return row[name] + _marked(row) + recipe_mark(result, row["approach"])


def _marked(row: Dict) -> str:
    """Why a row is not ranked, or ranked apart, as the tables say it."""
    return (" (extra data)" if row.get("extra_data") else "") + \
        (" (not converged)" if row["converged"] is False else "") + \
        ("" if row["complete"] else f" (incomplete: {len(row['seeds'])} seed(s))")


def _rank_cell(row: Dict, resolved: Optional[Tuple[int, int]]) -> str:
    """A row's rank, as validation resolves it (``resolved``, :func:`resolved_ranks`: one rank, or the
    range validation leaves it): E before the ranks of the rows with extra data, N before those of the
    rows trained on the protocol's negatives, each counted among themselves."""
    if not row["rank"]:
        return "—"
    best, worst = resolved
    return ("E" if row.get("extra_data") else "N" if saw_negatives(row) else "") + \
        (str(best) if best == worst else f"{best}–{worst}")


def _has_extra(result: Dict) -> bool:
    return any(row.get("extra_data") for row in result["rows"])


def _has_own_negatives(result: Dict) -> bool:
    return any(saw_negatives(row) and not row.get("extra_data") for row in result["rows"])


def _tie(row: Dict, name: str) -> str:
    cell = row["test"].get(name)
    return " †" if cell is not None and cell["tied_share"] > TIE_FLAG else ""


def _bounds(ends: Sequence[Optional[float]]) -> str:
    return "[—]" if None in ends else f"[{ends[0]:+.4f}, {ends[1]:+.4f}]"


def _p(value: Optional[float]) -> str:
    return "undefined" if value is None else f"{value:.3g}"




def _reference_short(result: Dict) -> str:
    """The reference approach as a column header names it: ``EOS``, ``softmax``."""
    return REFERENCE_NAMES[reference_of(result)][1]


def _row_md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _rule(header: Sequence[str]) -> str:
    return "|" + "---|" * len(header)


# ------------------------------------------------------------------ the documentation's result page
def site_page(result: Dict, title: str, run_link: str, figures: str) -> str:
    """The documentation's result page of a benchmark, written from its ``benchmark.json`` alone by
    the functions that write ``benchmark.md``, so that no number on it is typed by hand: the answer
    first (each approach with its paper's detector, the CCR at the lowest FPR, the first OSCR
    figure), then what the data says, how to read the tables, the run, the loss × detector matrix,
    and the full tables collapsed (MyST dropdowns of sphinx-design); every table in a container
    whose first column stays in place when it scrolls (``sticky-first``).

    Args:
        result: the benchmark's ``benchmark.json``, as read.
        title: the page's title.
        run_link: how the page names its run, e.g. a link to its provenance entry.
        figures: the folder, relative to the page, where the run's ``figures/`` were copied.

    Returns:
        The page's Markdown (MyST).
    """
    marks_of = marks(result)
    sets = list(result["test_sets"])
    figure_paths = {unknown: f"{figures}/{Path(path).name}" for unknown, path in result.get("oscr_figures", {}).items()}
    intro, _, reading = _intro(result, run_link, code=False)  # the provenance entry it links names the code
    lines = [f"# {title}", "",
             f"Run {run_link}, {seeds_said(result['seeds'])}: each approach with the detector its paper uses, then "
             "its OSCR curves; what the data says, how to read the cells, the run and the full tables (collapsed: "
             "open a section to see it) follow.", ""]
    lines += _papers_rows(result, sets, marks_of)
    lines += _beside_the_paper(result)
    first = next(iter(figure_paths.items()), None)
    if first:
        lines += [f"![OSCR curves on {first[0]}]({first[1]})", ""]
    lines += ["## What the data says", "", *[f"- {line}" for line in result["summary"]], "",
              "## How to read the tables", "", reading, "", *decision_rule(result), "",
              *_demoted(choices_and_splits(result)), "", "## The run", "", intro, ""]
    lines += _matrix(result)
    lines += _collapsed(_oscr_table(result, marks_of), f"All {len(result['rows'])} rows, ranked: OSCR on each set, "
                        f"closed-set accuracy and the secondary families' marks")
    for name in sets:
        scored = sum(name in row["test"] for row in result["rows"])
        lines += _collapsed(_set_table(result, name), f"{scored} rows: AUROC, FPR@95%TPR, AUPR, CCR at each FPR "
                            f"and the tied share on {name}")
    tests = sum(len(family) for family in result["tests"].values())
    lines += _collapsed(_tests_table(result), f"{tests} comparisons: difference, standard errors, p, p after "
                        f"Holm's correction, decision")
    lines += _collapsed(_ranking_metric_section(result), "The candidates' gap, spread and separation on validation "
                        "and test data")
    if result.get("recipes"):
        lines += _collapsed(recipes_section(result), "How each approach trained: the fine-tunes' recipes and where "
                            "they depart from their authors'")
    lines += _notes(result)
    for unknown, path in list(figure_paths.items())[1:]:
        lines += ["", f"![OSCR curves on {unknown}]({path})"]
    return "\n".join(sticky_tables(lines)).rstrip("\n") + "\n"


def _demoted(lines: List[str]) -> List[str]:
    """A section's heading one level down (``##`` to ``###``), to sit inside another section."""
    return [("#" + line) if line.startswith("## ") else line for line in lines]


def _collapsed(lines: List[str], summary: str) -> List[str]:
    """A section with its heading shown and its body in a dropdown titled ``summary``."""
    heading = [line for line in lines[:1] if line.startswith("## ")]
    body = lines[len(heading):]
    while body and not body[0]:
        body = body[1:]
    return [*heading, "", f"::::{{dropdown}} {summary}", *body, "::::", ""]


def sticky_tables(lines: List[str]) -> List[str]:
    """Each Markdown table (a run of lines that start with ``|``) in a ``sticky-first`` container."""
    out: List[str] = []
    for index, line in enumerate(lines):
        table = line.startswith("|")
        if table and not (index and lines[index - 1].startswith("|")):
            out.append(":::{container} sticky-first")
        out.append(line)
        if table and not (index + 1 < len(lines) and lines[index + 1].startswith("|")):
            out.append(":::")
    return out
