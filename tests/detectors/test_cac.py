"""CAC's rejection score (agnostophobia.detectors.cac): its float64 reference with the anchors at the
training means (the default, as the authors evaluate), checked by tests/contracts/test_detector_references.py
and here against a numpy reading of the authors' recipe and their own ``find_anchor_means``; with
``anchors: fixed`` against pytorch-ood 0.4.0's ``CACLoss.score`` and the authors' own ``gather_outputs``
(tests/fixtures/arpl_cac_reference.json); its export; which approaches it scores."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import torch

from agnostophobia.detectors import build_detector, detector_applies, place_in_predicted_column
from agnostophobia.detectors.cac import cac_scores
from agnostophobia.losses import LOSSES
from references import detector_reference

with warnings.catch_warnings():  # pytorch-ood's imports warn about things this test does not use
    warnings.simplefilter("ignore")
    from pytorch_ood.loss import CACLoss as OODCACLoss

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "arpl_cac_reference.json").read_text())["cac"]


def fixed():
    """The detector on the network's own anchors α·e_k (its logits, the negated distances)."""
    return build_detector("cac", anchors="fixed")


@detector_reference("cac")
def cac_reference(detector, logits, features, train):
    """Miller et al. 2021, Sec. 3, as the authors evaluate (eval_cacOpenset.py): the anchors are the mean z = W F + b
    of each class's correctly classified training knowns (arg-max of the logits = label); d the distances of z to
    them; at t = argmin d, -d_t (1 - softmin(d)_t), 1 - softmin_t written as the other classes' share."""
    weight, bias = detector.weight_.tolist(), detector.bias_.tolist()

    def linear(row):
        return [sum(w * f for w, f in zip(w_row, row)) + b for w_row, b in zip(weight, bias)]

    train_logits, train_features, train_labels = train
    sums, counts = {}, {}
    for row_logits, row_features, label in zip(train_logits.tolist(), train_features.tolist(), train_labels.tolist()):
        if row_logits.index(max(row_logits)) == label:
            z = linear(row_features)
            sums[label] = [a + b for a, b in zip(sums.get(label, [0.0] * len(z)), z)]
            counts[label] = counts.get(label, 0) + 1
    means = [[v / counts[k] for v in sums[k]] for k in range(len(weight))]
    out = []
    for row in features.tolist():
        z = linear(row)
        d = [math.sqrt(sum((a - b) ** 2 for a, b in zip(z, mean))) for mean in means]
        t = d.index(min(d))
        others = sum(math.exp(d[t] - v) for k, v in enumerate(d) if k != t)
        out.append(-d[t] * others / (1.0 + others))
    return np.array(out)


def test_the_score_equals_the_authors_code():
    """On the fixed anchors: the authors' ``gather_outputs(..., data_idx=1, calculate_scores=True)`` gives every class's
    d_k (1 - softmin_k); they reject by its minimum (metrics.py ``auroc``). Ours is minus that minimum
    (larger = more known), to rtol 1e-5 (measured: 4e-13: the score goes through a logarithm), in the
    column of their arg-min."""
    d = np.asarray(REFERENCE["distances"])
    theirs = np.asarray(REFERENCE["scores"])
    ours = fixed().scores(-d)
    np.testing.assert_allclose(ours.max(axis=1), -theirs.min(axis=1), rtol=1e-5, atol=0)
    assert (ours.argmax(axis=1) == theirs.argmin(axis=1)).all()


def test_the_score_equals_pytorch_ood_per_class_and_differs_in_the_class_it_takes():
    """pytorch-ood 0.4.0's ``CACLoss.score(d)`` is -max_k d_k (1 - softmin(d)_k), the largest class's
    product; the paper's and the authors' code, and ours, the smallest (the nearest anchor's). Checked on
    random distances in float64, to rtol 1e-5: theirs is minus the largest of the class-wise products, ours
    minus the smallest, the products written out here."""
    d = np.random.default_rng(5).uniform(0, 15, size=(50, 6))
    products = d * (1 - torch.softmax(-torch.tensor(d), 1).numpy())
    theirs = OODCACLoss.score(torch.tensor(d)).numpy()
    np.testing.assert_allclose(theirs, -products.max(axis=1), rtol=1e-5, atol=0)
    ours = fixed().scores(-d).max(axis=1)
    np.testing.assert_allclose(ours, -products.min(axis=1), rtol=1e-5, atol=0)
    assert not np.allclose(ours, theirs)


