"""Our seven post-processors against pytorch-ood 0.4.0's (a test-only dependency), on random
features, logits and last layers, in float64 at the same settings: each score equals theirs to
rtol 1e-6 after the convention that differs, named per test; where that convention is a monotone
transform, the AUROC of knowns against unknowns agrees to 1e-12.

Conventions that differ everywhere: pytorch-ood's scores are outlier scores (larger = more
unknown), ours larger = more known (sign); pytorch-ood fits on every sample with a label >= 0 it
is given, ours on the training knowns a run stores (the same samples here). Their ViM and
Mahalanobis cast or allocate in float32; the fixture below makes them compute in float64 (the
default dtype float64 and ``Tensor.float`` keeping float64), so that rtol 1e-6 measures the
formulas, not float32 rounding.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agnostophobia.detectors import build_detector
from agnostophobia.detectors.vim import principal_dimension
from agnostophobia.metrics import auroc

pytorch_ood = pytest.importorskip("pytorch_ood.detector")

C, D, N_TRAIN, N_TEST = 10, 64, 800, 300
RNG = np.random.default_rng(35)
WEIGHT = RNG.normal(size=(C, D)) / np.sqrt(D)
BIAS = RNG.normal(size=C)
TRAIN_LABELS = RNG.integers(0, C, N_TRAIN)
CENTRES = 1.5 * RNG.normal(size=(C, D))
TRAIN_FEATURES = CENTRES[TRAIN_LABELS] + RNG.normal(size=(N_TRAIN, D))
# test: half near the class centres (knowns), half from a wider, centred cloud (unknowns)
TEST_KNOWN = RNG.integers(0, C, N_TEST // 2)
TEST_FEATURES = np.concatenate([CENTRES[TEST_KNOWN] + RNG.normal(size=(N_TEST // 2, D)),
                                2.0 * RNG.normal(size=(N_TEST // 2, D))])
TEST_LABELS = np.r_[TEST_KNOWN, -np.ones(N_TEST // 2, dtype=np.int64)]


def logits_of(features):
    return features @ WEIGHT.T + BIAS


@pytest.fixture
def float64(monkeypatch):
    """pytorch-ood's float32 casts (``.float()``) and allocations (``torch.zeros``) in float64."""
    monkeypatch.setattr(torch.Tensor, "float", lambda self: self.double())
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def ours(name, features=TEST_FEATURES, train=TRAIN_FEATURES, bias=BIAS, **settings):
    detector = build_detector(name, **settings)
    if detector.needs_last_layer:
        detector.use_last_layer(WEIGHT, bias)
    detector.fit(train @ WEIGHT.T + bias, train, TRAIN_LABELS)
    return detector.scores(features @ WEIGHT.T + bias, features).max(axis=1)


