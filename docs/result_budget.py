"""The overview's projection of the CIFAR split's training time on one processor (``result_facts``
gathers it into :data:`FACTS`; review 1206a, m7): one seed of every approach the split trains from
scratch, measured alone as ``benchmarks/budget_timing.py`` recorded it (:data:`RECORD`;
``docs/provenance.md``, ``budget-timing-cifar``), and the fine-tunes of ``bench-cifar-5-room``,
which trained alone on the same processor model with the budget's fine-tune recipes (their start
networks' epochs do not change what a fine-tune costs)."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable, Dict, List

from agnostophobia.training.fine_tune import start_approach
from result_pages import DOCS
from result_runs import run

RECORD = DOCS / "results" / "budget-timing-cifar.json"
#: The run whose fine-tunes give their seconds: every fine-tune of every seed, alone, this processor model.
FINE_TUNES_FROM = "bench-cifar-5-room"


@lru_cache(maxsize=None)
def record() -> Dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def from_scratch() -> List[str]:
    """The approaches the recorded benchmark trains from scratch (every one that is not a fine-tune);
    an error where the record lacks one of them, since the projection would leave it out."""
    approaches = [a for a in record()["config"]["approaches"] if start_approach(a) is None]
    missing = sorted(set(approaches) - set(record()["seconds"]))
    if missing:
        raise ValueError(f"{RECORD}: seed {record()['seed']} lacks {missing}: the timing run stopped early")
    return approaches


def fine_tune_seconds() -> float:
    """The seconds of every fine-tune of every seed, summed, as :data:`FINE_TUNES_FROM` timed them."""
    asked = {a for a in record()["config"]["approaches"] if start_approach(a) is not None}
    timings = run(FINE_TUNES_FROM)["meta"]["timings_s"]
    found = {key.split("/", 1)[1] for key in timings if key.split("/", 1)[1] in asked}
    if found != asked:
        raise ValueError(f"{FINE_TUNES_FROM} times {sorted(found)}, not every fine-tune of {sorted(asked)}")
    return sum(seconds for key, seconds in timings.items() if key.split("/", 1)[1] in asked)


def seed_minutes() -> float:
    """Wall minutes of one seed's networks from scratch, trained :data:`concurrent_runs` at a time."""
    return sum(record()["seconds"][a] for a in from_scratch()) / record()["concurrent_runs"] / 60


def projected_hours() -> float:
    """The benchmark's training at its seeds, projected: every seed costs what the recorded one did,
    and the fine-tunes what :data:`FINE_TUNES_FROM` measured, at the record's networks at a time."""
    seeds = record()["config"]["seeds"]
    return (seeds * seed_minutes() * 60 + fine_tune_seconds() / record()["concurrent_runs"]) / 3600


FACTS: Dict[str, Callable[[], str]] = {
    "cifar_xeon_seed_minutes": lambda: f"{seed_minutes():.0f}",
    "cifar_xeon_projected_hours": lambda: f"{projected_hours():.1f}",
    "cifar_xeon_approaches": lambda: str(len(from_scratch())),
}
