"""Tests of the post-hoc detectors (agnostophobia.detectors.posthoc; the entropy family in
test_entropy.py) against scipy / explicit formulas."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agnostophobia.detectors import (
    DETECTORS,
    background_scores,
    build_detector,
    feature_magnitude,
    scaled_objectosphere_scores,
    softmax_entropy,
    softmax_log_odds,
    softmax_scores,
)
from references import detector_reference, per_row, softmax_row

POST_HOC = [name for name in DETECTORS.names() if not DETECTORS.get(name).needs_fit]


def compute_scores(name, logits, features=None):
    detector = build_detector(name)
    if detector.needs_last_layer:  # ASH, SCALE: a fixed random layer on the features
        detector.use_last_layer(np.random.default_rng(1).normal(size=(np.shape(logits)[1], np.shape(features)[1])))
    return detector.scores(logits, features)

RNG = np.random.default_rng(0)
LOGITS = 4 * RNG.standard_normal((30, 6))
FEATURES = RNG.standard_normal((30, 3)) * RNG.uniform(0, 5, (30, 1))


def test_softmax_scores():
    got = softmax_scores(LOGITS)
    expected = np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)
    assert got.dtype == np.float64 and got.shape == LOGITS.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_background_scores_drop_last_column_after_full_softmax():
    got = background_scores(LOGITS)
    full = np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)
    assert got.shape == (30, 5)
    np.testing.assert_allclose(got, full[:, :-1], rtol=1e-12)
    # Not a softmax over the C known columns: rows sum to 1 - S_background < 1.
    np.testing.assert_allclose(got.sum(1), 1 - full[:, -1], rtol=1e-12)
    assert not np.allclose(got, scipy.special.softmax(LOGITS[:, :-1], axis=1))


def test_scaled_objectosphere_scores():
    got = scaled_objectosphere_scores(LOGITS, FEATURES)
    magnitude = np.sqrt((FEATURES ** 2).sum(1))
    np.testing.assert_allclose(got, scipy.special.softmax(LOGITS, axis=1) * magnitude[:, None], rtol=1e-12)
    # Same softmax, larger feature -> proportionally larger score.
    np.testing.assert_allclose(scaled_objectosphere_scores(LOGITS, 3 * FEATURES), 3 * got, rtol=1e-12)


def test_feature_magnitude():
    got = feature_magnitude(FEATURES)
    assert got.shape == (30,) and got.dtype == np.float64
    np.testing.assert_allclose(got, [math.sqrt(sum(v * v for v in row)) for row in FEATURES], rtol=1e-12)
    # float32-range values do not overflow when squared
    big = torch.full((1, 4), 3e38, dtype=torch.float32)
    np.testing.assert_allclose(feature_magnitude(big), [2 * float(big[0, 0])], rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(shift=st.floats(-1e4, 1e4), seed=st.integers(0, 2**31 - 1))
def test_scores_are_shift_invariant_and_stable(shift, seed):
    logits = np.random.default_rng(seed).normal(0, 5, (8, 4))
    for fn in (softmax_scores, background_scores, softmax_entropy):
        shifted = fn(logits + shift)
        assert np.isfinite(shifted).all()
        np.testing.assert_allclose(shifted, fn(logits), rtol=1e-6, atol=1e-9)


def held(value):
    """The float64 values an input actually holds (after float32/bfloat16 rounding)."""
    if isinstance(value, torch.Tensor):
        return value.detach().double().numpy()
    return np.asarray(value, dtype=np.float64)


@pytest.mark.parametrize("convert", [
    lambda a: torch.as_tensor(a),
    lambda a: torch.as_tensor(a, dtype=torch.float32),
    lambda a: torch.as_tensor(a, dtype=torch.bfloat16),
    lambda a: torch.as_tensor(a).requires_grad_(True),
    lambda a: a.tolist(),
    lambda a: a.astype(np.float32),
], ids=["torch64", "torch32", "bfloat16", "requires_grad", "list", "numpy32"])
def test_numpy_and_torch_inputs_agree(convert):
    for name in POST_HOC:
        logits, features = convert(LOGITS), convert(FEATURES)
        # Compare on the values the converted input actually holds (float32 rounding etc.).
        held_logits, held_features = held(logits), held(features)
        got = compute_scores(name, logits, features)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, compute_scores(name, held_logits, held_features), rtol=1e-12)
    np.testing.assert_allclose(softmax_entropy(convert(LOGITS)), softmax_entropy(held(convert(LOGITS))), rtol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_accepted():
    got = compute_scores("objectosphere-scaled", torch.as_tensor(LOGITS).cuda(), torch.as_tensor(FEATURES).cuda())
    np.testing.assert_allclose(got, scaled_objectosphere_scores(LOGITS, FEATURES), rtol=1e-12)


def test_registry():
    # the package's own post-hoc scores need no fit (a detector added beside them needs no edit here)
    assert {"ash", "background", "energy", "entropy", "gen", "magnitude", "max-logit", "objectosphere-scaled",
            "scale", "softmax"} <= set(POST_HOC)
    # cac at its default, the anchors at the training means (with anchors: fixed it fits nothing)
    assert not {"knn", "openmax", "evm", "postmax", "ghost", "vim", "mahalanobis", "react", "cac"} & set(POST_HOC)
    # the softmax scores are log-odds (tie-free, score scale 2): expit gives the probabilities back
    np.testing.assert_array_equal(compute_scores("softmax", LOGITS), softmax_log_odds(LOGITS))
    np.testing.assert_allclose(scipy.special.expit(compute_scores("softmax", LOGITS)), softmax_scores(LOGITS),
                               rtol=1e-13)
    np.testing.assert_array_equal(compute_scores("background", LOGITS, FEATURES), softmax_log_odds(LOGITS)[:, :-1])
    np.testing.assert_allclose(scipy.special.expit(compute_scores("background", LOGITS, FEATURES)),
                               background_scores(LOGITS), rtol=1e-13)
    np.testing.assert_array_equal(compute_scores("objectosphere-scaled", LOGITS, FEATURES),
                                  scaled_objectosphere_scores(LOGITS, FEATURES))
    with pytest.raises(ValueError, match="unknown detector 'openmax-v2'"):
        compute_scores("openmax-v2", LOGITS, FEATURES)


@pytest.mark.parametrize("call, argument", [
    (lambda: softmax_scores(LOGITS[0]), "logits"),
    (lambda: softmax_scores(np.zeros((0, 3))), "logits"),
    (lambda: softmax_scores(np.array([[0.0, np.nan]])), "logits"),
    (lambda: softmax_scores(None), "logits"),
    (lambda: softmax_scores([[1, 2], [3]]), "logits"),
    (lambda: softmax_entropy(np.array([[np.inf, 0.0]])), "logits"),
    (lambda: background_scores(LOGITS[:, :1]), "logits"),
    (lambda: feature_magnitude(FEATURES[0]), "features"),
    (lambda: scaled_objectosphere_scores(LOGITS, FEATURES[:29]), "features"),
    (lambda: compute_scores("objectosphere-scaled", LOGITS), "features"),
    (lambda: compute_scores("objectosphere-scaled", LOGITS, ["a"] * 30), "features"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


# --------------------------------------------------------------------------- float64 references
# Each post-hoc detector's score of the predicted class, written out from its paper one sample at a
# time, checked with every registered detector's by tests/contracts/test_detector_references.py.
@detector_reference("softmax")
def softmax_log_odds_reference(detector, logits, features, train):
    """ln S_c / (1 - S_c) of the predicted class (Sec. 3, softmax thresholding, tie-free)."""
    def score(z):
        p = max(softmax_row(z))
        return math.log(p / (1 - p))
    return per_row(logits, score)


@detector_reference("background")
def background_log_odds_reference(detector, logits, features, train):
    """ln S_c / (1 - S_c) of the predicted known class, S over all C+1 columns (Sec. 3)."""
    def score(z):
        p = softmax_row(z)
        c = max(range(len(z) - 1), key=lambda k: z[k])
        return math.log(p[c] / (1 - p[c]))
    return per_row(logits, score)


@detector_reference("max-logit")
def max_logit_reference(detector, logits, features, train):
    return per_row(logits, max)


@detector_reference("magnitude")
def magnitude_reference(detector, logits, features, train):
    return np.array([math.sqrt(sum(v * v for v in row)) for row in features])


@detector_reference("objectosphere-scaled")
def scaled_objectosphere_reference(detector, logits, features, train):
    """max_c S_c * ||F|| (Sec. 4.2, last paragraph)."""
    return per_row(logits, lambda z: max(softmax_row(z))) * magnitude_reference(detector, logits, features, train)


@detector_reference("energy", temperature=2.5)
def energy_reference(detector, logits, features, train):
    """T ln sum_c exp(l_c / T): the negative free energy (Liu et al. 2020)."""
    t = detector.temperature
    return per_row(logits, lambda z: t * math.log(sum(math.exp(v / t) for v in z)))
