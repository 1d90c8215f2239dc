"""The ranking metric declared per protocol for the runs reported after 2026-12-05 (``result_facts``
gathers its numbers into :data:`FACTS`): each candidate read on the validation numbers of every run
of the protocol published by then, its knowns-only pairs pooled over the runs
(:func:`~agnostophobia.experiments.benchmark_ranking.pooled_candidates`), and the candidate the
ranking rule chooses from them (:func:`~agnostophobia.experiments.benchmark_ranking.largest_separation`).

A review found that each run's rule read a single pair of knowns-only approaches, so the metric
changed between runs of one protocol. The declaration fixes one per protocol, read from every pair
published when it was made; each protocol registers it (``ProtocolSpec.ranking_metric``), and a run
reported later ranks by it (the osr-cifar10 5-seed report passed it as ``--ranking-metric``). Its first form
(:data:`FIRST_DECLARED`) also pooled the pairs of rows trained on negatives; a second review found
that those pairs decided it, and it was amended to the rows the rule reads."""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from agnostophobia.data.protocols import PROTOCOLS
from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN
from agnostophobia.experiments.benchmark_ranking import (group_tests, half_width, largest_separation, pooled_candidates,
                                                          ranked_group, reaches_margin, rule_values)
from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES

from result_runs import run

#: When the declaration was made: before the osr-cifar10 5-seed report was written or read.
DECLARED_ON = "2026-12-05"
#: The runs it read: every published run that ranks its rows (a benchmark over splits summarises
#: runs listed here), as published on :data:`DECLARED_ON`. Runs published later do not move it.
DECLARED_FROM = ("bench-lenet-5", "bench-lenet-5-authors-prep", "bench-lenet-5-authors-net",
                 "bench-lenet-5-authors-net-12", "bench-lenet-5-confirm", "bench-cifar-5", "bench-cifar-5-paper",
                 "bench-cifar-5-more", "bench-cifar-5-ft", "bench-cifar-5-energy-ft", "bench-cifar-5-mixoe-ft",
                 "bench-cifar-5-oe", "bench-cifar-5-arpl-cac", "bench-cifar-5-xeon", "bench-cifar-5-confirm",
                 "bench-cifar-b-5", "bench-cifar-b-5-paper", "bench-osr-mnist-split-0", "bench-osr-mnist-split-0-5",
                 "bench-osr-cifar10-split-0")
#: The protocols behind each ``experiment`` the runs record (the CIFAR split's runs record the ``cifar`` config).
PROTOCOLS_OF = {"lenet++": ("lenet++",), "cifar": ("cifar10-split", "cifar10-split-b"), "osr-mnist": ("osr-mnist",),
                "osr-cifar10": ("osr-cifar10",)}
#: The declaration, per experiment: the metric its later runs rank by, as its protocols register it
#: (``ProtocolSpec.ranking_metric``, which ``benchmark`` ranks by unless ``--ranking-metric`` is given). A
#: test checks that each is the rule's choice from :data:`DECLARED_FROM`, and that an experiment's protocols agree.
DECLARED = {experiment: PROTOCOLS.get(protocols[0]).ranking_metric for experiment, protocols in PROTOCOLS_OF.items()}
#: The first form of the declaration (both groups of rows pooled), which ranked the `osr-cifar10`
#: 5-seed report (AUROC) before the amendment.
FIRST_DECLARED = {"lenet++": "oscr_log", "cifar": "auroc", "osr-mnist": "auroc", "osr-cifar10": "auroc"}
#: The protocols as the page names them.
PROTOCOL_NAMES = {"lenet++": "LeNet++", "cifar": "CIFAR-10 split (both partitions)", "osr-mnist": "`osr-mnist`",
                  "osr-cifar10": "`osr-cifar10`"}


def runs_of(protocol: str) -> List[str]:
    """The runs of :data:`DECLARED_FROM` that ``protocol`` recorded as their experiment."""
    return [label for label in DECLARED_FROM if run(label)["meta"]["experiment"] == protocol]


def pooled(protocol: str) -> List[Dict]:
    """The candidates read on ``protocol``'s runs, pooled."""
    return pooled_candidates([run(label)["rows"] for label in runs_of(protocol)])


def chosen(protocol: str) -> str:
    """The candidate the rule chooses from ``protocol``'s pooled pairs."""
    return largest_separation(pooled(protocol))["metric"]


