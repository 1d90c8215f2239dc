"""Evaluation rows: which (trained approach, detector) pair a reported number belongs to,
its label, and the order of rows in every table and figure.

Every detector is evaluated on every trained approach; a row is one such pair and appears
once. The pairs the paper reports keep the paper's names (Sec. 5, Tables 1-2, Figs. 1-2):
the softmax model thresholded by its softmax is ``softmax`` and with OpenMax ``openmax``;
the background model with its C+1 softmax is ``background``; Entropic Open-Set and
Objectosphere thresholded by their softmax are ``entropic`` and ``objectosphere``, and
Objectosphere with softmax·‖F‖ is ``objectosphere-scaled``. Every other pair is
``<approach>/<detector>``.

Display names are declared once, by what owns them: each loss its ``title`` (``losses``),
each detector its ``title`` (``detectors``); a paper row's title says which of the two it
shows (:func:`row_title`), and figures and reports read that.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

from agnostophobia.detectors import DETECTORS
from agnostophobia.losses import LOSSES


class PaperRow(NamedTuple):
    approach: str  # the trained approach (its loss)
    detector: str
    label: str     # the row's name in tables, figures and metrics.json
    title: str     # display name; {approach} / {detector} stand for the loss's / detector's title


#: The paper's rows, in the paper's order.
PAPER_ROWS = (
    PaperRow("softmax", "softmax", "softmax", "{approach}"),
    PaperRow("softmax", "openmax", "openmax", "{detector}"),
    PaperRow("background", "background", "background", "{approach}"),
    PaperRow("entropic", "softmax", "entropic", "{approach}"),
    PaperRow("objectosphere", "softmax", "objectosphere", "{approach}"),
    PaperRow("objectosphere", "objectosphere-scaled", "objectosphere-scaled", "{approach} (S·‖F‖)"),
)
#: Rows in the paper's order, for every table and figure; the ensemble of Fig. 3 follows.
#: Names not listed follow, by name.
ROW_ORDER = tuple(row.label for row in PAPER_ROWS) + ("ensemble",)


def row_label(approach: str, detector: str) -> str:
    """The display label of the row (approach, detector): the paper's name where it has one."""
    for row in PAPER_ROWS:
        if (row.approach, row.detector) == (approach, detector):
            return row.label
    return f"{approach}/{detector}"


def is_paper_row(row: str) -> bool:
    return any(row == paper.label for paper in PAPER_ROWS)


def paper_rows(approach: str) -> List[Tuple[str, str]]:
    """``(detector, row label)`` of the paper's rows of one trained approach, in order."""
    return [(row.detector, row.label) for row in PAPER_ROWS if row.approach == approach]


def row_title(name: str) -> str:
    """Display name of a paper row or of a trained approach (its loss's ``title``); any other
    name (``<approach>/<detector>`` rows) as it is."""
    for row in PAPER_ROWS:
        if row.label == name:
            return row.title.format(approach=_loss_title(row.approach), detector=DETECTORS.get(row.detector).title)
    return _loss_title(name) if name in LOSSES else name


def _loss_title(approach: str) -> str:
    return getattr(LOSSES.get(approach), "title", approach)


def own_detector(approach: str) -> Optional[str]:
    """The detector the paper thresholds ``approach`` with first (its softmax, or the C+1
    softmax of the background model); None for an approach the paper does not have."""
    rows = paper_rows(approach)
    return rows[0][0] if rows else None


def row_sort_key(name: str):
    return (ROW_ORDER.index(name), "") if name in ROW_ORDER else (len(ROW_ORDER), name)
