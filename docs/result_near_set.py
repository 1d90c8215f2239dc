"""The statistics page's numbers of the CIFAR split's near unknowns read on five times the samples
(``result_facts`` gathers them into :data:`FACTS`): the same networks' tests on the protocol's 2,000
near test images and on the 10,000 unused training images of the same classes, as
``near_set_study.py`` wrote them (``results/near-set-xeon.json``; ``docs/provenance.md``,
``bench-cifar-5-xeon-near``, declared the reading before it was made)."""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from typing import Callable, Dict, List, Tuple

import numpy as np

from agnostophobia.experiments.benchmark_comparisons import FAMILIES
from result_pages import DOCS
from result_runs import equivalence_se, num, signed

NEAR_SET_RESULT = DOCS / "results" / "near-set-xeon.json"
#: The order decisions are tallied in.
VERDICTS = ("better", "worse", "equivalent", "not resolved")


@lru_cache(maxsize=None)
def near_set() -> Dict:
    """The committed record of the second reading."""
    return json.loads(NEAR_SET_RESULT.read_text(encoding="utf-8"))


def tests_of(which: str) -> Dict[str, List[Dict]]:
    """The families' tests on the ``published`` set (the protocol's D_a test images) or the ``added`` one."""
    record = near_set()
    return {family: tests for family, tests in record["tests"][record[f"{which}_set"]].items() if tests}


def images(which: str) -> str:
    record = near_set()
    return f"{record['sets'][record[f'{which}_set']]:,}"


def share_ratios() -> np.ndarray:
    """Per test, the samples' share of its standard error on the added set over that on the published one."""
    added = {(f, t["row"], t["against"]): t["se_samples"] for f, tests in tests_of("added").items() for t in tests}
    return np.array([added[(f, t["row"], t["against"])] / t["se_samples"]
                     for f, tests in tests_of("published").items() for t in tests])


def in_reach(tests: List[Dict]) -> int:
    """How many of ``tests`` could be called equivalent at their seed count: the samples' share alone
    below the standard error whose 90 % interval fits inside the margin."""
    return sum(t["se_samples"] < equivalence_se(t["seeds"]) for t in tests)


def tally(tests: List[Dict]) -> str:
    """``1 worse, 16 not resolved``: the decisions in :data:`VERDICTS` order."""
    counts = Counter(t["decision"] for t in tests)
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])


def near_set_table() -> str:
    """Per family: its tests, how many could reach *equivalent*, and the decisions, on each set."""
    published, added = tests_of("published"), tests_of("added")
    head = (f"| family | tests | *equivalent* within reach, {images('published')} / {images('added')} images "
            f"| decisions on the {images('published')} | on the {images('added')} |")
    lines = [head, "|---|---:|---:|---|---|"]
    for family in FAMILIES:
        if family in published:
            lines.append(f"| {family} | {len(published[family])} | {in_reach(published[family])} / "
                         f"{in_reach(added[family])} | {tally(published[family])} | {tally(added[family])} |")
    return "\n".join(lines)


def changed() -> List[Tuple[str, Dict, Dict]]:
    """The tests whose decision differs between the two sets: ``(family, on published, on added)``."""
    added = {(t["row"], t["against"]): t for tests in tests_of("added").values() for t in tests}
    return [(family, t, added[(t["row"], t["against"])]) for family, tests in tests_of("published").items()
            for t in tests if added[(t["row"], t["against"])]["decision"] != t["decision"]]


def changed_list() -> str:
    """The changed decisions as a list, each with its difference on both sets."""
    return "\n".join(f"- `{a['row']}` against `{a['against']}` ({family}): {a['decision']} ({signed(a['difference'], 4)})"
                     f" → {b['decision']} ({signed(b['difference'], 4)})" for family, a, b in changed()) or "- none"


def changed_said() -> str:
    """How many decisions changed, in which families, and how many of them had been decided."""
    families = sorted({family for family, _, _ in changed()}, key=list(FAMILIES).index)
    decided = sum(a["decision"] != "not resolved" for _, a, _ in changed())
    if not changed():
        return "no decision changed"
    return (f"{len(changed())} decisions changed, in the {' and '.join(families)} "
            f"{'family' if len(families) == 1 else 'families'}; "
            f"{'none' if not decided else decided} of them had been decided on the {images('published')} images")


def alike_said() -> str:
    """The families in which every decision is the same on both sets."""
    moved = {family for family, _, _ in changed()}
    alike = [family for family in FAMILIES if family in tests_of("published") and family not in moved]
    return f"The {' and the '.join(alike)} {'family decides' if len(alike) == 1 else 'families decide'}" if alike \
        else "No family decides"


def _primary(which: str) -> Dict:
    (test,) = tests_of(which)["primary"]
    return test


def _all(which: str) -> List[Dict]:
    return [t for tests in tests_of(which).values() for t in tests]


FACTS: Dict[str, Callable[[], str]] = {
    "near_published_images": lambda: images("published"),
    "near_added_images": lambda: images("added"),
    "near_expected_ratio": lambda: num(np.sqrt(near_set()["sets"][near_set()["published_set"]]
                                               / near_set()["sets"][near_set()["added_set"]]), 2),
    "near_share_ratio": lambda: num(float(np.median(share_ratios())), 2),
    "near_share_ratio_span": lambda: f"{num(share_ratios().min(), 2)}-{num(share_ratios().max(), 2)}",
    "near_primary_samples": lambda: f"{num(_primary('published')['se_samples'], 4)} to "
                                    f"{num(_primary('added')['se_samples'], 4)}",
    "near_primary_seeds": lambda: f"{num(_primary('published')['se_seeds'], 4)} and "
                                  f"{num(_primary('added')['se_seeds'], 4)}",
    "near_reach": lambda: (f"{in_reach(_all('published'))} of the {len(_all('published'))} tests on the test images "
                           f"and {in_reach(_all('added'))} on the larger set"),
    "near_set_table": near_set_table,
    "near_changed": changed_list,
    "near_changed_said": changed_said,
    "near_alike": alike_said,
}
