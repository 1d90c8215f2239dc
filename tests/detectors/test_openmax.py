"""Tests of agnostophobia.detectors.openmax (the ``openmax`` detector): Weibull fitting (libMR
FitHigh semantics), distances, alpha-rank recalibration, vectorised vs per-sample reference,
and input validation."""
from __future__ import annotations

import math

import numpy as np
import scipy.special
import pytest
import torch
from scipy.stats import weibull_min

from agnostophobia.detectors.openmax import (
    DISTANCES,
    LIBMR_TRANSLATE_AMOUNT,
    OpenMax,
    alpha_weights,
    cosine_distance,
    euclidean_distance,
    eucos_distance,
    fit_high,
)
from agnostophobia.detectors._evt import fit_weibull, weibull_cdf

C = 6
MEANS = 8.0 * np.eye(C)  # class c: logit 8 on c, 0 elsewhere


def clusters(n_per_class: int, seed: int, noise: float = 1.0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(C), n_per_class)
    return MEANS[labels] + noise * rng.standard_normal((labels.size, C)), labels


TRAIN_X, TRAIN_Y = clusters(150, seed=1)
TEST_X, TEST_Y = clusters(150, seed=2)


@pytest.fixture(scope="module")
def model() -> OpenMax:
    return OpenMax(tail_size=20, alpha=3, distance="eucos").fit(TRAIN_X, None, TRAIN_Y)


# ----------------------------------------------------------------------------- Weibull

def _weibull_loglik(x, shape, scale, loc=0.0):
    return weibull_min.logpdf(x, shape, loc=loc, scale=scale).sum()


def test_fit_weibull_recovers_known_parameters_and_matches_scipy():
    data = weibull_min.rvs(2.5, scale=3.0, size=4000, random_state=np.random.default_rng(0))
    shape, scale = fit_weibull(data)
    # Recovered parameters are near the truth (sampling error ~ 1-2 %) ...
    assert shape == pytest.approx(2.5, rel=0.05)
    assert scale == pytest.approx(3.0, rel=0.05)
    # ... and equal scipy's MLE with the location fixed at 0 (scipy's optimiser stops at ~1e-5).
    sp_shape, sp_loc, sp_scale = weibull_min.fit(data, floc=0)
    assert sp_loc == 0
    assert shape == pytest.approx(sp_shape, rel=1e-4)
    assert scale == pytest.approx(sp_scale, rel=1e-4)
    # Ours is the exact maximum: at least as likely as scipy's, and a nudge lowers it.
    best = _weibull_loglik(data, shape, scale)
    assert best >= _weibull_loglik(data, sp_shape, sp_scale) - 1e-9
    for ds, dl in [(1.001, 1), (0.999, 1), (1, 1.001), (1, 0.999)]:
        assert _weibull_loglik(data, shape * ds, scale * dl) < best
    # The CDF is scipy's CDF with the fitted parameters.
    x = np.linspace(0, 10, 101)
    np.testing.assert_allclose(weibull_cdf(x, shape, scale), weibull_min.cdf(x, shape, scale=scale),
                               rtol=1e-12, atol=1e-15)


def test_fit_weibull_score_equations_vanish():
    data = weibull_min.rvs(0.8, scale=0.5, size=300, random_state=np.random.default_rng(3))
    k, lam = fit_weibull(data)
    # d/dλ and d/dk of the log-likelihood are 0 at the MLE.
    n, z = data.size, data / lam
    d_scale = (k / lam) * (np.sum(z ** k) - n)
    d_shape = n / k + np.sum(np.log(z)) - np.sum(z ** k * np.log(z))
    assert abs(d_scale) < 1e-8 * n / lam and abs(d_shape) < 1e-8 * n


