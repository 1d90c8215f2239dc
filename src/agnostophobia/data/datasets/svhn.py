"""SVHN cropped digits (Netzer et al. 2011): unknowns D_a of the ResNet-18 experiment (Sec. 5)."""
from __future__ import annotations

from pathlib import Path

from agnostophobia.errors import DataError
from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DatasetInfo, DatasetSplit, Resource, SplitUnavailable, dataset_paths,
                                               npz_split, register_dataset)
from agnostophobia.data.datasets.mnist import DIGITS


def _load_svhn(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "svhn", split, ("train", "test"))
    if npz.exists():
        return npz_split(npz, "svhn", split, DIGITS, (32, 32, 3))
    mat = d / f"{split}_32x32.mat"
    if not mat.exists():
        if any(d.glob("*_32x32.mat")):
            raise SplitUnavailable(f"{mat}: file not found")
        raise DataError(f"{d}: no svhn.npz or {split}_32x32.mat")
    x, y = F.read_svhn_mat(mat)
    return DatasetSplit("svhn", split, x, y, list(DIGITS), str(mat), "mat")


register_dataset(DatasetInfo(
    name="svhn", title="SVHN cropped digits (Netzer et al. 2011)", directory="svhn",
    splits=("train", "test"), required_splits=("test",), num_classes=10, class_names=DIGITS,
    kind="natural", optional=True,
    label_convention=".mat files store the digit 0 as 10; returned as 0..9",
    npz_layout="svhn/svhn.npz: x_test uint8 (26032,32,32,3) RGB, y_test 0..9, optional x_train/y_train",
    official_layout="svhn/test_32x32.mat (and optionally train_32x32.mat): X (32,32,3,N), y (N,1) 1..10",
    candidates=("svhn/svhn.npz", "svhn/test_32x32.mat", "svhn/train_32x32.mat"),
    resources=(Resource("test_32x32.mat", ("http://ufldl.stanford.edu/housenumbers/test_32x32.mat",),
                        md5="eb5a983be6a315427106f1b164d9cef3", checksum_source="torchvision.datasets.SVHN.split_list"),),
    loader=_load_svhn,
    notes=("Only the test split (26,032) is fetched: the paper uses SVHN as test unknowns only.",),
))
