"""OSCR curve and CCR@FPR against a literal, loop-over-thresholds reading of Eq. 3."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agnostophobia.metrics import accuracy_vs_confidence, ccr_at_fpr, class_ccr_at_fpr, oscr, oscr_area

VALUES = (0.0, 0.25, 0.5, 0.9, 1.0)  # few values: many ties, scores saturated at 1.0


# ---------------------------------------------------------------- brute force (Eq. 3)
def top(scores):
    """max and first arg-max of each row, with Python loops."""
    s, pred = [], []
    for row in scores:
        best = max(row)
        s.append(best)
        pred.append(list(row).index(best))
    return s, pred


def eq3(s, pred, labels, theta, counts=False):
    """FPR(theta), CCR(theta) exactly as Eq. 3 is written (>= for FPR, > for CCR)."""
    unknown = [i for i, y in enumerate(labels) if y < 0]
    known = [i for i, y in enumerate(labels) if y >= 0]
    fp = sum(1 for i in unknown if s[i] >= theta)
    cc = sum(1 for i in known if pred[i] == labels[i] and s[i] > theta)
    return (fp if counts else fp / len(unknown)), cc / len(known)


def all_thetas(s):
    """Every distinct score, a point inside every gap, and one above / below all."""
    vals = sorted(set(s), reverse=True)
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    assert all(a > m > b for a, m, b in zip(vals, mids, vals[1:]))
    return [vals[0] + 1] + vals + mids + [vals[-1] - 1]


def gap_below(s, v):
    """A threshold strictly between v and the next lower distinct score."""
    if v == math.inf:
        return max(s) + 1
    lower = [x for x in set(s) if x < v]
    return (v + max(lower)) / 2 if lower else v - 1


def brute_ccr_at_fpr(scores, labels, targets, counts=False):
    s, pred = top(scores)
    points = [eq3(s, pred, labels, th, counts) for th in all_thetas(s)]
    n_unknown = sum(1 for y in labels if y < 0)
    out = []
    for t in targets:
        if not counts and t < 1 / n_unknown:
            out.append(math.nan)
        else:
            out.append(max(c for f, c in points if f <= t))
    return out


# ---------------------------------------------------------------- strategies
@st.composite
def open_set_case(draw, values=VALUES):
    n_classes = draw(st.integers(1, 4))
    n = draw(st.integers(2, 25))
    scores = np.array(draw(st.lists(st.lists(st.sampled_from(values), min_size=n_classes,
                                             max_size=n_classes), min_size=n, max_size=n)))
    labels = draw(st.lists(st.integers(-2, n_classes - 1), min_size=n, max_size=n))
    labels[0], labels[1] = draw(st.integers(0, n_classes - 1)), -1  # both kinds present
    perm = draw(st.permutations(range(n)))
    return scores[perm], np.array(labels)[perm]


# ---------------------------------------------------------------- OSCR curve
@settings(max_examples=300, deadline=None)
@given(open_set_case(), st.booleans())
def test_oscr_matches_eq3(case, counts):
    scores, labels = case
    fpr, ccr, thresholds = oscr(scores, labels, counts=counts)
    s, pred = top(scores.tolist())
    lab = labels.tolist()
    # one point per distinct score (decreasing), plus +inf only when the top score is an unknown
    distinct = sorted(set(s), reverse=True)
    top_unknown = any(y < 0 and si == distinct[0] for si, y in zip(s, lab))
    assert thresholds.tolist() == ([math.inf] if top_unknown else []) + distinct
    # every point is what Eq. 3 gives inside the gap below its threshold
    for f, c, th in zip(fpr, ccr, thresholds):
        assert (f, c) == eq3(s, pred, lab, gap_below(s, th), counts)
    # and no Eq. 3 operating point is better than the curve at its FPR
    for th in all_thetas(s):
        f, c = eq3(s, pred, lab, th, counts)
        assert max(cc for ff, cc in zip(fpr, ccr) if ff == f) >= c
    if counts:
        assert fpr.dtype.kind == "i"


@settings(max_examples=300, deadline=None)
@given(open_set_case(), st.lists(st.sampled_from([0.0, 0.01, 0.05, 0.1, 1 / 3, 0.5, 0.99, 1.0]),
                                 min_size=1, max_size=5))
def test_ccr_at_fpr_matches_brute_force(case, targets):
    scores, labels = case
    got = ccr_at_fpr(scores, labels, targets)
    expected = brute_ccr_at_fpr(scores.tolist(), labels.tolist(), targets)
    np.testing.assert_array_equal(got, expected)  # NaN == NaN here


@settings(max_examples=200, deadline=None)
@given(open_set_case(), st.lists(st.sampled_from([0, 0.5, 1, 2, 3, 7, 100]), min_size=1, max_size=5))
def test_ccr_at_fp_counts_matches_brute_force(case, targets):
    scores, labels = case
    got = ccr_at_fpr(scores, labels, targets, counts=True)
    np.testing.assert_array_equal(got, brute_ccr_at_fpr(scores.tolist(), labels.tolist(), targets, True))


@settings(max_examples=200, deadline=None)
@given(open_set_case(values=(0.1, 0.3, 0.30000001, 0.6, 0.999, 1.0)))
def test_ccr_at_fpr_is_the_best_curve_point(case):
    scores, labels = case
    fpr, ccr, _ = oscr(scores, labels)
    targets = np.unique(fpr)
    got = ccr_at_fpr(scores, labels, targets)
    for t, g in zip(targets, got):
        if t >= 1 / np.count_nonzero(labels < 0):
            assert g == ccr[fpr <= t].max()


@settings(max_examples=100, deadline=None)
@given(open_set_case())
def test_curve_shape(case):
    scores, labels = case
    fpr, ccr, thresholds = oscr(scores, labels)
    assert fpr[0] == 0 and fpr[-1] == 1
    known = labels >= 0
    assert ccr[-1] == np.mean(scores[known].argmax(1) == labels[known])  # closed-set accuracy
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(ccr) >= 0)
    assert np.all(np.diff(thresholds) < 0)


# ---------------------------------------------------------------- fixed cases
def authors_case():
    """Knowns scoring 1.0, 1.0, 0.9 (all correct), unknowns at 0.95 and 0.92."""
    scores = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.05, 0.05, 0.9],
                       [0.95, 0.03, 0.02], [0.04, 0.92, 0.04]])
    return scores, np.array([0, 1, 2, -1, -1])


def test_saturated_knowns_count_before_first_unknown():
    fpr, ccr, thresholds = oscr(*authors_case())
    np.testing.assert_allclose(fpr, [0, 0.5, 1, 1])
    np.testing.assert_allclose(ccr, [2 / 3, 2 / 3, 2 / 3, 1])
    np.testing.assert_allclose(thresholds, [1.0, 0.95, 0.92, 0.9])
    # CCR at FPR 0 is 2/3: any threshold in (0.95, 1.0) accepts both 1.0 knowns and no unknown
    assert ccr_at_fpr(*authors_case(), [0], counts=True)[0] == pytest.approx(2 / 3)
    assert ccr_at_fpr(*authors_case(), [0.5])[0] == pytest.approx(2 / 3)
    np.testing.assert_allclose(ccr_at_fpr(*authors_case(), [0.4, 0.5, 0.99, 1.0]), [np.nan, 2 / 3, 2 / 3, 1])


def test_no_zero_point_unless_real():
    fpr, ccr, thresholds = oscr(*authors_case())
    assert not np.any((fpr == 0) & (ccr == 0))
    # the highest score is an unknown: only rejecting everything gives FPR 0, at CCR 0
    scores = np.array([[0.8, 0.2], [0.3, 0.7], [0.9, 0.1]])
    fpr, ccr, thresholds = oscr(scores, [0, 1, -1])
    assert (fpr[0], ccr[0], thresholds[0]) == (0, 0, np.inf)
    assert np.count_nonzero(fpr == 0) == 1


def test_tie_between_known_and_unknown():
    # a known and an unknown share the top score: no threshold accepts one without the other
    scores = np.array([[0.7, 0.3], [0.3, 0.7], [0.5, 0.5]])
    fpr, ccr, _ = oscr(scores, [0, -1, 0])
    np.testing.assert_allclose(fpr, [0, 1, 1])
    np.testing.assert_allclose(ccr, [0, 0.5, 1])  # the [0.5, 0.5] known is predicted class 0


def test_ccr_at_fpr_na_below_one_over_unknowns():
    rng = np.random.default_rng(0)
    scores = rng.random((300, 5))
    labels = np.r_[rng.integers(0, 5, 100), -np.ones(200, int)]
    got = ccr_at_fpr(scores, labels, [1e-4, 1e-3, 1 / 200 - 1e-12, 1 / 200, 1e-2, 1e-1])
    assert np.isnan(got[:3]).all() and not np.isnan(got[3:]).any()
    assert not np.isnan(ccr_at_fpr(scores, labels, [0, 1e-4], counts=True)).any()


def test_torch_and_float32_inputs_agree():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    scores = rng.random((200, 4))
    labels = np.r_[rng.integers(0, 4, 120), -np.ones(80, int)]
    ref = ccr_at_fpr(scores.astype(np.float32).astype(np.float64), labels, [0.0125, 0.1, 0.5])
    got = ccr_at_fpr(torch.tensor(scores, dtype=torch.float32), torch.tensor(labels), [0.0125, 0.1, 0.5])
    np.testing.assert_array_equal(got, ref)


def test_float32_scores_are_not_widened():
    rng = np.random.default_rng(2)
    scores = rng.random((50, 3)).astype(np.float32)
    labels = np.r_[np.zeros(25, int), -np.ones(25, int)]
    assert oscr(scores, labels).thresholds.dtype == np.float32


# ---------------------------------------------------------------- Fig. 3: scale invariance
def test_oscr_invariant_to_monotonic_rescaling_but_accuracy_vs_confidence_is_not():
    rng = np.random.default_rng(3)
    scores = rng.dirichlet(np.ones(10), size=400) + 0.01  # positive; squaring keeps every order
    labels = np.r_[rng.integers(0, 10, 250), -np.ones(150, int)]
    fpr, ccr, thr = oscr(scores, labels)
    fpr2, ccr2, thr2 = oscr(scores ** 2, labels)
    np.testing.assert_array_equal(fpr, fpr2)
    np.testing.assert_array_equal(ccr, ccr2)
    np.testing.assert_allclose(thr ** 2, thr2)
    np.testing.assert_array_equal(ccr_at_fpr(scores, labels, [0.01, 0.1]),
                                  ccr_at_fpr(scores ** 2, labels, [0.01, 0.1]))
    # the accuracy-vs-confidence curve read at the same confidence levels changes
    levels = np.linspace(0.05, 0.5, 10)
    acc = accuracy_vs_confidence(scores, labels, levels).value
    acc2 = accuracy_vs_confidence(scores ** 2, labels, levels).value
    assert np.nanmax(np.abs(acc - acc2)) > 0.05


# ---------------------------------------------------------------- bad input
GOOD_SCORES = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
GOOD_LABELS = np.array([0, 1, -1])


@pytest.mark.parametrize("func", [oscr, ccr_at_fpr])
@pytest.mark.parametrize("scores, labels, match", [
    (np.array([[np.nan, 0.1], [0.2, 0.8], [0.6, 0.4]]), GOOD_LABELS, "scores contains .*NaN"),
    (np.array([[np.inf, 0.1], [0.2, 0.8], [0.6, 0.4]]), GOOD_LABELS, "scores contains .*inf"),
    (np.array([[0.9, 0.1], [0.2, 0.8], [0.6, -np.inf]]), GOOD_LABELS, "scores contains .*inf"),
    (GOOD_SCORES, np.array([0, 1]), "labels has 2 entries but the scores have 3"),
    (GOOD_SCORES, np.array([0, 2, -1]), "labels contains 2, but the scores have only 2 classes"),
    (GOOD_SCORES, np.array([-1, -1, -1]), "labels has no known samples"),
    (GOOD_SCORES, np.array([0, 1, 1]), "labels has no unknown samples"),
    (np.zeros((0, 2)), np.zeros(0, int), "scores is empty"),
    (np.array([0.9, 0.2, 0.6]), GOOD_LABELS, r"scores must have shape \(N, C\)"),
    (np.zeros((3, 0)), GOOD_LABELS, "scores has 0 columns"),
    (GOOD_SCORES, np.array([[0, 1, -1]]), r"labels must have shape \(N,\)"),
    (GOOD_SCORES, np.array([0.5, 1, -1]), "labels must be integers"),
    (np.array([["a", "b"]] * 3), GOOD_LABELS, "scores must be real numbers"),
])
def test_bad_input(func, scores, labels, match):
    with pytest.raises(ValueError, match=match):
        func(scores, labels)


@pytest.mark.parametrize("targets, counts, match", [
    ([0.1, np.nan], False, "fpr_values contains non-finite"),
    ([-0.1], False, "fpr_values must be >= 0"),
    ([-1], True, "fpr_values must be >= 0"),
    ([10], False, "must be <= 1.*counts=True"),
    ([], False, "fpr_values is empty"),
    ([[0.1]], False, "fpr_values must be a scalar or a 1-D"),
])
def test_bad_fpr_values(targets, counts, match):
    with pytest.raises(ValueError, match=match):
        ccr_at_fpr(GOOD_SCORES, GOOD_LABELS, targets, counts=counts)


@pytest.mark.parametrize("threshold, match", [
    (float("nan"), "threshold is NaN"), (np.float32("nan"), "threshold is NaN"),
    (True, "threshold must be one real number"), ("0.5", "threshold must be one real number"),
    ([0.1, 0.2], "threshold must be one real number"),
])
def test_a_threshold_that_is_not_one_number_is_refused(threshold, match):
    from agnostophobia.metrics import rates_at_threshold

    with pytest.raises(ValueError, match=match):  # NaN accepted nothing: (0, 0), without a word
        rates_at_threshold(GOOD_SCORES, GOOD_LABELS, threshold)


def test_an_infinite_threshold_accepts_nothing_or_everything():
    from agnostophobia.metrics import rates_at_threshold

    assert rates_at_threshold(GOOD_SCORES, GOOD_LABELS, np.inf) == (0.0, 0.0)
    assert rates_at_threshold(GOOD_SCORES, GOOD_LABELS, -np.inf) == (1.0, 1.0)
    assert rates_at_threshold(GOOD_SCORES, GOOD_LABELS, np.float32(0.85)) == (0.0, 0.5)


def test_scalar_target():
    assert ccr_at_fpr(GOOD_SCORES, GOOD_LABELS, 1.0).shape == (1,)


# ------------------------------------------- OSCR area and per-class CCR (brute force)
def brute_ccr_with_false_positives(scores, labels, k):
    """The best Eq. 3 CCR over all thresholds that let at most k unknowns through."""
    s, pred = top(scores)
    return max(c for f, c in (eq3(s, pred, labels, th, counts=True) for th in all_thetas(s)) if f <= k)


def brute_oscr_area(scores, labels, log_fpr=False, min_fpr=1e-4):
    """Sum over k of (CCR with <= k false positives) x (width of FPR [k/n, (k+1)/n) on the axis)."""
    n_unknown = sum(1 for y in labels if y < 0)
    area = 0.0
    for k in range(n_unknown):
        low, high = k / n_unknown, (k + 1) / n_unknown
        if log_fpr:
            width = (math.log10(max(high, min_fpr)) - math.log10(max(low, min_fpr))) / -math.log10(min_fpr)
        else:
            width = high - low
        area += brute_ccr_with_false_positives(scores, labels, k) * width
    return area


@settings(max_examples=200, deadline=None)
@given(open_set_case(), st.sampled_from([1e-4, 0.05, 0.3]))
def test_oscr_area_matches_brute_force(case, min_fpr):
    scores, labels = case
    assert oscr_area(scores, labels) == pytest.approx(brute_oscr_area(scores, labels), abs=1e-12)
    assert oscr_area(scores, labels, log_fpr=True, min_fpr=min_fpr) == pytest.approx(
        brute_oscr_area(scores, labels, True, min_fpr), abs=1e-12)


def test_oscr_area_is_the_integral_of_the_ccr_at_fpr_readout():
    rng = np.random.default_rng(5)
    labels = np.concatenate([rng.integers(0, 3, 400), -np.ones(300, int)])
    scores = rng.random((700, 3)) + (labels[:, None] == np.arange(3)) * rng.random((700, 1))
    grid = (np.arange(200_000) + 0.5) / 200_000  # midpoint rule on [0, 1]
    readout = ccr_at_fpr(scores, labels, grid, counts=False)
    readout[np.isnan(readout)] = brute_ccr_with_false_positives(scores, labels, 0)  # below 1/|D_a|: 0 FP
    assert oscr_area(scores, labels) == pytest.approx(readout.mean(), abs=1e-4)
    log_grid = 10 ** (-4 + 4 * (np.arange(200_000) + 0.5) / 200_000)
    readout = ccr_at_fpr(scores, labels, log_grid)
    readout[np.isnan(readout)] = brute_ccr_with_false_positives(scores, labels, 0)
    assert oscr_area(scores, labels, log_fpr=True) == pytest.approx(readout.mean(), abs=1e-4)
    # a perfect separation with every known correct has area 1 on both axes
    perfect = np.eye(3)[np.r_[0, 1, 2, 0]] * np.array([[2.0], [2.0], [2.0], [2.0]])
    perfect = np.concatenate([perfect, np.full((3, 3), 0.1)])
    assert oscr_area(perfect, np.r_[0, 1, 2, 0, -1, -1, -1]) == 1.0
    assert oscr_area(perfect, np.r_[0, 1, 2, 0, -1, -1, -1], log_fpr=True) == pytest.approx(1.0)


def brute_class_ccr(scores, labels, fpr):
    """Per class: CCR at the lowest threshold that keeps FPR <= fpr (Eq. 3, >= for FPR, > for CCR)."""
    s, pred = top(scores)
    n_unknown = sum(1 for y in labels if y < 0)
    classes = len(scores[0])
    if fpr < 1 / n_unknown:
        return [math.nan] * classes
    theta = min(th for th in all_thetas(s) if eq3(s, pred, labels, th)[0] <= fpr)
    out = []
    for c in range(classes):
        members = [i for i, y in enumerate(labels) if y == c]
        hits = sum(1 for i in members if pred[i] == c and s[i] > theta)
        out.append(hits / len(members) if members else math.nan)
    return out


@settings(max_examples=300, deadline=None)
@given(open_set_case(), st.sampled_from([0.01, 0.1, 0.25, 0.5, 1.0]))
def test_class_ccr_at_fpr_matches_brute_force(case, fpr):
    scores, labels = case
    np.testing.assert_allclose(class_ccr_at_fpr(scores, labels, fpr), brute_class_ccr(scores, labels, fpr),
                               rtol=0, atol=1e-12)


def test_class_ccr_weighted_by_class_size_is_ccr_at_fpr():
    rng = np.random.default_rng(2)
    labels = np.concatenate([rng.integers(0, 4, 500), -np.ones(400, int)])
    scores = rng.random((900, 4)) + (labels[:, None] == np.arange(4)) * 0.6
    per_class = class_ccr_at_fpr(scores, labels, 0.05)
    sizes = np.bincount(labels[labels >= 0], minlength=4)
    assert per_class @ sizes / sizes.sum() == pytest.approx(ccr_at_fpr(scores, labels, [0.05])[0], abs=1e-12)
    assert per_class.min() < per_class.max()
    with pytest.raises(ValueError, match="one rate"):
        class_ccr_at_fpr(scores, labels, [0.01, 0.1])
    with pytest.raises(ValueError, match="min_fpr"):
        oscr_area(scores, labels, log_fpr=True, min_fpr=0.0)
