"""The overview's numbers of the CIFAR split's fine-tunes at a budget with room (``result_facts``
gathers them into :data:`FACTS`): ``bench-cifar-5-room`` in ``docs/provenance.md``, declared before
its networks trained (review 1205e, M1). At the split's 16-epoch budget softmax only just clears the
0.90 threshold, so the fine-tunes, which lose a little accuracy from their start network, fell below
it untested; at 20 epochs each fine-tune is judged against its own start network by the rule with an
interval, and the converged ones are tested against Entropic Open-Set as the declaration says."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from agnostophobia.experiments.benchmark_rows import accuracy_not_worse
from agnostophobia.metrics import paired_difference
from result_runs import ALPHA, num, paper_row, run, seed_accuracies, signed, span, test_said

LABEL = "bench-cifar-5-room"
FINE_TUNES = ("outlier-exposure-ft", "energy-regularized-ft", "mixoe-ft")
REFERENCE = "entropic"


def softmax_said() -> str:
    """Softmax's validation accuracy per seed and mean: the budget's check (the mean must reach the
    threshold)."""
    accuracy = seed_accuracies(LABEL, "softmax")
    threshold = run(LABEL)["min_accuracy"]
    verdict = "reaches" if np.mean(accuracy) >= threshold else "misses"
    return f"{num(np.mean(accuracy), 4)} ({span(accuracy, 4)} over the seeds; {verdict} {num(threshold, 2)})"


def drop_said(approach: str) -> str:
    """What fine-tuning cost ``approach``'s start networks on the validation knowns: the mean paired
    drop, the low end of its one-sided 95 % interval against the declared margin, and both rules'
    verdicts (the interval rule's, which the run applies, and the threshold's, reported beside)."""
    result = run(LABEL)
    mine, start = seed_accuracies(LABEL, approach), seed_accuracies(LABEL, "softmax")
    difference = paired_difference(mine, start)
    low = difference.interval(1 - 2 * ALPHA).low
    by_interval = accuracy_not_worse(mine, start, result["accuracy_margin"])
    by_threshold = np.mean(mine) >= result["min_accuracy"]
    return (f"`{approach}` {signed(difference.difference, 4)} (90 % low end {signed(low, 4)}; "
            f"{'converged' if by_interval else 'not converged'} by the interval, "
            f"{'above' if by_threshold else 'below'} the threshold at {num(np.mean(mine), 4)})")


def tests_said(family: str) -> str:
    """Each fine-tune against Entropic Open-Set in ``family`` (``primary``: the near D_a OSCR area;
    ``log_area``: over a log FPR axis), with the mark its page prints; a fine-tune the rule left
    untested says so."""
    against_reference = {t["row"] for t in run(LABEL)["tests"].get(family, []) if t["against"] == REFERENCE}
    said = []
    for approach in FINE_TUNES:
        name = paper_row(LABEL, approach)["row"]
        said.append(f"`{approach}` " + (test_said(LABEL, family, name, REFERENCE) if name in against_reference
                                         else "*not converged*, untested"))
    return "; ".join(said)


FACTS: Dict[str, Callable[[], str]] = {
    "room_softmax": softmax_said,
    "room_drops": lambda: "; ".join(drop_said(approach) for approach in FINE_TUNES),
    "room_primary": lambda: tests_said("primary"),
    "room_log_area": lambda: tests_said("log_area"),
}