def t(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def same_auroc(our_scores, their_outlier_scores):
    """AUROC of knowns vs unknowns agrees to 1e-12 (theirs negated: an outlier score)."""
    assert auroc(our_scores, TEST_LABELS) == pytest.approx(auroc(-their_outlier_scores, TEST_LABELS), abs=1e-12)
    # the scores order the two groups (either way round: random weights need not favour the knowns),
    # so that agreeing AUROCs are not those of two constants
    assert abs(auroc(our_scores, TEST_LABELS) - 0.5) > 0.05


def energy_head(features):
    return features.reshape(len(features), -1) @ t(WEIGHT).T + t(BIAS)


# --------------------------------------------------------------------------------- ViM
@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_vim_equals_pytorch_ood_negated(float64, fraction):
    """Same: origin -W⁺b, uncentred covariance / N, residual of the D - d smallest eigenvectors, α from
    the training knowns' max logit. Differs: sign; our d comes from principal_fraction x D (theirs
    an integer d, given as ours)."""
    theirs_detector = pytorch_ood.ViM(None, d=principal_dimension(fraction, D), w=t(WEIGHT), b=t(BIAS))
    theirs_detector.fit_features(t(TRAIN_FEATURES), t(TRAIN_LABELS))
    theirs = theirs_detector.predict_features(t(TEST_FEATURES)).numpy()
    mine = ours("vim", principal_fraction=fraction)
    np.testing.assert_allclose(mine, -theirs, rtol=1e-6)
    same_auroc(mine, theirs)


# ------------------------------------------------------------------------ Mahalanobis
def test_mahalanobis_equals_pytorch_ood_up_to_minus_one_over_2n(float64):
    """Differs: their covariance is the sum of centred outer products (not divided by N) plus 1e-6 I,
    and their score 0.5 min_c d_c (the Gaussian log-density's factor); ours Σ / N, its pseudo-inverse,
    -min_c d_c. So theirs = -ours / (2N) up to the ridge (relative 1e-6 / (N λ_min) ~ 1e-9 here)."""
    theirs_detector = pytorch_ood.Mahalanobis(None).fit_features(t(TRAIN_FEATURES), t(TRAIN_LABELS))
    theirs = theirs_detector.predict_features(t(TEST_FEATURES)).numpy()
    mine = ours("mahalanobis")
    np.testing.assert_allclose(mine, -2 * N_TRAIN * theirs, rtol=1e-6)
    same_auroc(mine, theirs)


def test_relative_mahalanobis_equals_pytorch_ood_up_to_minus_one_over_n(float64):
    """Differs: both covariances summed, not divided by N (+ 1e-6 I); their score min_c (d_c - d_0),
    ours -min_c (MD_c - MD_0). So theirs = -ours / N up to the ridge."""
    theirs_detector = pytorch_ood.RMD(None).fit_features(t(TRAIN_FEATURES), t(TRAIN_LABELS))
    theirs = theirs_detector.predict_features(t(TEST_FEATURES)).numpy()
    mine = ours("relative-mahalanobis")
    np.testing.assert_allclose(mine, -N_TRAIN * theirs, rtol=1e-6, atol=1e-9 * np.abs(mine).max())
    same_auroc(mine, theirs)


# ------------------------------------------------------------------------------ ReAct
@pytest.mark.parametrize("percentile", [85.0, 90.0])
def test_react_equals_pytorch_ood_negated(percentile):
    """Same threshold (np.percentile of every training entry, linear interpolation) and energy.
    Differs: their percentile is a fraction (0.9), ours percent (90); sign; ours continues the
    clipped energy where every entry reaches the clip (tie-free: ``ReAct.clipped_energy`` undoes
    it, and the order is theirs where theirs does not tie). Signed features as given (both clip
    from above only)."""
    theirs_detector = pytorch_ood.ReAct(None, head=energy_head, percentile=percentile / 100)
    theirs_detector.fit_feature_maps(t(TRAIN_FEATURES), t(TRAIN_LABELS))
    theirs = theirs_detector.predict_feature_maps(t(TEST_FEATURES)).numpy()
    detector = build_detector("react", percentile=percentile).use_last_layer(WEIGHT, BIAS)
    detector.fit(TRAIN_FEATURES @ WEIGHT.T + BIAS, TRAIN_FEATURES, TRAIN_LABELS)
    mine = ours("react", percentile=percentile)
    np.testing.assert_allclose(detector.clipped_energy(mine), -theirs, rtol=1e-6)
    same_auroc(mine, theirs)


# ------------------------------------------------------------------------- ASH, SCALE
NON_NEGATIVE = np.abs(TEST_FEATURES)  # post-ReLU activations: where the papers' sums are ours


@pytest.mark.parametrize("variant", ["s", "p", "b"])
def test_ash_equals_pytorch_ood_negated_on_non_negative_features(variant):
    """On F >= 0 our positive-part sums are their sums. Differs: their feature maps are 4-D (ours
    (N, D): given as (N, D, 1, 1)); fraction vs percent; sign; ties at the k-th value (we keep all,
    they keep k by topk: none in random floats)."""
    theirs_detector = pytorch_ood.ASH(None, head=energy_head, variant=f"ash-{variant}", percentile=0.65)
    theirs = theirs_detector.predict_feature_maps(t(NON_NEGATIVE[:, :, None, None])).numpy()
    mine = ours("ash", features=NON_NEGATIVE, train=np.abs(TRAIN_FEATURES), percentile=65.0, variant=variant)
    np.testing.assert_allclose(mine, -theirs, rtol=1e-6)


@pytest.mark.parametrize("percentile", [65.0, 90.0])
def test_scale_equals_pytorch_ood_negated_on_non_negative_features(percentile):
    """As ASH-S without the pruning: on F >= 0 equal, 4-D maps, fraction vs percent, sign."""
    theirs_detector = pytorch_ood.SCALE(None, head=energy_head, percentile=percentile / 100)
    theirs = theirs_detector.predict_feature_maps(t(NON_NEGATIVE[:, :, None, None])).numpy()
    mine = ours("scale", features=NON_NEGATIVE, train=np.abs(TRAIN_FEATURES), percentile=percentile)
    np.testing.assert_allclose(mine, -theirs, rtol=1e-6)


# -------------------------------------------------------------------------------- GEN
@pytest.mark.parametrize("gamma, m", [(0.1, None), (0.5, 3), (1.0, 10)])
def test_gen_equals_pytorch_ood_up_to_minus_one_over_m(gamma, m):
    """Differs: they average the top M terms (ours sum: the paper's Eq. 6), clamp p to
    [1e-7, 1 - 1e-7] (we do not: none of these p is clamped), and M=None means all classes (ours:
    M clipped to C); sign. So theirs = -ours / M."""
    logits = logits_of(TEST_FEATURES)
    p = torch.softmax(t(logits), dim=1)
    assert ((p > 1e-7) & (p < 1 - 1e-7)).all()
    theirs = pytorch_ood.GEN.score(t(logits), gamma=gamma, M=m).numpy()
    mine = build_detector("gen", gamma=gamma, top=m or 100).scores(logits).max(axis=1)
    np.testing.assert_allclose(mine, -(m or C) * theirs, rtol=1e-6)
    same_auroc(mine, theirs)
