"""Every registered detector against its float64 reference, the per-sample score of the predicted
class written out from its paper, which its own test module registers (``@detector_reference``,
tests/_support/references.py), on random outputs with the detector fitted on random training ones
where it learns. A detector added to the registry, in the package or by a plugin, is checked here
with no edit of this file; its export (a torch score equal to this one) is checked with every
detector's in tests/detectors/test_detectors.py."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.detectors import DETECTORS, build_detector
from references import DETECTOR_REFERENCES, find_reference

C, D, N = 5, 6, 60
#: The detectors of the package that came before the references and are compared with formulas of
#: their own, written in their test modules (not as a registered reference yet): name -> where.
CHECKED_BY_THEIR_OWN_TESTS = {
    "ash": "tests/detectors/test_post_processors.py (each paper's formula sample by sample) and test_against_pytorch_ood.py",
    "react": "tests/detectors/test_post_processors.py and test_against_pytorch_ood.py",
    "scale": "tests/detectors/test_post_processors.py and test_against_pytorch_ood.py",
    "vim": "tests/detectors/test_post_processors.py and test_against_pytorch_ood.py",
    "mahalanobis": "tests/detectors/test_post_processors.py and test_against_pytorch_ood.py",
    "relative-mahalanobis": "tests/detectors/test_post_processors.py and test_against_pytorch_ood.py",
    "knn": "tests/detectors/test_detectors.py (the k-th neighbour's distance by brute force)",
    "evm": "tests/detectors/test_evm.py (margins, Weibulls and set cover in plain numpy / scipy)",
    "openmax": "tests/detectors/test_openmax.py and the authors' numbers in tests/fixtures/openmax_reference.json",
    "postmax": "tests/detectors/test_postmax.py (the normalised max logit through the GPD by hand, the fit against scipy)",
    "ghost": "tests/detectors/test_postmax.py (the logit over the summed z-scores by hand, one scipy GPD per class)",
}


def outputs(seed: int, n: int, width: int):
    rng = np.random.default_rng(seed)
    logits = 4 * rng.standard_normal((n, width))
    features = rng.standard_normal((n, D)) * rng.uniform(0.1, 5, (n, 1))
    return logits, features, rng.integers(0, C, n)


def reads(detector, logits):
    """What a detector sees of a background-class network: all C+1 columns or the C known ones."""
    return logits if detector.reads_background_column else logits[:, :C]


@pytest.mark.parametrize("name", [n for n in DETECTORS.names() if n not in CHECKED_BY_THEIR_OWN_TESTS])
def test_every_detector_matches_its_reference(name):
    reference = find_reference(DETECTORS, DETECTOR_REFERENCES, "detector", name)
    detector = build_detector(name, **reference.settings)
    if detector.needs_last_layer:
        detector.use_last_layer(np.random.default_rng(1).normal(size=(C, D)))
    train_logits, train_features, train_labels = outputs(1, 200, C)
    train = (train_logits, train_features, train_labels)
    if detector.needs_fit:
        detector.fit(*train)
    logits, features, _ = outputs(2, N, C + 1)
    scores = detector.scores(reads(detector, logits), features)
    predicted = logits[:, :C].argmax(axis=1)
    expected = reference.formula(detector, reads(detector, logits), features, train)
    assert scores.shape == (N, C) and scores.dtype == np.float64
    np.testing.assert_allclose(scores[np.arange(N), predicted], expected, rtol=1e-9, atol=1e-12)


def test_the_detectors_checked_elsewhere_are_registered_ones():
    """A name left in the list after its detector is renamed or removed would check nothing."""
    assert set(CHECKED_BY_THEIR_OWN_TESTS) <= set(DETECTORS.names())


def test_a_detector_without_a_reference_is_named_with_the_file_to_write(monkeypatch):
    monkeypatch.setitem(DETECTORS._items, "no-reference", type("NoReference", (DETECTORS.get("energy").__base__,), {}))
    with pytest.raises(LookupError, match="'no-reference' has no float64 reference.*@detector_reference"):
        find_reference(DETECTORS, DETECTOR_REFERENCES, "detector", "no-reference")
