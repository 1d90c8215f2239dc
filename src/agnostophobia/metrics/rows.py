"""Evaluation rows: which (trained approach, detector) pair a reported number belongs to,
its label, and the order of rows in every table and figure.

Every detector is evaluated on every trained approach; a row is one such pair and appears
once. The pairs the paper reports keep the paper's names (Sec. 5, Tables 1-2, Figs. 1-2):
the softmax model thresholded by its softmax is ``softmax`` and with OpenMax ``openmax``;
the background model with its C+1 softmax is ``background``; Entropic Open-Set and
Objectosphere thresholded by their softmax are ``entropic`` and ``objectosphere``, and
Objectosphere with softmax·‖F‖ is ``objectosphere-scaled``. Every other pair is
``<approach>/<detector>``.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

#: The paper's rows: (trained approach, detector, row label), in the paper's order.
PAPER_ROWS: Tuple[Tuple[str, str, str], ...] = (
    ("softmax", "softmax", "softmax"),
    ("softmax", "openmax", "openmax"),
    ("background", "background", "background"),
    ("entropic", "softmax", "entropic"),
    ("objectosphere", "softmax", "objectosphere"),
    ("objectosphere", "objectosphere-scaled", "objectosphere-scaled"),
)
#: Rows in the paper's order, for every table and figure; the ensemble of Fig. 3 follows.
#: Names not listed follow, by name.
ROW_ORDER = tuple(row for _, _, row in PAPER_ROWS) + ("ensemble",)


def row_label(approach: str, detector: str) -> str:
    """The display label of the row (approach, detector): the paper's name where it has one."""
    for paper_approach, paper_detector, row in PAPER_ROWS:
        if (paper_approach, paper_detector) == (approach, detector):
            return row
    return f"{approach}/{detector}"


def is_paper_row(row: str) -> bool:
    return any(row == label for _, _, label in PAPER_ROWS)


def paper_rows(approach: str) -> List[Tuple[str, str]]:
    """``(detector, row label)`` of the paper's rows of one trained approach, in order."""
    return [(detector, row) for name, detector, row in PAPER_ROWS if name == approach]


def own_detector(approach: str) -> Optional[str]:
    """The detector the paper thresholds ``approach`` with first (its softmax, or the C+1
    softmax of the background model); None for an approach the paper does not have."""
    rows = paper_rows(approach)
    return rows[0][0] if rows else None


def row_sort_key(name: str):
    return (ROW_ORDER.index(name), "") if name in ROW_ORDER else (len(ROW_ORDER), name)
