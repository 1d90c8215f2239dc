"""The numbers the hand-written benchmark pages (``guide/benchmark.md``, ``guide/benchmark-statistics.md``;
``training-peers.md`` cites one) take from the published runs, computed from their committed
``benchmark.json`` (:data:`result_pages.PAGES`): a page writes ``{{ name }}`` and Sphinx fills it in
(myst-parser's substitutions, set up in ``conf.py``), so that no result on it is typed by hand. A
test (``tests/repository/test_result_facts.py``) fails where a page names a number this module does
not compute, where one it computes is cited nowhere, or where those pages type a decimal by hand.

Print every number and its value::

    python docs/result_facts.py
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np
from scipy import stats

from agnostophobia.experiments.benchmark_comparisons import ALPHA, AT_CEILING, BEYOND_MARGIN, MARGIN, mark
from agnostophobia.experiments.benchmark_rows import papers_rows, rows_at_ceiling, saw_negatives
from agnostophobia.experiments.benchmark_recipes import recipe_mark
from agnostophobia.experiments.benchmark_report import format_cell
from agnostophobia.experiments.benchmark_summary import at_ceiling, validation_test_agreement, verdicts_at
from agnostophobia.losses import LOSSES
from agnostophobia.metrics import PairedDifference, decide, holm, seed_interval, smallest_resolved_difference

sys.path.insert(0, str(Path(__file__).resolve().parent))
import result_against_softmax  # noqa: E402
import result_budget  # noqa: E402
import result_centred  # noqa: E402
import result_confirmatory  # noqa: E402
import result_fine_tunes  # noqa: E402
import result_near_set  # noqa: E402
import result_partition  # noqa: E402
import result_preparation  # noqa: E402
import result_osr_splits  # noqa: E402
import result_ranking  # noqa: E402
import result_room  # noqa: E402
import result_trivial  # noqa: E402
from result_pages import PAGES, published  # noqa: E402
from result_runs import (CIFAR_PARTS, CIFAR_REPORT, DECIDING_PARTS, cell, comparison,  # noqa: E402
                         equivalence_se, near_da, num, paired, paper_row, projected_resolution, row, run, run_marks, seed_accuracies,
                         signed, span, t_interval, test_said, val_accuracy)

#: Where the CIFAR split's first part's rows (trained on a Xeon) were trained again on Zen 4.
TRAINED_AGAIN = {"entropic": "bench-cifar-5-paper", "softmax": "bench-cifar-5-ft", "arpl": "bench-cifar-5-arpl-cac",
                 "cac": "bench-cifar-5-arpl-cac"}


@lru_cache(maxsize=None)
def across_runs(name: str) -> Dict:
    """Row ``name`` of the CIFAR split's first part (trained on a Xeon) against the same seeds trained
    again on Zen 4 (:data:`TRAINED_AGAIN`): the mean difference, first minus second, with Welch's 95 %
    interval and p; the paired t interval and p over the seeds, as the comparison was declared (the
    seeds fix the initial weights and batches on both processors, but whether their networks still
    move together is what the two tests differ on); and the range of the per-seed differences."""
    first = np.asarray(row("bench-cifar-5", name)["mean_oscr_per_seed"])
    second = np.asarray(row(TRAINED_AGAIN[name.split("/")[0]], name)["mean_oscr_per_seed"])
    welch = stats.ttest_ind(first, second, equal_var=False)
    interval = welch.confidence_interval(0.95)
    paired_test = stats.ttest_rel(first, second)
    paired_interval = paired_test.confidence_interval(0.95)
    return {"welch_p": welch.pvalue, "paired_p": paired_test.pvalue,
            "shift": num(first.mean() - second.mean(), 4), "p": num(welch.pvalue, 3),
            "interval": f"[{num(interval.low)}, {num(interval.high)}]",
            "paired": f"[{num(paired_interval.low)}, {num(paired_interval.high)}], p {num(paired_test.pvalue, 3)}",
            "per_seed": f"{signed(np.min(first - second))} to {signed(np.max(first - second))}"}


#: The CIFAR split's softmax and EOS trained again on a Xeon in another sitting (not a part: ``measures``).
XEON_AGAIN = "bench-cifar-5-xeon"


@lru_cache(maxsize=None)
def xeon_again(approach: str) -> Dict:
    """Approach ``approach`` of :data:`XEON_AGAIN` against the first part's networks (the same seeds on
    a Xeon of another sitting), with its paper's detector: how many of its seeds repeat their
    validation accuracy and near D_a OSCR to the last digit (``same`` of ``seeds``), and its cell."""
    first, again = paper_row("bench-cifar-5", approach), paper_row(XEON_AGAIN, approach)
    if first["seeds"] != again["seeds"]:
        raise ValueError(f"{approach}: the two Xeon runs hold different seeds")
    pairs = [(first["accuracy_per_seed"]["val"], again["accuracy_per_seed"]["val"]),
             (first["mean_oscr_per_seed"], again["mean_oscr_per_seed"])]
    same = sum(all(a[i] == b[i] for a, b in pairs) for i in range(len(first["seeds"])))
    return {"same": same, "seeds": len(first["seeds"]), "cell": cell(again["mean_oscr_per_seed"])}


def xeon_again_same() -> str:
    """How many of :data:`XEON_AGAIN`'s networks repeat the first part's to the last digit (validation
    accuracy and near D_a OSCR)."""
    approaches = sorted({r["approach"] for r in run(XEON_AGAIN)["rows"]})
    said = [xeon_again(approach) for approach in approaches]
    same, total = sum(s["same"] for s in said), sum(s["seeds"] for s in said)
    return f"{same} of its {total} networks ({' and '.join(approaches)})" + ("" if same == total else ", not the others")


#: The rows whose shift across processors was declared before it was read (provenance, the fourth
#: part's entry: "how far this part's softmax and EOS rows lie from the earlier parts'", paired over
#: the seeds); ARPL and CAC were trained again later, with no test declared.
DECLARED_ACROSS_PROCESSORS = ("softmax", "entropic")


@lru_cache(maxsize=None)
def processor_holm() -> Dict[str, str]:
    """EOS's p across the processors, Holm-adjusted: Welch's and the paired test over the declared
    rows (:data:`DECLARED_ACROSS_PROCESSORS`), and the paired test over every approach of the
    processor table (:data:`TRAINED_AGAIN`, where published), a family chosen after the data."""
    def eos_adjusted(test: str, approaches: Sequence[str]) -> str:
        p = [across_runs(paper_row("bench-cifar-5", approach)["row"])[f"{test}_p"] for approach in approaches]
        return num(holm(p)[list(approaches).index("entropic")], 3)

    published = [approach for approach, label in TRAINED_AGAIN.items() if label in CIFAR_PARTS]
    return {"welch": eos_adjusted("welch", DECLARED_ACROSS_PROCESSORS),
            "paired": eos_adjusted("paired", DECLARED_ACROSS_PROCESSORS),
            "paired_all": eos_adjusted("paired", published)}


def processor_table() -> str:
    """Each approach of the CIFAR split's first part (Xeon) beside its networks trained again on Zen 4
    (:data:`TRAINED_AGAIN`, where published), with its paper's detector: both means with their 95 %
    t intervals over seeds, the difference with Welch's interval and p, paired by seed, the per-seed
    differences' range, each set's seed SD and its validation accuracy."""
    again = XEON_AGAIN in published()
    lines = ["| approach (its paper's detector) | Xeon | " + ("Xeon again (seeds repeating) | " if again else "")
             + "Zen 4 | Xeon − Zen 4 [Welch's 95 % interval] | p | paired by seed [95 % interval], p | per seed "
             "| seed SD, Xeon / Zen 4 | val acc., Xeon / Zen 4 |", "|---|---|---|---|---|---|---|---|---|"
             + ("---|" if again else "")]
    for approach, label in TRAINED_AGAIN.items():
        if label not in CIFAR_PARTS:
            continue
        first, second = paper_row("bench-cifar-5", approach), paper_row(label, approach)
        marks = ["" if r["converged"] else " (not converged)" for r in (first, second)]
        shift = across_runs(first["row"])
        sds = " / ".join(num(np.std(r["mean_oscr_per_seed"], ddof=1), 4) for r in (first, second))
        repeated = ""
        if again:
            trained = any(r["approach"] == approach for r in run(XEON_AGAIN)["rows"])
            again_row = xeon_again(approach) if trained else None
            repeated = (f"{again_row['cell']} ({again_row['same']} of {again_row['seeds']}) | " if trained
                        else "not trained again | ")
        lines.append(f"| {approach} ({first['detector']}) | {cell(first['mean_oscr_per_seed'])}{marks[0]} | "
                     f"{repeated}{cell(second['mean_oscr_per_seed'])}{marks[1]} | {shift['shift']} {shift['interval']} | "
                     f"{shift['p']} | {shift['paired']} | {shift['per_seed']} | {sds} | "
                     f"{' / '.join(cell(r['accuracy_per_seed']['val']) for r in (first, second))} |")
    return "\n".join(lines)


def seed_sd_median(label: str, converged_only: bool) -> float:
    """The median over the approaches with their papers' detectors of the seed standard deviation of
    the mean D_a OSCR area."""
    sds = [np.std(r["mean_oscr_per_seed"], ddof=1) for r in papers_rows(run(label)["rows"])
           if r["converged"] or not converged_only]
    return float(np.median(sds))


def resolved(label: str, family: str) -> str:
    return num(run(label)["families"][family]["resolution"]["smallest_resolved"])


def family_size(label: str, family: str) -> str:
    return str(run(label)["families"][family]["resolution"]["tests"])


def ranking_separation(label: str, candidate: str) -> str:
    """A ranking candidate's median separation on validation, in half-widths."""
    return next(f"{c['median_separation']:.2f}" for c in run(label)["ranking"]["candidates"]["val"]
                if c["metric"] == candidate)


