"""Open-set evaluation (paper Sec. 4.3).

* :mod:`.oscr`: the OSCR curve of Eq. 3, CCR at fixed FPR (Table 2), and the rates of one
  threshold (the smallest with FPR <= t, as ``calibrate`` chooses it on validation data).
* :mod:`.ood`: AUROC, FPR at a TPR, PR curve / average precision (AUPR-In, AUPR-Out), and the
  accuracy- and precision-vs-confidence curves the paper argues against.
* :mod:`.resolution`: the FPRs a number of negatives supports (a CCR is reported only at
  FPR >= 10/#negatives), one rule for tuning, ranking and reports.
* :mod:`.stats`: Table 1's entropy and feature-magnitude statistics.
* :mod:`.significance`: intervals over seeds, paired differences whose standard error adds a
  bootstrap over the shared test samples to the seeds' spread, decisions against a declared margin (better,
  worse, equivalent, not resolved) with Holm's adjustment within a family of comparisons.
* ``resampled``: :func:`auroc_resamples` and :func:`ccr_at_fpr_resamples`, AUROC and CCR at one FPR
  on every resample of a bootstrap given as weights.
* ``ties``: the share of samples whose score ties with a sample of the other kind (known vs
  unknown), the part of a ranking that ties decide.
* :mod:`.summary`: every number of one evaluation row (``CCR@FPR``, AUROC, OSCR areas,
  worst / best class CCR), JSON-ready; :mod:`.rows`: row labels and order.

**One convention for the whole API.** Inputs are NumPy arrays or torch tensors (any device,
float16/bfloat16 widened); results are Python floats or NumPy arrays, whatever the input --
as every detector's ``scores()`` returns a NumPy (N, C) float64 array from NumPy or torch
inputs. ``scores`` is (N, C) per-class scores (the OSCR and CCR metrics need the predicted
class, their arg-max); ``labels`` (N,) with known classes ``0..C-1`` and any negative label
for unknown samples. The threshold-free measures (:func:`auroc`, :func:`fpr_at_tpr`,
:func:`precision_recall`) take a per-sample confidence (N,) or the same (N, C) scores, read
as their maximum over classes, so every metric accepts what ``scores()`` returns.
"""
from .ood import (ConfidenceCurve, PRCurve, accuracy_vs_confidence, aupr_in, aupr_out, auroc, fpr_at_tpr,
                  precision_recall, precision_vs_confidence)
from .minimum_effect import beyond_margin, minimum_effect_p
from .oscr import (PAPER_FPR_VALUES, OperatingPoint, OSCRCurve, ccr_at_fpr, class_ccr_at_fpr, oscr, oscr_area,
                   rates_at_threshold, threshold_at_fpr)
from .resampled import auroc_resamples, ccr_at_fpr_resamples
from .resolution import (DEFAULT_FPR, MIN_FALSE_POSITIVES, default_fpr, reported_fprs, smallest_supported_fpr, supported_fprs,
                         supports_fpr, unsupported_fpr_message)
from .significance import (BETTER, EQUIVALENT, NOT_RESOLVED, WORSE, Bootstrap, Decision, Interval, PairedDifference, PairedTest,
                           decide, holm, oscr_area_resamples, paired_bootstrap, paired_difference, paired_seed_test,
                           resample_weights, resampled_se, seed_interval, smallest_resolved_difference)
from .stats import EntropyMagnitudeStats, MeanStd, entropy_magnitude_stats
from .summary import FPR_KEYS, finite_or_none, fpr_keys, summarize
from .ties import TIE_FLAG, tied_share

__all__ = [
    "oscr", "ccr_at_fpr", "OSCRCurve", "PAPER_FPR_VALUES", "oscr_area", "class_ccr_at_fpr",
    "threshold_at_fpr", "rates_at_threshold", "OperatingPoint",
    "summarize", "fpr_keys", "FPR_KEYS", "finite_or_none",
    "auroc", "fpr_at_tpr", "precision_recall", "PRCurve", "aupr_in", "aupr_out",
    "accuracy_vs_confidence", "precision_vs_confidence", "ConfidenceCurve",
    "MIN_FALSE_POSITIVES", "supports_fpr", "smallest_supported_fpr", "supported_fprs", "reported_fprs",
    "unsupported_fpr_message",
    "entropy_magnitude_stats", "EntropyMagnitudeStats", "MeanStd",
    "seed_interval", "paired_seed_test", "paired_bootstrap", "Bootstrap", "holm", "Interval", "PairedTest",
    "paired_difference", "PairedDifference", "decide", "Decision", "smallest_resolved_difference",
    "minimum_effect_p", "beyond_margin",
    "resample_weights", "oscr_area_resamples", "auroc_resamples", "ccr_at_fpr_resamples", "resampled_se",
    "BETTER", "WORSE", "EQUIVALENT", "NOT_RESOLVED",
    "tied_share", "TIE_FLAG",
]