def test_weibull_cdf_is_zero_below_location_and_handles_huge_shapes():
    assert weibull_cdf(-1.0, 2.0, 1.0) == 0.0 and weibull_cdf(0.0, 2.0, 1.0) == 0.0
    assert weibull_cdf(5.0, 2.0, 1.0, loc=5.0) == 0.0
    # k = 1e6 around scale 1e4: compare with the exact formula in terms of the offset.
    k, lam = 1e6, 1e4
    x = lam + np.array([-0.02, -0.005, 0.0, 0.005, 0.02])
    expected = 1 - np.exp(-np.exp(k * np.log1p((x - lam) / lam)))
    np.testing.assert_allclose(weibull_cdf(x, k, lam), expected, rtol=1e-12)
    assert weibull_cdf(lam, k, lam) == pytest.approx(1 - math.exp(-1), rel=1e-12)
    assert weibull_cdf(2 * lam, k, lam) == 1.0 and weibull_cdf(lam / 2, k, lam) == 0.0


@pytest.mark.parametrize("translate", [1.0, 10.0])
def test_fit_high_is_a_fixed_location_weibull_on_the_tail(translate):
    """libMR FitHigh: top tail_size values, location = smallest tail value - translate_amount."""
    rng = np.random.default_rng(5)
    values = rng.gamma(3.0, 1.0, size=500)
    tail = np.sort(values)[-25:]
    fit = fit_high(values, 25, translate_amount=translate)
    assert fit.small_score == tail[0]
    assert fit.loc == pytest.approx(tail[0] - translate, abs=1e-12)
    # The smallest tail value translates to exactly `translate`, i.e. "near 1" for T = 1.
    assert tail[0] - fit.loc == pytest.approx(translate, rel=1e-12)
    sp_shape, _, sp_scale = weibull_min.fit(tail, floc=fit.loc)
    assert fit.shape == pytest.approx(sp_shape, rel=1e-3)
    assert fit.scale == pytest.approx(sp_scale, rel=1e-3)
    assert _weibull_loglik(tail, fit.shape, fit.scale, fit.loc) >= \
        _weibull_loglik(tail, sp_shape, sp_scale, fit.loc) - 1e-9
    d = np.linspace(0, 15, 61)
    np.testing.assert_allclose(fit.cdf(d), weibull_min.cdf(d, fit.shape, loc=fit.loc, scale=fit.scale),
                               rtol=1e-10, atol=1e-14)
    # Only the tail matters, and the fit moves with the data.
    smaller = np.concatenate([values, rng.uniform(0, tail[0], 100)])
    again = fit_high(smaller, 25, translate_amount=translate)
    assert (again.shape, again.scale, again.loc) == pytest.approx((fit.shape, fit.scale, fit.loc), rel=1e-12)
    moved = fit_high(values + 7.0, 25, translate_amount=translate)
    assert moved.shape == pytest.approx(fit.shape, rel=1e-9)
    assert moved.scale == pytest.approx(fit.scale, rel=1e-9)
    assert moved.loc == pytest.approx(fit.loc + 7.0, rel=1e-9)


def test_fit_high_default_translation_is_libmr_10000():
    values = np.random.default_rng(6).gamma(3.0, 1.0, size=200)
    fit = fit_high(values, 20)
    assert LIBMR_TRANSLATE_AMOUNT == 10000.0 and fit.translate_amount == 10000.0
    assert fit.loc == pytest.approx(np.sort(values)[-20] - 10000.0)
    # A tail of range r translated by 1e4 gives a very large shape (~1e4 / r) ...
    assert fit.shape > 1000
    # ... and the CDF still rises from small values below the tail to ~1 above it. (With
    # T = 1e4 the model is effectively a reversed Gumbel: it is not 0 below the tail.)
    tail = np.sort(values)[-20:]
    assert fit.cdf(0.0) < 0.1 and fit.cdf(tail[0]) < 0.5 and fit.cdf(tail[-1] + 10.0) > 0.999999
    # With T = 1 the support starts 1 below the tail.
    assert fit_high(values, 20, translate_amount=1.0).cdf(tail[0] - 1.0) == 0.0
    assert np.all(np.diff(fit.cdf(np.linspace(0, 20, 200))) >= 0)


