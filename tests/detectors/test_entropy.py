"""Tests of the entropy family (agnostophobia.detectors.entropy): -H and GEN against scipy and
their papers' formulas written out one sample at a time."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

from agnostophobia.detectors import generalized_entropy, log_generalized_entropy, softmax_entropy
from references import detector_reference, per_row, softmax_row

RNG = np.random.default_rng(0)
LOGITS = 4 * RNG.standard_normal((30, 6))


def test_softmax_entropy_matches_scipy_in_nats():
    got = softmax_entropy(LOGITS)
    assert got.shape == (30,)
    np.testing.assert_allclose(got, scipy.stats.entropy(scipy.special.softmax(LOGITS, axis=1), axis=1), rtol=1e-10)
    # Maximum ln C at equal logits (ln 10 ~ 2.303 as in Table 1); 0 when saturated.
    np.testing.assert_allclose(softmax_entropy(np.full((2, 10), 3.0)), [math.log(10)] * 2, rtol=1e-12)
    saturated = softmax_entropy(np.array([[1e4, -1e4, -1e4]]))
    assert np.isfinite(saturated).all() and saturated[0] == pytest.approx(0, abs=1e-300)


@pytest.mark.parametrize("top, gamma, names", [(0, 0.1, "top"), (4, 0.1, "top"), (2.0, 0.1, "top"),
                                               (True, 0.1, "top"), (2, 0.0, "gamma"), (2, "0.1", "gamma")])
def test_gen_called_directly_refuses_a_top_or_gamma_out_of_range_naming_it(top, gamma, names):
    """top=0 returned a wrong number and top > C numpy's 'kth out of bounds'; the gen detector
    clips its setting to C, a direct caller is told."""
    logits = np.random.default_rng(0).normal(size=(5, 3))
    for function in (log_generalized_entropy, generalized_entropy):
        with pytest.raises(ValueError, match=f"^{names}: "):
            function(logits, gamma, top)
    assert np.all(np.isfinite(log_generalized_entropy(logits, 0.1, 3)))


# --------------------------------------------------------------------------- float64 references
# The entropy family's score of the predicted class, written out from its paper one sample at a
# time, checked with every registered detector's by tests/contracts/test_detector_references.py.
@detector_reference("entropy")
def negative_entropy_reference(detector, logits, features, train):
    """-H(S) = sum_c S_c ln S_c in nats."""
    return per_row(logits, lambda z: sum(p * math.log(p) for p in softmax_row(z)))


@detector_reference("gen", gamma=0.5, top=3)
def generalized_entropy_reference(detector, logits, features, train):
    """-sum over the top M probabilities of S^gamma (1 - S)^gamma (GEN, Liu et al. 2023)."""
    g, m = detector.gamma, detector.top
    return per_row(logits, lambda z: -sum(p ** g * (1 - p) ** g for p in sorted(softmax_row(z))[-m:]))
