"""The minimum-effect test (agnostophobia.metrics.minimum_effect) against scipy's one-sample t-test of
the per-seed differences shifted by the margin, and its relation to decide's better and worse."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from agnostophobia.metrics import BETTER, WORSE, beyond_margin, decide, holm, minimum_effect_p, paired_difference

MARGIN = 0.005


def _scipy_minimum_effect_p(first, second, margin):
    """Without a samples' share the difference's SE is the seeds' alone, so the test is scipy's
    one-sample t-test of the per-seed differences moved toward 0 by the margin, one-sided in the
    observed direction, doubled (two-sided, as the module states), capped at 1."""
    differences = np.subtract(first, second)
    if differences.mean() >= 0:
        p = stats.ttest_1samp(differences - margin, 0.0, alternative="greater").pvalue
    else:
        p = stats.ttest_1samp(differences + margin, 0.0, alternative="less").pvalue
    return min(1.0, 2 * p) if abs(differences.mean()) > margin else 1.0


def test_minimum_effect_p_matches_scipy_on_random_differences():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 8))
        second = rng.uniform(0.5, 0.9, n)
        first = second + rng.normal(rng.uniform(-0.03, 0.03), rng.uniform(0.001, 0.02), n)
        ours = minimum_effect_p(paired_difference(first, second), MARGIN)
        assert ours == pytest.approx(_scipy_minimum_effect_p(first, second, MARGIN), rel=1e-9, abs=1e-12)


def test_samples_share_widens_the_test():
    second = [0.5, 0.25, 0.75]
    first = [s + 0.0078125 for s in second]  # a constant 2**-7, exact in binary: no spread over seeds
    assert minimum_effect_p(paired_difference(first, second), MARGIN) == 1.0  # no noise to read it against
    tight = minimum_effect_p(paired_difference(first, second, sample_se=0.0005), MARGIN)
    loose = minimum_effect_p(paired_difference(first, second, sample_se=0.004), MARGIN)
    assert tight < 0.05 < loose


def test_beyond_margin_is_holm_over_the_family():
    rng = np.random.default_rng(1)
    family = [paired_difference(rng.uniform(0.7, 0.8, 5) + shift, rng.uniform(0.7, 0.8, 5) * 0 + 0.75, sample_se=0.002)
              for shift in (-0.05, -0.01, 0.0, 0.02, 0.06)]
    expected = [p < 0.05 for p in holm([minimum_effect_p(d, MARGIN) for d in family])]
    assert beyond_margin(family, MARGIN) == expected
    # one test alone is not adjusted: a family can only make the mark harder to reach
    alone = [beyond_margin([d], MARGIN)[0] for d in family]
    assert all(a or not b for a, b in zip(alone, expected))


def test_beyond_margin_only_narrows_better_and_worse():
    """Holm is monotone in every p and this p is never below the test against 0, so a difference
    beyond the margin is always better or worse; the reverse fails for a mean just past the margin."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        family = [paired_difference(rng.normal(0.75, 0.01, 5) + rng.normal(0, 0.02), rng.normal(0.75, 0.01, 5),
                                    sample_se=float(rng.uniform(0, 0.004))) for _ in range(int(rng.integers(1, 6)))]
        for decision, beyond in zip(decide(family, MARGIN), beyond_margin(family, MARGIN)):
            assert not beyond or decision.verdict in (BETTER, WORSE)
    just_past = paired_difference([0.7552, 0.7558, 0.7556], [0.75, 0.75, 0.75], sample_se=0.0004)
    assert decide([just_past], MARGIN)[0].verdict == BETTER
    assert beyond_margin([just_past], MARGIN) == [False]


@pytest.mark.parametrize("margin", [0.0, -0.01, float("nan")])
def test_beyond_margin_refuses_a_margin_that_is_not_positive(margin):
    with pytest.raises(ValueError, match="margin must be a positive number"):
        beyond_margin([paired_difference([0.8, 0.81], [0.7, 0.7])], margin)


def test_minimum_effect_p_refuses_a_negative_margin():
    with pytest.raises(ValueError, match="margin must be a number >= 0"):
        minimum_effect_p(paired_difference([0.8, 0.81], [0.7, 0.7]), -0.1)
