"""The CIFAR split's fine-tunes as the overview reads them (``result_facts`` gathers their numbers
into :data:`FACTS`): how far each lowered its start network's validation accuracy, and which of
these untested rows read above Entropic Open-Set on every seed."""
from __future__ import annotations

from typing import List

import numpy as np

from result_runs import FINE_TUNE_PARTS, paper_row, seed_accuracies, signed, span


def _fine_tune_drop() -> List[float]:
    """Per seed, how far each fine-tune lowered its softmax start network's validation accuracy."""
    drops = []
    for label, approach in FINE_TUNE_PARTS.items():
        drops += list(np.asarray(seed_accuracies(label, "softmax")) - np.asarray(seed_accuracies(label, approach)))
    return drops


def fine_tunes_above_eos() -> str:
    """The CIFAR fine-tunes whose mean near D_a OSCR (their papers' detectors) reads above Entropic
    Open-Set's on every seed of their part: untested rows, described, with the per-seed differences."""
    said = []
    for label, approach in FINE_TUNE_PARTS.items():
        mine, eos = paper_row(label, approach), paper_row(label, "entropic")
        above = np.subtract(mine["mean_oscr_per_seed"], eos["mean_oscr_per_seed"])
        if mine["seeds"] == eos["seeds"] and (above > 0).all():
            said.append(f"`{approach}`, {signed(above.min())} to {signed(above.max())} on each of {len(above)} seeds")
    return "; ".join(said) or "none"


FACTS = {
    "ft_drop": lambda: span(_fine_tune_drop()),
    "ft_above_eos": fine_tunes_above_eos,
}
