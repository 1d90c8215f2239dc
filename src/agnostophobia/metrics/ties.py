r"""How much of a known-vs-unknown ranking ties can touch: the share of samples whose score equals
the score of a sample of the other kind (a share of samples, not of the ranking's pairs).

A threshold cannot part a known and an unknown that score the same: every threshold accepts
both or neither. Where many do (a max-softmax that rounds to exactly 1.0 in float32 or float64
for confident knowns and confident unknowns alike, a CDF that saturates at 0 or 1), CCR at a
low FPR reads 0 and the AUROC counts each tied pair as half right, whatever the statistic beneath
the score would say. The detectors' scores are tie-free where their statistics saturate too (a
clip every entry reaches, ReAct's, continues with the unclipped energy), except the ties a detector
declares (:meth:`~agnostophobia.detectors.Detector.ties`: ASH-B gives every sample without a
positive feature one score; :mod:`agnostophobia.detectors`); this measures it, for every evaluation row (:func:`~agnostophobia.metrics.summary.summarize`:
``tied_share``), and the report flags a row above :data:`TIE_FLAG`.
"""
from __future__ import annotations

import numpy as np

from ._common import check_confidence

#: A row whose ``tied_share`` exceeds this (1 %) is flagged in the report: more than 1 % of its
#: samples tie with a sample of the other kind.
TIE_FLAG = 0.01


def tied_share(confidence, labels) -> float:
    r"""Share of the samples whose confidence ties with a sample of the other kind.

    .. math:: \frac{|\{x \in D_c : c(x) \in c(D_a)\}| + |\{x \in D_a : c(x) \in c(D_c)\}|}{|D_c| + |D_a|}.

    It lies in [0, 1]: 0 when no known scores exactly as an unknown does, 1 when every sample ties with one
    of the other kind (e.g. all score 1.0). Ties within one kind do not count: they decide nothing
    between knowns and unknowns.

    Args:
        confidence: (N,) per-sample score, e.g. the max score of a detector's (N, C) scores;
            compared exactly, as every threshold compares it.
        labels: (N,) integers, >= 0 known, < 0 unknown; both kinds must be present.

    Returns:
        The share, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import tied_share
        >>> float(tied_share(np.array([0.9, 0.5, 0.5, 0.2]), np.array([0, 0, -1, -1])))  # the two 0.5s tie across the kinds
        0.5
    """
    confidence, known = check_confidence(confidence, labels)
    known_scores, unknown_scores = confidence[known], confidence[~known]
    tied = np.count_nonzero(np.isin(known_scores, unknown_scores)) + \
        np.count_nonzero(np.isin(unknown_scores, known_scores))
    return tied / confidence.size