def agreement(label: str, negatives: bool) -> str:
    """Spearman's correlation of validation's and test's order within one group the page ranks apart."""
    return next(num(a.rho, 2) for a in validation_test_agreement(run(label)) if a.negatives == negatives)


@lru_cache(maxsize=None)
def pooled_primary() -> Dict[str, float]:
    """The CIFAR split's distinct primary tests (parts that share networks repeat a test) in one Holm
    family: the largest Holm p of a *worse*, the smallest of a *not resolved*, and how many decisions
    (``decide`` over the pooled family: Holm *and* the margin) differ from the parts' own."""
    distinct = {}
    for label in DECIDING_PARTS:
        for t in run(label)["tests"]["primary"]:
            distinct[(t["row"], t["against"], round(t["difference"], 12), round(t["se"], 12))] = t
    tests = list(distinct.values())
    pooled = holm([t["p"] for t in tests])
    again = decide([PairedDifference(t["difference"], t["se"], t["se_seeds"], t["se_samples"] or 0.0, t["seeds"] - 1,
                                     t["p"], t["seeds"]) for t in tests], MARGIN, ALPHA)
    return {"tests": len(tests),
            "worse": max(p for p, t in zip(pooled, tests) if t["decision"] == "worse"),
            "not_resolved": min(p for p, t in zip(pooled, tests) if t["decision"] == "not resolved"),
            "changed": sum(d.verdict != t["decision"] for d, t in zip(again, tests))}


