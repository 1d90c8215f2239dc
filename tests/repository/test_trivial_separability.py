"""The trivial-statistics check (benchmarks/trivial_separability.py): each statistic reads what it
names, the oriented AUROC is scikit-learn's with the better sign, and on images that differ only in
ink near the border the border's statistic separates them while two draws of one distribution stay
at chance; the committed records hold what the pages print."""
import json

import numpy as np
import pytest
from repo_paths import REPO, load_module
from sklearn.metrics import roc_auc_score

check = load_module("trivial_separability", REPO / "benchmarks" / "trivial_separability.py")


def _glyphs(rng, count, border_ink):
    """Dark 28x28 images with a bright square stroke in the middle, and, where ``border_ink``, one
    bright pixel somewhere in the 4-pixel frame."""
    images = rng.uniform(0, 0.1, size=(count, 1, 28, 28))
    images[:, :, 10:18, 10:18] += 0.8
    if border_ink:
        rows = rng.integers(0, check.BORDER, size=count)
        images[np.arange(count), 0, rows, rng.integers(0, 28, size=count)] = 1.0
    return images


def test_each_statistic_reads_what_it_names():
    images = np.zeros((2, 1, 28, 28))
    images[0, 0, 10:14, 10:14] = 1.0  # 16 bright pixels in the middle
    images[1, 0, 0, :] = 1.0  # a bright top row: 28 pixels, all in the frame
    stats = check.statistics(images)
    assert np.allclose(stats["ink share"], [16 / 784, 28 / 784])
    frame = 784 - (28 - 2 * check.BORDER) ** 2
    assert np.allclose(stats["ink in the border"], [0, 28 / frame])
    assert np.allclose(stats["mean intensity"], [16 / 784, 28 / 784])
    assert np.allclose(stats["intensity spread"], images.reshape(2, -1).std(axis=1))


def test_ink_is_read_the_same_on_uint8_images_as_on_floats():
    """A protocol's images are uint8: the ink threshold, half way between an image's darkest and
    brightest pixel, must not wrap at 256 (13 and 255 give 134, not 6)."""
    images = np.full((1, 1, 28, 28), 13, dtype=np.uint8)
    images[0, 0, 10:14, 10:14] = 255
    images[0, 0, 0, :] = 100  # below 134: not ink
    for batch in (images, images.astype(np.float64)):
        stats = check.statistics(batch)
        assert np.allclose(stats["ink share"], [16 / 784]) and np.allclose(stats["ink in the border"], [0])


def test_the_oriented_auroc_is_scikit_learns_with_the_better_sign():
    rng = np.random.default_rng(0)
    labels, scores = rng.integers(0, 2, 200), rng.normal(size=200)
    auroc = roc_auc_score(labels, scores)
    assert check.oriented_auroc(labels, scores) == pytest.approx(max(auroc, 1 - auroc), abs=1e-12)
    assert check.oriented_auroc(labels, -scores) == pytest.approx(check.oriented_auroc(labels, scores), abs=1e-12)


def test_ink_in_the_border_separates_and_one_distribution_stays_at_chance():
    rng = np.random.default_rng(1)
    known = _glyphs(rng, 300, border_ink=False)
    apart = check.separability(known, _glyphs(rng, 300, border_ink=True))
    assert apart["ink in the border"] > 0.99 and apart["linear on all four"] > 0.99
    alike = check.separability(known, _glyphs(rng, 300, border_ink=False))
    assert all(value < 0.6 for value in alike.values()), alike


def test_the_committed_records_name_their_code_and_every_statistic():
    for name in ("trivial-separability-lenet.json", "trivial-separability-cifar.json"):
        record = json.loads((REPO / "docs" / "results" / name).read_text(encoding="utf-8"))
        assert "commit" in record["meta"]["code"] and record["meta"]["processor"]
        for values in record["sets"].values():
            assert set(values) == {"samples", *check.statistics(np.zeros((1, 1, 28, 28)))} | {"linear on all four"}
            assert all(0.5 <= values[s] <= 1 for s in values if s != "samples")
