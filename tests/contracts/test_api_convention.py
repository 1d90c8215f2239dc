"""One shape and type convention over the whole API: every registered detector's ``scores()``
returns a NumPy (N, C) float64 array from NumPy or torch inputs, and every metric accepts it;
the threshold-free ones also take the per-sample confidence (N,), the others say in one line
that they need (N, C)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agnostophobia.detectors import DETECTORS
from agnostophobia.metrics import (accuracy_vs_confidence, auroc, ccr_at_fpr, class_ccr_at_fpr, fpr_at_tpr, oscr,
                                   oscr_area, precision_recall, summarize, threshold_at_fpr)

from tests.detectors.test_detectors import C, TEST_FEATURES, TEST_LABELS, TEST_LOGITS, columns, fitted


@pytest.mark.parametrize("name", DETECTORS.names())
def test_scores_are_numpy_n_by_c_from_torch_or_numpy_and_every_metric_takes_them(name):
    detector = fitted(name)
    logits = columns(detector, TEST_LOGITS)
    from_torch = detector.scores(torch.tensor(logits), torch.tensor(TEST_FEATURES))
    from_numpy = detector.scores(logits, TEST_FEATURES)
    for scores in (from_torch, from_numpy):
        assert type(scores) is np.ndarray and scores.shape == (len(TEST_LABELS), C) and scores.dtype == np.float64
    confidence = from_numpy.max(axis=1)
    assert auroc(from_numpy, TEST_LABELS) == auroc(confidence, TEST_LABELS)
    assert fpr_at_tpr(from_numpy, TEST_LABELS) == fpr_at_tpr(confidence, TEST_LABELS)
    assert precision_recall(from_numpy, TEST_LABELS).average_precision == \
        precision_recall(confidence, TEST_LABELS).average_precision
    labels = torch.tensor(TEST_LABELS)  # labels as a tensor too
    assert auroc(torch.tensor(from_numpy), labels) == auroc(confidence, TEST_LABELS)
    for metric in (ccr_at_fpr, oscr, oscr_area, accuracy_vs_confidence):
        metric(from_numpy, labels)
    class_ccr_at_fpr(from_numpy, TEST_LABELS, 0.1)
    threshold_at_fpr(from_numpy, TEST_LABELS, 0.1)
    summarize(from_numpy, TEST_LABELS)


def test_a_metric_that_needs_the_predicted_class_says_so_for_a_confidence():
    confidence = np.linspace(0, 1, len(TEST_LABELS))
    for metric in (ccr_at_fpr, oscr):
        with pytest.raises(ValueError, match=r"^scores must have shape \(N, C\).*suits auroc"):
            metric(confidence, TEST_LABELS)