def holm_strictest_t(tests: int, seeds: int, digits: int = 1) -> str:
    """The t a difference needs at Holm's strictest step (two-sided 0.05 / ``tests``) with ``seeds`` - 1
    degrees of freedom."""
    return f"{stats.t.ppf(1 - ALPHA / tests / 2, seeds - 1):.{digits}f}"


def negatives_spread(label: str) -> float:
    """The range of the near D_a OSCR areas of the converged approaches trained with negatives, each with
    its paper's detector."""
    return float(np.ptp([np.mean(r["mean_oscr_per_seed"]) for r in papers_rows(run(label)["rows"])
                         if r["converged"] and saw_negatives(r)]))


def samples_floor(label: str, family: str) -> float:
    """What the test samples alone let a family resolve: Holm's strictest step (normal quantile, as with
    endless seeds) times the family's median samples' standard error."""
    tests = run(label)["tests"][family]
    return float(stats.norm.ppf(1 - ALPHA / len(tests) / 2) * np.median([t["se_samples"] for t in tests]))


def equivalent_at_ceiling(label: str) -> str:
    """How many of run ``label``'s *equivalent* calls compare two rows at their ceiling, its pages'
    "equivalent (at ceiling)", of how many."""
    ceiling = rows_at_ceiling(run(label)["rows"])
    equivalent = [t for tests in run(label)["tests"].values() for t in tests if t["decision"] == "equivalent"]
    return f"{sum(mark(t, ceiling).endswith(AT_CEILING) for t in equivalent)} of its {len(equivalent)}"


#: The families whose better and worse calls the overview's conclusions rest on.
DECIDING_FAMILIES = ("primary", "knowns")


def decided_calls(primary: bool) -> List[tuple]:
    """The better or worse calls of the published, not superseded runs with tests, in the families
    the conclusions rest on (``primary``) or the secondary ones: ``(label, test, its mark)``, a test
    that several runs repeat on the same networks with the same mark counted once (the first run's)."""
    calls, seen = [], set()
    for label in published():
        result = run(label)
        if PAGES[label].superseded_by or "tests" not in result:
            continue
        for family, by_row in run_marks(label).items():
            if (family in DECIDING_FAMILIES) == primary:
                for t in result["tests"][family]:
                    key = (family, t["row"], t["against"], t["difference"], by_row[t["row"]])
                    if t["decision"] in ("better", "worse") and key not in seen:
                        seen.add(key)
                        calls.append((label, t, by_row[t["row"]]))
    return calls


