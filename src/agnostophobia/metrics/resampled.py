"""AUROC and CCR at one FPR on every resample of a bootstrap given as weights, without drawing a
resample: what the benchmark's bootstrap over the validation samples reads besides the OSCR areas
(:func:`~agnostophobia.metrics.oscr_area_resamples`). One sort of the scores serves every
resample; a drawn resample copies and sorts the (N, C) scores once per resample, which for 200
resamples of 10,000 samples is seconds per detector where this is a few hundredths.

With every weight 1 each equals the metric of the samples themselves (:func:`~agnostophobia.metrics.auroc`,
:func:`~agnostophobia.metrics.ccr_at_fpr`), and with integer weights the metric of the resample the
weights draw (the tests check both, and the AUROC against scikit-learn's weighted
``roc_auc_score``).
"""
from __future__ import annotations

import numpy as np

from ._common import check_confidence, top_class


def check_resample_weights(known_weights, unknown_weights, n_known: int, n_unknown: int, caller: str):
    """``(known_weights, unknown_weights)`` as float64 arrays of shape (B, ``n_known``) and (B,
    ``n_unknown``), or a ValueError naming ``caller`` and the shapes given."""
    known_weights = np.asarray(known_weights, dtype=np.float64)
    unknown_weights = np.asarray(unknown_weights, dtype=np.float64)
    if known_weights.ndim != 2 or unknown_weights.ndim != 2 or known_weights.shape[0] != unknown_weights.shape[0] \
            or known_weights.shape[1] != n_known or unknown_weights.shape[1] != n_unknown:
        raise ValueError(f"{caller}: weights of shape (B, {n_known}) and (B, {n_unknown}) (knowns, unknowns), got "
                         f"{known_weights.shape} and {unknown_weights.shape}")
    return known_weights, unknown_weights


def weight_below(unknown: np.ndarray, unknown_weights: np.ndarray):
    """The unknown scores sorted increasing, and (B, count + 1) the weight of the unknowns below each
    rank on every resample (column r: the r lowest), which a ``searchsorted`` of a known's score
    into the sorted scores indexes."""
    order = np.argsort(unknown, kind="stable")
    below = np.zeros((unknown_weights.shape[0], unknown.size + 1))
    np.cumsum(unknown_weights[:, order], axis=1, out=below[:, 1:])
    return unknown[order], below


def _check_weights(known_weights, unknown_weights, n_known: int, n_unknown: int, caller: str):
    known_weights, unknown_weights = check_resample_weights(known_weights, unknown_weights, n_known, n_unknown,
                                                            caller)
    if (known_weights < 0).any() or (unknown_weights < 0).any() or not (
            known_weights.sum(axis=1) > 0).all() or not (unknown_weights.sum(axis=1) > 0).all():
        raise ValueError(f"{caller}: weights must be >= 0 with a positive sum for the knowns and for the unknowns of "
                         "every resample")
    return known_weights, unknown_weights


def auroc_resamples(confidence, labels, known_weights, unknown_weights) -> np.ndarray:
    r"""The AUROC of known against unknown (:func:`~agnostophobia.metrics.auroc`, ties counted half)
    of each bootstrap resample given as weights.

    On resample :math:`b`, with weights :math:`w_{bi}` of the knowns and :math:`v_{bj}` of the unknowns,

    .. math:: A_b = \frac{\sum_{i \in D_c} \sum_{j \in D_a} w_{bi} v_{bj}
              \left([s_i > s_j] + \tfrac12 [s_i = s_j]\right)}{\sum_i w_{bi} \sum_j v_{bj}}.

    Args:
        confidence: (N,) per-sample confidence, or (N, C) per-class scores read as their maximum.
        labels: (N,) labels, >= 0 known, < 0 unknown; both kinds present.
        known_weights: (B, number of knowns) weights of the knowns, in their order in ``labels``
            (e.g. :func:`~agnostophobia.metrics.resample_weights`).
        unknown_weights: (B, number of unknowns) weights of the unknowns, likewise.

    Returns:
        A float64 array of the B areas.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import auroc, auroc_resamples
        >>> confidence = np.array([0.9, 0.8, 0.4, 0.6, 0.3, 0.2])
        >>> labels = np.array([0, 1, 1, -1, -1, -1])
        >>> ones = auroc_resamples(confidence, labels, np.ones((1, 3)), np.ones((1, 3)))
        >>> round(float(ones[0]), 4), round(auroc(confidence, labels), 4)  # every weight 1: the area itself
        (0.8889, 0.8889)
    """
    confidence, known = check_confidence(confidence, labels)
    known_weights, unknown_weights = _check_weights(known_weights, unknown_weights, int(known.sum()),
                                                    int((~known).sum()), "auroc_resamples")
    unknown, below = weight_below(confidence[~known].astype(np.float64), unknown_weights)
    mine = confidence[known].astype(np.float64)
    strictly_below = below[:, np.searchsorted(unknown, mine, side="left")]
    at_or_below = below[:, np.searchsorted(unknown, mine, side="right")]
    wins = (known_weights * (strictly_below + at_or_below) / 2).sum(axis=1)
    return wins / (known_weights.sum(axis=1) * below[:, -1])


