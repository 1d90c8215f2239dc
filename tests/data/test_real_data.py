"""The real staged data ($AGNOSTOPHOBIA_DATA; CI sets it): counts, histograms and array
hashes as recorded in docs/provenance.md (The staged data), and the full LeNet++ protocol.

Skipped only when AGNOSTOPHOBIA_DATA is unset.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from agnostophobia.cli import main
from agnostophobia.data import build_protocol, load_dataset
from agnostophobia.data.preprocess import border_mean

# name, split -> (count, histogram or None, sha256 prefix of the stored image bytes)
EXPECTED = {
    ("mnist", "train"): (60000, [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949], "741c988805d008ac"),
    ("mnist", "test"): (10000, [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009], "6d87418db22cc802"),
    ("letters", "train"): (69243, [3352, 2311, 2718, 3066, 5192, 2684, 1810, 2773, 2899, 1607, 1538, 3718, 2529,
                                   3710, 4832, 2378, 1779, 3710, 3897, 4350, 2438, 1288, 1291, 1038, 1279, 1056],
                           "1696f8800f88c0ba"),
    ("letters", "test"): (58405, [2706, 1501, 2171, 2462, 4943, 1840, 1036, 2000, 2475, 943, 848, 3345, 1949,
                                  3249, 4622, 1765, 918, 3129, 3945, 4541, 2484, 1264, 1273, 902, 1179, 915],
                          "36321f0b789d294f"),
    ("notmnist", "test"): (18724, [1872, 1873, 1873, 1873, 1873, 1872, 1872, 1872, 1872, 1872], "684045a54aeca0b8"),
    ("nhcd", "all"): (12912, [205] * 36 + [221] * 12 + [288] * 10, "7241dfb84c907e7e"),
    ("devanagari", "test"): (10032, [205] * 36 + [221] * 12, None),
    ("dhcd", "test"): (13800, [300] * 46, "f979bff909f82c66"),
    ("nist_sd19_vowels", "train"): (10000, [2000 if c in "aeiou" else 0 for c in "abcdefghijklmnopqrstuvwxyz"],
                                    "dc773bb40265a5a4"),
    ("az_handwritten_sample", "train"): (5934, None, "e2bacea7bd409dc8"),
    ("cifar10", "test"): (10000, [1000] * 10, None),
}


@pytest.mark.parametrize("name, split", list(EXPECTED))
def test_counts_histograms_hashes(real_data_dir, name, split):
    count, hist, sha = EXPECTED[(name, split)]
    ds = load_dataset(name, split, real_data_dir)
    assert len(ds) == count and ds.images.dtype == np.uint8 and ds.labels.dtype == np.int64
    if hist is not None:
        assert ds.histogram().tolist() == hist
    if sha is not None:
        assert hashlib.sha256(ds.images.tobytes()).hexdigest()[:16] == sha


def test_letters_case_counts(real_data_dir):
    train = load_dataset("letters", "train", real_data_dir).extra["case"]
    test = load_dataset("letters", "test", real_data_dir).extra["case"]
    assert [(train == c).sum() for c in (0, 1, -1)] == [10306, 17685, 41252]
    assert [(test == c).sum() for c in (0, 1, -1)] == [31346, 27059, 0]


def test_cifar10_test_hash(real_data_dir):
    x = load_dataset("cifar10", "test", real_data_dir).images
    assert x.shape == (10000, 32, 32, 3)
    digest = hashlib.sha256(x.tobytes()).hexdigest()
    assert digest.startswith("5a6aa818") and digest.endswith("259f")


def test_cifar10_train_decodes_to_the_recorded_array(real_data_dir):
    import PIL

    ds = load_dataset("cifar10", "train", real_data_dir)
    assert ds.format == "jpeg-npz" and ds.histogram().tolist() == [5000] * 10
    if PIL.__version__ == "13.0.0":  # the recorded hash is for Pillow 13.0.0 / libjpeg-turbo 3.2.0
        assert hashlib.sha256(ds.images.tobytes()).hexdigest() == \
            "bf3aabd52be912dae02a0435296c4dab5289524b57f55cd162dc4796935a611b"
    assert np.allclose(ds.images.reshape(-1, 3).mean(0), [125.27, 122.93, 113.86], atol=0.01)


def test_polarity_of_stored_glyph_sets(real_data_dir):
    """White glyph on black: median frame pixel is ~0, NHCD ~42 (JPEG noise), notMNIST ~93 (glyphs fill the frame)."""
    limits = {("mnist", "test"): 1, ("letters", "test"): 1, ("dhcd", "test"): 1, ("nhcd", "all"): 60,
              ("notmnist", "test"): 100}
    for (name, split), limit in limits.items():
        median = np.median(border_mean(load_dataset(name, split, real_data_dir).images))
        assert median < limit, (name, median)


def test_full_lenet_protocol(real_lenet):
    p = real_lenet
    assert p.sizes() == {
        "train": {"known": 48000, "unknown": 55394}, "val": {"known": 12000, "unknown": 13849},
        "test_known": {"known": 10000, "unknown": 0},
        "test_unknowns/letters": {"known": 0, "unknown": 58405},
        "test_unknowns/devanagari": {"known": 0, "unknown": 10032},
        "test_unknowns/notmnist": {"known": 0, "unknown": 18724},
        "test_unknowns/cifar10": {"known": 0, "unknown": 10000}}
    assert np.bincount(p.val.labels[p.val.labels >= 0]).tolist() == \
        [1185, 1348, 1192, 1226, 1168, 1084, 1184, 1253, 1170, 1190]
    for split in [p.train, p.val, p.test_known, *p.test_unknowns.values()]:
        assert split.images.dtype == np.uint8 and split.images.shape[1:] == (1, 28, 28)
    assert any("pooled" in n for n in p.notes) and any("NHCD consonants + vowels" in n for n in p.notes)


def test_lenet_train_and_val_do_not_overlap(real_lenet):
    # MNIST train and the pooled letters have no exact duplicate images, so bytes identify samples.
    train = {img.tobytes() for img in real_lenet.train.images}
    assert len(train) == len(real_lenet.train.images)
    assert not any(img.tobytes() in train for img in real_lenet.val.images)


def test_lenet_every_glyph_set_is_white_on_black(real_lenet):
    sets = {"train": real_lenet.train, "val": real_lenet.val, "known": real_lenet.test_known,
            **real_lenet.test_unknowns}
    for name, split in sets.items():
        median = np.median(border_mean(split.images[:, 0]))
        # CIFAR-10 has no glyph polarity (natural images); it is only checked not to be a glyph set.
        limit = 140 if name == "cifar10" else 100
        assert median < limit, (name, median)


def test_lenet_cifar10_unknowns_are_luma_of_the_test_set(real_data_dir, real_lenet):
    from PIL import Image

    rgb = load_dataset("cifar10", "test", real_data_dir).images[:5]
    ref = np.stack([np.asarray(Image.fromarray(x).convert("L").resize((28, 28), Image.Resampling.BILINEAR))
                    for x in rgb])
    assert np.array_equal(real_lenet.test_unknowns["cifar10"].images[:5, 0], ref)


def test_lenet_limits_deterministic(real_data_dir):
    kw = dict(max_known_train=600, max_unknown_train=600, max_val=200, max_test_per_set=300)
    a = build_protocol("lenet++", real_data_dir, seed=1, **kw)
    b = build_protocol("lenet++", real_data_dir, seed=1, **kw)
    assert np.array_equal(a.train.images, b.train.images) and np.array_equal(a.val.labels, b.val.labels)
    assert a.sizes()["train"] == {"known": 600, "unknown": 600}
    assert np.bincount(a.test_known.labels, minlength=10).min() >= 26  # stratified


def test_cifar10_split_real(real_data_dir):
    p = build_protocol("cifar10-split", real_data_dir, seed=0)
    assert p.sizes() == {"train": {"known": 24000, "unknown": 8000}, "val": {"known": 6000, "unknown": 2000},
                         "test_known": {"known": 6000, "unknown": 0},
                         "test_unknowns/cifar10-dog-truck": {"known": 0, "unknown": 2000},
                         "test_unknowns/cifar10-horse-ship": {"known": 0, "unknown": 2000},
                         "test_unknowns/mnist-rgb": {"known": 0, "unknown": 10000},
                         "test_unknowns/notmnist-rgb": {"known": 0, "unknown": 18724}}
    assert p.train.images.shape[1:] == (3, 32, 32) and p.test_unknowns["mnist-rgb"].images.shape[1:] == (3, 32, 32)


@pytest.mark.parametrize("protocol", ["cifar10-split", "cifar10-split-b"])
def test_cifar10_split_never_reads_its_near_training_images(real_data_dir, protocol):
    """The second reading of a split's near unknowns scores the CIFAR-10 training images of its D_a
    classes (``docs/near_set_study.py``) because the protocol reads none of them: prepared as the
    protocol prepares its images, no one of them is a training or validation image; the same
    preparation of those classes' test images gives the protocol's near test set (the check can see
    a shared image)."""
    from agnostophobia.data.paper_protocols import CIFAR10_PARTITIONS

    from agnostophobia.data.preprocess import prepare_images
    from agnostophobia.data.protocols import protocol_input
    from repo_paths import REPO, load_module

    study = load_module("near_set_study", REPO / "docs" / "near_set_study.py")
    partition = CIFAR10_PARTITIONS[protocol]
    built = build_protocol(protocol, real_data_dir, seed=0)
    spec = protocol_input(protocol)
    unused = study.unused_near_images(real_data_dir, protocol)
    assert len(unused) == 10000

    def digests(images):
        return {hashlib.sha1(np.ascontiguousarray(image).tobytes()).digest() for image in images}

    read = digests(built.train.images) | digests(built.val.images)
    assert not digests(prepare_images(unused, spec, name="near train")) & read
    test = load_dataset("cifar10", "test", real_data_dir)
    near_test = prepare_images(test.images[np.isin(test.labels, partition.unknown)], spec, name="near test")
    assert digests(near_test) == digests(built.test_unknowns[partition.near_set].images)


def test_cifar_protocol_stops_cleanly_here(real_data_dir):
    from agnostophobia.errors import DataError

    # both missing sets are named in one message with one command that fetches them
    with pytest.raises(DataError, match=r"^cifar100 and svhn not found in .*; "
                                        r"get them with `agnostophobia data fetch cifar100 svhn`"):
        build_protocol("cifar", real_data_dir)


def test_data_check_json_on_real_data(real_data_dir, capsys):
    rc = main(["data", "check", "--json", "--data-dir", str(real_data_dir)])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert rc == 0 and report["ok"] and err == ""
    ds = report["datasets"]
    assert {n for n, s in ds.items() if s["status"] == "missing"} == {"cifar100", "svhn"}
    assert all(s["status"] in ("ok", "missing") for s in ds.values())
    for (name, split), (count, hist, _) in EXPECTED.items():
        assert ds[name]["splits"][split]["count"] == count
        if hist is not None:
            assert ds[name]["splits"][split]["histogram"] == hist
    assert ds["cifar10"]["splits"]["train"]["count"] == 50000


def test_data_check_explicit_missing_on_real_data(real_data_dir, capsys):
    rc = main(["data", "check", "svhn", "mnist", "--data-dir", str(real_data_dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and err == [f"agnostophobia: error: svhn not found in {real_data_dir}; "
                               f"get it with `agnostophobia data fetch svhn`"]
