"""The open-set literature's standard splits of MNIST and CIFAR-10: protocols ``osr-mnist`` and
``osr-cifar10``, five splits each (``split``: 0-4; config key ``protocol_split``; ``--split K``).

Neal et al. (ECCV 2018, "Open Set Learning with Counterfactual Images") drew five random splits of
six known and four unknown classes; Chen et al. (ARPL, TPAMI 2021, ``iCGY96/ARPL`` ``split.py``)
and Vaze et al. (ICLR 2022, ``sgvaze/osr_closed_set_all_you_need``
``data/open_set_splits/osr_splits.py``) publish the same lists, which are copied here unchanged
(:data:`OSR_MNIST_SPLITS`, :data:`OSR_CIFAR10_SPLITS`). Both codebases number the known classes
in the order of the list (``known.index(label)``; ``enumerate(include_classes)``), and so does
this module: known class ``i`` of a split is ``split[i]``. The metrics do not depend on it.

Per split: the six known classes' training images, a seeded class-stratified validation hold-out
of them, the known classes' test images (D_c) and the four other classes' test images as the one
unknown set (D_a). No image of the four unknown classes is trained or validated on.

Negatives (D_b', label -1) are no part of the splits: an approach that trains on negatives
takes them from a declared outside set, EMNIST letters (training split, a seeded hold-out of it
as the validation negatives), for both protocols (for ``osr-cifar10`` as grey letters repeated to
RGB and resized to 32x32: no natural-image outlier set is staged and all ten CIFAR-10 classes are
in use). Its rows are *extra data* (``ProtocolSpec.outside_negatives``); the other approaches see
the knowns only, as in the literature.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from agnostophobia.data.datasets import CIFAR10_CLASSES, DIGITS, LETTERS
from agnostophobia.data.paper_protocols import _Builder, _concat, _subset, _unknown
from agnostophobia.data.preprocess import LENET_INPUT, OURS, RESNET_INPUT
from agnostophobia.data.protocol_types import NEAR, PROTOCOLS, OpenSetProtocol, UnknownSet, register_protocol

#: The known classes (MNIST labels) of each split, in the order they are numbered 0..5.
OSR_MNIST_SPLITS: Tuple[Tuple[int, ...], ...] = (
    (2, 4, 5, 9, 8, 3), (3, 2, 6, 9, 4, 0), (5, 8, 3, 2, 4, 6), (3, 7, 8, 4, 0, 5), (6, 3, 4, 9, 8, 2))
#: The known classes (CIFAR-10 labels) of each split, in the order they are numbered 0..5. Splits 0
#: and 1 hold the same six classes (airplane, automobile, deer, frog, horse, truck) in another order.
OSR_CIFAR10_SPLITS: Tuple[Tuple[int, ...], ...] = (
    (0, 6, 4, 9, 1, 7), (7, 6, 4, 9, 0, 1), (1, 5, 7, 3, 9, 4), (8, 6, 1, 9, 0, 7), (2, 4, 1, 7, 9, 6))
#: Where the published lists are (both agree).
OSR_SOURCES = ("Neal et al., ECCV 2018; lists as published in iCGY96/ARPL split.py (Chen et al., TPAMI 2021) "
               "and sgvaze/osr_closed_set_all_you_need data/open_set_splits/osr_splits.py (Vaze et al., ICLR 2022)")
#: The outside set the negatives of both protocols come from.
OUTSIDE_NEGATIVES = "EMNIST letters train"


def _osr_protocol(b: _Builder, dataset: str, class_names: Sequence[str], split: int, data_dir) -> OpenSetProtocol:
    """Split ``split`` of the protocol ``b`` builds: the known classes' training images of ``dataset``
    (its classes ``class_names``), the letters as outside negatives, and its test images."""
    name = b.name
    spec = PROTOCOLS.get(name)
    spec.check_split(split, "split", required=True)
    known = spec.splits[split]
    unknown = tuple(c for c in range(len(class_names)) if c not in known)
    remap = np.full(len(class_names), -1, np.int64)
    remap[list(known)] = np.arange(len(known))  # list order, as ARPL's known.index(label)
    train = b.load(dataset, "train", data_dir)
    ours = _subset(train, np.isin(train.labels, known))
    del train
    k_train, k_val = b.train_val(ours, remap[ours.labels], "known", "max_known_train", f"{dataset} known")
    del ours
    letters = b.load("letters", "train", data_dir)
    u_train, u_val = b.train_val(letters, _unknown(letters), "unknown", "max_unknown_train", "letters",
                                 negative_class=letters.labels)  # letter a-z = 0..25
    del letters
    test = b.load(dataset, "test", data_dir)
    test_known, test_unknown = _subset(test, np.isin(test.labels, known)), _subset(test, np.isin(test.labels, unknown))
    names = [class_names[c] for c in known]

    def label(c: int) -> str:  # a digit is its own name; a CIFAR-10 class is named, with its label
        return class_names[c] if class_names[c] == str(c) else f"{class_names[c]} ({c})"

    b.note(f"split {split} ({OSR_SOURCES}): known {', '.join(map(label, known))} = classes 0-{len(known) - 1} "
           f"in this order; unknown (test images only) {', '.join(map(label, unknown))}")
    b.note(f"negatives (D_b', for the approaches that train on them: extra data) from an outside set, "
           f"{OUTSIDE_NEGATIVES}" + (", grey repeated to RGB, resized 28 -> 32" if dataset != "mnist" else ""))
    b.note(f"validation: seeded class-stratified {b.val_fraction:.0%} hold-out of the known classes' training "
           f"images and of the letters")
    return b.protocol(name, len(known), b.input.shape, _concat("train", k_train, u_train),
                      _concat("val", k_val, u_val),
                      b.test(test_known, remap[test_known.labels], "known", f"{dataset} known test"),
                      {f"{name}-unknown": b.test(test_unknown, _unknown(test_unknown), f"{name}-unknown")},
                      b.notes, names, negative_class_names=list(LETTERS))


@register_protocol("osr-mnist", LENET_INPUT, datasets=("mnist", "letters"), converged_accuracy=0.985,
                   splits=OSR_MNIST_SPLITS, outside_negatives=OUTSIDE_NEGATIVES, ranking_metric="auroc",
                   unknown_sets=(UnknownSet("osr-mnist-unknown", "MNIST test, the split's 4 unknown digits",
                                            proximity=NEAR),))
def osr_mnist_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, split: int = None,
                       **limits) -> OpenSetProtocol:
    """MNIST, split ``split`` of :data:`OSR_MNIST_SPLITS`: six known digits, the other four unknown."""
    return _osr_protocol(_Builder("osr-mnist", seed, limits, preprocessing), "mnist", DIGITS, split, data_dir)


@register_protocol("osr-cifar10", RESNET_INPUT, datasets=("cifar10", "letters"), converged_accuracy=0.90,
                   splits=OSR_CIFAR10_SPLITS, outside_negatives=OUTSIDE_NEGATIVES, ranking_metric="oscr",
                   unknown_sets=(UnknownSet("osr-cifar10-unknown", "CIFAR-10 test, the split's 4 unknown classes",
                                            proximity=NEAR),))
def osr_cifar10_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, split: int = None,
                         **limits) -> OpenSetProtocol:
    """CIFAR-10, split ``split`` of :data:`OSR_CIFAR10_SPLITS`: six known classes, the other four
    unknown."""
    return _osr_protocol(_Builder("osr-cifar10", seed, limits, preprocessing), "cifar10", CIFAR10_CLASSES, split,
                         data_dir)
