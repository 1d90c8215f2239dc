"""The numbers ``docs/osr-splits.md`` gives of the ``osr-cifar10`` split-0 run at 5 seeds, computed from its
published ``benchmark.json`` (``result_facts`` gathers them into :data:`FACTS`): each approach's primary
test against softmax, its mark as the run's page prints it, and the log-FPR family's calls; and how the
two protocols' 5-seed runs resolve against the projection from their 3-seed runs
(``docs/guide/benchmark-statistics.md``)."""
from __future__ import annotations

from typing import Callable, Dict

from agnostophobia.experiments.benchmark_comparisons import marks
from result_runs import num, projected_resolution, run, signed, val_accuracy

#: The run the page reports.
OSR10_5 = "bench-osr-cifar10-split-0-5"


def _test(approach: str, family: str = "primary") -> Dict:
    return next(t for t in run(OSR10_5)["tests"][family] if t["approach"] == approach)


def primary_said(approach: str) -> str:
    """An approach's primary test against softmax as the page says it: its mark in italics, then the
    mean difference of the linear area, with its 95 % interval where the test calls a difference, with
    its 90 % interval's place where it calls the rows equivalent."""
    test = _test(approach)
    mark = marks(run(OSR10_5))["primary"][test["row"]]
    said = f"*{mark.split(' (')[0]}*" + (" beyond the margin" if "beyond margin" in mark else "")
    difference = signed(test["difference"], 4 if abs(test["difference"]) < 0.01 else 3)
    if test["decision"] in ("better", "worse"):
        low, high = test["interval"]
        return f"{said} ({difference} [{num(low)}, {num(high)}])"
    if test["decision"] == "equivalent":
        return f"{said} ({difference}, its 90 % interval inside ±{run(OSR10_5)['margin']})"
    return f"{said} ({difference})"


def log_area_called() -> str:
    """The log-FPR family's calls: the approaches it calls better or worse, with their differences."""
    called = [t for t in run(OSR10_5)["tests"]["log_area"] if t["decision"] in ("better", "worse")]
    return ", ".join(f"{t['approach']} {t['decision']} ({signed(t['difference'])})" for t in called) or "none"


#: Each protocol's 3-seed run (the projection's source) and its 5-seed run, by the pages' tag.
PROJECTED = {"osrmnist": ("bench-osr-mnist-split-0", "bench-osr-mnist-split-0-5"),
             "osrcifar": ("bench-osr-cifar10-split-0", OSR10_5)}


def against_projection(tag: str, family: str) -> str:
    """How finely a family of the 5-seed run resolves, against the 3-seed run's projection to 5 seeds
    (the statistics page's table): its smallest resolved difference over the projected one, said in
    words (within 5 %: about as projected; within 15 %: a little finer or coarser)."""
    projected_from, measured_in = PROJECTED[tag]
    ratio = (run(measured_in)["families"][family]["resolution"]["smallest_resolved"]
             / projected_resolution(projected_from, family, 5))
    if abs(ratio - 1) <= 0.05:
        return "about as projected"
    return ("a little " if abs(ratio - 1) <= 0.15 else "") + ("finer" if ratio < 1 else "coarser") + " than projected"


FACTS: Dict[str, Callable[[], str]] = {
    **{f"{tag}5_{family}_against_projection": (lambda tag=tag, family=family: against_projection(tag, family))
       for tag in PROJECTED for family in ("primary", "approaches", "detectors")},
    **{f"osr10_5_{approach.replace('-', '_')}": (lambda a=approach: primary_said(a))
       for approach in ("arpl", "cac", "logitnorm", "entropic", "outlier-exposure-ft")},
    "osr10_5_log_area_called": log_area_called,
    "osr10_5_arpl_val": lambda: num(val_accuracy(OSR10_5, "arpl")),
    "osr10_5_better": lambda: str(sum(t["decision"] == "better" for t in run(OSR10_5)["tests"]["primary"])),
}
