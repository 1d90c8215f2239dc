"""Intervals and tests for comparing methods (agnostophobia.metrics.significance), checked against
scipy's own routines computed another way and against Holm's definition written out."""
import itertools

import numpy as np
import pytest
from scipy import stats

from agnostophobia.metrics import Bootstrap, auroc, holm, paired_bootstrap, paired_seed_test, seed_interval


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
    interval, p = paired_bootstrap(_confidence_auroc, good, bad, labels, Bootstrap(resamples=400))
    assert interval.estimate == pytest.approx(auroc(good, labels) - auroc(bad, labels))
    assert interval.low > 0 and p < 0.01
    same, p_same = paired_bootstrap(_confidence_auroc, good, good, labels, Bootstrap(resamples=400))
    assert same.estimate == 0 and p_same == 1.0
    again, _ = paired_bootstrap(_confidence_auroc, good, bad, labels, Bootstrap(resamples=400))
    assert again == interval  # seeded: the same resamples
    with pytest.raises(ValueError, match="the same samples"):
        paired_bootstrap(_confidence_auroc, good, bad[:10], labels)


# ------------------------------------------------------------------ issue 55: differences, decisions, resolution
from agnostophobia.metrics import (BETTER, EQUIVALENT, NOT_RESOLVED, WORSE, decide, oscr_area,  # noqa: E402
                                   oscr_area_resamples, paired_difference, resample_weights, resampled_se,
                                   smallest_resolved_difference)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_paired_difference_without_the_samples_share_is_scipys_paired_t_test(n):
    rng = np.random.default_rng(10 + n)
    a = rng.normal(0.7, 0.05, n)
    b = a - rng.normal(0.01, 0.02, n)
    d = paired_difference(a, b)
    reference = stats.ttest_rel(a, b)
    assert d.p_value == pytest.approx(reference.pvalue, rel=1e-10) and d.df == reference.df == n - 1
    assert d.difference == pytest.approx((a - b).mean()) and d.se == d.se_seeds and d.se_samples == 0
    interval = d.interval(0.95)
    assert (interval.low, interval.high) == pytest.approx(tuple(reference.confidence_interval(0.95)), rel=1e-10)
    ninety = stats.t.interval(0.90, n - 1, loc=(a - b).mean(), scale=stats.sem(a - b))
    assert (d.interval(0.90).low, d.interval(0.90).high) == pytest.approx(ninety, rel=1e-10)
    # the test samples' share adds in quadrature: a share equal to the seeds' error widens it by sqrt(2)
    both = paired_difference(a, b, sample_se=d.se_seeds)
    assert both.se == pytest.approx(np.sqrt(2) * d.se_seeds, rel=1e-12) and both.se_samples == d.se_seeds
    assert both.p_value == pytest.approx(2 * stats.t.sf(abs(d.difference) / both.se, n - 1), rel=1e-12)


def test_the_samples_share_is_the_standard_error_where_the_seeds_barely_move():
    """The reviewer's case: a difference of -0.0001 whose spread over 3 seeds is a few 1e-6 (two
    detectors on one network) had p = 3e-5; with the test samples' standard error it has none of
    that certainty."""
    first = np.array([0.9900, 0.9870, 0.9930])
    second = first + np.array([1.01e-4, 0.995e-4, 1.00e-4])
    assert paired_seed_test(first, second).p_value < 1e-4  # the seeds alone: "significant"
    d = paired_difference(first, second, sample_se=4e-4)
    assert d.se == pytest.approx(np.hypot(d.se_seeds, 4e-4), rel=1e-12) and d.se_seeds < 1e-5
    t = abs(d.difference) / d.se  # by hand: t with n - 1 degrees of freedom on the combined standard error
    assert d.p_value == pytest.approx(2 * stats.t.sf(t, 2))
    assert d.p_value > 0.5
    [decision] = decide([d], margin=0.005)
    assert decision.verdict == EQUIVALENT  # the 90 % interval lies well inside +-0.005


