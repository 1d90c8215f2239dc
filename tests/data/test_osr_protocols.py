"""The open-set literature's splits (``osr-mnist``, ``osr-cifar10``): the published lists, each
split built from synthetic files (which images are known, unknown, trained on, in which label
order), and the refusals of a split that does not exist."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.data import PROTOCOLS, build_protocol
from agnostophobia.data.datasets import CIFAR10_CLASSES
from agnostophobia.data.osr_protocols import OSR_CIFAR10_SPLITS, OSR_MNIST_SPLITS, OUTSIDE_NEGATIVES
from agnostophobia.errors import ConfigError
from agnostophobia.training import TrainConfig

# The lists as Neal et al. (ECCV 2018) drew them and ARPL's split.py / Vaze et al.'s osr_splits.py
# publish them, written out by class name so that a changed index shows as a changed class.
MNIST_KNOWN = [[2, 4, 5, 9, 8, 3], [3, 2, 6, 9, 4, 0], [5, 8, 3, 2, 4, 6], [3, 7, 8, 4, 0, 5], [6, 3, 4, 9, 8, 2]]
CIFAR10_KNOWN_NAMES = [
    ["airplane", "frog", "deer", "truck", "automobile", "horse"],
    ["horse", "frog", "deer", "truck", "airplane", "automobile"],
    ["automobile", "dog", "horse", "cat", "truck", "deer"],
    ["ship", "frog", "automobile", "truck", "airplane", "horse"],
    ["bird", "deer", "automobile", "horse", "truck", "frog"],
]


def rows(images: np.ndarray) -> list:
    return [img.tobytes() for img in images]


def stamped(arrays: dict, path, first: int) -> dict:
    """The synthetic glyph sets with every image made unique (its number written into the first
    pixels of its top row, which keeps the border black enough for the polarity check): the
    stand-in glyphs of one class are otherwise alike, and a letter can equal a digit."""
    number = first
    for key in ("x_train", "x_test"):
        images = arrays[key]
        for image in images:
            image[0, :3] = [(number >> 16) & 255, (number >> 8) & 255, number & 255]
            number += 1
    np.savez_compressed(path, **arrays)
    return arrays


def test_the_published_lists_by_class_name():
    assert [list(s) for s in OSR_MNIST_SPLITS] == MNIST_KNOWN
    assert [[CIFAR10_CLASSES[c] for c in s] for s in OSR_CIFAR10_SPLITS] == CIFAR10_KNOWN_NAMES
    assert PROTOCOLS.get("osr-mnist").splits == OSR_MNIST_SPLITS
    assert PROTOCOLS.get("osr-cifar10").splits == OSR_CIFAR10_SPLITS
    for s in OSR_MNIST_SPLITS + OSR_CIFAR10_SPLITS:  # six distinct known classes of ten
        assert len(set(s)) == 6 and set(s) <= set(range(10))
    # splits 0 and 1 of CIFAR-10 hold the same classes in another order (docs/osr-splits.md says so)
    assert set(OSR_CIFAR10_SPLITS[0]) == set(OSR_CIFAR10_SPLITS[1])
    assert OSR_CIFAR10_SPLITS[0] != OSR_CIFAR10_SPLITS[1]
    for name in ("osr-mnist", "osr-cifar10"):
        assert PROTOCOLS.get(name).outside_negatives == OUTSIDE_NEGATIVES
    assert not PROTOCOLS.get("lenet++").splits and not PROTOCOLS.get("lenet++").outside_negatives


@pytest.mark.parametrize("split", range(5))
def test_osr_mnist_split(synth, split):
    mnist = stamped(synth.mnist_npz(per_class=(20, 6)), synth.root / "mnist" / "mnist.npz", 1)
    letters = stamped(synth.letters_npz(per_class=(4, 2)), synth.root / "letters" / "letters.npz", 10_000)
    p = build_protocol("osr-mnist", synth.root, seed=0, split=split)
    known = OSR_MNIST_SPLITS[split]
    unknown = [c for c in range(10) if c not in known]
    assert p.num_classes == 6 and p.input_shape == (1, 28, 28)
    assert p.class_names == [str(c) for c in known]  # label i is known[i]: list order
    xte, yte = mnist["x_test"], mnist["y_test"]
    test_rows = rows(p.test_known.images)
    for label, digit in enumerate(known):  # every test image of known[i] has label i
        for img in xte[yte == digit]:
            assert p.test_known.labels[test_rows.index(img[None].tobytes())] == label
    assert sorted(test_rows) == sorted(rows(xte[np.isin(yte, known)][:, None]))
    assert list(p.test_unknowns) == ["osr-mnist-unknown"]
    assert sorted(rows(p.test_unknowns["osr-mnist-unknown"].images)) == sorted(rows(xte[np.isin(yte, unknown)][:, None]))
    # training and validation: the known digits' training images and letters (label -1), nothing else
    xtr, ytr = mnist["x_train"], mnist["y_train"]
    seen = set(rows(np.concatenate([p.train.images, p.val.images])))
    assert not seen & set(rows(xtr[np.isin(ytr, unknown)][:, None]))  # no unknown digit in training
    assert not seen & set(rows(xte[:, None]))  # no test image either
    knowns_seen = rows(np.concatenate([p.train.images[p.train.labels >= 0], p.val.images[p.val.labels >= 0]]))
    assert sorted(knowns_seen) == sorted(rows(xtr[np.isin(ytr, known)][:, None]))
    negatives = rows(np.concatenate([p.train.images[p.train.labels < 0], p.val.images[p.val.labels < 0]]))
    assert sorted(negatives) == sorted(rows(letters["x_train"][:, None]))
    assert set(np.unique(p.train.labels)) == set(range(-1, 6)) and (p.val.labels < 0).any()
    assert any(f"split {split} " in note and "Neal et al." in note for note in p.notes)


@pytest.mark.parametrize("split", [0, 1, 4])
def test_osr_cifar10_split(synth, split):
    c10 = synth.cifar10_npz(per_class=(10, 4))
    synth.letters_npz(per_class=(2, 1))
    p = build_protocol("osr-cifar10", synth.root, seed=0, split=split)
    known = OSR_CIFAR10_SPLITS[split]
    unknown = [c for c in range(10) if c not in known]
    assert p.num_classes == 6 and p.input_shape == (3, 32, 32)
    assert p.class_names == CIFAR10_KNOWN_NAMES[split]
    chw = c10["x_test"].transpose(0, 3, 1, 2)
    yte = c10["y_test"]
    test_rows = rows(p.test_known.images)
    for label, c in enumerate(known):
        for img in chw[yte == c]:
            assert p.test_known.labels[test_rows.index(img.tobytes())] == label
    assert sorted(rows(p.test_unknowns["osr-cifar10-unknown"].images)) == sorted(rows(chw[np.isin(yte, unknown)]))
    assert len(p.train) + len(p.val) == 10 * 6 + 26 * 2  # the six classes' training images and the letters
    neg = p.train.images[p.train.labels < 0]
    assert neg.shape[1:] == (3, 32, 32) and (neg[:, 0] == neg[:, 1]).all()  # grey letters repeated to RGB
    assert p.negative_class_names[:3] == ["a", "b", "c"]


def test_the_two_same_class_splits_differ_only_in_label_order(synth):
    synth.cifar10_npz(per_class=(10, 4))
    synth.letters_npz(per_class=(2, 1))
    a, b = (build_protocol("osr-cifar10", synth.root, seed=0, split=k) for k in (0, 1))
    assert sorted(rows(a.test_known.images)) == sorted(rows(b.test_known.images))
    by_row = dict(zip(rows(a.test_known.images), a.test_known.labels))
    relabel = {OSR_CIFAR10_SPLITS[0].index(c): OSR_CIFAR10_SPLITS[1].index(c) for c in OSR_CIFAR10_SPLITS[0]}
    assert all(relabel[by_row[r]] == label for r, label in zip(rows(b.test_known.images), b.test_known.labels))


@pytest.mark.parametrize("split, match", [
    (None, r"^protocol 'osr-mnist' has 5 splits; name one, 0-4 \(split\)$"),
    (5, r"^split 5: protocol 'osr-mnist' has splits 0-4$"),
    (-1, r"^split -1: protocol 'osr-mnist' has splits 0-4$"),
    (True, r"^split True: protocol 'osr-mnist' has splits 0-4$"),
])
def test_a_split_that_is_not_one_is_refused(synth, split, match):
    with pytest.raises(ConfigError, match=match):
        build_protocol("osr-mnist", synth.root, split=split)


def test_a_split_of_a_protocol_without_splits_is_refused(synth):
    with pytest.raises(ConfigError, match=r"^split 0: protocol 'lenet\+\+' has no splits \(the protocols with "
                                          r"splits: osr-mnist, osr-cifar10\)$"):
        build_protocol("lenet++", synth.root, split=0)


def test_the_config_key_protocol_split(synth):
    assert TrainConfig(protocol="osr-mnist", protocol_split=4).validate().protocol_split == 4
    assert TrainConfig(protocol="osr-mnist").validate().protocol_split is None  # a config before --split
    with pytest.raises(ConfigError, match=r"config key 'protocol_split' 5: protocol 'osr-mnist' has splits 0-4"):
        TrainConfig(protocol="osr-mnist", protocol_split=5).validate()
    with pytest.raises(ConfigError, match=r"config key 'protocol_split' 0: protocol 'lenet\+\+' has no splits"):
        TrainConfig(protocol_split=0).validate()
    with pytest.raises(ConfigError, match=r"config key 'protocol_split'"):
        TrainConfig(protocol="osr-mnist", protocol_split="two").validate()


def test_the_documented_table_is_the_lists():
    """docs/osr-splits.md's table of the splits, read back: each row's known and unknown classes."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/osr-splits.md").read_text()
    table = [line.split("|")[1:-1] for line in page.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [int(cells[0]) for cells in table] == list(range(5))
    for k, cells in enumerate(table):
        digits, unknown_digits, classes, unknown_classes = (c.strip() for c in cells[1:])
        assert digits == ", ".join(map(str, OSR_MNIST_SPLITS[k]))
        assert unknown_digits == ", ".join(str(d) for d in range(10) if d not in OSR_MNIST_SPLITS[k])
        assert classes == ", ".join(f"{CIFAR10_CLASSES[c]} ({c})" for c in OSR_CIFAR10_SPLITS[k])
        assert unknown_classes == ", ".join(CIFAR10_CLASSES[c] for c in range(10) if c not in OSR_CIFAR10_SPLITS[k])
