"""The centred reading of LeNet++'s glyph unknowns (benchmarks/centred_unknowns.py): a glyph that
fills its frame comes out in MNIST's 20-pixel box, its aspect kept and its centre of mass on the
field's centre, leaving the frame empty; the CCR is the metrics' CCR at FPR 1e-3 of the softmax; the
declared verdicts follow from the paired intervals; the committed record holds what the pages print."""
import json
import sys

import numpy as np
import pytest
from repo_paths import REPO, load_module
from scipy import ndimage
from scipy.special import softmax

# the script imports its neighbour as a script would find it (benchmarks/ first on the path)
sys.modules.setdefault("trivial_separability", load_module("trivial_separability", REPO / "benchmarks" / "trivial_separability.py"))
centred = load_module("centred_unknowns", REPO / "benchmarks" / "centred_unknowns.py")
RECORD = REPO / "docs" / "results" / "centred-unknowns-lenet.json"


def _block(top, left, height, width, size=28):
    image = np.zeros((1, 1, size, size), np.uint8)
    image[0, 0, top:top + height, left:left + width] = 255
    return image


@pytest.mark.parametrize("top, left, height, width", [(0, 0, 28, 28), (1, 3, 24, 12), (20, 2, 6, 24)])
def test_a_glyph_is_scaled_into_the_box_and_centred_by_its_mass(top, left, height, width):
    out = centred.centre(_block(top, left, height, width))[0, 0]
    rows, cols = np.nonzero(out >= centred.INK)
    box_height, box_width = np.ptp(rows) + 1, np.ptp(cols) + 1
    assert max(box_height, box_width) in (centred.BOX - 1, centred.BOX, centred.BOX + 1)  # edge pixels of the filter
    assert box_height / box_width == pytest.approx(height / width, rel=0.2)  # aspect kept, not squashed
    mass = ndimage.center_of_mass(out.astype(float))
    assert mass == pytest.approx((13.5, 13.5), abs=0.51)  # whole-pixel shifts
    frame = np.ones((28, 28), bool)
    frame[3:-3, 3:-3] = False
    assert not out[frame].any()  # the frame a centred glyph leaves stays empty


def test_a_blank_image_stays_blank_and_the_shape_and_type_are_kept():
    images = np.concatenate([np.zeros((1, 1, 28, 28), np.uint8), _block(5, 5, 10, 10)])
    out = centred.centre(images)
    assert out.shape == images.shape and out.dtype == np.uint8 and not out[0].any() and out[1].any()


def test_the_ccr_is_the_metrics_ccr_of_the_softmax_at_the_declared_fpr():
    rng = np.random.default_rng(0)
    known, unknown = rng.normal(size=(3000, 10)) * 3, rng.normal(size=(2000, 10))
    labels = rng.integers(0, 10, 3000)
    got = centred.ccr(known, labels, unknown)
    # by hand: at most 2 of 2,000 unknowns accepted; a known counts where it is right and scored above them
    probabilities = softmax(np.r_[known, unknown], axis=1)
    top = probabilities.max(axis=1)
    limit = np.sort(top[3000:])[-3]  # the third-highest unknown score: two unknowns above it
    right = probabilities[:3000].argmax(axis=1) == labels
    assert got == pytest.approx(np.mean(right & (top[:3000] > limit)))


@pytest.mark.parametrize("shift, noise, verdict", [(-0.1, 0.01, "centring lowers it by more than the margin"),
                                                   (0.1, 0.01, "centring raises it by more than the margin"),
                                                   (0.0, 0.0005, "equivalent within the margin"),
                                                   (-0.005, 0.05, "not resolved")])
def test_the_verdict_follows_the_declared_reading(shift, noise, verdict):
    rng = np.random.default_rng(3)
    prepared = list(0.8 + rng.normal(scale=0.02, size=5))
    moved = [p + shift + e for p, e in zip(prepared, rng.normal(scale=noise, size=5))]
    assert centred.reading(prepared, moved)["verdict"] == verdict


def test_the_committed_record_reads_as_its_numbers_say():
    record = json.loads(RECORD.read_text())
    for sets in record["readings"].values():
        for name, reading in sets.items():
            again = centred.reading(reading["prepared"], reading["centred"])
            assert again["verdict"] == reading["verdict"], name
            assert again["difference"] == pytest.approx(reading["difference"]), name
