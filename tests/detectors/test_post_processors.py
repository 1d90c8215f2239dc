"""The seven post-processors of issue 35 (ViM, Mahalanobis, relative Mahalanobis, ReAct, ASH,
SCALE, GEN): each score against its paper's formula written out sample by sample, finite scores
for F = 0 and for features whose sum is <= 0, the adaptive defaults (ViM's principal dimension,
GEN's M) and the last layer's checks. pytorch-ood's implementations: tests/detectors/test_against_pytorch_ood.py."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from agnostophobia.detectors import DETECTORS, NotFittedError, build_detector
from agnostophobia.detectors.shaping import kept_count
from agnostophobia.detectors.vim import principal_dimension

C, D = 6, 12
NEW = ["vim", "mahalanobis", "relative-mahalanobis", "react", "ash", "scale", "gen"]
RNG = np.random.default_rng(11)
WEIGHT = RNG.normal(size=(C, D))
BIAS = RNG.normal(size=C)
TRAIN_LABELS = np.repeat(np.arange(C), 40)
TRAIN_FEATURES = 2.0 * RNG.normal(size=(C, D))[TRAIN_LABELS] + RNG.normal(size=(len(TRAIN_LABELS), D))
TRAIN_LOGITS = TRAIN_FEATURES @ WEIGHT.T + BIAS
FEATURES = np.concatenate([RNG.normal(size=(30, D)) * RNG.uniform(0.1, 5, (30, 1)), TRAIN_FEATURES[:10]])
LOGITS = FEATURES @ WEIGHT.T + BIAS


def fitted(name, weight=WEIGHT, bias=BIAS, **settings):
    detector = build_detector(name, **settings)
    if detector.needs_last_layer:
        detector.use_last_layer(weight, bias)
    return detector.fit(TRAIN_LOGITS, TRAIN_FEATURES, TRAIN_LABELS)


def top(detector, logits=LOGITS, features=FEATURES):
    scores = detector.scores(logits, features)
    np.testing.assert_array_equal(scores.argmax(1), logits.argmax(1))  # the network's prediction is kept
    return scores.max(1)


def energy(shaped):
    return scipy.special.logsumexp(shaped @ WEIGHT.T + BIAS, axis=1)


# ------------------------------------------------------------------------- the formulas
def test_react_clips_at_the_training_percentile_and_scores_the_energy():
    detector = fitted("react", percentile=80.0)
    assert detector.threshold_ == pytest.approx(np.percentile(TRAIN_FEATURES, 80))
    # the paper's score is the clipped energy; ours continues it at the corner (tie-free, score scale 2)
    np.testing.assert_allclose(detector.clipped_energy(top(detector)), energy(np.minimum(FEATURES, detector.threshold_)),
                               rtol=1e-12)
    every = fitted("react", percentile=100.0)  # the largest training entry: no training feature is clipped
    np.testing.assert_allclose(every.clipped_energy(top(every, TRAIN_LOGITS, TRAIN_FEATURES)), energy(TRAIN_FEATURES),
                               rtol=1e-12)


def ash_by_hand(f, percentile, variant):
    k = max(1, len(f) - int(np.round(len(f) * percentile / 100)))
    keep = np.argsort(-f)[:k]
    h = np.zeros_like(f)
    s1 = np.clip(f, 0, None).sum()
    if variant == "b":
        h[keep] = s1 / k
        return h
    h[keep] = f[keep]
    if variant == "s":
        s2 = np.clip(f[keep], 0, None).sum()
        h *= np.exp(s1 / s2 if s2 > 0 else 1.0)
    return h


@pytest.mark.parametrize("variant", ["s", "p", "b"])
@pytest.mark.parametrize("percentile", [0.0, 65.0, 90.0])
def test_ash_prunes_each_sample_and_shapes_what_is_kept(variant, percentile):
    shaped = np.array([ash_by_hand(f, percentile, variant) for f in FEATURES])
    np.testing.assert_allclose(top(fitted("ash", percentile=percentile, variant=variant)), energy(shaped),
                               rtol=1e-12)


@pytest.mark.parametrize("percentile", [0.0, 65.0, 85.0, 99.0])
def test_scale_multiplies_the_whole_feature_by_exp_s1_over_s2(percentile):
    expected = []
    for f in FEATURES:
        k = kept_count(D, percentile)
        positive = np.clip(f, 0, None)
        ratio = positive.sum() / np.sort(positive)[::-1][:k].sum()
        expected.append(f * np.exp(ratio))
    np.testing.assert_allclose(top(fitted("scale", percentile=percentile)), energy(np.array(expected)), rtol=1e-12)
    if percentile == 0.0:  # nothing pruned: s1 = s2, F scaled by e
        np.testing.assert_allclose(top(fitted("scale", percentile=0.0)), energy(np.e * FEATURES), rtol=1e-12)


def test_vim_is_energy_minus_the_scaled_residual_outside_the_principal_subspace():
    detector = fitted("vim", principal_fraction=0.25)
    d = principal_dimension(0.25, D)
    assert d == 3
    origin = -np.linalg.pinv(WEIGHT) @ BIAS
    np.testing.assert_allclose(WEIGHT @ origin + BIAS, 0, atol=1e-12)  # the origin the last layer sees (C < D)
    centred = TRAIN_FEATURES - origin
    _, _, vt = np.linalg.svd(centred, full_matrices=True)  # right singular vectors: the covariance's eigenvectors
    residual = lambda f: np.linalg.norm((f - origin) @ vt[d:].T, axis=1)  # noqa: E731
    alpha = TRAIN_LOGITS.max(1).mean() / residual(TRAIN_FEATURES).mean()
    assert float(detector.alpha_) == pytest.approx(alpha, rel=1e-10)
    expected = scipy.special.logsumexp(LOGITS, axis=1) - alpha * residual(FEATURES)
    np.testing.assert_allclose(top(detector), expected, rtol=1e-9)


def test_vims_principal_dimension_follows_d_and_is_clipped():
    assert [principal_dimension(0.5, dims) for dims in (2048, 768, 512, 32, 3, 2)] == [1024, 384, 256, 16, 2, 1]
    assert principal_dimension(1.0, 32) == 31 and principal_dimension(0.01, 32) == 1


def test_vim_refuses_features_with_no_more_dimensions_than_classes():
    detector = build_detector("vim").use_last_layer(WEIGHT[:, :C], BIAS)
    assert DETECTORS.get("vim").not_applicable(C, C).startswith("ViM needs more feature dimensions than classes")
    assert DETECTORS.get("vim").not_applicable(C, C + 1) is None
    with pytest.raises(ValueError, match=r"D=6 <= C=6"):
        detector.fit(TRAIN_LOGITS, TRAIN_FEATURES[:, :C], TRAIN_LABELS)


def mahalanobis_by_hand(features, labels, queries):
    means = np.array([features[labels == c].mean(0) for c in range(C)])
    covariance = sum(np.cov(features[labels == c].T, bias=True) * (labels == c).sum() for c in range(C))
    precision = np.linalg.pinv(covariance / len(labels))
    distances = np.array([[(q - m) @ precision @ (q - m) for m in means] for q in queries])
    background = features.mean(0)
    background_precision = np.linalg.pinv(np.cov(features.T, bias=True))
    md0 = np.array([(q - background) @ background_precision @ (q - background) for q in queries])
    return distances.min(1), md0


def test_mahalanobis_and_relative_mahalanobis_are_their_papers_distances():
    nearest, background = mahalanobis_by_hand(TRAIN_FEATURES, TRAIN_LABELS, FEATURES)
    np.testing.assert_allclose(top(fitted("mahalanobis")), -nearest, rtol=1e-8)
    np.testing.assert_allclose(top(fitted("relative-mahalanobis")), background - nearest, rtol=1e-8, atol=1e-8)


def test_mahalanobis_with_a_singular_covariance_stays_finite():
    """A feature dimension that never varies (collapsed features): the pseudo-inverse ignores it."""
    train = TRAIN_FEATURES.copy()
    train[:, 0] = 1.0
    detector = build_detector("mahalanobis").fit(TRAIN_LOGITS, train, TRAIN_LABELS)
    assert np.isfinite(detector.scores(LOGITS, FEATURES)).all()


@pytest.mark.parametrize("gamma, m", [(0.1, 100), (0.5, 3), (1.0, 1)])
def test_gen_sums_the_top_m_probabilities_power_terms(gamma, m):
    p = np.sort(scipy.special.softmax(LOGITS, axis=1), axis=1)[:, ::-1][:, :min(m, C)]
    expected = -(p ** gamma * (1 - p) ** gamma).sum(1)
    # (1 - p by hand loses digits where p is near 1; the detector works from log-probabilities)
    np.testing.assert_allclose(top(build_detector("gen", gamma=gamma, top=m)), expected, rtol=1e-7)


def test_gen_clips_m_to_the_number_of_classes():
    assert build_detector("gen").top == 100  # the paper's ImageNet value, declared
    np.testing.assert_array_equal(top(build_detector("gen", top=100)), top(build_detector("gen", top=C)))


# ------------------------------------------------------------------------- finite for every input
def edge_features():
    """F = 0, all-negative F, F summing to exactly 0, a single positive entry, tiny and huge F."""
    rows = [np.zeros(D), -np.abs(RNG.normal(size=D)), np.r_[np.ones(D // 2), -np.ones(D // 2)],
            np.r_[1e-300, -np.ones(D - 1)], np.full(D, 1e-300), 1e3 * RNG.normal(size=D), -1e3 * np.ones(D)]
    return np.array(rows)


@pytest.mark.parametrize("name", NEW)
def test_every_score_is_finite_for_zero_negative_and_extreme_features(name):
    features = edge_features()
    logits = features @ WEIGHT.T + BIAS
    for settings in [{}] + [{"variant": v, "percentile": 99.0} for v in "spb" if name == "ash"] + \
            [{"percentile": 99.0}] * (name in ("scale", "react")):
        scores = fitted(name, **settings).scores(logits, features)
        assert np.isfinite(scores).all(), (name, settings)
    # and with extreme logits that saturate the softmax (GEN: p = 1 exactly)
    saturated = np.zeros((2, C))
    saturated[:, 0] = [800.0, -800.0]
    assert np.isfinite(fitted(name).scores(saturated, np.zeros((2, D)))).all()


def test_at_f_zero_the_shaping_detectors_score_the_bias_alone():
    """F = 0: nothing to clip, prune or scale; the logits are b."""
    zero = np.zeros((1, D))
    for name in ("react", "ash", "scale"):
        assert fitted(name).scores(BIAS[None], zero).max() == pytest.approx(scipy.special.logsumexp(BIAS), rel=1e-12)


# ------------------------------------------------------------------------- the last layer
@pytest.mark.parametrize("name", [n for n in NEW if DETECTORS.get(n).needs_last_layer])
def test_the_last_layer_is_required_and_checked(name):
    detector = build_detector(name)
    with pytest.raises(NotFittedError, match=f"detector '{name}' reads the network's last layer"):
        detector.fit(TRAIN_LOGITS, TRAIN_FEATURES, TRAIN_LABELS) if detector.needs_fit else \
            detector.scores(LOGITS, FEATURES)
    with pytest.raises(ValueError, match=r"last layer bias has shape \(5,\), expected \(6,\)"):
        detector.use_last_layer(WEIGHT, BIAS[:5])
    with pytest.raises(ValueError, match="last layer weight"):
        detector.use_last_layer(np.full((C, D), np.nan))
    detector = fitted(name)
    with pytest.raises(ValueError, match=f"features has {D - 1} dimensions but the detector '{name}'"):
        detector.scores(LOGITS, FEATURES[:, :-1])


def test_a_bias_free_layer_is_a_zero_bias():
    for name in ("react", "ash", "scale", "vim"):
        logits = FEATURES @ WEIGHT.T
        train = TRAIN_FEATURES @ WEIGHT.T
        free = build_detector(name).use_last_layer(WEIGHT).fit(train, TRAIN_FEATURES, TRAIN_LABELS)
        zero = build_detector(name).use_last_layer(WEIGHT, np.zeros(C)).fit(train, TRAIN_FEATURES, TRAIN_LABELS)
        np.testing.assert_array_equal(free.scores(logits, FEATURES), zero.scores(logits, FEATURES))