def beyond_margin_said(primary: bool) -> str:
    """How many of :func:`decided_calls` pass the minimum-effect test, and (for the deciding families)
    the calls that do not, with their runs and their families' sizes."""
    calls = decided_calls(primary)
    beyond = [c for c in calls if c[2].endswith(BEYOND_MARGIN)]
    short = []
    for label, t, said in calls:
        if primary and not said.endswith(BEYOND_MARGIN):
            size = len(run(label)["tests"][t["family"]])
            low, high = t["interval"]
            short.append(f"{t['row']} in `{label}` ({t['family']}, {signed(t['difference'])} [{signed(low)}, "
                         f"{signed(high)}], a family of {size} test{'s' if size > 1 else ''})")
    return f"in {len(beyond)} of {len(calls)}" + (", all but " + "; ".join(short) if short else "")


def verdicts(label: str, family: str, times: int) -> int:
    """How many of a family's comparisons are better or worse at ``times`` the declared margin."""
    return verdicts_at(run(label)["tests"][family], times * MARGIN)["resolved"]


def cifar_approaches() -> set:
    """The approaches the CIFAR split's parts have run."""
    return {a for label in CIFAR_PARTS for a in run(label)["accuracy"]}


def _missing_on_cifar() -> str:
    """The registered approaches no part of the CIFAR split has run, and how many are registered."""
    missing = [a for a in LOSSES if a not in cifar_approaches()]
    return f"of the {len(list(LOSSES))} registered; not run: {', '.join(missing) if missing else 'none'}"


@lru_cache(maxsize=None)
def validation_ties(label: str, approach: str) -> tuple:
    """How many of an approach's detectors share its most common validation OSCR area (to five
    decimals), how many detectors it has, and that area."""
    areas = [round(r["val"]["oscr"], 5) for r in run(label)["rows"] if r["approach"] == approach]
    value = max(set(areas), key=areas.count)
    return areas.count(value), len(areas), value


def minutes(label: str, fine_tunes: bool) -> str:
    """The range of a run's training time per network (``timings.json``), from scratch or fine-tunes."""
    times = [seconds / 60 for key, seconds in run(label)["meta"]["timings_s"].items()
             if key.endswith("-ft") == fine_tunes]
    return f"{min(times):.1f}-{max(times):.1f}"


def cifar_training_time() -> Dict[str, str]:
    """The CIFAR split's networks over its deciding parts, each approach and seed counted once (a part
    that copied another's networks repeats their times): how many, and their training hours summed."""
    times: Dict[str, float] = {}
    for label in DECIDING_PARTS:
        for key, seconds in run(label)["meta"]["timings_s"].items():
            times.setdefault(key, seconds)
    return {"networks": str(len(times)), "hours": f"{sum(times.values()) / 3600:.1f}",
            "parts": str(len(DECIDING_PARTS))}


def threshold_within_noise(converged: bool) -> str:
    """The CIFAR split's approaches (:func:`cifar_parts_rows`: each network set once, over the deciding
    parts) whose 95 % t interval over seeds of the mean validation accuracy contains the convergence
    threshold, converged by the rule or not: the rule's verdict on them lies within the seeds' noise."""
    said = []
    for r in cifar_parts_rows():
        threshold, interval = run(r["label"])["min_accuracy"], seed_interval(r["val_per_seed"])
        if interval.low <= threshold <= interval.high and (interval.estimate >= threshold) == converged:
            said.append(f"{r['approach']} {num(interval.estimate)} [{num(interval.low)}, {num(interval.high)}]")
    return ", ".join(sorted(said)) if said else "none"


