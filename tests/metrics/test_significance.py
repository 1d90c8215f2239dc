"""Intervals and tests for comparing methods (agnostophobia.metrics.significance), checked against
scipy's own routines computed another way and against Holm's definition written out."""
import itertools

import numpy as np
import pytest
from scipy import stats

from agnostophobia.metrics import auroc, holm, paired_bootstrap, paired_seed_test, seed_interval


@pytest.mark.parametrize("n", [2, 3, 5])
def test_seed_interval_is_the_t_interval(n):
    values = np.random.default_rng(n).normal(0.7, 0.05, n)
    interval = seed_interval(values)
    half = stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n)  # written out, not scipy.stats.sem
    assert interval.estimate == pytest.approx(values.mean())
    assert (interval.low, interval.high) == pytest.approx((values.mean() - half, values.mean() + half))


def test_seed_interval_covers_the_mean_as_often_as_it_says():
    rng = np.random.default_rng(0)
    draws = rng.normal(1.0, 0.3, (4000, 3))
    covered = [(lambda i: i.low <= 1.0 <= i.high)(seed_interval(row)) for row in draws]
    assert 0.935 < np.mean(covered) < 0.965


def test_seed_interval_of_one_seed_or_no_spread():
    one = seed_interval([0.8])
    assert one.estimate == 0.8 and np.isnan(one.low) and np.isnan(one.high)
    flat = seed_interval([0.5, 0.5, 0.5])
    assert (flat.low, flat.high) == (0.5, 0.5)
    with pytest.raises(ValueError, match="finite"):
        seed_interval([0.1, float("nan")])


def test_paired_seed_test_against_scipy_one_sample_tests():
    rng = np.random.default_rng(1)
    a = rng.normal(0.7, 0.05, 7)
    b = a - rng.normal(0.03, 0.02, 7)
    t = paired_seed_test(a, b)
    assert t.p_value == pytest.approx(stats.ttest_1samp(a - b, 0.0).pvalue)  # the paired test is one-sample on differences
    assert t.difference == pytest.approx((a - b).mean())
    w = paired_seed_test(a, b, test="wilcoxon")
    assert w.p_value == pytest.approx(stats.wilcoxon(a - b).pvalue)
    assert paired_seed_test(a, a).p_value == 1.0
    with pytest.raises(ValueError, match="one value per seed in both"):
        paired_seed_test(a, b[:3])
    with pytest.raises(ValueError, match="at least 2"):
        paired_seed_test([0.1], [0.2])


def _holm_by_definition(p):
    """Holm (1979) written out: the adjusted p of the k-th smallest is the maximum over j <= k of
    min(1, (m - j + 1) p_(j))."""
    m, order = len(p), sorted(range(len(p)), key=lambda i: (p[i], i))
    adjusted = [0.0] * m
    for k, i in enumerate(order):
        adjusted[i] = max(min(1.0, (m - j) * p[order[j]]) for j in range(k + 1))
    return adjusted


def test_holm_against_its_definition_on_random_families():
    rng = np.random.default_rng(2)
    for m in (1, 2, 5, 12):
        p = rng.random(m) ** 3
        assert holm(p) == pytest.approx(_holm_by_definition(list(p)))
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.5, 1.5])


def test_holm_controls_the_familywise_error():
    """Under the null (uniform p-values) Holm rejects anything in at most 5 % of families."""
    rng = np.random.default_rng(3)
    rejected = [bool((holm(rng.random(10)) <= 0.05).any()) for _ in range(3000)]
    assert np.mean(rejected) <= 0.06


def _confidence_auroc(scores, labels):
    return auroc(scores, labels)


def test_paired_bootstrap_finds_a_real_difference_and_none_where_there_is_none():
    rng = np.random.default_rng(4)
    labels = np.where(np.arange(600) % 3 == 0, -1, 0)
    signal = np.where(labels >= 0, 1.0, 0.0)
    good = signal + rng.normal(0, 0.6, 600)
    bad = signal + rng.normal(0, 1.5, 600)
    interval, p = paired_bootstrap(_confidence_auroc, good, bad, labels, resamples=400)
    assert interval.estimate == pytest.approx(auroc(good, labels) - auroc(bad, labels))
    assert interval.low > 0 and p < 0.01
    same, p_same = paired_bootstrap(_confidence_auroc, good, good, labels, resamples=400)
    assert same.estimate == 0 and p_same == 1.0
    again, _ = paired_bootstrap(_confidence_auroc, good, bad, labels, resamples=400)
    assert again == interval  # seeded: the same resamples
    with pytest.raises(ValueError, match="the same samples"):
        paired_bootstrap(_confidence_auroc, good, bad[:10], labels)
