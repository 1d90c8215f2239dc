r"""Known-vs-unknown detection measures, and the curves the paper argues against (Sec. 4.3).

Throughout, known samples (label >= 0, D_c) are the *positive* class and unknown samples
(negative label, D_a) the negative class; a sample is *accepted* (called known) when its
confidence is at least the threshold.

* :func:`auroc`, :func:`fpr_at_tpr`: threshold-free detection summaries, common in the
  out-of-distribution literature; they ignore whether accepted knowns are classified
  correctly.
* :func:`precision_recall`: the PR curve and its AUC (average precision), which Sec. 4.3
  shows cannot rank algorithms at a chosen operating point; :func:`aupr_in` and
  :func:`aupr_out`, the two average precisions the out-of-distribution literature reports
  (knowns positive, unknowns positive).
* :func:`accuracy_vs_confidence`, :func:`precision_vs_confidence`: curves over the
  confidence threshold itself (Lakshminarayanan et al. 2017; paper Fig. 3b), which depend
  on how scores are scaled -- unlike the OSCR curve, see :mod:`.oscr`.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve

from .._validation import check_vector
from ._common import check_confidence, top_class


def auroc(confidence, labels) -> float:
    r"""Area under the ROC curve of known-vs-unknown detection (``sklearn.metrics.roc_auc_score``;
    the out-of-distribution convention of Hendrycks & Gimpel, ICLR 2017, not a metric of the paper).

    Equals :math:`P(c(x_k) > c(x_u)) + \tfrac12 P(c(x_k) = c(x_u))` for a random known
    :math:`x_k` and unknown :math:`x_u`.

    Args:
        confidence: (N,) per-sample confidence, higher = more known; or (N, C) per-class scores as a
            detector's ``scores()`` returns them, read as their maximum over classes. NumPy or torch.
        labels: (N,) integers, >= 0 known (positive), < 0 unknown; both must be present.

    Returns:
        The area, a float in [0, 1] (0.5 is no better than chance).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import auroc
        >>> confidence = np.array([0.9, 0.8, 0.4, 0.6, 0.3, 0.2])
        >>> labels = np.array([0, 1, 1, -1, -1, -1])  # >= 0 known, < 0 unknown
        >>> round(auroc(confidence, labels), 4)  # 8 of the 9 (known, unknown) pairs are ranked right
        0.8889
    """
    confidence, known = check_confidence(confidence, labels)
    return float(roc_auc_score(known, confidence))


def fpr_at_tpr(confidence, labels, tpr: float = 0.95) -> float:
    r"""FPR at the first threshold whose TPR reaches ``tpr`` ("FPR95" for 0.95; Hendrycks &
    Gimpel, ICLR 2017).

    :math:`\min_\theta \{\mathrm{FPR}(\theta) : \mathrm{TPR}(\theta) \ge \mathrm{tpr}\}`
    with :math:`\mathrm{TPR}(\theta) = |\{x \in D_c : c(x) \ge \theta\}| / |D_c|` and
    :math:`\mathrm{FPR}(\theta) = |\{x \in D_a : c(x) \ge \theta\}| / |D_a|`, using
    ``sklearn.metrics.roc_curve`` (thresholds at every distinct confidence). The
    comparison with ``tpr`` is exact in floating point (``count / |D_c| >= tpr``), not
    interpolated. **Ties**: a threshold accepts every sample of its confidence, so where a tie
    group straddles the ``tpr`` line the whole group counts (the FPR is that of the highest
    threshold accepting at least ``tpr`` of the knowns), never a share of it.

    Args:
        confidence, labels: as for :func:`auroc`.
        tpr: target true positive rate in (0, 1].

    Returns:
        The false-positive rate, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import fpr_at_tpr
        >>> confidence = np.array([0.9, 0.8, 0.4, 0.6, 0.3, 0.2])
        >>> labels = np.array([0, 1, 1, -1, -1, -1])
        >>> round(fpr_at_tpr(confidence, labels, tpr=0.95), 4)  # all knowns accepted at 0.4: one unknown of three with them
        0.3333
    """
    if not np.isscalar(tpr) or not 0 < float(tpr) <= 1:
        raise ValueError(f"tpr must be a number in (0, 1], got {tpr!r}")
    confidence, known = check_confidence(confidence, labels)
    fpr, tpr_curve, _ = roc_curve(known, confidence, drop_intermediate=False)
    return float(fpr[np.argmax(tpr_curve >= tpr)])  # fpr is non-decreasing: first hit is the min


class PRCurve(NamedTuple):
    """Precision-recall curve of known-vs-unknown detection (``sklearn`` conventions).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import precision_recall
        >>> curve = precision_recall(np.array([0.9, 0.8, 0.3, 0.1]), np.array([0, 1, -1, 0]))
        >>> curve.precision.round(3).tolist(), curve.recall.round(3).tolist(), round(curve.average_precision, 4)
        ([0.75, 0.667, 1.0, 1.0, 1.0], [1.0, 0.667, 0.667, 0.333, 0.0], 0.9167)
    """

    precision: np.ndarray          # one more entry than thresholds, ending in 1
    recall: np.ndarray             # decreasing, ending in 0
    thresholds: np.ndarray         # increasing distinct confidences
    average_precision: float       # AP = sum_n (R_n - R_{n-1}) P_n, a step-wise AUC


def precision_recall(confidence, labels) -> PRCurve:
    r"""Precision-recall curve and its area (average precision), knowns positive (Sec. 4.3).

    At threshold :math:`\theta`: precision = :math:`|\{x \in D_c: c \ge \theta\}| /
    |\{x : c \ge \theta\}|`, recall = TPR. The AUC is ``average_precision_score`` (a step
    sum, not the trapezoid rule, so it is not over-optimistic; the curve is *not* made
    monotonic). The paper's objection: two algorithms can have equal AP and very
    different precision at a chosen recall.

    Args:
        confidence, labels: as for :func:`auroc`.

    Returns:
        A :class:`PRCurve`: the (K+1,) precision and recall arrays, the (K,) thresholds (the
        distinct confidences) and the average precision.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import precision_recall
        >>> confidence = np.array([0.9, 0.8, 0.4, 0.6, 0.3, 0.2])
        >>> labels = np.array([0, 1, 1, -1, -1, -1])
        >>> curve = precision_recall(confidence, labels)
        >>> round(curve.average_precision, 4)
        0.9167
    """
    confidence, known = check_confidence(confidence, labels)
    precision, recall, thresholds = precision_recall_curve(known, confidence)
    return PRCurve(precision, recall, thresholds, float(average_precision_score(known, confidence)))


def aupr_in(confidence, labels) -> float:
    r"""AUPR-In: the average precision of detecting the *knowns*, knowns positive and ranked by
    ``confidence`` (Hendrycks & Gimpel, ICLR 2017; OpenOOD, Yang et al. 2022).

    :math:`\mathrm{AP} = \sum_n (R_n - R_{n-1}) P_n` over the distinct confidences taken as
    thresholds from the highest down, where a sample is accepted when :math:`c(x) \ge \theta`:
    ``sklearn.metrics.average_precision_score(labels >= 0, confidence)``, the same number as
    :func:`precision_recall`'s ``average_precision``. **Ties**: samples of one confidence are
    accepted together (one step of the curve), never split in an order. Chance level is the
    share of knowns.

    Args:
        confidence, labels: as for :func:`auroc`.

    Returns:
        The average precision, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import aupr_in
        >>> round(aupr_in(np.array([0.9, 0.8, 0.3, 0.1]), np.array([0, 1, -1, 0])), 4)
        0.9167
    """
    confidence, known = check_confidence(confidence, labels)
    return float(average_precision_score(known, confidence))


def aupr_out(confidence, labels) -> float:
    r"""AUPR-Out: the average precision of detecting the *unknowns*, unknowns positive and ranked
    by ``-confidence``, the least known-looking first (Hendrycks & Gimpel, ICLR 2017; OpenOOD,
    Yang et al. 2022).

    :math:`\mathrm{AP} = \sum_n (R_n - R_{n-1}) P_n` with recall and precision of the unknowns
    among the samples *rejected* at each threshold, :math:`c(x) \le \theta`:
    ``sklearn.metrics.average_precision_score(labels < 0, -confidence)``. **Ties**: as for
    :func:`aupr_in`, samples of one confidence are rejected together. Chance level is the share
    of unknowns, so AUPR-In and AUPR-Out of one score differ wherever the two sets differ in size.

    Args:
        confidence, labels: as for :func:`auroc`.

    Returns:
        The average precision, a float in [0, 1].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import aupr_out
        >>> round(aupr_out(np.array([0.9, 0.8, 0.3, 0.1]), np.array([0, 1, -1, 0])), 4)
        0.5
    """
    confidence, known = check_confidence(confidence, labels)
    return float(average_precision_score(~known, -np.asarray(confidence, dtype=np.float64)))


class ConfidenceCurve(NamedTuple):
    """A measure over the accepted samples as a function of the confidence threshold.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import accuracy_vs_confidence
        >>> scores = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.45, 0.55]])
        >>> curve = accuracy_vs_confidence(scores, np.array([0, 1, 1, -1]))
        >>> curve.thresholds.tolist(), curve.value.round(3).tolist(), curve.accepted.tolist()
        ([0.55, 0.6, 0.7, 0.9], [0.5, 0.667, 1.0, 1.0], [4, 3, 2, 1])
    """

    thresholds: np.ndarray   # increasing unless given otherwise
    value: np.ndarray        # accuracy or precision; NaN where nothing is accepted
    accepted: np.ndarray     # number of accepted samples, |A(theta)|


def _over_accepted(score: np.ndarray, hit: np.ndarray, thresholds) -> ConfidenceCurve:
    """|{x in A(theta) : hit(x)}| / |A(theta)| with A(theta) = {x : score(x) >= theta}."""
    order = np.argsort(score)
    score = score[order]
    hits_below = np.concatenate([[0], np.cumsum(hit[order])])  # hits among the i lowest scores
    if thresholds is None:
        thresholds = score[np.append(True, score[1:] != score[:-1])]  # distinct, increasing
    else:
        thresholds = check_vector(thresholds, "thresholds")
    first = np.searchsorted(score, thresholds, side="left")       # first accepted index
    accepted = score.size - first
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (hits_below[-1] - hits_below[first]) / accepted
    return ConfidenceCurve(thresholds, np.where(accepted > 0, value, np.nan), accepted)


def accuracy_vs_confidence(scores, labels, thresholds=None) -> ConfidenceCurve:
    r"""Accuracy over the samples accepted at each threshold (Lakshminarayanan et al. 2017).

    Unknowns form an extra class C+1 that no known-class prediction can match, so

    .. math::

        \mathrm{Acc}(\theta) = \frac{|\{x \in A(\theta) \cap D_c : \arg\max_c S_c(x) = y(x)\}|}
                                  {|A(\theta)|}, \qquad
        A(\theta) = \{x : \max_c S_c(x) \ge \theta\}.

    An accepted unknown is an error, a rejected sample does not count at all. Sec. 4.3
    lists the drawbacks: it mixes D_c and D_a (sensitive to their ratio), confidences
    of different algorithms are not comparable, and it changes under a monotonic
    rescaling of the scores (e.g. squaring), which OSCR does not.

    Args:
        scores: (N, C) per-class scores.
        labels: (N,) integers, negative = unknown. Knowns and unknowns may each be absent.
        thresholds: confidence thresholds; default every distinct max score, increasing.

    Returns:
        ``ConfidenceCurve(thresholds, value, accepted)``; ``value`` is NaN where no sample
        is accepted.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import accuracy_vs_confidence
        >>> curve = accuracy_vs_confidence(scores, labels, thresholds=np.array([0.0, 0.6, 0.8]))
        >>> curve.value.round(4), curve.accepted
        (array([0.5, 0.6, 1. ]), array([6, 5, 2]))
    """
    top = top_class(scores, labels, need_known=False, need_unknown=False)
    return _over_accepted(top.score, top.correct, thresholds)


def precision_vs_confidence(scores, labels, thresholds=None) -> ConfidenceCurve:
    r"""Precision of known-vs-unknown detection against the threshold (paper Fig. 3b).

    .. math::

        \mathrm{Prec}(\theta) = \frac{|A(\theta) \cap D_c|}{|A(\theta)|}, \qquad
        A(\theta) = \{x : \max_c S_c(x) \ge \theta\}:

    the fraction of accepted samples that are known, whether or not they are classified
    correctly (that stricter count is :func:`accuracy_vs_confidence`). It is the
    precision of :func:`precision_recall` for the max score, read at the threshold
    instead of at a recall.

    Args:
        scores, labels, thresholds: as for :func:`accuracy_vs_confidence`.

    Returns:
        ``ConfidenceCurve(thresholds, value, accepted)``, as :func:`accuracy_vs_confidence`.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import precision_vs_confidence
        >>> curve = precision_vs_confidence(scores, labels, thresholds=np.array([0.0, 0.6, 0.8]))
        >>> curve.value.round(4), curve.accepted
        (array([0.6667, 0.8   , 1.    ]), array([6, 5, 2]))
    """
    top = top_class(scores, labels, need_known=False, need_unknown=False)
    return _over_accepted(top.score, top.known, thresholds)


#: Thresholds at which confidence curves are reported and drawn (Fig. 3b).
CONFIDENCE_GRID = np.linspace(0.0, 1.0, 201)


def mean_confidence_curves(pairs, thresholds=CONFIDENCE_GRID) -> dict:
    """``{"precision": ..., "accuracy": ...}`` vs ``thresholds``, each the mean over the
    ``(scores, labels)`` pairs (e.g. seeds); NaN where no pair accepts anything."""
    curves = {"precision": [], "accuracy": []}
    for scores, labels in pairs:
        curves["precision"].append(precision_vs_confidence(scores, labels, thresholds).value)
        curves["accuracy"].append(accuracy_vs_confidence(scores, labels, thresholds).value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing accepted
        return {kind: np.nanmean(np.stack(values), axis=0) for kind, values in curves.items()}