@lru_cache(maxsize=None)
def cifar_parts_rows() -> tuple:
    """Every approach of the CIFAR split's parts with its paper's detector against its part's Entropic
    Open-Set, one row per network set (a row that parts share, the same networks, is shown once with
    the parts that hold it): validation accuracy, near D_a OSCR and the primary family's decision."""
    rows: Dict[tuple, Dict] = {}
    shown: Dict[tuple, str] = {}  # a tested row's decision as its page marks it (beyond margin)
    for part, label in enumerate(CIFAR_PARTS, start=1):
        if label not in DECIDING_PARTS:
            continue
        result = run(label)
        reference = paper_row(label, result["reference"])
        for approach in result["accuracy"]:
            r = paper_row(label, approach)
            key = (r["row"], tuple(np.round(r["mean_oscr_per_seed"], 12)),
                   tuple(np.round(reference["mean_oscr_per_seed"], 12)))
            tested = [t for t in result["tests"]["primary"] if t["row"] == r["row"]]
            if approach == result["reference"]:
                decision, difference = "the reference", ""
            elif not r["converged"]:
                decision, difference = "*not converged*", ""
            elif not tested:
                decision, difference = "not tested", ""
            else:
                low, high = tested[0]["interval"]
                decision = tested[0]["decision"]
                difference = f"{signed(tested[0]['difference'])} [{signed(low)}, {signed(high)}]"
                shown[r["row"], label] = run_marks(label)["primary"][r["row"]]
            if key in rows:  # the same networks in another part: shown once, so it must read the same
                if rows[key]["decision"] != decision:
                    raise ValueError(f"{r['row']}: the parts that share its networks decide it differently "
                                     f"({rows[key]['decision']!r} in part {rows[key]['parts'][0]}, {decision!r} "
                                     f"in part {part})")
                rows[key]["parts"].append(part)
                continue
            val = r["accuracy_per_seed"]["val"]
            rows[key] = {"parts": [part], "label": label, "approach": approach + recipe_mark(result, approach),
                         "detector": r["detector"],
                         "val_per_seed": val, "val": cell(val),
                         "test_accuracy": format_cell(r["closed_set_accuracy"]),
                         "oscr": cell(r["mean_oscr_per_seed"]), "difference": difference,
                         "decision": decision, "mark": shown.get((r["row"], label), decision)}
    order = {"the reference": 0, "*not converged*": 2}
    return tuple(sorted(rows.values(), key=lambda r: (r["parts"][0], order.get(r["decision"], 1), r["approach"])))


def cifar_tally() -> str:
    """How the CIFAR split's approaches (the reference aside) came out, each counted once: converged
    and tested, by decision, and not converged."""
    decided: Dict[str, set] = {}
    for r in cifar_parts_rows():
        if r["decision"] != "the reference":
            decided.setdefault(r["approach"], set()).add(r["decision"].strip("*"))
    if any(len(d) > 1 for d in decided.values()):
        raise ValueError(f"an approach decided differently on two network sets: {decided}")
    verdicts = [d.pop() for d in decided.values()]
    if set(verdicts) - {"better", "worse", "equivalent", "not resolved", "not converged"}:
        raise ValueError(f"a decision the tally does not count: {sorted(set(verdicts))}")
    tested = {v: verdicts.count(v) for v in ("better", "worse", "equivalent", "not resolved")}
    said = ", ".join(f"{n} {v}" for v, n in tested.items())
    return (f"{len(verdicts)} approaches besides the reference: {sum(tested.values())} converged and tested "
            f"({said}), {verdicts.count('not converged')} not converged")


