"""The benchmark pages' numbers that compare with softmax, the baseline trained on the known classes
alone, computed from the published runs (``result_facts`` gathers them into :data:`FACTS`): the
knowns-only family of the runs whose reports predate it, and the convergence rule with an interval
declared for the reruns of the approaches the threshold leaves untested."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Dict

import numpy as np

from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN, bounded_sample_se, family_pairs, mark
from agnostophobia.experiments.benchmark_rows import (ACCURACY_MARGIN_SES, KNOWNS_ONLY_REFERENCE, accuracy_margin_for,
                                                      accuracy_not_worse, papers_rows, saw_negatives)
from agnostophobia.metrics import beyond_margin, decide, paired_difference, smallest_resolved_difference
from result_runs import CIFAR_REPORT, DECIDING_PARTS, cell, equivalence_se, num, paper_row, run, signed

#: The runs of each protocol whose approaches trained on the knowns alone are compared with softmax.
KNOWNS_ONLY_RUNS = {"CIFAR-10 split": DECIDING_PARTS, "LeNet++": ("bench-lenet-5",)}


@lru_cache(maxsize=None)
def knowns_only(protocol: str) -> tuple:
    """The knowns-only family (``family_pairs(..., "knowns", ...)``: each converged approach trained on
    the knowns alone, its paper's detector, against softmax with max-softmax) of a protocol's runs
    (:data:`KNOWNS_ONLY_RUNS`), whose reports predate the family: from their stored per-seed values,
    the samples' standard error bounded by ``bounded_sample_se`` from the primary family's against
    the reference, the runs' shared networks (a row several runs hold must read alike), decided as
    one family: ``((row, base, PairedDifference, Decision), ...)``."""
    rows, primary = {}, {}
    for label in KNOWNS_ONLY_RUNS[protocol]:
        for r in run(label)["rows"]:
            if r["row"] in rows and rows[r["row"]]["mean_oscr_per_seed"] != r["mean_oscr_per_seed"]:
                raise ValueError(f"{r['row']}: two runs of {protocol} hold different networks under one name")
            rows.setdefault(r["row"], r)
        for t in run(label)["tests"]["primary"]:  # a row two runs share must bring the same samples' share
            if t["row"] in primary and primary[t["row"]]["se_samples"] != t["se_samples"]:
                raise ValueError(f"{t['row']}: two runs of {protocol} give its test different samples' shares")
            primary.setdefault(t["row"], t)
    (reference,) = {run(label)["reference"] for label in KNOWNS_ONLY_RUNS[protocol]}
    pairs = family_pairs(list(rows.values()), "knowns", reference)
    differences = [paired_difference(r["mean_oscr_per_seed"], base["mean_oscr_per_seed"], sample_se=bounded_sample_se(
        primary[r["row"]]["se_samples"], primary[base["row"]]["se_samples"])) for r, base in pairs]
    return tuple((r, base, d, decision) for (r, base), d, decision in
                 zip(pairs, differences, decide(differences, MARGIN, ALPHA)))


def _on(protocol: str) -> str:
    """``on the CIFAR-10 split``, ``on LeNet++``."""
    return f"on the {protocol}" if protocol.startswith("CIFAR") else f"on {protocol}"


def knowns_only_untested() -> str:
    """Per protocol of :data:`KNOWNS_ONLY_RUNS`, its approaches trained on the knowns alone (softmax
    aside) that are not converged, so the knowns-only family leaves them out."""
    said = []
    for protocol, labels in KNOWNS_ONLY_RUNS.items():
        names = sorted({r["approach"] for label in labels for r in papers_rows(run(label)["rows"])
                        if not saw_negatives(r) and r["approach"] != KNOWNS_ONLY_REFERENCE and not r["converged"]})
        said.append(f"{', '.join(names) or 'none'} {_on(protocol)}")
    return "; ".join(said)


def knowns_only_table() -> str:
    """:func:`knowns_only` for every protocol, as a Markdown table."""
    lines = [f"| protocol | approach (its paper's detector) | its mean D_a OSCR (CIFAR: near) | "
             f"{KNOWNS_ONLY_REFERENCE}'s | difference [95 % interval] | SE: seeds, samples (at most) | p (Holm) | "
             "decision | val acc., approach / reference |", "|---|---|---|---|---|---|---|---|---|"]
    for protocol in KNOWNS_ONLY_RUNS:
        family = knowns_only(protocol)
        beyond = beyond_margin([d for _, _, d, _ in family], MARGIN, ALPHA)
        for (r, base, d, decision), far in zip(family, beyond):
            interval = d.interval(1 - ALPHA)
            said = mark({"decision": decision.verdict, "seeds": d.n, "row": r["row"]}, beyond=[r["row"]] if far else ())
            lines.append(f"| {protocol} | {r['approach']} ({r['detector']}) | {cell(r['mean_oscr_per_seed'])} | "
                         f"{cell(base['mean_oscr_per_seed'])} | {signed(d.difference)} [{signed(interval.low)}, "
                         f"{signed(interval.high)}] | {num(d.se_seeds, 4)}, {num(d.se_samples, 4)} | "
                         f"{num(decision.p_holm)} | {said} | "
                         f"{' / '.join(cell(x['accuracy_per_seed']['val']) for x in (r, base))} |")
    return "\n".join(lines)


def derived_margin() -> float:
    """The rule's margin on the CIFAR split (:func:`accuracy_margin_for`): two binomial standard errors
    at the threshold on the split's validation knowns, read from the published run."""
    softmax = paper_row(CIFAR_REPORT, KNOWNS_ONLY_REFERENCE)
    return accuracy_margin_for(run(CIFAR_REPORT)["min_accuracy"], softmax["val"]["num_known"])


def margins_again() -> tuple:
    """The margins the published parts are read at again (they decide nothing published): the derived
    one, half and twice it."""
    return (derived_margin() / 2, derived_margin(), 2 * derived_margin())


@lru_cache(maxsize=None)
def _accuracy_rows() -> tuple:
    """Each approach of the CIFAR split's deciding parts (its paper's detector, a network set once)
    but softmax, beside softmax's networks of the same seeds."""
    rows: Dict[str, Dict] = {}
    for label in DECIDING_PARTS:
        for r in papers_rows(run(label)["rows"]):
            if r["approach"] != KNOWNS_ONLY_REFERENCE:
                rows.setdefault(r["approach"], r)
    return tuple(sorted(rows.values(), key=lambda r: np.mean(r["accuracy_per_seed"]["val"]), reverse=True))


def _admitted(r: Dict, margin: float) -> bool:
    """Whether the rule with an interval at ``margin`` calls ``r``'s approach converged."""
    softmax = paper_row(CIFAR_REPORT, KNOWNS_ONLY_REFERENCE)
    if r["seeds"] != softmax["seeds"]:
        raise ValueError(f"{r['approach']}: not on softmax's seeds")
    return accuracy_not_worse(r["accuracy_per_seed"]["val"], softmax["accuracy_per_seed"]["val"], margin, ALPHA)


def accuracy_rule_said() -> str:
    """At each margin of :func:`margins_again`, which approaches the rule with an interval
    converges beyond, or short of, the declared threshold's."""
    threshold = run(CIFAR_REPORT)["min_accuracy"]
    said = []
    rows = _accuracy_rows()
    for margin in margins_again():
        more = [r["approach"] for r in rows if _admitted(r, margin) and np.mean(r["accuracy_per_seed"]["val"]) < threshold]
        fewer = [r["approach"] for r in rows if not _admitted(r, margin)
                 and np.mean(r["accuracy_per_seed"]["val"]) >= threshold]
        change = ", ".join([*([f"{len(more)} more ({', '.join(more)})"] if more else []),
                            *([f"{len(fewer)} fewer ({', '.join(fewer)})"] if fewer else [])])
        said.append(f"at {margin:.4f}, {change or 'the same approaches'}")
    return "; ".join(said)


def accuracy_rule_table() -> str:
    """The CIFAR split's approaches under the declared threshold and under the rule with an interval
    (:func:`derived_margin`), at the margins of :func:`margins_again`."""
    softmax = paper_row(CIFAR_REPORT, KNOWNS_ONLY_REFERENCE)
    threshold = run(CIFAR_REPORT)["min_accuracy"]
    margins = " | ".join(f"δ {margin:.4f}" + (" (derived)" if margin == derived_margin() else "")
                         for margin in margins_again())
    lines = [f"| approach | validation accuracy | minus softmax's [90 % interval] | mean ≥ {threshold:g} | {margins} |",
             "|---|---|---|---|" + "---|" * len(margins_again())]
    for r in _accuracy_rows():
        mine, theirs = r["accuracy_per_seed"]["val"], softmax["accuracy_per_seed"]["val"]
        interval = paired_difference(mine, theirs).interval(1 - 2 * ALPHA)
        admitted = ["yes" if _admitted(r, margin) else "no" for margin in margins_again()]
        lines.append(f"| {r['approach']} | {cell(mine)} | {signed(interval.estimate)} [{signed(interval.low)}, "
                     f"{signed(interval.high)}] | {'yes' if np.mean(mine) >= threshold else 'no'} | "
                     f"{' | '.join(admitted)} |")
    return "\n".join(lines)


def knowns_only_reach() -> Dict[str, str]:
    """Per protocol of :data:`KNOWNS_ONLY_RUNS`, what each test of its knowns-only family resolves (the
    smallest observed difference called better or worse at its standard error) and how many of its
    tests could be called equivalent at their seeds even if the seeds agreed exactly (the samples'
    bounded share below :func:`result_runs.equivalence_se`)."""
    resolves, reach = [], []
    for protocol in KNOWNS_ONLY_RUNS:
        family = knowns_only(protocol)
        if not family:
            continue
        each = " and ".join(f"{r['approach']} {num(smallest_resolved_difference(d.se, d.n, ALPHA, len(family), MARGIN))}"
                         for r, _, d, _ in family)
        resolves.append(f"{each} {_on(protocol)}")
        reachable = sum(d.se_samples < equivalence_se(d.n) for *_, d, _ in family)
        reach.append(f"{reachable} of {len(family)} {_on(protocol)}")
    return {"resolves": "; ".join(resolves), "reach": ", ".join(reach)}


FACTS: Dict[str, Callable[[], str]] = {
    "knowns_only_resolves": lambda: knowns_only_reach()["resolves"],
    "knowns_only_reach": lambda: knowns_only_reach()["reach"],
    "accuracy_rule_table": accuracy_rule_table,
    "accuracy_rule_said": accuracy_rule_said,
    "accuracy_margin": lambda: num(derived_margin(), 4),
    "accuracy_margin_ses": lambda: str(ACCURACY_MARGIN_SES),
    "knowns_only_table": knowns_only_table,
    "knowns_only_untested": knowns_only_untested,
    "knowns_only_tally": lambda: ", ".join(
        f"{[d.verdict for protocol in KNOWNS_ONLY_RUNS for *_, d in knowns_only(protocol)].count(verdict)} {verdict}"
        for verdict in ("better", "worse", "equivalent", "not resolved")),
}
