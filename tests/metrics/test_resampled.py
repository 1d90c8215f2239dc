"""AUROC and CCR at one FPR on bootstrap resamples given as weights (agnostophobia.metrics.resampled),
checked against the metrics of the resamples drawn by repeating the samples, and the AUROC against
scikit-learn's weighted roc_auc_score (the same convention: ties count half; scikit-learn takes the
known as the positive class, as ours does)."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from agnostophobia.metrics import (auroc, auroc_resamples, ccr_at_fpr, ccr_at_fpr_resamples, resample_weights,
                                   smallest_supported_fpr)


def _scores_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([rng.integers(0, 4, 150), np.full(110, -1)])
    rng.shuffle(labels)
    scores = rng.normal(size=(260, 4)) + np.where(labels[:, None] == np.arange(4), 1.5, 0.0)
    scores[::6, 0] = 3.0  # ties between knowns and unknowns, as a saturating score makes them
    scores = np.round(scores, 1)  # and many more ties within the set
    return scores, labels


def _drawn(labels, known_weights, unknown_weights, b):
    known, unknown = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    return np.concatenate([np.repeat(known, known_weights[b]), np.repeat(unknown, unknown_weights[b])])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_resamples_are_the_aurocs_of_the_resamples_and_sklearns_weighted_auroc(seed):
    scores, labels = _scores_with_ties(seed)
    n_known, n_unknown = int((labels >= 0).sum()), int((labels < 0).sum())
    ones = auroc_resamples(scores, labels, np.ones((1, n_known)), np.ones((1, n_unknown)))
    assert ones[0] == pytest.approx(auroc(scores, labels), abs=1e-14)
    known_weights, unknown_weights = resample_weights(n_known, 15, seed), resample_weights(n_unknown, 15, seed + 9)
    areas = auroc_resamples(scores, labels, known_weights, unknown_weights)
    weights = np.empty((15, labels.size))
    weights[:, labels >= 0], weights[:, labels < 0] = known_weights, unknown_weights
    for b in range(15):
        index = _drawn(labels, known_weights, unknown_weights, b)
        assert areas[b] == pytest.approx(auroc(scores[index], labels[index]), abs=1e-12)
        assert areas[b] == pytest.approx(roc_auc_score(labels >= 0, scores.max(axis=1), sample_weight=weights[b]),
                                         abs=1e-12)
    assert areas.std() > 0  # the resamples differ


@pytest.mark.parametrize("fpr", [10 / 110, 0.05, 0.25, 1.0, 0.0])
def test_ccr_at_fpr_resamples_are_the_ccrs_of_the_resamples(fpr):
    scores, labels = _scores_with_ties(3)
    n_known, n_unknown = int((labels >= 0).sum()), int((labels < 0).sum())
    ones = ccr_at_fpr_resamples(scores, labels, np.ones((1, n_known)), np.ones((1, n_unknown)), fpr)
    np.testing.assert_allclose(ones, ccr_at_fpr(scores, labels, [fpr]), atol=1e-14)
    known_weights, unknown_weights = resample_weights(n_known, 15, 4), resample_weights(n_unknown, 15, 5)
    rates = ccr_at_fpr_resamples(scores, labels, known_weights, unknown_weights, fpr)
    for b in range(15):
        index = _drawn(labels, known_weights, unknown_weights, b)
        np.testing.assert_allclose(rates[b], ccr_at_fpr(scores[index], labels[index], [fpr])[0], atol=1e-12)
    assert np.isnan(rates).all() if fpr == 0.0 else rates.std() > 0


def test_the_lowest_supported_fpr_allows_ten_false_positives_on_every_resample():
    """10/n in floating point times n can fall short of 10: the count of false positives it allows
    is still 10, as ccr_at_fpr reads it (the smallest FPR the benchmark ranks by)."""
    for n_unknown in (110, 3000, 4573, 7001):
        lowest = smallest_supported_fpr(n_unknown)
        rng = np.random.default_rng(n_unknown)
        labels = np.concatenate([rng.integers(0, 3, 200), np.full(n_unknown, -1)])
        scores = rng.normal(size=(labels.size, 3))
        weights = resample_weights(200, 5, 1), resample_weights(n_unknown, 5, 2)
        rates = ccr_at_fpr_resamples(scores, labels, *weights, lowest)
        for b in range(5):
            index = _drawn(labels, *weights, b)
            assert rates[b] == ccr_at_fpr(scores[index], labels[index], [lowest])[0]


def test_bad_weights_and_rates_are_named():
    scores, labels = _scores_with_ties(0)
    n_known, n_unknown = int((labels >= 0).sum()), int((labels < 0).sum())
    with pytest.raises(ValueError, match=r"auroc_resamples: weights of shape \(B, 150\)"):
        auroc_resamples(scores, labels, np.ones((2, n_known - 1)), np.ones((2, n_unknown)))
    with pytest.raises(ValueError, match="positive sum"):
        auroc_resamples(scores, labels, np.ones((1, n_known)), np.zeros((1, n_unknown)))
    with pytest.raises(ValueError, match="fpr must be a rate"):
        ccr_at_fpr_resamples(scores, labels, np.ones((1, n_known)), np.ones((1, n_unknown)), 1.5)
