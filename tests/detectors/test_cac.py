"""CAC's rejection score (agnostophobia.detectors.cac): its float64 reference, checked by
tests/contracts/test_detector_references.py; against pytorch-ood 0.4.0's ``CACLoss.score`` and the
authors' own ``gather_outputs`` (tests/fixtures/arpl_cac_reference.json); which approaches it scores."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import torch

from agnostophobia.detectors import build_detector, detector_applies
from agnostophobia.losses import LOSSES
from references import detector_reference

with warnings.catch_warnings():  # pytorch-ood's imports warn about things this test does not use
    warnings.simplefilter("ignore")
    from pytorch_ood.loss import CACLoss as OODCACLoss

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "arpl_cac_reference.json").read_text())["cac"]


@detector_reference("cac")
def cac_reference(detector, logits, features, train):
    """Miller et al. 2021, Sec. 3, at the predicted class t = argmin d, d = -logits: -d_t (1 - softmin(d)_t)."""
    out = []
    for row in logits:
        d = [-v for v in row.tolist()]
        t = int(np.argmin(d))
        softmin = math.exp(-d[t]) / sum(math.exp(-v) for v in d)
        out.append(-d[t] * (1 - softmin))
    return np.array(out)


def test_the_score_equals_the_authors_code():
    """The authors' ``gather_outputs(..., data_idx=1, calculate_scores=True)`` gives every class's
    d_k (1 - softmin_k); they reject by its minimum (metrics.py ``auroc``). Ours is minus that minimum
    (larger = more known), to rtol 1e-5 (measured: 4e-13: the score goes through a logarithm), in the
    column of their arg-min."""
    d = np.asarray(REFERENCE["distances"])
    theirs = np.asarray(REFERENCE["scores"])
    ours = build_detector("cac").scores(-d)
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
    ours = build_detector("cac").scores(-d).max(axis=1)
    np.testing.assert_allclose(ours, -products.min(axis=1), rtol=1e-5, atol=0)
    assert not np.allclose(ours, theirs)


def test_it_scores_cac_networks_alone_and_the_distance_networks_lose_the_last_layer_detectors():
    assert detector_applies("cac", "cac")
    assert not any(detector_applies("cac", name) for name in LOSSES.names() if name != "cac")
    for approach in ("arpl", "cac"):
        assert not detector_applies("vim", approach) and detector_applies("knn", approach)
        assert detector_applies("softmax", approach) and detector_applies("max-logit", approach)


def test_a_confident_sample_keeps_a_score_of_its_own_where_the_softmin_rounds_to_one():
    """1 - softmin from the log-odds: two samples whose softmin is 1 in float64 still differ."""
    d = np.array([[0.5, 60.0, 60.0], [0.5, 70.0, 70.0]])
    scores = build_detector("cac").scores(-d).max(axis=1)
    assert scores[0] != scores[1] and (scores < 0).all()


def test_where_the_product_rounds_to_zero_the_score_goes_on_in_log_space_in_the_papers_order():
    """d_t (1 - softmin_t) below e^-700 (anchors thousands apart): still distinct, the smaller product the
    more known, above every score of a product that does not round; numpy and torch alike."""
    d = np.array([[3.0, 5.0, 5.0], [0.5, 900.0, 900.0], [0.5, 2000.0, 2000.0], [0.25, 2000.0, 2000.0]])
    detector = build_detector("cac")
    scores = detector.scores(-d).max(axis=1)
    assert np.isfinite(scores).all() and scores[0] < scores[1] < scores[2] < scores[3]
    logits = torch.tensor(-d)
    exported = detector.torch_score()(logits, torch.zeros(4, 1, dtype=torch.float64), logits.argmax(1)).numpy()
    np.testing.assert_allclose(exported, scores, rtol=1e-12)
