"""The statistics page's numbers of how far four image statistics no network learns tell each unknown
test set from the test knowns (``result_facts`` gathers them into :data:`FACTS`), as
``benchmarks/trivial_separability.py`` wrote them (:data:`RECORDS`; ``docs/provenance.md``,
``trivial-separability``)."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable, Dict, List

from agnostophobia.data.protocols import unknown_set
from result_pages import DOCS
from result_runs import num

#: Each protocol's committed record.
RECORDS = {"lenet++": DOCS / "results" / "trivial-separability-lenet.json",
           "cifar10-split": DOCS / "results" / "trivial-separability-cifar.json"}
#: The statistics, in the record's names and the table's order; the last is the four together.
STATISTICS = ("mean intensity", "intensity spread", "ink share", "ink in the border", "linear on all four")


@lru_cache(maxsize=None)
def record(protocol: str) -> Dict:
    return json.loads(RECORDS[protocol].read_text(encoding="utf-8"))


def _sets(protocol: str, role: str = "", proximity: str = "") -> List[str]:
    """The protocol's unknown sets of ``role`` (D_a, D_b) and ``proximity`` (near, far); "" any."""
    return [name for name in record(protocol)["sets"]
            if (not role or unknown_set(name).role == role)
            and (not proximity or unknown_set(name).proximity == proximity)]


def extreme(protocol: str, statistic: str, proximity: str = "", pick: Callable = min) -> str:
    """The lowest (``pick=max``: highest) AUROC of ``statistic`` over the protocol's D_a sets of that
    proximity, to five decimals (four would print 0.99996 as a perfect 1.0000)."""
    return num(pick(record(protocol)["sets"][name][statistic] for name in _sets(protocol, "D_a", proximity)), 5)


def table() -> str:
    """Every set of both protocols: its role, proximity, samples and each statistic's oriented AUROC."""
    lines = ["| protocol | unknown set | role | samples | " + " | ".join(STATISTICS) + " |",
             "|---|---|---|---|" + "---|" * len(STATISTICS)]
    for protocol in RECORDS:
        for name in _sets(protocol):
            values = record(protocol)["sets"][name]
            kind = " ".join(x for x in (unknown_set(name).role, unknown_set(name).proximity) if x)
            lines.append(f"| {protocol} | {name} | {kind} | {values['samples']:,} | "
                         + " | ".join(num(values[s], 4) for s in STATISTICS) + " |")
    return "\n".join(lines)


FACTS: Dict[str, Callable[[], str]] = {
    "trivial_table": table,
    "trivial_lenet_da": lambda: extreme("lenet++", "linear on all four"),
    "trivial_lenet_border": lambda: extreme("lenet++", "ink in the border"),
    "trivial_cifar_near": lambda: extreme("cifar10-split", "linear on all four", "near", pick=max),
    "trivial_cifar_far": lambda: extreme("cifar10-split", "linear on all four", "far"),
    "trivial_knowns": lambda: ", ".join(f"{record(protocol)['known_samples']:,} on {name}"
                                        for protocol, name in (("lenet++", "LeNet++"), ("cifar10-split", "the CIFAR split"))),
}