def ccr_at_fpr_resamples(scores, labels, known_weights, unknown_weights, fpr: float) -> np.ndarray:
    r"""The CCR at one FPR (:func:`~agnostophobia.metrics.ccr_at_fpr`: the highest CCR whose FPR is at
    most ``fpr``) of each bootstrap resample given as weights.

    With :math:`V_b = \sum_j v_{bj}`
    the resample's unknowns, :math:`k_b = \lfloor \mathrm{fpr} \cdot V_b \rfloor` false positives are
    allowed, and the limit :math:`u_b` is the unknown score at which the weight of the unknowns from
    the top first exceeds :math:`k_b` (no limit once it never does); a correct known counts when its
    score is above the limit:

    .. math:: \mathrm{CCR}_b = \frac{\sum_{i \in D_c} w_{bi}\, [\text{$i$ correct}]\, [s_i > u_b]}
              {\sum_{i \in D_c} w_{bi}}.

    Args:
        scores: (N, C) per-class scores (a detector's ``scores()``).
        labels: (N,) labels, >= 0 known, < 0 unknown; both kinds present.
        known_weights: (B, number of knowns) weights of the knowns, in their order in ``labels``.
        unknown_weights: (B, number of unknowns) weights of the unknowns, likewise.
        fpr: the target rate in [0, 1].

    Returns:
        A float64 array of the B rates; NaN where the resample's unknowns allow no false positive
        (as :func:`~agnostophobia.metrics.ccr_at_fpr`: the rate is below what they resolve).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import ccr_at_fpr, ccr_at_fpr_resamples
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])
        >>> ccr_at_fpr_resamples(scores, labels, np.ones((1, 4)), np.ones((1, 2)), fpr=0.5), ccr_at_fpr(scores, labels, [0.5])
        (array([0.75]), array([0.75]))
    """
    if not (isinstance(fpr, (int, float, np.floating)) and 0 <= fpr <= 1):
        raise ValueError(f"ccr_at_fpr_resamples: fpr must be a rate in [0, 1], got {fpr!r}")
    top = top_class(scores, labels)
    known_weights, unknown_weights = _check_weights(known_weights, unknown_weights, int(top.known.sum()),
                                                    int((~top.known).sum()), "ccr_at_fpr_resamples")
    unknown = top.score[~top.known].astype(np.float64)
    order = np.argsort(unknown, kind="stable")[::-1]  # decreasing
    from_top = np.cumsum(unknown_weights[:, order], axis=1)
    total = from_top[:, -1]
    # the largest k with k / V <= fpr, in the arithmetic of ccr_at_fpr (a division, not a product)
    allowed = np.floor(fpr * total)
    allowed += (allowed + 1) / total <= fpr
    allowed -= allowed / total > fpr
    limit_at = np.argmax(from_top > allowed[:, None], axis=1)
    limit = np.where(from_top[:, -1] > allowed, unknown[order][limit_at], -np.inf)
    correct = top.correct[top.known]
    known_scores = top.score[top.known].astype(np.float64)
    accepted = correct[None, :] & (known_scores[None, :] > limit[:, None])
    ccr = (known_weights * accepted).sum(axis=1) / known_weights.sum(axis=1)
    return np.where(allowed > 0, ccr, np.nan)
