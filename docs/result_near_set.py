"""The statistics page's numbers of the CIFAR split's near unknowns read on five times the samples
(``result_facts`` gathers them into :data:`FACTS`): on each class partition, the same networks' tests
on the protocol's 2,000 near test images and on the 10,000 unused training images of the same
classes, as ``near_set_study.py`` wrote them (:data:`NEAR_SET_RECORDS`; ``docs/provenance.md``,
``bench-cifar-5-xeon-near`` and ``bench-cifar-b-5``, declared each reading before it was made)."""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from typing import Callable, Dict, List, Tuple

import numpy as np

from agnostophobia.experiments.benchmark_comparisons import FAMILIES
from result_pages import DOCS
from result_runs import equivalence_se, num, signed

#: The second readings, by the protocol whose networks were read: each committed record.
NEAR_SET_RECORDS = {"cifar10-split": DOCS / "results" / "near-set-xeon.json",
                    "cifar10-split-b": DOCS / "results" / "near-set-b-paper.json"}
#: How the pages name each protocol's partition.
PARTITIONS = {"cifar10-split": "first", "cifar10-split-b": "second"}
#: The order decisions are tallied in.
VERDICTS = ("better", "worse", "equivalent", "not resolved")


@lru_cache(maxsize=None)
def near_set(protocol: str) -> Dict:
    """The committed record of a partition's second reading."""
    return json.loads(NEAR_SET_RECORDS[protocol].read_text(encoding="utf-8"))


def tests_of(protocol: str, which: str) -> Dict[str, List[Dict]]:
    """The families' tests on the ``published`` set (the protocol's D_a test images) or the ``added`` one."""
    record = near_set(protocol)
    return {family: tests for family, tests in record["tests"][record[f"{which}_set"]].items() if tests}


def set_size(which: str) -> int:
    """The size of the ``published`` (or ``added``) sets, the same in every record."""
    (size,) = {near_set(p)["sets"][near_set(p)[f"{which}_set"]] for p in NEAR_SET_RECORDS}
    return size


def images(which: str) -> str:
    return f"{set_size(which):,}"


def _pairs(protocol: str) -> List[Tuple[str, Dict, Dict]]:
    """Each test of a partition on both sets: ``(family, on published, on added)``."""
    added = {(f, t["row"], t["against"]): t for f, tests in tests_of(protocol, "added").items() for t in tests}
    return [(family, t, added[(family, t["row"], t["against"])])
            for family, tests in tests_of(protocol, "published").items() for t in tests]


def share_ratios() -> np.ndarray:
    """Per test of every partition, the samples' share of its standard error on the added set over
    that on the published one."""
    return np.array([b["se_samples"] / a["se_samples"] for p in NEAR_SET_RECORDS for _, a, b in _pairs(p)])


def in_reach(tests: List[Dict]) -> int:
    """How many of ``tests`` could be called equivalent at their seed count: the samples' share alone
    below the standard error whose 90 % interval fits inside the margin."""
    return sum(t["se_samples"] < equivalence_se(t["seeds"]) for t in tests)


def tally(tests: List[Dict]) -> str:
    """``1 worse, 16 not resolved``: the decisions in :data:`VERDICTS` order."""
    counts = Counter(t["decision"] for t in tests)
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])


def near_set_table() -> str:
    """Per partition and family: its tests, how many could reach *equivalent*, and the decisions, on each set."""
    head = (f"| partition | family | tests | *equivalent* within reach, {images('published')} / {images('added')} "
            f"images | decisions on the {images('published')} | on the {images('added')} |")
    lines = [head, "|---|---|---:|---:|---|---|"]
    for protocol in NEAR_SET_RECORDS:
        published, added = tests_of(protocol, "published"), tests_of(protocol, "added")
        for family in FAMILIES:
            if family in published:
                lines.append(f"| {PARTITIONS[protocol]} | {family} | {len(published[family])} | "
                             f"{in_reach(published[family])} / {in_reach(added[family])} | "
                             f"{tally(published[family])} | {tally(added[family])} |")
    return "\n".join(lines)


def changed() -> List[Tuple[str, str, Dict, Dict]]:
    """The tests whose decision differs between the two sets: ``(protocol, family, on published, on added)``."""
    return [(p, family, a, b) for p in NEAR_SET_RECORDS for family, a, b in _pairs(p) if a["decision"] != b["decision"]]


def changed_list() -> str:
    """The changed decisions as a list, each with its difference on both sets."""
    return "\n".join(f"- {PARTITIONS[p]} partition, `{a['row']}` against `{a['against']}` ({family}): {a['decision']} "
                     f"({signed(a['difference'], 4)}) → {b['decision']} ({signed(b['difference'], 4)})"
                     for p, family, a, b in changed()) or "- none"


def changed_said() -> str:
    """How many decisions changed, in which families, and how many of them had been decided."""
    if not changed():
        return "no decision changed"
    families = sorted({family for _, family, _, _ in changed()}, key=list(FAMILIES).index)
    decided = sum(a["decision"] != "not resolved" for _, _, a, _ in changed())
    return (f"{len(changed())} decisions changed, in the {' and '.join(families)} "
            f"{'family' if len(families) == 1 else 'families'}; "
            f"{'none' if not decided else decided} of them had been decided on the {images('published')} images")


def alike_said() -> str:
    """The families in which every decision is the same on both sets, on every partition."""
    moved = {family for _, family, _, _ in changed()}
    present = {family for p in NEAR_SET_RECORDS for family in tests_of(p, "published")}
    alike = [family for family in FAMILIES if family in present and family not in moved]
    return f"The {' and the '.join(alike)} {'family decides' if len(alike) == 1 else 'families decide'}" if alike \
        else "No family decides"


def primary_shares() -> str:
    """Per partition and primary test: the samples' share on both sets, and the seeds' share."""
    return "; ".join(f"{PARTITIONS[p]} partition, `{a['row']}`: {num(a['se_samples'], 4)} to {num(b['se_samples'], 4)} "
                     f"(seeds' share {num(a['se_seeds'], 4)})"
                     for p in NEAR_SET_RECORDS for family, a, b in _pairs(p) if family == "primary")


def reach_said() -> str:
    """Per partition: how many tests could reach *equivalent* on each set."""
    said = []
    for p in NEAR_SET_RECORDS:
        pairs = _pairs(p)
        said.append(f"{in_reach([a for _, a, _ in pairs])} of {len(pairs)} on the test images and "
                    f"{in_reach([b for _, _, b in pairs])} on the larger set ({PARTITIONS[p]} partition)")
    return "; ".join(said)


FACTS: Dict[str, Callable[[], str]] = {
    "near_published_images": lambda: images("published"),
    "near_added_images": lambda: images("added"),
    "near_expected_ratio": lambda: num(np.sqrt(set_size("published") / set_size("added")), 2),
    "near_share_ratio": lambda: num(float(np.median(share_ratios())), 2),
    "near_share_ratio_span": lambda: f"{num(share_ratios().min(), 2)}-{num(share_ratios().max(), 2)}",
    "near_share_tests": lambda: str(len(share_ratios())),
    "near_primary_shares": primary_shares,
    "near_reach": reach_said,
    "near_set_table": near_set_table,
    "near_changed": changed_list,
    "near_changed_said": changed_said,
    "near_alike": alike_said,
}