def test_it_scores_cac_networks_alone_and_the_distance_networks_lose_the_last_layer_detectors():
    """cac reads a cac network's last layer (its z = W F + b, not logits) and applies there alone."""
    assert detector_applies("cac", "cac") and build_detector("cac").needs_last_layer
    assert not any(detector_applies("cac", name) for name in LOSSES.names() if name != "cac")
    for approach in ("arpl", "cac"):
        assert not detector_applies("vim", approach) and detector_applies("knn", approach)
        assert detector_applies("softmax", approach) and detector_applies("max-logit", approach)


def test_a_confident_sample_keeps_a_score_of_its_own_where_the_softmin_rounds_to_one():
    """1 - softmin from the log-odds: two samples whose softmin is 1 in float64 still differ."""
    d = np.array([[0.5, 60.0, 60.0], [0.5, 70.0, 70.0]])
    scores = fixed().scores(-d).max(axis=1)
    assert scores[0] != scores[1] and (scores < 0).all()


def test_where_the_product_rounds_to_zero_the_score_goes_on_in_log_space_in_the_papers_order():
    """d_t (1 - softmin_t) below e^-700 (anchors thousands apart): still distinct, the smaller product the
    more known, above every score of a product that does not round; numpy and torch alike."""
    d = np.array([[3.0, 5.0, 5.0], [0.5, 900.0, 900.0], [0.5, 2000.0, 2000.0], [0.25, 2000.0, 2000.0]])
    detector = fixed()
    scores = detector.scores(-d).max(axis=1)
    assert np.isfinite(scores).all() and scores[0] < scores[1] < scores[2] < scores[3]
    logits = torch.tensor(-d)
    exported = detector.torch_score()(logits, torch.zeros(4, 1, dtype=torch.float64), logits.argmax(1)).numpy()
    np.testing.assert_allclose(exported, scores, rtol=1e-12)


# ------------------------------------------------------------------ anchors: means (the authors' evaluation)
C, D = 4, 6
RNG = np.random.default_rng(59)
WEIGHT, BIAS = RNG.normal(size=(C, D)), RNG.normal(size=C)
ALPHA = 10.0


def cac_outputs(n: int, spread: float = 1.0):
    """(features, the logits of a cac network on them: -||z - α e_k||, labels), z = W F + b scattered
    around the anchors (some samples nearer another class's anchor: misclassified)."""
    rng = np.random.default_rng(n)
    labels = rng.integers(0, C, n)
    z = ALPHA * np.eye(C)[labels] + spread * 4.0 * rng.normal(size=(n, C))
    features = np.linalg.lstsq(WEIGHT, (z - BIAS).T, rcond=None)[0].T  # z = W F + b (D > C)
    logits = -np.linalg.norm((features @ WEIGHT.T + BIAS)[:, None, :] - ALPHA * np.eye(C), axis=2)
    return features, logits, labels


TRAIN = cac_outputs(300)
TEST = cac_outputs(120, spread=2.0)


def fitted(**settings):
    return build_detector("cac", **settings).use_last_layer(WEIGHT, BIAS).fit(TRAIN[1], TRAIN[0], TRAIN[2])


def authors_recipe(train, test):
    """The authors' evaluation in numpy, read from eval_cacOpenset.py and utils.py: ``find_anchor_means``
    averages the linear output z of the training samples whose arg-max of z is their label, per class;
    ``set_anchors`` puts the anchors there; ``gather_outputs(calculate_scores=True)`` gives every class's
    d_k (1 - softmin(d)_k) and ``metrics.auroc`` rejects by its minimum. Minus that minimum."""
    (train_features, _, train_labels), (test_features, _, _) = train, test
    z = train_features @ WEIGHT.T + BIAS
    correct = z.argmax(axis=1) == train_labels
    means = np.stack([z[correct & (train_labels == k)].mean(axis=0) for k in range(C)])
    d = np.linalg.norm((test_features @ WEIGHT.T + BIAS)[:, None, :] - means[None], axis=2)
    return -(d * (1.0 - scipy.special.softmax(-d, axis=1))).min(axis=1), means


def test_the_default_is_the_authors_evaluation_with_the_anchors_at_the_training_means():
    """Ours at its default equals a numpy reading of the authors' recipe (rtol 1e-9), in the column of the
    network's prediction (the nearest fixed anchor); the scores are not those of the fixed anchors."""
    detector = fitted()
    assert detector.anchors == "means" and detector.needs_fit and detector.needs_features
    expected, means = authors_recipe(TRAIN, TEST)
    np.testing.assert_allclose(detector.anchor_means_, means, rtol=1e-12)
    scores = detector.scores(TEST[1], TEST[0])
    np.testing.assert_array_equal(scores.argmax(axis=1), TEST[1].argmax(axis=1))
    np.testing.assert_allclose(scores.max(axis=1), expected, rtol=1e-9)
    assert not np.allclose(scores.max(axis=1), fixed().scores(TEST[1]).max(axis=1))


