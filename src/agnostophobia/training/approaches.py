"""The four approaches of the paper, found by name, and how each one is scored.

=============  =====================  ==========================================
approach       loss (Sec. 4)          scores used for evaluation
=============  =====================  ==========================================
softmax        cross-entropy, knowns  max-softmax ("softmax thresholding"); OpenMax on its logits
background     C+1 cross-entropy      softmax over C+1, known columns only
entropic       J_E (Eq. 1)            max-softmax
objectosphere  J_R (Eq. 2)            max-softmax and softmax·||F|| ("objectosphere-scaled")
=============  =====================  ==========================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from agnostophobia.registry import Registry


@dataclass(frozen=True)
class Approach:
    name: str
    uses_unknowns: bool                    # trains on D_b' (softmax thresholding does not)
    evaluations: Tuple[Tuple[str, str], ...]  # (row name in reports, detector name in agnostophobia.detectors,
    #                                            or "openmax": fitted on the training knowns' logits)


APPROACHES: Registry = Registry("approach")
for _approach in (
    Approach("softmax", False, (("softmax", "softmax"), ("openmax", "openmax"))),
    Approach("background", True, (("background", "background"),)),
    Approach("entropic", True, (("entropic", "softmax"),)),
    Approach("objectosphere", True, (("objectosphere", "softmax"), ("objectosphere-scaled", "objectosphere-scaled"))),
):
    APPROACHES.register(_approach.name)(_approach)


# Rows in the paper's order, for every table and figure; names not listed follow, by name.
ROW_ORDER = ("softmax", "openmax", "background", "entropic", "objectosphere", "objectosphere-scaled", "ensemble")


def row_sort_key(name: str):
    return (ROW_ORDER.index(name), "") if name in ROW_ORDER else (len(ROW_ORDER), name)


def evaluation_rows(approaches) -> Tuple[Tuple[str, str, str], ...]:
    """``(row name, trained approach, score name)`` for every evaluated score."""
    return tuple((row, name, score) for name in approaches for row, score in APPROACHES.get(name).evaluations)
