"""The Extreme Value Machine (``detectors.evm``): margins, Weibulls, the set cover and the
scores against a plain numpy / scipy computation written here; chunking; settings."""
from __future__ import annotations

import numpy as np
import torch
import pytest
import scipy.stats

from agnostophobia.detectors import build_detector
from agnostophobia.detectors import evm as evm_module

TAIL = 4
THRESHOLD = 0.5


def two_classes():
    """2 classes of 2-D features in two blobs (class 0 around (2, 1), class 1 around (1, 3)),
    logits that classify all but one sample correctly."""
    rng = np.random.default_rng(11)
    labels = np.repeat([0, 1], 15)
    features = np.where(labels[:, None] == 0, [2.0, 1.0], [1.0, 3.0]) + 0.5 * rng.normal(size=(30, 2))
    logits = np.eye(2)[labels] * 2.0
    logits[3] = [0.0, 1.0]  # class 0, misclassified: neither an extreme vector nor a negative
    return logits, features, labels


def pairwise(a, b, distance):
    if distance == "euclidean":
        return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    cos = (a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    return np.clip(1.0 - cos, 0.0, 2.0)


def independent_fit(features, labels, distance):
    """Per class: the Weibull (scipy) of every sample and its cover of the class's samples."""
    fits = {}
    for c in (0, 1):
        own, other = features[labels == c], features[labels != c]
        margins = np.sort(pairwise(own, other, distance), axis=1)[:, :TAIL] / 2
        params = np.array([scipy.stats.weibull_min.fit(m, floc=0)[::2] for m in margins])  # (shape, scale)
        within = pairwise(own, own, distance)
        psi = np.exp(-(within / params[:, 1:2]) ** params[:, 0:1])  # row i: Psi(x_i, x_j)
        fits[c] = own, params, (psi >= THRESHOLD) | np.eye(len(own), dtype=bool)  # each covers itself
    return fits


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_evm_equals_a_numpy_scipy_computation(distance):
    logits, features, labels = two_classes()
    detector = build_detector("evm", tail_size=TAIL, cover_threshold=THRESHOLD, distance=distance).fit(
        logits, features, labels)
    correct = logits.argmax(1) == labels
    fits = independent_fit(features[correct], labels[correct], distance)
    test = np.random.default_rng(2).normal(1.5, 1.5, size=(40, 2))
    expected = np.zeros((40, 2))
    for c, (own, params, covers) in fits.items():
        chosen = np.flatnonzero(detector.ev_class_ == c)
        index = [int(np.flatnonzero((own == ev).all(1))[0]) for ev in detector.ev_features_[chosen]]
        # Weibulls: our MLE and scipy's optimiser agree to its tolerance
        np.testing.assert_allclose(detector.ev_shape_[chosen], params[index, 0], rtol=1e-3)
        np.testing.assert_allclose(detector.ev_scale_[chosen], params[index, 1], rtol=1e-3)
        # greedy set cover: everything covered, each pick covered the most still-uncovered samples
        uncovered = np.ones(len(own), dtype=bool)
        for i in index:
            assert (covers[:, uncovered].sum(1)).max() == covers[i, uncovered].sum()
            uncovered &= ~covers[i]
        assert not uncovered.any() and len(index) < len(own)
        psi = np.exp(-(pairwise(test, own[index], distance) / params[index, 1]) ** params[index, 0])
        expected[:, c] = psi.max(1)
    np.testing.assert_allclose(detector.probabilities(np.zeros((40, 2)), test), expected, rtol=1e-2, atol=1e-9)
    inside = (expected > 1e-6) & (expected < 1 - 1e-6)  # where -ln(-ln P) is well conditioned
    np.testing.assert_allclose(detector.scores(np.zeros((40, 2)), test)[inside],
                               -np.log(-np.log(expected[inside])), rtol=1e-2, atol=1e-3)


def test_one_extreme_vector_per_class_by_hand():
    # class 0 at x = 0, 1, 2, 3, 4 on a line, class 1 at x = 10, ..., 14; tail 2. The margins
    # (half distances to the 2 nearest negatives) of x = 0 are (5, 5.5), of x = 3 (3.5, 4), of
    # x = 4 (3, 3.5); a Weibull on (a, a + 0.5) has its scale near a + 0.3 and a shape of
    # 13-20, so with cover threshold 0.01 the covering radius, scale * 4.6^(1 / shape), is
    # about 3.7 for x = 4 (covers 1..4) and above 4 for x = 0..3 (cover all 5): a tie that
    # goes to the lower index, x = 0. Mirrored, x = 11 (margins (3.5, 4)) covers 10..14.
    features = np.c_[np.r_[np.arange(5), np.arange(10, 15)].astype(float), np.zeros(10)]
    labels = np.repeat([0, 1], 5)
    detector = build_detector("evm", tail_size=2, cover_threshold=0.01, distance="euclidean").fit(
        np.eye(2)[labels], features, labels)
    np.testing.assert_array_equal(detector.ev_features_, [[0.0, 0.0], [11.0, 0.0]])
    np.testing.assert_array_equal(detector.ev_class_, [0, 1])
    (k0, l0), (k1, l1) = [scipy.stats.weibull_min.fit(m, floc=0)[::2] for m in ([5.0, 5.5], [3.5, 4.0])]
    probe = np.array([[0.0, 0.0], [7.0, 0.0], [12.0, 5.0]])
    distances = np.array([[0.0, 11.0], [7.0, 4.0], [13.0, np.hypot(1, 5)]])
    psi = np.exp(-np.c_[(distances[:, 0] / l0) ** k0, (distances[:, 1] / l1) ** k1])
    np.testing.assert_allclose(detector.probabilities(np.zeros((3, 2)), probe), psi, rtol=1e-3, atol=1e-12)
    assert np.isfinite(detector.scores(np.zeros((3, 2)), probe)).all()  # distance 0: finite, not +inf


def test_chunked_and_unchunked_fits_are_equal(monkeypatch):
    logits, features, labels = two_classes()
    whole = build_detector("evm", tail_size=TAIL, distance="euclidean").fit(logits, features, labels)
    monkeypatch.setattr(evm_module, "BLOCK_ENTRIES", 20)  # set cover and scores in blocks of a few rows
    chunked = build_detector("evm", tail_size=TAIL, distance="euclidean", query_chunk=3, reference_chunk=5).fit(
        logits, features, labels)
    np.testing.assert_array_equal(chunked.ev_features_, whole.ev_features_)
    np.testing.assert_allclose(chunked.ev_shape_, whole.ev_shape_, rtol=1e-12)
    test = features + 0.2
    np.testing.assert_allclose(chunked.scores(logits, test), whole.scores(logits, test), rtol=1e-12)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_the_set_cover_picks_the_same_extreme_vectors_with_its_cover_matrix_kept_or_computed_again(
        monkeypatch, distance):
    """The whole cover matrix kept for a small class (read again in the lazy greedy loop) and the
    blocks computed again for a large one give the same picks in the same order, and the picks
    cover every row, each pick covering as many uncovered rows as any row could (greedy)."""
    from agnostophobia.detectors.knn import _Metric

    rng = np.random.default_rng(3)
    metric = _Metric(distance)
    points = metric.prepare(np.round(rng.normal(size=(300, 2)), 1))  # rounded: many equal distances
    radius = torch.from_numpy(rng.uniform(0.05, 0.6, size=300))
    monkeypatch.setattr(evm_module, "BLOCK_ENTRIES", 300 * 40)  # blocks of 40 rows: the lazy loop works
    kept = evm_module.greedy_set_cover(points, radius, metric)
    monkeypatch.setattr(evm_module, "COVER_MATRIX_ENTRIES", 0)
    computed = evm_module.greedy_set_cover(points, radius, metric)
    np.testing.assert_array_equal(kept, computed)
    inside = (metric.block(points, points, metric.bias(points)) <= radius[:, None]).numpy()
    np.fill_diagonal(inside, True)
    uncovered = np.ones(300, dtype=bool)
    for pick in kept:
        assert (inside[pick] & uncovered).sum() == (inside & uncovered).sum(axis=1).max() > 0
        uncovered &= ~inside[pick]
    assert not uncovered.any()


@pytest.mark.parametrize("settings, message", [
    ({"tail_size": 1}, "tail_size must be an integer >= 2"),
    ({"tail_size": 0.5}, "tail_size must be an integer"),
    ({"cover_threshold": 0.0}, "cover_threshold must be a number in"),
    ({"cover_threshold": 1.5}, "cover_threshold must be a number in"),
    ({"distance": "manhattan"}, "distance must be one of euclidean, cosine"),
])
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        build_detector("evm", **settings)


def test_too_few_negatives_and_wrong_shapes_are_refused():
    logits, features, labels = two_classes()
    with pytest.raises(ValueError, match="class 0 has 15 correctly classified training sample.* of other classes, "
                                         "fewer than tail_size=20"):
        build_detector("evm", tail_size=20).fit(logits, features, labels)
    detector = build_detector("evm", tail_size=TAIL).fit(logits, features, labels)
    with pytest.raises(ValueError, match="features has 3 dimensions but the detector 'evm' was fitted on 2"):
        detector.scores(logits[:2], np.ones((2, 3)))
    with pytest.raises(ValueError, match="logits has 3 columns"):
        detector.scores(np.ones((2, 3)), features[:2])