def test_the_means_are_those_of_the_correctly_classified_training_knowns_alone():
    """The misclassified training samples (z nearer another class's anchor) are left out of the means: the
    means of every sample of each class differ from the fitted ones, those of the correct ones do not."""
    features, logits, labels = TRAIN
    z = features @ WEIGHT.T + BIAS
    correct = logits.argmax(axis=1) == labels
    assert 0.05 < 1 - correct.mean() < 0.5  # some misclassified, most not
    every = np.stack([z[labels == k].mean(axis=0) for k in range(C)])
    only_correct = np.stack([z[correct & (labels == k)].mean(axis=0) for k in range(C)])
    means = fitted().anchor_means_
    np.testing.assert_allclose(means, only_correct, rtol=1e-12)
    assert np.abs(means - every).max() > 0.1


def test_a_class_without_a_correctly_classified_training_sample_takes_the_mean_of_all_its_samples():
    """A barely trained network (no training sample of class 2 classified right; the authors' mean would be
    NaN) still gets an anchor for it, the mean z of all its samples; a class without any sample is named."""
    features, logits, labels = TRAIN
    keep = ~((labels == 2) & (logits.argmax(axis=1) == 2))
    detector = build_detector("cac").use_last_layer(WEIGHT, BIAS).fit(logits[keep], features[keep], labels[keep])
    z = features[keep] @ WEIGHT.T + BIAS
    np.testing.assert_allclose(detector.anchor_means_[2], z[labels[keep] == 2].mean(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(detector.anchor_means_[[0, 1, 3]], fitted().anchor_means_[[0, 1, 3]])
    with pytest.raises(ValueError, match="class.es. 2 have no training sample"):
        build_detector("cac").use_last_layer(WEIGHT, BIAS).fit(logits[labels != 2], features[labels != 2],
                                                               labels[labels != 2])


def test_the_means_equal_the_authors_find_anchor_means_and_the_scores_their_gather_outputs():
    """tests/fixtures/arpl_cac_reference.json ``means``: the authors' ``find_anchor_means(..., only_correct=True)``
    on training z, their anchors set to them (``torch.Tensor``: float32, hence rtol 1e-5 on the scores) and
    ``gather_outputs`` on test z. Here z is the features, the last layer the identity."""
    recorded = REFERENCE["means"]
    train_z, test_z = np.asarray(recorded["train_z"]), np.asarray(recorded["test_z"])
    anchors = REFERENCE["alpha"] * np.eye(train_z.shape[1])
    train_logits = -np.linalg.norm(train_z[:, None, :] - anchors, axis=2)
    detector = build_detector("cac").use_last_layer(np.eye(train_z.shape[1]))
    detector.fit(train_logits, train_z, np.asarray(recorded["train_labels"]))
    np.testing.assert_allclose(detector.anchor_means_, recorded["anchor_means"], rtol=1e-12)
    scores = detector.scores(-np.linalg.norm(test_z[:, None, :] - anchors, axis=2), test_z).max(axis=1)
    np.testing.assert_allclose(scores, -np.asarray(recorded["scores"]).min(axis=1), rtol=1e-5)


def test_fixed_anchors_are_the_networks_logits_as_before():
    """``anchors: fixed`` scores as the detector did before the means (:func:`cac_scores` of the logits in the
    predicted class's column, bit for bit), fits nothing and reads neither features nor a last layer."""
    detector = fixed()
    assert not (detector.needs_fit or detector.needs_features or detector.needs_last_layer)
    logits = TEST[1]
    before = place_in_predicted_column(cac_scores(logits), logits)
    np.testing.assert_array_equal(detector.scores(logits), before)
    assert detector.fit(TRAIN[1], None, TRAIN[2]) is detector and detector.fitted_state() == {}
    np.testing.assert_array_equal(detector.scores(logits), before)


@pytest.mark.parametrize("anchors", ["means", "fixed"])
def test_the_exported_score_is_the_numpy_one_with_the_means_in_its_buffers(anchors):
    detector = fitted(anchors=anchors)
    features, logits, _ = TEST
    predicted = logits.argmax(axis=1)
    exported = detector.torch_score()
    got = exported(torch.from_numpy(logits), torch.from_numpy(features), torch.from_numpy(predicted)).numpy()
    np.testing.assert_allclose(got, detector.scores(logits, features).max(axis=1), rtol=1e-12, atol=1e-12)
    buffers = dict(exported.named_buffers())
    if anchors == "means":
        np.testing.assert_array_equal(buffers["anchor_means"].numpy(), detector.anchor_means_)
        np.testing.assert_array_equal(buffers["weight"].numpy(), WEIGHT)
        np.testing.assert_array_equal(buffers["bias"].numpy(), BIAS)
    else:
        assert not buffers
