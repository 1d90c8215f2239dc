"""MNIST handwritten digits (LeCun et al. 1998): the known classes D_c of the LeNet++
experiment (Sec. 5)."""
from __future__ import annotations

from pathlib import Path

from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DatasetInfo, DatasetSplit, Resource, dataset_paths, idx_pair,
                                               npz_split, register_dataset)

DIGITS = tuple(str(d) for d in range(10))
_MNIST_IDX = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _load_mnist(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "mnist", split, ("train", "test"))
    if npz.exists():
        return npz_split(npz, "mnist", split, DIGITS, (28, 28))
    x, y, xp = idx_pair(d, _MNIST_IDX[split], "MNIST idx")
    x = F.check_images(x, str(xp), (28, 28))
    y = F.check_labels(y, str(xp).replace("images-idx3", "labels-idx1"), len(x), 10)
    return DatasetSplit("mnist", split, x, y, list(DIGITS), str(xp.parent), "idx")


register_dataset(DatasetInfo(
    name="mnist", title="MNIST handwritten digits (LeCun et al. 1998)", directory="mnist",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=10, class_names=DIGITS,
    kind="glyph",
    label_convention="digits 0..9, unchanged",
    npz_layout="mnist/mnist.npz: x_train uint8 (60000,28,28), y_train (60000,), x_test (10000,28,28), y_test (10000,)",
    official_layout="mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]",
    candidates=("mnist/mnist.npz", "mnist/train-images-idx3-ubyte.gz", "mnist/train-images-idx3-ubyte",
                "mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-images-idx3-ubyte"),
    resources=tuple(
        Resource(f, ("https://ossci-datasets.s3.amazonaws.com/mnist/" + f, "http://yann.lecun.com/exdb/mnist/" + f),
                 md5=m, checksum_source="torchvision.datasets.MNIST.resources")
        for f, m in (("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
                     ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
                     ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
                     ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"))),
    loader=_load_mnist,
))
