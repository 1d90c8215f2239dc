"""The overview's numbers of the LeNet++ run with the authors' preparation (``result_facts`` gathers
them into :data:`FACTS`): whether preparing the images as the authors' code did moves the converged
softmax's Devanagari CCR toward the paper's, read as ``docs/provenance.md`` declared before the run
trained (``bench-lenet-5-authors-prep``): the difference of the two runs' means with Welch's 95 %
interval, against the benchmark's margin."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np
from scipy import stats

from agnostophobia.experiments.benchmark_comparisons import MARGIN
from agnostophobia.experiments.benchmark_report import format_cell

from result_runs import num, row, run, signed, test_said

#: The run with our preparation and the one with the authors', the same budget, seeds and network.
OURS, AUTHORS = "bench-lenet-5", "bench-lenet-5-authors-prep"
#: The runs with the authors' activation-free network as well as their preparation (softmax alone), at
#: the budget's 3 epochs and at 12.
NETWORK, NETWORK_12 = "bench-lenet-5-authors-net", "bench-lenet-5-authors-net-12"
#: The unknown set whose softmax CCR the paper reads at 0 and ours does not.
UNKNOWN = "devanagari"
#: The other unknown sets of the paper's Table 2, with the names the pages give them.
OTHER_SETS = {"notmnist": "notMNIST", "cifar10": "CIFAR-10"}
#: The paper's column at the lowest FPR the 10,000-image test sets resolve (10 / 10,000).
PAPER_FPR = "1e-3"


def _mean_sd_n(cell: Dict) -> tuple:
    """A published cell's mean, the seeds' standard deviation and seeds, the deviation recovered from its
    95 % t interval; refused where the interval was cut to [0, 1], which hides its true width."""
    if cell["low"] <= 0 or cell["high"] >= 1:
        raise ValueError(f"the interval [{cell['low']}, {cell['high']}] was cut to [0, 1]: its width does not "
                         "give the seeds' deviation")
    n = cell["seeds"]
    half = (cell["high"] - cell["low"]) / 2
    return cell["mean"], half / stats.t.ppf(0.975, n - 1) * np.sqrt(n), n


def ccr(label: str, unknown: str = UNKNOWN) -> Dict:
    """Softmax's CCR at the lowest FPR the test set resolves, in run ``label``."""
    return row(label, "softmax")["test"][unknown]["ccr_at_lowest_fpr"]


def welch(first: str = AUTHORS, second: str = OURS, factor: str = "the preparation", unknown: str = UNKNOWN) -> tuple:
    """The declared reading: softmax's mean on ``unknown`` in run ``first`` minus run ``second``'s,
    Welch's 95 % interval (independent networks: unpaired), and the decision against :data:`MARGIN`
    for the ``factor`` that tells the runs apart."""
    (m1, s1, n1), (m2, s2, n2) = _mean_sd_n(ccr(first, unknown)), _mean_sd_n(ccr(second, unknown))
    va, vb = s1 ** 2 / n1, s2 ** 2 / n2
    df = (va + vb) ** 2 / (va ** 2 / (n1 - 1) + vb ** 2 / (n2 - 1))  # Welch-Satterthwaite
    half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    low, high = m1 - m2 - half, m1 - m2 + half
    if high < -MARGIN:
        said = f"{factor} accounts for at least the margin of the gap"
    elif -MARGIN < low and high < MARGIN:
        said = "ruled out as the cause at convergence"
    else:
        said = f"not resolved at {min(n1, n2)} seeds"
    return m1 - m2, low, high, said


def gap_said(first: str = AUTHORS, second: str = OURS, factor: str = "the preparation") -> str:
    difference, low, high, said = welch(first, second, factor)
    return f"{signed(difference)} [{signed(low)}, {signed(high)}]: {said}"


def network_said(label: str) -> str:
    """What the authors' network adds to their preparation in run ``label``: softmax's Devanagari CCR
    and the declared reading against the preparation alone, or that it did not converge."""
    accuracy = run(label)["accuracy"]["softmax"]["val"]["mean"]
    if row(label, "softmax")["converged"] is False:
        return (f"does not converge (validation accuracy {num(accuracy)} against "
                f"{run(label)['min_accuracy']:g}), so it says nothing about the gap")
    return (f"reads {format_cell(ccr(label))} on Devanagari (validation accuracy {num(accuracy)}), against "
            f"the preparation alone {gap_said(label, AUTHORS, 'the network')}")


def val_said() -> str:
    accuracy = run(AUTHORS)["accuracy"]
    return ", ".join(f"{approach} {num(accuracy[approach]['val']['mean'])}" for approach in ("softmax", "entropic"))


def other_sets() -> str:
    """Softmax's CCR on the other unknown sets the paper reads, ours then the authors' preparation's,
    the difference with Welch's 95 % interval, and the paper's value at the FPR its column gives for
    the lowest the test sets resolve."""
    paper = run(OURS)["paper"]["ccr"]
    said = []
    for unknown, name in OTHER_SETS.items():
        difference, low, high, _ = welch(unknown=unknown)
        said.append(f"{name} {num(ccr(OURS, unknown)['mean'])} → {num(ccr(AUTHORS, unknown)['mean'])}, "
                    f"{signed(difference)} [{signed(low)}, {signed(high)}] (paper {num(paper[unknown]['softmax'][PAPER_FPR])})")
    return "; ".join(said)


def gap_share() -> str:
    """The most of the gap between our softmax's Devanagari CCR and the paper's that the preparation's
    effect can be, by the far end of its interval: a share, in per cent."""
    _, low, high, _ = welch()
    gap = ccr(OURS)["mean"] - run(OURS)["paper"]["ccr"][UNKNOWN]["softmax"][PAPER_FPR]
    return f"{100 * max(abs(low), abs(high)) / gap:.0f} %"


FACTS: Dict[str, Callable[[], str]] = {
    "authors_prep_devanagari": lambda: format_cell(ccr(AUTHORS)),
    "authors_prep_gap": gap_said,
    "authors_prep_val": val_said,
    "authors_prep_vs_eos": lambda: test_said(AUTHORS, "primary", "softmax", "entropic"),
    "authors_prep_other_sets": other_sets,
    "authors_prep_share": gap_share,
    "authors_net": lambda: network_said(NETWORK),
    "authors_net_12": lambda: network_said(NETWORK_12),
}