def cifar_parts_table() -> str:
    """:func:`cifar_parts_rows` as a Markdown table, each part linked to its page."""
    rows = cifar_parts_rows()
    shared = sum(r["decision"] == "the reference" for r in rows) == 1  # every part read the same EOS networks
    against = "against EOS" if shared else "against its part's EOS"
    lines = [f"| part | approach | detector | val acc. | closed-set acc. | near D_a OSCR | {against} | decision |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        parts = ", ".join(f"[{part}]({Path(PAGES[CIFAR_PARTS[part - 1]].page).name})" for part in r["parts"])
        lines.append(f"| {parts} | {r['approach']} | {r['detector']} | {r['val']} | {r['test_accuracy']} | {r['oscr']} | "
                     f"{r['difference']} | {r['mark']} |")
    return "\n".join(lines)


FACTS: Dict[str, Callable[[], str]] = {
    # "How to read the report": the margin against the seeds' spread, and the CIFAR split's EOS rerun
    "osrmnist_seed_sd": lambda: num(seed_sd_median("bench-osr-mnist-split-0", True), 4),
    "osrmnist_seed_sd_all": lambda: num(seed_sd_median("bench-osr-mnist-split-0", False), 4),
    "osrmnist_logitnorm_sd": lambda: num(np.std(paper_row("bench-osr-mnist-split-0", "logitnorm")
                                                ["mean_oscr_per_seed"], ddof=1)),
    "osrcifar_seed_sd": lambda: num(seed_sd_median("bench-osr-cifar10-split-0", True), 4),
    "cifar_softmax_seed_sd": lambda: num(np.std(paper_row(CIFAR_REPORT, "softmax")["mean_oscr_per_seed"], ddof=1),
                                         4),
    "eos_rerun_shift": lambda: num(-paired("bench-cifar-5-paper", "entropic", "bench-cifar-5", "entropic").mean()),
    "eos_rerun_val_first": lambda: num(val_accuracy("bench-cifar-5", "entropic")),
    "eos_rerun_val_second": lambda: num(val_accuracy("bench-cifar-5-paper", "entropic")),
    "eos_rerun_db_first": lambda: num(np.mean(paper_row("bench-cifar-5", "entropic")["test"]["cifar10-horse-ship"]
                                              ["oscr"]["mean"])),
    "eos_rerun_db_second": lambda: num(np.mean(paper_row("bench-cifar-5-paper", "entropic")["test"]
                                               ["cifar10-horse-ship"]["oscr"]["mean"])),
    "eos_rerun_val_seed_moved": lambda: num(np.max(np.abs(np.subtract(seed_accuracies("bench-cifar-5", "entropic"),
                                                                      seed_accuracies("bench-cifar-5-paper",
                                                                                      "entropic"))))),
    # what 5 seeds would resolve, projected from the 3-seed split-0 runs, and the test samples' floor
    **{f"proj_{tag}_{family}_{seeds}": (lambda label=label, family=family, seeds=seeds:
                                         num(projected_resolution(label, family, seeds)))
       for tag, label in (("osrmnist", "bench-osr-mnist-split-0"), ("osrcifar", "bench-osr-cifar10-split-0"))
       for family in ("primary", "approaches", "detectors") for seeds in (3, 5, 10)},
    **{f"{tag}_{family}_tests": (lambda label=label, family=family: family_size(label, family))
       for tag, label in (("osrmnist", "bench-osr-mnist-split-0"), ("osrcifar", "bench-osr-cifar10-split-0"))
       for family in ("primary", "approaches", "detectors")},
    "floor_osrmnist": lambda: span([samples_floor("bench-osr-mnist-split-0", f) for f in ("primary", "approaches",
                                                                                          "detectors")]),
    "floor_osrcifar": lambda: span([samples_floor("bench-osr-cifar10-split-0", f) for f in ("primary", "approaches",
                                                                                            "detectors")]),
    "floor_osrcifar_secondary": lambda: span([samples_floor("bench-osr-cifar10-split-0", f)
                                              for f in ("approaches", "detectors")], 4),
    "holm_t_150_3_seeds": lambda: f"{float(holm_strictest_t(150, 3)):.0f}",
    "holm_t_5_5_seeds": lambda: holm_strictest_t(5, 5, 2),
    "holm_t_79_5_seeds": lambda: holm_strictest_t(79, 5, 2),
    "equivalence_se_3_seeds": lambda: num(equivalence_se(3), 4),
    "equivalence_se_5_seeds": lambda: num(equivalence_se(5), 4),
    "cifar_equivalence_out_of_reach": lambda: ", ".join(
        f"{sum(t['se_samples'] >= equivalence_se(t['seeds']) for t in tests)} of {len(tests)} in the {family} family"
        for family, tests in run(CIFAR_REPORT)["tests"].items() if tests and all(t["se_samples"] for t in tests)),
    "proj_primary_5": lambda: span([projected_resolution(label, "primary", 5)
                                    for label in ("bench-osr-mnist-split-0", "bench-osr-cifar10-split-0")]),
    "proj_secondary_5": lambda: span([projected_resolution(label, family, 5)
                                      for label in ("bench-osr-mnist-split-0", "bench-osr-cifar10-split-0")
                                      for family in ("approaches", "detectors")]),
    # the margin decided again on the CIFAR split: its secondary better or worse, at the margin and at 4 times it
    **{f"cifar_{family}_resolved_at_{times}": (lambda family=family, times=times: str(verdicts(
        CIFAR_REPORT, family, times)))
       for family in ("approaches", "detectors") for times in (1, 4)},
    "paper_lenet_ccr_top": lambda: span([run("bench-lenet-5")["paper"]["ccr"][unknowns][approach]["1e-1"]
                                         for unknowns in run("bench-lenet-5")["paper"]["ccr"]
                                         for approach in ("entropic", "objectosphere")]),
    # the smallest difference each 5-seed run's families resolve
    **{f"{tag}_{family}_{what}": (lambda label=label, family=family, what=what:
                                  resolved(label, family) if what == "resolved" else family_size(label, family))
       for tag, label in (("lenet", "bench-lenet-5"), ("cifar", CIFAR_REPORT),
                          ("osrmnist5", "bench-osr-mnist-split-0-5"),  # the last two: against their projection
                          ("osrcifar5", "bench-osr-cifar10-split-0-5"))
       for family in ("primary", "approaches", "detectors") for what in ("resolved", "tests")},
    # the margin decided again (LeNet++'s two primary pairs it would call worse at half the margin)
    "lenet_softmax_diff": lambda: signed(comparison("bench-lenet-5", "primary", "softmax", "entropic")["difference"],
                                         4),
    "lenet_softmax_holm": lambda: num(comparison("bench-lenet-5", "primary", "softmax", "entropic")["p_holm"], 2),
    "lenet_energyft_diff": lambda: signed(comparison("bench-lenet-5", "primary", "energy-regularized-ft/energy",
                                               "entropic")["difference"], 4),
    "lenet_energyft_holm": lambda: num(comparison("bench-lenet-5", "primary", "energy-regularized-ft/energy",
                                            "entropic")["p_holm"], 2),
    # validation's order against test's (Spearman), per run and group ranked apart
    **{f"agree_{tag}_{group}": (lambda label=label, negatives=(group == "neg"): agreement(label, negatives))
       for tag, label in (("lenet", "bench-lenet-5"), ("cifar1", "bench-cifar-5"), ("cifar3", "bench-cifar-5-more"),
                          ("cifar4", "bench-cifar-5-ft"), ("cifar7", "bench-cifar-5-oe"),
                          ("cifar8", "bench-cifar-5-arpl-cac"),
                          ("osrmnist", "bench-osr-mnist-split-0-5"),
                          ("osrcifar", "bench-osr-cifar10-split-0-5"))
       for group in ("knowns", "neg")},
    "agree_cifar2_neg": lambda: agreement("bench-cifar-5-paper", True),
    # what the ranking rule chose
    **{f"sep_{tag}_{candidate}": (lambda label=label, candidate=candidate: ranking_separation(label, candidate))
       for tag, label in (("lenet", "bench-lenet-5"), ("cifar", CIFAR_REPORT))
       for candidate in ("oscr", "oscr_log", "auroc", "ccr_at_lowest_fpr")},
    **{f"sep_cifarb_{candidate}": (lambda candidate=candidate: ranking_separation("bench-cifar-b-5-paper", candidate))
       for candidate in ("oscr_log", "ccr_at_lowest_fpr")},
    # every choice on validation data: ties on validation, and a validation choice that does not carry
    "val_ties_count": lambda: str(validation_ties("bench-osr-cifar10-split-0", "entropic")[0]),
    "val_ties_total": lambda: str(validation_ties("bench-osr-cifar10-split-0", "entropic")[1]),
    "val_ties_value": lambda: f"{validation_ties('bench-osr-cifar10-split-0', 'entropic')[2]:.5f}",
    "osrcifar_vim_val": lambda: num(row("bench-osr-cifar10-split-0", "softmax/vim")["val"]["oscr"]),
    "osrcifar_vim_test": lambda: num(near_da("bench-osr-cifar10-split-0", "softmax/vim")),
    "osrcifar_mls_test": lambda: num(near_da("bench-osr-cifar10-split-0", "softmax/max-logit")),
    # budgets and time
    "lenet_scratch_minutes": lambda: minutes("bench-lenet-5", fine_tunes=False),
    "lenet_ft_minutes": lambda: minutes("bench-lenet-5", fine_tunes=True),
    **{f"cifar_training_{what}": (lambda what=what: cifar_training_time()[what]) for what in ("networks", "hours", "parts")},
    # the list of results
    "cifar_parts_table": cifar_parts_table,
    "processor_table": processor_table,
    "cifar_tally": cifar_tally,
    "cifar_parts_primary_resolved": lambda: span([run(label)["families"]["primary"]["resolution"]["smallest_resolved"]
                                                  for label in DECIDING_PARTS]),
    "cifar_approaches_run": lambda: str(len(cifar_approaches())),
    "cifar_approaches_missing": lambda: _missing_on_cifar(),
    "lenet_negatives_spread": lambda: num(negatives_spread("bench-lenet-5")),
    "cifar_not_converged": lambda: ", ".join(f"{r['approach']} {num(np.mean(r['val_per_seed']))}"
                                             for r in cifar_parts_rows() if r["decision"] == "*not converged*"),
    "cifar_softmax_val": lambda: num(val_accuracy(CIFAR_REPORT, "softmax")),
    "cifar_untested": lambda: str(sum(r["decision"] == "*not converged*" for r in cifar_parts_rows())),
    "cifar_questions": lambda: str(sum(r["decision"] != "the reference" for r in cifar_parts_rows())),
    "threshold_noise_converged": lambda: threshold_within_noise(True),
    "threshold_noise_not_converged": lambda: threshold_within_noise(False),
    "lenet_at_ceiling": lambda: "{} of its {}".format(*map(len, at_ceiling(run("bench-lenet-5")))),
    "lenet_equivalent_at_ceiling": lambda: equivalent_at_ceiling("bench-lenet-5"),
    "deciding_beyond_margin": lambda: beyond_margin_said(True),
    "secondary_beyond_margin": lambda: beyond_margin_said(False),
    "lenet_softmax_devanagari": lambda: format_cell(row("bench-lenet-5", "softmax")["test"]["devanagari"]
                                                    ["ccr_at_lowest_fpr"]),
    "lenet_eos_devanagari": lambda: format_cell(row("bench-lenet-5", "entropic")["test"]["devanagari"]
                                                ["ccr_at_lowest_fpr"]),
    "lenet_softmax_devanagari_paper": lambda: num(run("bench-lenet-5")["paper"]["ccr"]["devanagari"]["softmax"]["1e-3"]),
    "lenet_softmax_vs_eos": lambda: test_said("bench-lenet-5", "primary", "softmax", "entropic"),
    "lenet_energy_val": lambda: num(val_accuracy("bench-lenet-5", "energy-regularized")),
    "lenet_logitnorm_val": lambda: num(val_accuracy("bench-lenet-5", "logitnorm")),
    "holm_t_9_3_seeds": lambda: holm_strictest_t(9, 3),
    "holm_t_9_5_seeds": lambda: holm_strictest_t(9, 5),
    "scaled": lambda: num(near_da("bench-cifar-5-paper", "objectosphere-scaled")),
    "scaled_second": lambda: test_said("bench-cifar-b-5-paper", "primary", "objectosphere-scaled", "entropic"),
    "scaled_val": lambda: num(row("bench-cifar-5-paper", "objectosphere-scaled")["val"]["oscr"]),
    "scaled_val_eos": lambda: num(row("bench-cifar-5-paper", "entropic")["val"]["oscr"]),
    "scaled_gain": lambda: signed(paired("bench-cifar-5-paper", "objectosphere-scaled",
                                         "bench-cifar-5-paper", "entropic").mean()),
    "scaled_gain_seeds": lambda: " to ".join(signed(x) for x in sorted(
        paired("bench-cifar-5-paper", "objectosphere-scaled", "bench-cifar-5-paper", "entropic"))[::4]),
    "scaled_gain_interval": lambda: t_interval(paired("bench-cifar-5-paper", "objectosphere-scaled",
                                                      "bench-cifar-5-paper", "entropic")),
    "scaled_vs_objectosphere": lambda: signed(comparison("bench-cifar-5-paper", "detectors", "objectosphere-scaled",
                                                   "objectosphere")["difference"]),
    "scaled_vs_objectosphere_holm": lambda: num(comparison("bench-cifar-5-paper", "detectors", "objectosphere-scaled",
                                                     "objectosphere")["p_holm"]),
    "scaled_vs_eos": lambda: signed(comparison("bench-cifar-5-paper", "approaches", "objectosphere-scaled",
                                         "entropic/objectosphere-scaled")["difference"]),
    "scaled_vs_eos_holm": lambda: num(comparison("bench-cifar-5-paper", "approaches", "objectosphere-scaled",
                                           "entropic/objectosphere-scaled")["p_holm"], 2),
    "xeon_again_same": xeon_again_same,
    "xeon_again_reading": lambda: ("a second sitting on one kind of processor moved none of them, so the shift "
                                   "comes with the change of machine (its processor, or anything else that "
                                   "differs), not with the sitting" if "not the others" not in xeon_again_same()
                                   else "a sitting moves networks too"),
    "processor_holm_welch": lambda: processor_holm()["welch"],
    "processor_holm_paired": lambda: processor_holm()["paired"],
    "processor_holm_paired_all": lambda: processor_holm()["paired_all"],
    "pooled_tests": lambda: str(pooled_primary()["tests"]),
    "pooled_changed": lambda: (f"{pooled_primary()['changed']} decisions" if pooled_primary()["changed"]
                               else "no decision"),
    "pooled_worse": lambda: num(pooled_primary()["worse"], 4),
    "pooled_not_resolved": lambda: num(pooled_primary()["not_resolved"], 2),
}


for _module in (result_against_softmax, result_budget, result_centred, result_confirmatory, result_fine_tunes,
                result_near_set, result_osr_splits, result_partition, result_preparation, result_ranking, result_room,
                result_trivial):
    if set(FACTS) & set(_module.FACTS):
        raise ValueError(f"numbers named twice: {sorted(set(FACTS) & set(_module.FACTS))}")
    FACTS.update(_module.FACTS)


@lru_cache(maxsize=None)
def _computed() -> tuple:
    return tuple((name, compute()) for name, compute in FACTS.items())


def facts() -> Dict[str, str]:
    """Every number :data:`FACTS` names, computed from the committed runs (once a process)."""
    return dict(_computed())


if __name__ == "__main__":
    for name, value in facts().items():
        print(f"{name}: {value}")
