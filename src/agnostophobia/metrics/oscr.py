r"""Open-Set Classification Rate (OSCR) curve and CCR at fixed FPR (paper Sec. 4.3, Eq. 3).

With :math:`s(x) = \max_c S_c(x)` and :math:`\hat y(x) = \arg\max_c S_c(x)`, Eq. 3 is

.. math::

    \mathrm{FPR}(\theta) = \frac{|\{x \in D_a : s(x) \ge \theta\}|}{|D_a|}, \qquad
    \mathrm{CCR}(\theta) = \frac{|\{x \in D_c : \hat y(x) = y(x) \wedge s(x) > \theta\}|}{|D_c|}.

Both are step functions of :math:`\theta` that can only change at a sample's score. Exactly
at a score :math:`v` the two comparisons disagree (an unknown scoring :math:`v` counts,
a known scoring :math:`v` does not); for every :math:`\theta` in the open gap between
:math:`v` and the next lower distinct score, ``>=`` and ``>`` agree and

.. math::

    \mathrm{FPR} = |\{x \in D_a : s \ge v\}| / |D_a|, \qquad
    \mathrm{CCR} = |\{x \in D_c : \hat y = y,\ s \ge v\}| / |D_c|,

which has the same FPR as :math:`\theta = v` and a CCR at least as high. These gap
points are therefore all the operating points Eq. 3 can reach that are not dominated,
and they are what :func:`oscr` returns, one per distinct score ``v``: ``thresholds[i] =
v`` reads as the decision rule "accept a sample when ``s(x) >= v``". Knowns that score
exactly 1.0 already count at the first point, threshold 1.0 (the authors' code missed
them until the first lower known).

**CCR at FPR readout (ours).** ``ccr_at_fpr(t)`` is the largest CCR over *all* thresholds
whose FPR is at most ``t`` -- no interpolation, no "nearest FPR" and no shift by one
point. Other code reads the same curve differently (openset-imagenet takes the point
whose FPR is nearest ``t`` within 10 %, which may exceed ``t``; the authors' code reads
each point one step low), so its numbers can differ slightly from ours on the same scores.
Where ``t < 1/|D_a|`` the data cannot resolve the rate and the result is NaN (the
paper's "N/A" in Table 2).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .._validation import check_labels, check_scores, check_threshold, check_vector
from ._common import _float_input, top_class

#: The FPR columns of the paper's Table 2.
PAPER_FPR_VALUES = (1e-4, 1e-3, 1e-2, 1e-1)


class OSCRCurve(NamedTuple):
    """Points of an OSCR curve; unpacks as ``fpr, ccr, thresholds``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import oscr
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.3], [0.4, 0.5]])
        >>> labels = np.array([0, 1, -1, -1])  # two knowns, both correctly classified; two unknowns
        >>> fpr, ccr, thresholds = oscr(scores, labels)
        >>> fpr.tolist(), ccr.tolist()
        ([0.0, 0.0, 0.5, 1.0], [0.5, 1.0, 1.0, 1.0])
    """

    fpr: np.ndarray         # float64 FPR, or int64 false-positive counts with counts=True
    ccr: np.ndarray         # float64 CCR
    thresholds: np.ndarray  # accept s(x) >= thresholds[i]; +inf = accept nothing


def oscr(scores, labels, counts: bool = False) -> OSCRCurve:
    r"""OSCR curve of Eq. 3 (Sec. 4.3): CCR against FPR while the threshold falls.

    Args:
        scores: (N, C) per-class scores ``S_c(x)`` (numpy or torch), finite.
        labels: (N,) integers, ``0..C-1`` for known samples (D_c), negative for unknown
            samples (D_a). Both kinds must be present.
        counts: if True, the first array holds the raw number of false positives
            :math:`|\{x \in D_a : s(x) \ge \theta\}|` instead of the rate (Sec. 4.3,
            last paragraph: compares systems evaluated on different numbers of unknowns).

    Returns:
        ``OSCRCurve(fpr, ccr, thresholds)``, ordered by decreasing threshold, so FPR and
        CCR are both non-decreasing. There is one point per distinct max score ``v``
        (the Eq. 3 values for :math:`\theta` just below ``v``, see the module docstring),
        preceded by the point ``(0, 0)`` at threshold ``+inf`` only when the highest
        score belongs to an unknown -- then rejecting everything is the only way to
        reach FPR 0. Hence the curve always starts at FPR 0, and it ends at FPR 1 with
        CCR equal to the closed-set accuracy on D_c. No other point is added.

    Cost: one ``argsort`` of the N max scores plus linear passes.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import oscr
        >>> curve = oscr(scores, labels)
        >>> curve.fpr, curve.ccr  # the threshold falls: CCR rises only where a known is classified correctly
        (array([0. , 0. , 0.5, 0.5, 0.5, 1. ]), array([0.25, 0.5 , 0.5 , 0.5 , 0.75, 0.75]))
    """
    top = top_class(scores, labels)
    order = np.argsort(top.score)[::-1]        # decreasing score; ties are grouped below
    score = top.score[order]
    false_pos = np.cumsum(~top.known[order])   # unknowns with s >= score[i]
    correct = np.cumsum(top.correct[order])    # correct knowns with s >= score[i]
    last = np.flatnonzero(np.append(score[1:] != score[:-1], True))  # last sample of each tie group
    false_pos, correct, thresholds = false_pos[last], correct[last], score[last]
    if false_pos[0] > 0:                       # top score is an unknown: add "reject all"
        false_pos = np.concatenate([[0], false_pos])
        correct = np.concatenate([[0], correct])
        thresholds = np.concatenate([[np.inf], thresholds]).astype(score.dtype)
    n_unknown = np.count_nonzero(~top.known)
    fpr = false_pos if counts else false_pos / n_unknown
    return OSCRCurve(fpr, correct / np.count_nonzero(top.known), thresholds)


def ccr_at_fpr(scores, labels, fpr_values: Sequence[float] = PAPER_FPR_VALUES,
               counts: bool = False) -> np.ndarray:
    r"""Correct Classification Rate at fixed False Positive Rates (Table 2, Sec. 4.3).

    For each target ``t``: :math:`\max\{\mathrm{CCR}(\theta) : \mathrm{FPR}(\theta) \le t\}`
    over all real thresholds, i.e. the highest point of :func:`oscr` with FPR <= ``t``.
    If ``k`` false positives are allowed, that optimum is
    :math:`|\{x \in D_c : \hat y = y,\ s > u_{(k+1)}\}| / |D_c|`, with :math:`u_{(k+1)}` the
    (k+1)-th highest unknown score (no limit once ``k = |D_a|``), so the full curve is
    never built.

    Args:
        scores, labels: as for :func:`oscr`.
        fpr_values: target rates in ``[0, 1]`` (default: the paper's 1e-4 ... 1e-1), a
            scalar or a sequence.
        counts: if True, the targets are numbers of false positives (``>= 0``, rounded
            down); a count above ``|D_a|`` allows every unknown.

    Returns:
        float64 array aligned with ``fpr_values``. NaN where a rate target is below
        ``1/|D_a|`` (``t * |D_a| < 1``: too few unknowns to measure such a rate; the
        paper's "N/A"). With ``counts=True`` the result is never NaN: zero false
        positives is always reachable (a threshold above every score) and is a
        well-defined operating point.

    Cost: ``np.sort`` of the unknown and of the correctly classified known scores.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import ccr_at_fpr
        >>> ccr_at_fpr(scores, labels, fpr_values=(0.5, 1.0))  # CCR where at most half, and where all, of the unknowns are accepted
        array([0.75, 0.75])
    """
    targets = _check_targets(fpr_values, counts)
    top = top_class(scores, labels)
    allowed, limit = _score_limits(top, targets, counts)
    correct = np.sort(top.score[top.correct])           # increasing
    n_correct = correct.size - np.searchsorted(correct, limit, side="right")  # correct with s > limit
    ccr = n_correct / np.count_nonzero(top.known)
    if not counts:
        ccr[allowed == 0] = np.nan
    return ccr


def _check_targets(fpr_values, counts: bool) -> np.ndarray:
    targets = check_vector(fpr_values, "fpr_values")
    if (targets < 0).any():
        raise ValueError(f"fpr_values must be >= 0, got {targets[targets < 0][:3].tolist()}")
    if not counts and (targets > 1).any():
        raise ValueError(f"fpr_values are rates and must be <= 1, got {targets[targets > 1][:3].tolist()}"
                         " (pass counts=True for numbers of false positives)")
    return targets


def _score_limits(top, targets: np.ndarray, counts: bool):
    """For each target: the number k of false positives it allows and the score limit
    :math:`u_{(k+1)}` (the (k+1)-th highest unknown score; -inf once every unknown is
    allowed) above which a sample is accepted: the single threshold of the readout."""
    unknown = np.sort(top.score[~top.known])[::-1]      # decreasing
    n_unknown = unknown.size
    if counts:
        allowed = np.minimum(np.floor(targets), n_unknown).astype(np.int64)
    else:  # the largest k with k / |D_a| <= t, in the same arithmetic as oscr()'s FPR
        allowed = np.searchsorted(np.arange(n_unknown + 1) / n_unknown, targets, side="right") - 1
    limit = np.where(allowed < n_unknown, unknown[np.minimum(allowed, n_unknown - 1)], -np.inf)
    return allowed, limit


class OperatingPoint(NamedTuple):
    """One threshold and what it gives: accept a sample when ``s(x) >= threshold``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import threshold_at_fpr
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.7], [0.6, 0.3], [0.4, 0.5]])
        >>> labels = np.array([0, 1, -1, -1])
        >>> point = threshold_at_fpr(scores, labels, fpr=0.5)  # one of the two unknowns may pass
        >>> round(point.threshold, 4), point.fpr, point.ccr, point.allowed
        (0.5, 0.5, 1.0, 1)
    """

    threshold: float   # NaN where the unknowns are too few to resolve the target FPR
    fpr: float         # |{x in D_a : s >= threshold}| / |D_a|
    ccr: float         # |{x in D_c : correct, s >= threshold}| / |D_c|
    allowed: int       # the false positives the target allows, k (0: too few unknowns)


def threshold_at_fpr(scores, labels, fpr: float) -> OperatingPoint:
    r"""The smallest threshold whose FPR on the unknowns (labels < 0) is at most ``fpr``, and
    the FPR and CCR (Eq. 3) it gives on the same samples.

    With ``k`` the false positives ``fpr`` allows (the largest ``k`` with ``k / |D_a| <= fpr``)
    and :math:`u_{(k+1)}` the (k+1)-th highest unknown score, every threshold above
    :math:`u_{(k+1)}` has FPR <= ``fpr`` and none at or below it has; the threshold is the
    smallest float64 above :math:`u_{(k+1)}`, so "accept ``s >= threshold``" is exactly the
    rule :func:`ccr_at_fpr` reads its optimum with ("accept ``s > u_(k+1)``"), and the CCR
    returned here is that optimum. Where every unknown is allowed (``fpr = 1``) it is the
    smallest score, accepting every sample. Where ``fpr < 1/|D_a|`` no threshold can be
    told apart from rejecting every unknown: threshold, FPR and CCR are NaN (as in
    :func:`ccr_at_fpr`) and ``allowed`` is 0. ``calibrate`` chooses a deployed threshold this way on validation
    data (Sec. 4.3: an operating point is a threshold on the score).

    Args:
        scores, labels: as for :func:`oscr`.
        fpr: the target false-positive rate, in [0, 1].

    Returns:
        ``OperatingPoint(threshold, fpr, ccr, allowed)``.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import threshold_at_fpr
        >>> point = threshold_at_fpr(scores, labels, fpr=0.5)
        >>> round(point.threshold, 4), point.fpr, point.ccr
        (0.5, 0.5, 0.75)
    """
    targets = _check_targets(fpr, counts=False)
    if targets.size != 1:
        raise ValueError(f"fpr must be one rate, got {targets.size} values")
    top = top_class(scores, labels)
    allowed, limit = _score_limits(top, targets, counts=False)
    if allowed[0] == 0:
        return OperatingPoint(float("nan"), float("nan"), float("nan"), 0)
    threshold = float(np.nextafter(limit[0], np.inf)) if np.isfinite(limit[0]) else float(top.score.min())
    return OperatingPoint(threshold, *_rates(top, threshold), int(allowed[0]))


def rates_at_threshold(scores, labels, threshold: float):
    r"""``(fpr, ccr)`` of the single threshold "accept ``s(x) >= threshold``" (Eq. 3): the
    share of unknowns accepted, :math:`|\{x \in D_a : s(x) \ge \theta\}| / |D_a|`, and of knowns
    accepted and correctly classified, :math:`|\{x \in D_c : \hat y = y,\ s(x) \ge \theta\}| / |D_c|`.

    Args:
        scores, labels: as for :func:`oscr`.
        threshold: accept a sample whose score is at least this: a real number, ``+inf``
            accepting nothing; NaN is refused (it would accept nothing, without a word).

    Returns:
        ``(fpr, ccr)``, two floats in [0, 1].

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import rates_at_threshold
        >>> rates_at_threshold(scores, labels, threshold=0.65)  # (FPR, CCR)
        (0.5, 0.5)
    """
    return _rates(top_class(scores, labels), check_threshold(threshold))


def _rates(top, threshold: float):
    accepted = top.score >= threshold
    return (float(np.count_nonzero(accepted & ~top.known) / np.count_nonzero(~top.known)),
            float(np.count_nonzero(accepted & top.correct) / np.count_nonzero(top.known)))


def class_ccr_at_fpr(scores, labels, fpr: float = 1e-2) -> np.ndarray:
    r"""CCR of each known class at the single threshold that gives FPR ``fpr``, (C,) (Eq. 3 per
    class, Sec. 4.3).

    The threshold is that of :func:`ccr_at_fpr` (accept :math:`s > u_{(k+1)}` with ``k``
    the false positives ``fpr`` allows); class ``c`` then has
    :math:`\mathrm{CCR}_c = |\{x \in D_c : y = c = \hat y,\ s > u_{(k+1)}\}| / |\{x \in D_c : y = c\}|`.
    Their mean weighted by class size is ``ccr_at_fpr``; the smallest and largest say how
    unevenly the classes are served. NaN for a class without known samples, and for
    every class where ``fpr < 1/|D_a|`` (as in :func:`ccr_at_fpr`).

    Args:
        scores, labels: as for :func:`oscr`.
        fpr: the target false-positive rate, in [0, 1].

    Returns:
        A (C,) float64 NumPy array of per-class CCRs in [0, 1], NaN where undefined.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import class_ccr_at_fpr
        >>> class_ccr_at_fpr(scores, labels, fpr=0.5)  # class 0, class 1
        array([1. , 0.5])
    """
    targets = _check_targets(fpr, counts=False)
    if targets.size != 1:
        raise ValueError(f"fpr must be one rate, got {targets.size} values")
    scores = check_scores(_float_input(scores), "scores", ndim=2, keep_float32=True)
    top = top_class(scores, labels)
    allowed, limit = _score_limits(top, targets, counts=False)
    y = check_labels(labels, scores.shape[0])
    size = np.bincount(y[top.known], minlength=scores.shape[1])
    accepted = top.correct & (top.score > limit[0])  # correct: the label is the predicted class
    hits = np.bincount(y[accepted], minlength=scores.shape[1])
    ccr = np.full(scores.shape[1], np.nan)
    if allowed[0] > 0:
        ccr[size > 0] = hits[size > 0] / size[size > 0]
    return ccr


def oscr_area(scores, labels, log_fpr: bool = False, min_fpr: float = 1e-4) -> float:
    r"""Area under the OSCR curve, read as the step function of :func:`ccr_at_fpr`.

    The curve is :math:`\mathrm{CCR}(f) = \max\{\mathrm{CCR}(\theta) : \mathrm{FPR}(\theta) \le f\}`,
    constant between the reachable FPRs :math:`k/|D_a|` (no interpolation between
    operating points, as for CCR at FPR); below :math:`1/|D_a|` it is the CCR with zero
    false positives.

    * ``log_fpr=False``: :math:`\int_0^1 \mathrm{CCR}(f)\,df`, in [0, closed-set accuracy].
    * ``log_fpr=True``: :math:`\frac{1}{-\log_{10} f_0}\int_{\log_{10} f_0}^{0}
      \mathrm{CCR}(10^u)\,du` with :math:`f_0` = ``min_fpr`` (default 10⁻⁴, the paper's
      smallest FPR), i.e. the area over a log FPR axis from ``min_fpr`` to 1 normalised to
      [0, 1]; it weights the low-FPR region the paper's Fig. 1d and Table 2 focus on.

    Args:
        scores, labels: as for :func:`oscr`.
        log_fpr: the area over a log FPR axis (normalised) instead of a linear one.
        min_fpr: where the log axis starts, in (0, 1).

    Returns:
        The area, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import oscr_area
        >>> round(oscr_area(scores, labels), 4)
        0.625
    """
    if not (isinstance(min_fpr, (int, float)) and 0 < min_fpr < 1):
        raise ValueError(f"min_fpr must be in (0, 1), got {min_fpr!r}")
    top = top_class(scores, labels)
    n_unknown = int(np.count_nonzero(~top.known))
    allowed = np.arange(n_unknown)  # k false positives hold for f in [k / |D_a|, (k + 1) / |D_a|)
    _, limit = _score_limits(top, allowed.astype(np.float64), counts=True)
    correct = np.sort(top.score[top.correct])
    ccr = (correct.size - np.searchsorted(correct, limit, side="right")) / np.count_nonzero(top.known)
    low, high = allowed / n_unknown, (allowed + 1) / n_unknown
    if not log_fpr:
        return float(np.sum(ccr * (high - low)))
    low = np.maximum(low, min_fpr)
    width = np.log10(np.maximum(high, min_fpr)) - np.log10(low)  # 0 for steps entirely below min_fpr
    return float(np.sum(ccr * width) / -np.log10(min_fpr))
