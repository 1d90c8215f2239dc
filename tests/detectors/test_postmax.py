"""PostMax (``detectors.postmax``) and GHOST (``detectors.ghost``): the normalised logits by
hand, the generalized Pareto fits against scipy on values computed here, the settings."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from agnostophobia.detectors import build_detector

# 2 classes, 2-D features, a bias-free logit layer along the axes: l = 2 F
WEIGHTS = np.array([[2.0, 0.0], [0.0, 2.0]])


def training_set():
    """12 samples per class spread along its axis, plus one misclassified sample of class 0."""
    rng = np.random.default_rng(5)
    along = rng.uniform(1, 6, 24)
    across = rng.uniform(-0.8, 0.8, 24)
    labels = np.repeat([0, 1], 12)
    features = np.where(labels[:, None] == 0, np.c_[along, across], np.c_[across, along])
    features = np.vstack([features, [[0.1, 9.0]]])  # labelled 0, classified 1: left out of every fit
    labels = np.append(labels, 0)
    return features @ WEIGHTS.T, features, labels


def test_postmax_scores_the_normalised_max_logit_through_the_gpd_by_hand():
    logits, features, labels = training_set()
    detector = build_detector("postmax").fit(logits, features, labels)
    detector.gpd_ = (0.0, 0.0, 1.0)  # an exponential distribution: G(v) = 1 - exp(-v)
    # logits (6, 1.5) / ||(3, 4)|| = 6 / 5; logits (0, 2) / ||(0, 1)|| = 2 / 1, class 1
    scores = detector.scores(np.array([[6.0, 1.5], [0.0, 2.0]]), np.array([[3.0, 4.0], [0.0, 1.0]]))
    np.testing.assert_allclose(scores.max(1), [1 - math.exp(-1.2), 1 - math.exp(-2.0)], rtol=1e-14)
    np.testing.assert_array_equal(scores.argmax(1), [0, 1])


@pytest.mark.parametrize("tail_fraction", [1.0, 0.5])
def test_postmax_fits_scipys_gpd_to_the_correctly_classified_training_knowns(tail_fraction):
    logits, features, labels = training_set()
    detector = build_detector("postmax", tail_fraction=tail_fraction).fit(logits, features, labels)
    correct = logits.argmax(1) == labels
    assert correct.sum() == 24
    values = np.sort(logits[correct].max(1) / np.sqrt((features[correct] ** 2).sum(1)))
    expected = scipy.stats.genpareto.fit(values[24 - int(24 * tail_fraction):])
    np.testing.assert_allclose(detector.gpd_, expected, rtol=1e-12)
    test_logits, test_features = logits[:5] + 0.3, features[:5] + 0.1
    v = test_logits.max(1) / np.sqrt((test_features ** 2).sum(1))
    cdf = scipy.stats.genpareto.cdf(v, *expected)
    # the CDF where it does not saturate; above the fitted support's upper end (tie-free scores) 1 + z
    saturated = cdf > 1 - 2.0 ** -26
    assert 0 < saturated.sum() < len(v)
    z = (v - expected[1]) / expected[2]
    np.testing.assert_allclose(detector.scores(test_logits, test_features).max(1),
                               np.where(saturated, 1 + z, cdf), rtol=1e-12)


def test_ghost_divides_the_logit_by_the_summed_z_scores_by_hand():
    # class 0: x in {1, 3}, y in {0, 4}, 3 times each: mean (2, 2), std (1, 2) * sqrt(12 / 11)
    # class 1: x in {0, 2}, y = 5 always: mean (1, 5), std (sqrt(12 / 11), 0): y is left out
    grid = np.array([[1, 0], [3, 0], [1, 4], [3, 4]] * 3, dtype=float)
    features = np.vstack([grid, np.c_[np.tile([0.0, 2.0], 6), np.full(12, 5.0)]])
    labels = np.repeat([0, 1], 12)
    logits = 1.0 + np.eye(2)[labels] * (3.0 + 0.1 * np.arange(24))[:, None]  # all classified correctly
    detector = build_detector("ghost").fit(logits, features, labels)
    np.testing.assert_allclose(detector.mean_, [[2, 2], [1, 5]], rtol=1e-15)
    np.testing.assert_allclose(detector.std_, np.array([[1, 2], [1, np.inf]]) * np.sqrt(12 / 11), rtol=1e-15)
    detector.gpd_ = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])  # exponentials with scales 1 and 2
    test_logits = np.array([[5.0, 1.0], [1.0, 4.0]])
    test_features = np.array([[3.0, 6.0], [3.0, -7.0]])
    # sample 0, class 0: z = 1 / s + 4 / (2 s) = 3 / s with s = sqrt(12/11); v = 5 s / 3
    # sample 1, class 1: z = 2 / s (y left out); v = 4 s / 2
    s = math.sqrt(12 / 11)
    expected = [1 - math.exp(-5 * s / 3), 1 - math.exp(-(4 * s / 2) / 2)]
    scores = detector.scores(test_logits, test_features)
    np.testing.assert_allclose(scores.max(1), expected, rtol=1e-14)
    np.testing.assert_array_equal(scores.argmax(1), [0, 1])


def test_ghost_fits_one_scipy_gpd_per_class_on_its_correctly_classified_knowns():
    logits, features, labels = training_set()
    detector = build_detector("ghost").fit(logits, features, labels)
    correct = logits.argmax(1) == labels
    for c in (0, 1):
        mine = features[correct & (labels == c)]
        z = np.abs((mine - mine.mean(0)) / mine.std(0, ddof=1)).sum(1)
        values = logits[correct & (labels == c), c] / z
        np.testing.assert_allclose(detector.gpd_[c], scipy.stats.genpareto.fit(values), rtol=1e-12)


@pytest.mark.parametrize("name, settings, message", [
    ("postmax", {"tail_fraction": 0.0}, "tail_fraction must be a number in"),
    ("postmax", {"tail_fraction": 1.5}, "tail_fraction must be a number in"),
])
def test_bad_settings_are_named(name, settings, message):
    with pytest.raises(ValueError, match=message):
        build_detector(name, **settings)


def test_too_few_values_for_a_gpd_are_refused_naming_them():
    logits, features, labels = training_set()
    with pytest.raises(ValueError, match="a generalized Pareto fit needs at least 10"):
        build_detector("postmax", tail_fraction=0.3).fit(logits, features, labels)
    with pytest.raises(ValueError, match="class 1: .* 5 correctly classified .* needs at least 10"):
        keep = np.r_[np.arange(12), np.arange(12, 17)]
        build_detector("ghost").fit(logits[keep], features[keep], labels[keep])


def test_fitted_on_other_classes_or_dimensions_is_refused():
    logits, features, labels = training_set()
    for name in ("postmax", "ghost"):
        detector = build_detector(name).fit(logits, features, labels)
        with pytest.raises(ValueError, match="logits has 3 columns .* fitted on 2 classes"):
            detector.scores(np.ones((2, 3)), features[:2])
        with pytest.raises(ValueError, match="features has 3 dimensions .* fitted on 2"):
            detector.scores(logits[:2], np.ones((2, 3)))


@pytest.mark.parametrize("shape", [-0.7, -1e-9, 0.0, 1e-9, 0.3, 2.0])
def test_the_torch_gpd_cdf_is_scipys(shape):
    """The CDF that ``export`` writes (detectors/_evt.py): scipy's on and around the support,
    0 below the location and 1 above the upper end of a negative shape's support."""
    import torch

    from agnostophobia.detectors._evt import gpd_cdf, torch_gpd_cdf

    loc, scale = -0.5, 1.5
    values = np.concatenate([np.linspace(-3, 6, 181), [loc, loc + scale / 0.7, 1e6, -1e6]])
    got = torch_gpd_cdf(torch.from_numpy(values), torch.tensor(shape, dtype=torch.float64),
                        torch.tensor(loc, dtype=torch.float64), torch.tensor(scale, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), gpd_cdf(values, shape, loc, scale), rtol=1e-12, atol=1e-15)
