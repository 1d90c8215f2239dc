"""The benchmark pages' numbers that compare with softmax, the baseline trained on the known classes
alone, computed from the published runs (``result_facts`` gathers them into :data:`FACTS`): the
knowns-only family of the runs whose reports predate it."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Dict

from agnostophobia.experiments.benchmark_comparisons import (ALPHA, KNOWNS_BASELINE, MARGIN, bounded_sample_se,
                                                             family_pairs, mark)
from agnostophobia.experiments.benchmark_rows import papers_rows, saw_negatives
from agnostophobia.metrics import decide, paired_difference
from result_runs import DECIDING_PARTS, cell, num, run, signed

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
        primary.update({t["row"]: t for t in run(label)["tests"]["primary"]})
    (reference,) = {run(label)["reference"] for label in KNOWNS_ONLY_RUNS[protocol]}
    pairs = family_pairs(list(rows.values()), "knowns", reference)
    differences = [paired_difference(r["mean_oscr_per_seed"], base["mean_oscr_per_seed"], sample_se=bounded_sample_se(
        primary[r["row"]]["se_samples"], primary[base["row"]]["se_samples"])) for r, base in pairs]
    return tuple((r, base, d, decision) for (r, base), d, decision in
                 zip(pairs, differences, decide(differences, MARGIN, ALPHA)))


def knowns_only_untested() -> str:
    """Per protocol of :data:`KNOWNS_ONLY_RUNS`, its approaches trained on the knowns alone (softmax
    aside) that are not converged, so the knowns-only family leaves them out."""
    said = []
    for protocol, labels in KNOWNS_ONLY_RUNS.items():
        names = sorted({r["approach"] for label in labels for r in papers_rows(run(label)["rows"])
                        if not saw_negatives(r) and r["approach"] != KNOWNS_BASELINE and not r["converged"]})
        said.append(f"{', '.join(names) or 'none'} on the {protocol}" if protocol.startswith("CIFAR")
                    else f"{', '.join(names) or 'none'} on {protocol}")
    return "; ".join(said)


def knowns_only_table() -> str:
    """:func:`knowns_only` for every protocol, as a Markdown table."""
    lines = [f"| protocol | approach (its paper's detector) | its mean D_a OSCR (CIFAR: near) | {KNOWNS_BASELINE}'s | difference "
             "[95 % interval] | SE: seeds, samples (at most) | p (Holm) | decision |", "|---|---|---|---|---|---|---|---|"]
    for protocol in KNOWNS_ONLY_RUNS:
        for r, base, d, decision in knowns_only(protocol):
            interval = d.interval(1 - ALPHA)
            said = mark({"decision": decision.verdict, "seeds": d.n})
            lines.append(f"| {protocol} | {r['approach']} ({r['detector']}) | {cell(r['mean_oscr_per_seed'])} | "
                         f"{cell(base['mean_oscr_per_seed'])} | {signed(d.difference)} [{signed(interval.low)}, "
                         f"{signed(interval.high)}] | {num(d.se_seeds, 4)}, {num(d.se_samples, 4)} | "
                         f"{num(decision.p_holm)} | {said} |")
    return "\n".join(lines)


FACTS: Dict[str, Callable[[], str]] = {
    "knowns_only_table": knowns_only_table,
    "knowns_only_untested": knowns_only_untested,
    "knowns_only_tally": lambda: ", ".join(
        f"{[d.verdict for protocol in KNOWNS_ONLY_RUNS for *_, d in knowns_only(protocol)].count(verdict)} {verdict}"
        for verdict in ("better", "worse", "equivalent", "not resolved")),
}