def test_a_constant_difference_is_never_certain():
    """A difference that is the same on every seed has no spread: the t-test is undefined, not p = 0."""
    a = np.array([0.71, 0.74, 0.77])
    assert np.isnan(paired_seed_test(a + 1e-5, a).p_value)  # was 0: "significant"
    assert paired_seed_test(a, a).p_value == 1.0
    bare = paired_difference(a + 1e-5, a)
    assert np.isnan(bare.p_value) and np.isnan(bare.interval().low)
    assert decide([bare], margin=0.005)[0].verdict == NOT_RESOLVED  # nothing measured the noise
    # shifted by a constant, the differences keep only floating-point rounding (0.1 and 0.09999999999999998):
    # still no spread, where the t-test would divide by it and call the difference certain
    shifted, base = np.array([0.8, 0.9, 0.7]), np.array([0.7, 0.8, 0.6])
    assert np.ptp(shifted - base) > 0 and np.isnan(paired_seed_test(shifted, base).p_value)
    assert np.isnan(paired_difference(shifted, base).p_value) and paired_difference(shifted, base).se_seeds == 0
    floored = paired_difference(a + 1e-5, a, sample_se=1e-3)
    assert 0.9 < floored.p_value < 1
    assert decide([floored], margin=0.005)[0].verdict == EQUIVALENT
    same = paired_difference(a, a)  # identical scores: equivalent, whatever the margin
    assert same.p_value == 1.0 and decide([same], margin=1e-9)[0].verdict == EQUIVALENT
    with pytest.raises(ValueError, match="sample_se"):
        paired_difference(a, a, sample_se=-1.0)