# ----------------------------------------------------------------------------- distances

def test_distances_by_hand():
    x = np.array([[3.0, 4.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    m = np.array([[0.0, 4.0], [0.0, 1.0], [-1.0, -1.0], [1.0, 2.0]])
    # euclidean: |(3,0)| = 3, |(1,-1)| = sqrt 2, |(2,2)| = 2 sqrt 2, |(-1,-2)| = sqrt 5
    np.testing.assert_allclose(euclidean_distance(x, m), [3, math.sqrt(2), 2 * math.sqrt(2), math.sqrt(5)],
                               rtol=1e-15)
    # cosine: 1 - 16/(5*4) = 0.2, orthogonal = 1, opposite = 2, zero vector = 1 by definition
    np.testing.assert_allclose(cosine_distance(x, m), [0.2, 1.0, 2.0, 1.0], rtol=1e-15)
    # eucos: euclidean / 200 + cosine
    np.testing.assert_allclose(eucos_distance(x, m),
                               [3 / 200 + 0.2, math.sqrt(2) / 200 + 1, 2 * math.sqrt(2) / 200 + 2,
                                math.sqrt(5) / 200 + 1], rtol=1e-15)
    # a single mean vector broadcasts over rows; same direction -> cosine 0
    np.testing.assert_allclose(cosine_distance([[2.0, 2.0], [5.0, 5.0]], [1.0, 1.0]), [0, 0], atol=1e-15)
    assert DISTANCES.names() == ["cosine", "euclidean", "eucos"]


# ----------------------------------------------------------------------------- alpha ranks

def test_alpha_weights_by_hand():
    np.testing.assert_allclose(alpha_weights(1), [1.0])
    np.testing.assert_allclose(alpha_weights(3), [1.0, 2 / 3, 1 / 3])
    np.testing.assert_allclose(alpha_weights(4), [1.0, 0.75, 0.5, 0.25])


def _hand_model(alpha):
    """C = 3, Weibull(k=1, λ=1, ℓ=0): W(d) = 1 - exp(-d); euclidean distances chosen by hand."""
    v = np.array([3.0, 1.0, 2.0])
    mav = np.stack([v + [0, 0, math.log(2)],        # d_0 = ln 2 -> W = 1/2
                    v + [0, math.log(5), 0],        # d_1 = ln 5 -> W = 4/5
                    v + [math.log(4), 0, 0]])       # d_2 = ln 4 -> W = 3/4
    model = OpenMax.from_parameters(mav, np.ones(3), np.ones(3), np.zeros(3), alpha=alpha, distance="euclidean")
    return model, v


def _softmax(values):
    e = [math.exp(z) for z in values]
    return [z / sum(e) for z in e]


@pytest.mark.parametrize("alpha", [1, 2, 3])
def test_recalibration_by_hand(alpha):
    model, v = _hand_model(alpha)
    # ranks: class 0 (v=3) rank 1, class 2 (v=2) rank 2, class 1 (v=1) rank 3
    w = {0: 0.5, 1: 0.8, 2: 0.75}
    rank = {0: 1, 2: 2, 1: 3}
    omega = [1 - (alpha - rank[i] + 1) / alpha * w[i] if rank[i] <= alpha else 1.0 for i in range(3)]
    if alpha == 1:
        assert omega == [0.5, 1.0, 1.0]
    if alpha == 2:
        assert omega == pytest.approx([0.5, 1.0, 1 - 0.5 * 0.75])
    if alpha == 3:
        assert omega == pytest.approx([0.5, 1 - 0.8 / 3, 1 - 2 / 3 * 0.75])
    revised = [v[i] * omega[i] for i in range(3)] + [sum(v[i] * (1 - omega[i]) for i in range(3))]
    if alpha == 2:  # written out: [1.5, 1, 1.25 | 3*0.5 + 2*0.375 = 2.25]
        assert revised == pytest.approx([1.5, 1.0, 1.25, 2.25])
    np.testing.assert_allclose(model.revised_activations(v[None]), [revised], rtol=1e-12)
    np.testing.assert_allclose(model.predict_proba(v[None]), [_softmax(revised)], rtol=1e-12)


def test_ties_rank_lower_class_index_first():
    mav = np.eye(3)
    model = OpenMax.from_parameters(mav, np.ones(3), np.ones(3), np.zeros(3), alpha=1, distance="euclidean")
    v = np.array([[2.0, 2.0, 0.0]])  # classes 0 and 1 tie; class 0 gets rank 1
    d0 = math.dist(v[0], mav[0])
    np.testing.assert_allclose(model.revised_activations(v)[0, :3], [2 * math.exp(-d0), 2.0, 0.0], rtol=1e-12)


# ----------------------------------------------------------------------------- behaviour

def test_known_members_low_unknown_far_inputs_high_unknown(model):
    proba = model.predict_proba(TEST_X)
    assert proba[:, -1].mean() < 0.2
    assert (model.predict(TEST_X) == TEST_Y).mean() > 0.9
    assert (proba[:, :-1].argmax(1) == TEST_Y).mean() > 0.98
    rng = np.random.default_rng(9)
    far = np.concatenate([rng.uniform(15, 30, (100, C)),          # large everywhere
                          40.0 * np.eye(C) + rng.standard_normal((C, C)),  # 5x beyond each mean
                          12.0 * (np.eye(C) + np.roll(np.eye(C), 1, axis=1))])  # between two means
    far_proba = model.predict_proba(far)
    assert np.all(far_proba[:, -1] > 0.5), far_proba[:, -1].min()
    assert np.all(model.predict(far) == -1)  # -1: unknown, as everywhere in the package


def test_scores_are_the_known_columns(model):
    proba = model.predict_proba(TEST_X[:50])
    scores = model.scores(TEST_X[:50])
    assert scores.shape == (50, C)
    # the log-odds of the known columns (tie-free, score scale 2): expit gives the probabilities back
    np.testing.assert_allclose(scipy.special.expit(scores), proba[:, :C], rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(scores.argmax(1), proba[:, :C].argmax(1))


def test_fit_uses_only_correctly_classified_samples():
    x, y = TRAIN_X.copy(), TRAIN_Y.copy()
    # 30 class-0 samples that the network puts into class 1: huge, but must not move MAV_0.
    wrong = np.zeros((30, C))
    wrong[:, 1] = 100.0
    x2 = np.concatenate([x, wrong])
    y2 = np.concatenate([y, np.zeros(30, dtype=int)])
    a = OpenMax().fit(x, None, y)
    b = OpenMax().fit(x2, None, y2)
    np.testing.assert_array_equal(a.mav_, b.mav_)
    np.testing.assert_array_equal(a.weibull_shape_, b.weibull_shape_)
    correct0 = x[(y == 0) & (x.argmax(1) == 0)]
    np.testing.assert_allclose(a.mav_[0], correct0.mean(0), rtol=1e-14)
    assert b.n_correct_[0] == a.n_correct_[0] == len(correct0)


@pytest.mark.parametrize("distance", ["eucos", "euclidean", "cosine"])
def test_probabilities_valid(distance):
    model = OpenMax(tail_size=10, alpha=2, distance=distance).fit(TRAIN_X, None, TRAIN_Y)
    rng = np.random.default_rng(4)
    x = np.concatenate([TEST_X, 30 * rng.standard_normal((200, C)), 500 * rng.standard_normal((20, C)),
                        np.zeros((1, C))])
    proba = model.predict_proba(x)
    assert proba.shape == (x.shape[0], C + 1)
    assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)


def test_torch_and_float32_inputs():
    model = OpenMax(tail_size=10).fit(torch.tensor(TRAIN_X, dtype=torch.float32), None, torch.tensor(TRAIN_Y))
    ref = OpenMax(tail_size=10).fit(TRAIN_X.astype(np.float32), None, TRAIN_Y)
    np.testing.assert_allclose(model.predict_proba(torch.tensor(TEST_X[:20])), ref.predict_proba(TEST_X[:20]))


# ----------------------------------------------------------------------------- reference loop

def _loop_reference(model: OpenMax, activations: np.ndarray) -> np.ndarray:
    """Per-sample OpenMax in plain Python, written from the paper's Algorithm 2."""
    out = []
    for v in activations.tolist():
        ranked = sorted(range(len(v)), key=lambda i: (-v[i], i))
        omega = [1.0] * len(v)
        for r in range(1, model.alpha + 1):
            i = ranked[r - 1]
            mu = model.mav_[i].tolist()
            eu = math.dist(v, mu)
            nv, nm = math.hypot(*v), math.hypot(*mu)
            cos = 1 - sum(a * b for a, b in zip(v, mu)) / (nv * nm)
            d = {"euclidean": eu, "cosine": cos, "eucos": eu / 200 + cos}[model.distance]
            z = d - model.weibull_loc_[i]
            w = 1 - math.exp(-((z / model.weibull_scale_[i]) ** model.weibull_shape_[i])) if z > 0 else 0.0
            omega[i] = 1 - (model.alpha - r + 1) / model.alpha * w
        revised = [vi * oi for vi, oi in zip(v, omega)] + [sum(vi * (1 - oi) for vi, oi in zip(v, omega))]
        top = max(revised)
        e = [math.exp(z - top) for z in revised]
        out.append([z / sum(e) for z in e])
    return np.array(out)


@pytest.mark.parametrize("distance,alpha,translate", [("eucos", 3, 1e4), ("euclidean", 2, 1e4),
                                                      ("cosine", 6, 1e4), ("eucos", 4, 1.0)])
def test_vectorised_equals_loop_reference(distance, alpha, translate):
    rng = np.random.default_rng(11)
    model = OpenMax(tail_size=15, alpha=alpha, distance=distance, translate_amount=translate)
    model.fit(TRAIN_X, None, TRAIN_Y)
    x = np.concatenate([TEST_X[::3], 10 * rng.standard_normal((100, C)), rng.uniform(5, 20, (50, C))])
    got = model.predict_proba(x)
    ref = _loop_reference(model, x)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-12)
    # and the recalibration really changes something (the reference is not just a softmax)
    assert not np.allclose(got[:, :-1], np.exp(x) / np.exp(x).sum(1, keepdims=True), atol=1e-3)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs,match", [
    ({"tail_size": 1}, "tail_size must be an integer >= 2"),
    ({"tail_size": 2.5}, "tail_size must be an integer"),
    ({"tail_size": True}, "tail_size must be an integer"),
    ({"alpha": 0}, "alpha must be an integer >= 1"),
    ({"alpha": -2}, "alpha must be an integer >= 1"),
    ({"distance": "manhattan"}, "distance must be one of .*eucos"),
    ({"distance": None}, "distance must be a string"),
    ({"translate_amount": 0}, "translate_amount must be a number > 0"),
    ({"translate_amount": float("nan")}, "translate_amount"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OpenMax(**kwargs)


def test_alpha_larger_than_classes():
    with pytest.raises(ValueError, match=r"alpha=7 exceeds the number of classes C=6"):
        OpenMax(alpha=7).fit(TRAIN_X, None, TRAIN_Y)


def test_too_few_correct_samples_names_class_and_counts():
    x, y = TRAIN_X.copy(), TRAIN_Y.copy()
    idx = np.flatnonzero(y == 4)
    x[idx[:140], 4] = -50.0  # 140 of 150 class-4 samples now misclassified
    n_correct = int(((x.argmax(1) == y) & (y == 4)).sum())
    with pytest.raises(ValueError, match=rf"class 4 has {n_correct} correctly classified training "
                                         rf"sample\(s\) \(of 150 labelled 4\), fewer than tail_size=20"):
        OpenMax(tail_size=20).fit(x, None, y)


def test_class_without_samples():
    keep = TRAIN_Y != 2
    with pytest.raises(ValueError, match=r"class 2 has 0 correctly classified training sample\(s\) \(of 0"):
        OpenMax().fit(TRAIN_X[keep], None, TRAIN_Y[keep])


@pytest.mark.parametrize("labels,match", [
    (np.where(TRAIN_Y == 5, 6, TRAIN_Y), r"labels contains 6, but the scores have only 6 classes"),
    (np.where(TRAIN_Y == 5, -1, TRAIN_Y), r"labels contains 150 negative"),
    (TRAIN_Y[:-1], r"labels has 899 entries"),
    (TRAIN_Y + 0.5, r"labels must be integers"),
])
def test_bad_labels(labels, match):
    with pytest.raises(ValueError, match=match):
        OpenMax().fit(TRAIN_X, None, labels)


@pytest.mark.parametrize("bad,kind", [(np.nan, "NaN"), (np.inf, "inf")])
def test_non_finite_logits(model, bad, kind):
    x = TRAIN_X.copy()
    x[3, 2] = bad
    with pytest.raises(ValueError, match=rf"train_logits contains 1 non-finite value\(s\) \({kind}\)"):
        OpenMax().fit(x, None, TRAIN_Y)
    with pytest.raises(ValueError, match=rf"logits contains 1 non-finite value\(s\) \({kind}\)"):
        model.predict_proba(x)


def test_width_mismatch_and_shape_errors(model):
    with pytest.raises(ValueError, match="logits has 7 columns but OpenMax was fitted on 6 classes"):
        model.predict_proba(np.zeros((4, 7)))
    with pytest.raises(ValueError, match="logits has 5 columns but OpenMax was fitted on 6 classes"):
        model.scores(np.zeros((4, 5)))
    with pytest.raises(ValueError, match=r"logits must have shape \(N, C\)"):
        model.predict(np.zeros(6))
    with pytest.raises(ValueError, match="logits is empty"):
        model.predict(np.zeros((0, 6)))


def test_predict_before_fit():
    with pytest.raises(ValueError, match="not fitted"):
        OpenMax().predict_proba(TEST_X)


def test_identical_tail_distances():
    x = np.tile(MEANS, (30, 1))  # every sample sits exactly on its class mean
    y = np.tile(np.arange(C), 30)
    with pytest.raises(ValueError, match=r"class 0: cannot fit the Weibull tail .* all equal"):
        OpenMax(tail_size=5).fit(x, None, y)


def test_weibull_helpers_reject_bad_data():
    with pytest.raises(ValueError, match="data must be > 0"):
        fit_weibull([1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="at least 2 values"):
        fit_weibull([1.0])
    with pytest.raises(ValueError, match="all equal"):
        fit_weibull([2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="non-finite"):
        fit_weibull([1.0, np.nan])
    with pytest.raises(ValueError, match="fewer than tail_size=5"):
        fit_high([1.0, 2.0, 3.0], 5)
    with pytest.raises(ValueError, match="tail_size must be >= 2"):
        fit_high([1.0, 2.0, 3.0], 1)


def test_from_parameters_validates():
    with pytest.raises(ValueError, match=r"mav must have shape \(C, C\)"):
        OpenMax.from_parameters(np.zeros((3, 4)), np.ones(3), np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match=r"weibull_scale must have shape \(3,\)"):
        OpenMax.from_parameters(np.zeros((3, 3)), np.ones(3), np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="weibull_shape must be > 0"):
        OpenMax.from_parameters(np.zeros((3, 3)), -np.ones(3), np.ones(3), np.zeros(3))
