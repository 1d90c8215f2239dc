"""The CIFAR split's fine-tunes as the overview reads them (``result_facts`` gathers their numbers
into :data:`FACTS`): how far each lowered its start network's validation accuracy, and how each of
these untested rows reads against Entropic Open-Set, seed by seed."""
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


def fine_tunes_against_eos() -> str:
    """Each CIFAR fine-tune's mean near D_a OSCR (its paper's detector) minus Entropic Open-Set's, per
    seed of its part: the smallest and largest difference and the seeds above. Untested rows,
    described alike, so that none is singled out (a review found the one that reads well named alone)."""
    said = []
    for label, approach in FINE_TUNE_PARTS.items():
        mine, eos = paper_row(label, approach), paper_row(label, "entropic")
        if mine["seeds"] != eos["seeds"]:
            raise ValueError(f"{label}: {approach} and entropic hold different seeds")
        above = np.subtract(mine["mean_oscr_per_seed"], eos["mean_oscr_per_seed"])
        said.append(f"`{approach}` {signed(above.min())} to {signed(above.max())}, above on "
                    f"{int((above > 0).sum())} of {len(above)} seeds")
    return "; ".join(said)


FACTS = {
    "ft_drop": lambda: span(_fine_tune_drop()),
    "ft_against_eos": fine_tunes_against_eos,
}