def _tost_by_scipy(a, b, margin, alpha=0.05):
    """Two one-sided paired t-tests (Schuirmann 1987), each computed by scipy: equivalent where the
    mean difference is shown both above -margin and below +margin."""
    lower = stats.ttest_1samp(a - b, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(a - b, margin, alternative="less").pvalue
    return max(lower, upper) < alpha


def test_decide_holm_adjusts_within_the_family_and_reads_the_margin_and_tost():
    rng = np.random.default_rng(55)
    margin, alpha = 0.005, 0.05
    for trial in range(200):
        n, m = int(rng.integers(2, 7)), int(rng.integers(1, 8))
        family, pairs = [], []
        for _ in range(m):
            a = rng.normal(0.8, 0.02, n)
            b = a - rng.normal(rng.choice([0.0, 0.003, 0.01, 0.05]), rng.choice([0.0005, 0.003, 0.02]), n)
            family.append(paired_difference(a, b))
            pairs.append((a, b))
        decisions = decide(family, margin, alpha)
        adjusted = _holm_by_definition([d.p_value for d in family])
        for d, decision, p_holm, (a, b) in zip(family, decisions, adjusted, pairs):
            assert decision.p_holm == pytest.approx(p_holm)
            passes = p_holm < alpha and abs(d.difference) >= margin
            equivalent = _tost_by_scipy(a, b, margin, alpha)
            expected = (BETTER if d.difference > 0 else WORSE) if passes else EQUIVALENT if equivalent else NOT_RESOLVED
            assert decision.verdict == expected, (trial, d, decision)
    # significant but smaller than the margin: not a difference that matters, and not shown equivalent
    tiny = _difference_of(0.0045, 0.0005, 3)
    assert tiny.p_value < 0.05 and abs(tiny.difference) < margin and tiny.interval(0.90).high > margin
    assert decide([tiny], margin)[0].verdict == NOT_RESOLVED
    with pytest.raises(ValueError, match="margin"):
        decide([tiny], margin=0)


def test_the_smallest_resolved_difference_is_where_holms_strictest_step_is_cleared():
    se, n, m = 0.002, 3, 9
    smallest = smallest_resolved_difference(se, n, family_size=m)
    assert smallest == pytest.approx(stats.t.ppf(1 - 0.05 / (2 * m), n - 1) * se)
    for delta, resolved in ((smallest * 1.001, True), (smallest * 0.999, False)):
        # a family of m tests, this one and m - 1 that reject nothing
        family = [_difference_of(delta, se, n)] + [_difference_of(0.0, se, n)] * (m - 1)
        assert (decide(family, margin=1e-6)[0].verdict == BETTER) is resolved
    assert smallest_resolved_difference(1e-6, 3, margin=0.005) == 0.005  # the margin where noise is small
    assert smallest_resolved_difference(se, 10, family_size=m) < smallest  # more seeds, smaller
    with pytest.raises(ValueError):
        smallest_resolved_difference(se, 1)


def _difference_of(delta, se, n):
    """Per-seed values whose mean difference is ``delta`` and whose standard error is ``se``."""
    spread = np.linspace(-1, 1, n)
    spread = spread / (spread.std(ddof=1) / np.sqrt(n)) * se
    base = np.full(n, 0.8)
    return paired_difference(base + delta + spread, base)


def test_resample_weights_are_seeded_counts_of_draws_with_replacement():
    weights = resample_weights(50, 7, seed=3)
    assert weights.shape == (7, 50) and (weights.sum(axis=1) == 50).all() and weights.min() >= 0
    np.testing.assert_array_equal(weights, resample_weights(50, 7, seed=3))
    draws = np.random.default_rng(3).integers(0, 50, (7, 50))
    np.testing.assert_array_equal(weights, [np.bincount(row, minlength=50) for row in draws])


def test_oscr_area_resamples_are_the_oscr_areas_of_the_resamples():
    rng = np.random.default_rng(8)
    labels = np.concatenate([rng.integers(0, 4, 120), np.full(90, -1)])
    scores = rng.normal(size=(210, 4)) + np.where(labels[:, None] == np.arange(4), 1.5, 0.0)
    scores[::7, 0] = 3.0  # ties between knowns and unknowns, as a saturating score makes them
    known, unknown = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    ones = oscr_area_resamples(scores, labels, np.ones((1, known.size)), np.ones((1, unknown.size)))
    assert ones[0] == pytest.approx(oscr_area(scores, labels), abs=1e-15)
    known_weights, unknown_weights = resample_weights(known.size, 20, 1), resample_weights(unknown.size, 20, 2)
    areas = oscr_area_resamples(scores, labels, known_weights, unknown_weights)
    for b in range(20):
        index = np.concatenate([np.repeat(known, known_weights[b]), np.repeat(unknown, unknown_weights[b])])
        assert areas[b] == pytest.approx(oscr_area(scores[index], labels[index]), abs=1e-12)
    with pytest.raises(ValueError, match="weights of shape"):
        oscr_area_resamples(scores, labels, known_weights[:, 1:], unknown_weights)


@pytest.mark.parametrize("min_fpr", [1e-3, 10 / 90, 0.5])
def test_log_fpr_oscr_area_resamples_are_the_log_fpr_areas_of_the_resamples(min_fpr):
    """The weighted log-FPR area is oscr_area(log_fpr=True) of the resample itself, drawn by repeating
    the samples, for knowns tied with unknowns (a saturating score), with every weight 1, and with a
    min_fpr below, at and above the set's smallest step."""
    rng = np.random.default_rng(18)
    labels = np.concatenate([rng.integers(0, 4, 120), np.full(90, -1)])
    scores = rng.normal(size=(210, 4)) + np.where(labels[:, None] == np.arange(4), 1.5, 0.0)
    scores[::7, 0] = 3.0
    known, unknown = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    ones = oscr_area_resamples(scores, labels, np.ones((1, known.size)), np.ones((1, unknown.size)), log_fpr=True,
                               min_fpr=min_fpr)
    assert ones[0] == pytest.approx(oscr_area(scores, labels, log_fpr=True, min_fpr=min_fpr), abs=1e-12)
    known_weights, unknown_weights = resample_weights(known.size, 20, 3), resample_weights(unknown.size, 20, 4)
    areas = oscr_area_resamples(scores, labels, known_weights, unknown_weights, log_fpr=True, min_fpr=min_fpr)
    for b in range(20):
        index = np.concatenate([np.repeat(known, known_weights[b]), np.repeat(unknown, unknown_weights[b])])
        assert areas[b] == pytest.approx(oscr_area(scores[index], labels[index], log_fpr=True, min_fpr=min_fpr),
                                         abs=1e-12)
    linear = oscr_area_resamples(scores, labels, known_weights, unknown_weights)
    assert not np.allclose(areas, linear)  # the two axes weigh the curve apart
    with pytest.raises(ValueError, match="min_fpr"):
        oscr_area_resamples(scores, labels, known_weights, unknown_weights, log_fpr=True, min_fpr=0.0)


def test_resampled_se_is_the_spread_of_the_mean_difference_over_resamples():
    rng = np.random.default_rng(9)
    first, second = rng.normal(0.8, 0.01, (3, 50)), rng.normal(0.79, 0.01, (3, 50))
    by_hand = np.std([np.mean(first[:, b] - second[:, b]) for b in range(50)], ddof=1)
    assert resampled_se(first, second) == pytest.approx(by_hand)
    assert resampled_se(first, first) == 0
    with pytest.raises(ValueError, match="one shape"):
        resampled_se(first, second[:2])