def _cell(candidate: Dict) -> str:
    if candidate["median_separation"] is None:
        return "—"
    return f"{candidate['median_separation']:.2f} ({candidate['median_gap']:+.3f})"


def pooled_table() -> str:
    """Per protocol: its runs, its pairs, each candidate's median separation in half-widths (its median
    gap to validation accuracy) and the declared metric."""
    head = ("| protocol | runs | pairs | " + " | ".join(RANKING_CANDIDATES.values())
            + " | declared |")
    lines = [head, "|---|---:|---:|" + "---:|" * len(RANKING_CANDIDATES) + "---|"]
    for protocol, name in PROTOCOL_NAMES.items():
        candidates = pooled(protocol)
        lines.append(f"| {name} | {len(runs_of(protocol))} | {candidates[0]['pairs']} | "
                     + " | ".join(_cell(c) for c in candidates)
                     + f" | {RANKING_CANDIDATES[DECLARED[protocol]]} |")
    return "\n".join(lines)


def separation_range(protocol: str) -> str:
    """The smallest and the largest of ``protocol``'s candidates' median separations."""
    separations = [c["median_separation"] for c in pooled(protocol) if c["median_separation"] is not None]
    return f"{min(separations):.2f} to {max(separations):.2f}"


def declared_said() -> str:
    """The declaration in words: each declared metric and the protocols that rank by it."""
    by_metric: Dict[str, List[str]] = {}
    for protocol, metric in DECLARED.items():
        by_metric.setdefault(metric, []).append(PROTOCOL_NAMES[protocol])
    return "; ".join(f"{RANKING_CANDIDATES[metric]} on {', '.join(names)}" for metric, names in by_metric.items())


def declared_half_width(protocol: str) -> float:
    """The median 95 % t half-width over seeds of ``protocol``'s declared metric on validation, over the
    rows the ranking rule reads on its runs (each network set once)."""
    widths = {(row["approach"], tuple(values)): half_width(values)
              for label in runs_of(protocol) for row, values, _ in rule_values(run(label)["rows"], DECLARED[protocol], "val")}
    return float(np.median(list(widths.values())))


def margin_in_ranking_units() -> str:
    """Per protocol, the margin against its declared metric's median validation half-width: what the
    margin, declared for the linear area, means where the ranks and best rows borrow it."""
    widths = {protocol: declared_half_width(protocol) for protocol in PROTOCOL_NAMES}
    return "; ".join(f"{PROTOCOL_NAMES[protocol]} ({RANKING_CANDIDATES[DECLARED[protocol]]}): "
                     f"{width:.4f}, the margin {MARGIN / width:.1f} of it" for protocol, width in widths.items())


def binding_criteria(label: str) -> Dict[str, int]:
    """Over the pairs of ranked rows within a group of run ``label`` (rows trained on negatives apart)
    that differ on validation in its ranking metric: how many pass both criteria of a rank's "beats"
    (the margin, and the paired t-test over seeds Holm-adjusted over the group's pairs,
    :func:`~agnostophobia.experiments.benchmark_ranking.group_tests`), how many the margin alone
    blocks, the test alone, and both."""
    result = run(label)
    metric, counts = result["ranking"]["chosen"], {"beats": 0, "margin": 0, "test": 0, "both": 0}
    for negatives in (False, True):
        for _, _, difference, p_holm in group_tests(ranked_group(result["rows"], negatives), metric):
            if difference == 0:
                continue
            small, unresolved = not reaches_margin(difference), p_holm >= ALPHA
            counts["both" if small and unresolved else "margin" if small else "test" if unresolved
                   else "beats"] += 1
    return counts


def binding_said(label: str) -> str:
    """:func:`binding_criteria` in words."""
    counts = binding_criteria(label)
    return (f"{counts['beats']} pairs beat, the margin alone blocks {counts['margin']}, the test alone "
            f"{counts['test']}, both {counts['both']}")


FACTS = {
    "pooled_ranking_table": pooled_table,
    "declared_ranking_said": declared_said,
    "pooled_ranking_lenet_range": lambda: separation_range("lenet++"),
    "pooled_ranking_runs": lambda: str(len(DECLARED_FROM)),
    "margin_in_ranking_units": margin_in_ranking_units,
    "binding_lenet": lambda: binding_said("bench-lenet-5"),
    "binding_cifar": lambda: binding_said("bench-cifar-5"),
    "binding_osrcifar": lambda: binding_said("bench-osr-cifar10-split-0-5"),
}
