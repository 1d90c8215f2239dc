"""Every number reported for one evaluation row on one unknown set, as a JSON-ready dict.

Used for every row of every experiment (the LeNet++ and CIFAR reproductions, the MLP
ensemble of Fig. 3), so all reports read the same fields:

* ``ccr_at_fpr``: CCR at FPR 1e-4..1e-1 (Table 2; null where the unknown set is too small);
* ``closed_set_accuracy``, ``auroc`` and ``fpr_at_95tpr`` of the max score;
* ``oscr_auc`` and ``oscr_auc_log``: the area under the OSCR curve over a linear FPR
  axis [0, 1] and over log10 FPR from 1e-4 to 1, normalised to [0, 1] (:func:`oscr_area`);
* ``class_ccr_worst`` / ``class_ccr_best``: the CCR of the worst and of the best known
  class at the single threshold that gives FPR 1e-2 (:func:`class_ccr_at_fpr`);
* ``tied_share``: the share of samples whose max score ties with a sample of the other kind
  (known vs unknown, :func:`~agnostophobia.metrics.ties.tied_share`), the part of the ranking
  that ties decide; the report flags a row above 1 %.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from .._validation import check_labels, check_scores
from .ood import auroc, fpr_at_tpr
from .oscr import PAPER_FPR_VALUES, ccr_at_fpr, class_ccr_at_fpr, oscr_area
from .ties import tied_share

#: The FPR at which the per-class CCR is read (the paper's middle column, Table 2).
CLASS_CCR_FPR = 1e-2


def fpr_keys(targets: Sequence[float]) -> List[str]:
    """JSON keys of FPR targets: 1e-4 -> "1e-4".

    Args:
        targets: the FPR targets.

    Returns:
        One key per target, in their order (``0.01`` -> ``"0.01"``).

    Examples:
        >>> from agnostophobia.metrics import fpr_keys
        >>> fpr_keys([1e-4, 0.001, 0.01, 0.1])
        ['1e-4', '1e-3', '1e-2', '1e-1']
    """
    return [f"{t:.0e}".replace("e-0", "e-") for t in targets]


FPR_KEYS = tuple(fpr_keys(PAPER_FPR_VALUES))


def finite_or_none(value) -> Optional[float]:
    """A number for a JSON record: ``value`` as a float, or None where it is None, NaN or infinite.

    Args:
        value: a number or None.

    Returns:
        A float, or None.

    Examples:
        >>> from agnostophobia.metrics import finite_or_none
        >>> finite_or_none(0.5), finite_or_none(float("nan")), finite_or_none(None)
        (0.5, None, None)
    """
    return None if value is None or not np.isfinite(value) else float(value)


def summarize(scores: np.ndarray, labels: np.ndarray, fpr_targets: Sequence[float] = PAPER_FPR_VALUES) -> Dict:
    """The numbers of one row of a report: sample counts, CCR at each FPR target, closed-set
    accuracy, AUROC, FPR at 95 % TPR, OSCR areas and per-class CCR.

    Args:
        scores: (N, C) per-class scores of the known test samples and the unknowns.
        labels: (N,) their labels, negative for the unknowns.
        fpr_targets: the FPRs to read CCR at (default: the paper's 1e-4 ... 1e-1).

    Returns:
        A JSON-ready dict, non-finite values as None.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import summarize
        >>> row = summarize(scores, labels, fpr_targets=(0.5,))
        >>> sorted(row)[:6]
        ['auroc', 'ccr_at_fpr', 'class_ccr_best', 'class_ccr_worst', 'closed_set_accuracy', 'fpr_at_95tpr']
        >>> row["auroc"]
        0.75
    """
    scores = check_scores(scores)
    labels = check_labels(labels, scores.shape[0], num_classes=scores.shape[1])
    known = labels >= 0
    confidence = scores.max(axis=1)
    ccr = ccr_at_fpr(scores, labels, fpr_targets)
    per_class = class_ccr_at_fpr(scores, labels, CLASS_CCR_FPR)
    present = per_class[np.isfinite(per_class)]
    return {
        "num_known": int(known.sum()),
        "num_unknown": int((~known).sum()),
        "ccr_at_fpr": {key: finite_or_none(v) for key, v in zip(fpr_keys(fpr_targets), ccr)},
        "closed_set_accuracy": float((scores[known].argmax(1) == labels[known]).mean()),
        "auroc": float(auroc(confidence, labels)),
        "fpr_at_95tpr": float(fpr_at_tpr(confidence, labels, 0.95)),
        "oscr_auc": oscr_area(scores, labels),
        "oscr_auc_log": oscr_area(scores, labels, log_fpr=True),
        "class_ccr_worst": float(present.min()) if present.size else None,
        "class_ccr_best": float(present.max()) if present.size else None,
        "tied_share": tied_share(confidence, labels),
    }
