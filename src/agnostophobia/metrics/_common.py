"""Shared preparation of (scores, labels) for the open-set metrics."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import check_labels, check_scores, split_known_unknown


class TopClass(NamedTuple):
    """Per-sample view of a score matrix that every open-set metric starts from."""

    score: np.ndarray    # (N,) max_c S_c(x), float32 or float64 like the input
    known: np.ndarray    # (N,) bool, label >= 0 (x in D_c)
    correct: np.ndarray  # (N,) bool, known and argmax_c S_c(x) == label


def _float_input(value):
    """numpy has no bfloat16/float16 fast paths: widen such torch tensors to float32."""
    if hasattr(value, "detach") and str(getattr(value, "dtype", "")) in ("torch.bfloat16", "torch.float16"):
        return value.detach().float()
    return value


def top_class(scores, labels, need_known: bool = True, need_unknown: bool = True) -> TopClass:
    """Validate ``scores`` (N, C) and ``labels`` (N,) and reduce them to the top class.

    The predicted class is ``argmax_c S_c(x)``; on a tie between classes the lowest
    index wins (``numpy.argmax``). Float32 scores stay float32 (no (N, C) copy); the max
    score is gathered at the arg-max instead of running a second reduction.
    """
    if getattr(scores, "ndim", 2) == 1:  # a per-sample confidence: no class to count as correct
        raise ValueError(f"scores must have shape (N, C), the per-class scores a detector's scores() returns (the "
                         f"predicted class is their arg-max), got shape {tuple(scores.shape)}: a per-sample "
                         f"confidence (N,) suits auroc, fpr_at_tpr and precision_recall only")
    scores = check_scores(_float_input(scores), "scores", ndim=2, keep_float32=True)
    labels = check_labels(labels, scores.shape[0], num_classes=scores.shape[1])
    known, _ = split_known_unknown(labels, need_known=need_known, need_unknown=need_unknown)
    pred = scores.argmax(axis=1)
    score = np.take_along_axis(scores, pred[:, None], axis=1)[:, 0]
    return TopClass(score, known, pred == labels)  # pred >= 0, so unknowns are never correct


def check_confidence(confidence, labels, need_known: bool = True, need_unknown: bool = True):
    """Validate a per-sample confidence (N,), or per-class scores (N, C) read as their maximum over
    classes (the score a threshold acts on, as in the OSCR curve), and labels (N,); return
    (confidence (N,), known mask)."""
    if getattr(confidence, "ndim", 1) == 2:
        confidence = check_scores(_float_input(confidence), "confidence", ndim=2, keep_float32=True).max(axis=1)
    confidence = check_scores(_float_input(confidence), "confidence", ndim=1, keep_float32=True)
    labels = check_labels(labels, confidence.shape[0])
    known, _ = split_known_unknown(labels, need_known=need_known, need_unknown=need_unknown)
    return confidence, known
