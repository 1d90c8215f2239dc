"""AUROC, FPR at TPR, PR curve and the confidence curves, against brute force."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agnostophobia.metrics import (accuracy_vs_confidence, aupr_in, aupr_out, auroc, fpr_at_tpr, precision_recall,
                                   precision_vs_confidence)

VALUES = (0.0, 0.1, 0.25, 0.5, 0.9, 1.0)


@st.composite
def detection_case(draw):
    n = draw(st.integers(2, 30))
    confidence = draw(st.lists(st.sampled_from(VALUES), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(-2, 3), min_size=n, max_size=n))
    labels[0], labels[1] = draw(st.integers(0, 3)), -1
    return np.array(confidence), np.array(labels)


@st.composite
def scores_case(draw):
    n_classes = draw(st.integers(1, 3))
    n = draw(st.integers(1, 20))
    scores = draw(st.lists(st.lists(st.sampled_from(VALUES), min_size=n_classes, max_size=n_classes),
                           min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(-1, n_classes - 1), min_size=n, max_size=n))
    return np.array(scores), np.array(labels)


def split(confidence, labels):
    known = [c for c, y in zip(confidence, labels) if y >= 0]
    unknown = [c for c, y in zip(confidence, labels) if y < 0]
    return known, unknown


# ---------------------------------------------------------------- AUROC, FPR@TPR, AP
@settings(max_examples=200, deadline=None)
@given(detection_case())
def test_auroc_brute_force(case):
    known, unknown = split(*case)
    pairs = [1.0 if k > u else 0.5 if k == u else 0.0 for k in known for u in unknown]
    assert auroc(*case) == pytest.approx(sum(pairs) / len(pairs), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(detection_case(), st.sampled_from([0.05, 0.5, 0.8, 0.95, 1.0]))
def test_fpr_at_tpr_brute_force(case, tpr):
    known, unknown = split(*case)
    best = math.inf
    for theta in set(case[0]):
        t = sum(k >= theta for k in known) / len(known)
        f = sum(u >= theta for u in unknown) / len(unknown)
        if t >= tpr:
            best = min(best, f)
    assert fpr_at_tpr(*case, tpr=tpr) == best


@settings(max_examples=200, deadline=None)
@given(detection_case())
def test_average_precision_brute_force(case):
    confidence, labels = case
    known, unknown = split(confidence, labels)
    ap, last_recall = 0.0, 0.0
    for theta in sorted(set(confidence), reverse=True):
        tp = sum(k >= theta for k in known)
        fp = sum(u >= theta for u in unknown)
        ap += (tp / len(known) - last_recall) * tp / (tp + fp)
        last_recall = tp / len(known)
    curve = precision_recall(confidence, labels)
    assert curve.average_precision == pytest.approx(ap, abs=1e-12)
    assert curve.recall[0] == 1 and curve.recall[-1] == 0 and curve.precision[-1] == 1
    assert len(curve.precision) == len(curve.thresholds) + 1


def test_perfect_and_inverted_detection():
    labels = np.array([0, 1, 2, -1, -1])
    good = np.array([0.9, 0.8, 0.7, 0.2, 0.1])
    assert auroc(good, labels) == 1 and fpr_at_tpr(good, labels) == 0
    assert auroc(-good, labels) == 0 and fpr_at_tpr(-good, labels) == 1
    assert precision_recall(good, labels).average_precision == 1


@pytest.mark.parametrize("seed", range(5))
def test_aupr_in_and_out_and_fpr95_match_scikit_learn_on_random_scores_with_ties(seed):
    """AUPR-In: knowns positive, ranked by confidence; AUPR-Out: unknowns positive, ranked by
    -confidence; FPR@95: the unknowns' FPR at the first threshold (from the top) that accepts 95 %
    of the knowns. Scores rounded to two decimals: many ties, each tie group taken together."""
    from sklearn.metrics import average_precision_score, roc_curve

    rng = np.random.default_rng(seed)
    labels = np.r_[rng.integers(0, 5, 300), -np.ones(200, int)]
    confidence = np.round(rng.normal(size=500) + (labels >= 0), 1)  # ~60 distinct values for 500 samples
    assert aupr_in(confidence, labels) == pytest.approx(average_precision_score(labels >= 0, confidence), abs=1e-12)
    assert aupr_out(confidence, labels) == pytest.approx(average_precision_score(labels < 0, -confidence), abs=1e-12)
    assert aupr_in(confidence, labels) == precision_recall(confidence, labels).average_precision
    fpr, tpr, _ = roc_curve(labels >= 0, confidence, drop_intermediate=False)
    assert fpr_at_tpr(confidence, labels, 0.95) == fpr[np.argmax(tpr >= 0.95)]
    # the same by hand: the highest threshold accepting 95 % of the knowns, ties accepted together
    theta = max(t for t in set(confidence) if (confidence[labels >= 0] >= t).mean() >= 0.95)
    assert fpr_at_tpr(confidence, labels, 0.95) == (confidence[labels < 0] >= theta).mean()
    # the two conventions are one another with the roles of knowns and unknowns swapped
    swapped = np.where(labels < 0, 0, -1)
    assert aupr_out(-confidence, swapped) == pytest.approx(aupr_in(confidence, labels), abs=1e-12)
    # (N, C) scores are read as their maximum, as every metric here reads them
    scores = np.stack([confidence, confidence - 1], axis=1)
    assert aupr_out(scores, labels) == aupr_out(confidence, labels)


def test_aupr_chance_levels_are_the_shares_of_each_kind():
    labels = np.r_[np.zeros(30, int), -np.ones(70, int)]
    flat = np.zeros(100)  # one tie group: every sample accepted (or rejected) at once
    assert aupr_in(flat, labels) == pytest.approx(0.3) and aupr_out(flat, labels) == pytest.approx(0.7)


# ---------------------------------------------------------------- confidence curves
def brute_over_accepted(scores, labels, thresholds, need_correct):
    out = []
    for theta in thresholds:
        accepted = [i for i, row in enumerate(scores) if max(row) >= theta]
        hits = [i for i in accepted if labels[i] >= 0
                and (not need_correct or list(scores[i]).index(max(scores[i])) == labels[i])]
        out.append(len(hits) / len(accepted) if accepted else math.nan)
    return out


@settings(max_examples=200, deadline=None)
@given(scores_case(), st.one_of(st.none(), st.lists(st.sampled_from((-1.0, 0.0, 0.3, 0.5, 1.0, 2.0)),
                                                   min_size=1, max_size=4)))
def test_confidence_curves_brute_force(case, thresholds):
    scores, labels = case
    grid = sorted(set(scores.max(1).tolist())) if thresholds is None else thresholds
    for func, need_correct in ((accuracy_vs_confidence, True), (precision_vs_confidence, False)):
        curve = func(scores, labels, thresholds)
        np.testing.assert_array_equal(curve.thresholds, grid)
        np.testing.assert_allclose(curve.value, brute_over_accepted(scores.tolist(), labels.tolist(),
                                                                    grid, need_correct), rtol=1e-12)
        np.testing.assert_array_equal(curve.accepted, [(scores.max(1) >= t).sum() for t in grid])


def test_accuracy_counts_misclassified_knowns_precision_does_not():
    scores = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    labels = np.array([0, 1, -1])  # second known is misclassified
    assert accuracy_vs_confidence(scores, labels, [0.75]).value[0] == 0.5
    assert precision_vs_confidence(scores, labels, [0.75]).value[0] == 1.0


def test_precision_vs_confidence_is_pr_precision():
    rng = np.random.default_rng(0)
    scores = rng.random((100, 4))
    labels = np.r_[rng.integers(0, 4, 60), -np.ones(40, int)]
    pr = precision_recall(scores.max(1), labels)
    curve = precision_vs_confidence(scores, labels, pr.thresholds)
    np.testing.assert_allclose(curve.value, pr.precision[:-1])


# ---------------------------------------------------------------- bad input
CONF = np.array([0.9, 0.2, 0.6])
LABELS = np.array([0, 1, -1])


@pytest.mark.parametrize("func", [auroc, fpr_at_tpr, precision_recall, aupr_in, aupr_out])
@pytest.mark.parametrize("confidence, labels, match", [
    (np.array([0.9, np.nan, 0.6]), LABELS, "confidence contains .*NaN"),
    (np.array([0.9, np.inf, 0.6]), LABELS, "confidence contains .*inf"),
    (CONF, np.array([0, 1]), "labels has 2 entries but the scores have 3"),
    (CONF, np.array([-1, -1, -1]), "labels has no known samples"),
    (CONF, np.array([0, 1, 1]), "labels has no unknown samples"),
    (np.zeros(0), np.zeros(0, int), "confidence is empty"),
    (np.ones((3, 2, 2)), LABELS, r"confidence must have shape \(N,\)"),  # (N, C) is read as its max
    (CONF, np.array([0.5, 1, -1]), "labels must be integers"),
])
def test_detection_bad_input(func, confidence, labels, match):
    with pytest.raises(ValueError, match=match):
        func(confidence, labels)


@pytest.mark.parametrize("tpr", [0, -0.5, 1.5, float("nan"), [0.9]])
def test_fpr_at_tpr_bad_tpr(tpr):
    with pytest.raises(ValueError, match="tpr must be a number in"):
        fpr_at_tpr(CONF, LABELS, tpr)


SCORES = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])


@pytest.mark.parametrize("func", [accuracy_vs_confidence, precision_vs_confidence])
@pytest.mark.parametrize("scores, labels, thresholds, match", [
    (np.array([[np.nan, 0.1], [0.2, 0.8], [0.6, 0.4]]), LABELS, None, "scores contains .*NaN"),
    (SCORES, np.array([0, 1]), None, "labels has 2 entries"),
    (SCORES, np.array([0, 2, -1]), None, "labels contains 2, but the scores have only 2 classes"),
    (np.array([0.9, 0.2, 0.6]), LABELS, None, r"scores must have shape \(N, C\)"),
    (np.zeros((0, 2)), np.zeros(0, int), None, "scores is empty"),
    (SCORES, LABELS, [0.5, np.inf], "thresholds contains non-finite"),
    (SCORES, LABELS, [], "thresholds is empty"),
])
def test_confidence_curves_bad_input(func, scores, labels, thresholds, match):
    with pytest.raises(ValueError, match=match):
        func(scores, labels, thresholds)


def test_confidence_curves_allow_one_kind_only():
    assert accuracy_vs_confidence(SCORES, [0, 0, 0], [0.0]).value[0] == pytest.approx(2 / 3)
    assert precision_vs_confidence(SCORES, [-1, -1, -1], [0.0]).value[0] == 0
