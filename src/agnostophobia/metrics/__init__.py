"""Open-set evaluation (paper Sec. 4.3).

* :mod:`.oscr`: the OSCR curve of Eq. 3, CCR at fixed FPR (Table 2), and the rates of one
  threshold (the smallest with FPR <= t, as ``calibrate`` chooses it on validation data).
* :mod:`.ood`: AUROC, FPR at a TPR, PR curve / average precision, and the
  accuracy- and precision-vs-confidence curves the paper argues against.
* :mod:`.stats`: Table 1's entropy and feature-magnitude statistics.
* ``ties``: the share of samples whose score ties with a sample of the other kind (known vs
  unknown), the part of a ranking that ties decide.
* :mod:`.summary`: every number of one evaluation row (CCR@FPR, AUROC, OSCR areas,
  worst / best class CCR), JSON-ready; :mod:`.rows`: row labels and order.

Inputs are numpy arrays or torch tensors. ``scores`` is (N, C), ``labels`` (N,) with
known classes ``0..C-1`` and any negative label for unknown samples.
"""
from .ood import (ConfidenceCurve, PRCurve, accuracy_vs_confidence, auroc, fpr_at_tpr,
                  precision_recall, precision_vs_confidence)
from .oscr import (PAPER_FPR_VALUES, OperatingPoint, OSCRCurve, ccr_at_fpr, class_ccr_at_fpr, oscr, oscr_area,
                   rates_at_threshold, threshold_at_fpr)
from .stats import EntropyMagnitudeStats, MeanStd, entropy_magnitude_stats
from .summary import FPR_KEYS, finite_or_none, fpr_keys, summarize
from .ties import TIE_FLAG, tied_share

__all__ = [
    "oscr", "ccr_at_fpr", "OSCRCurve", "PAPER_FPR_VALUES", "oscr_area", "class_ccr_at_fpr",
    "threshold_at_fpr", "rates_at_threshold", "OperatingPoint",
    "summarize", "fpr_keys", "FPR_KEYS", "finite_or_none",
    "auroc", "fpr_at_tpr", "precision_recall", "PRCurve",
    "accuracy_vs_confidence", "precision_vs_confidence", "ConfidenceCurve",
    "entropy_magnitude_stats", "EntropyMagnitudeStats", "MeanStd",
    "tied_share", "TIE_FLAG",
]
