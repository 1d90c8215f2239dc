"""notMNIST_small (Bulatov 2011), glyphs A-J in many fonts: unknowns D_a of the LeNet++
experiment (Sec. 5)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DatasetInfo, DatasetSplit, Resource, dataset_paths, npz_split,
                                               register_dataset)

NOTMNIST_CLASSES = tuple("ABCDEFGHIJ")
_NOTMNIST_RE = re.compile(r"(?:^|/)([A-J])/[^/]+\.png$")
_NOTMNIST_NOTE = ("notmnist: about 23 % of the glyphs fill or touch the frame (some fonts are reverse blocks), "
                  "so the median border pixel is about 93, not 0; used as published, no per-image flipping")


def _load_notmnist(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "notmnist", split, ("test",))
    if npz.exists():
        return npz_split(npz, "notmnist", split, NOTMNIST_CLASSES, (28, 28), notes=[_NOTMNIST_NOTE])
    src = F.first_existing([d / "notMNIST_small.tar.gz", d / "notMNIST_small"])
    if src is None:
        raise DataError(f"{d}: no notmnist.npz, notMNIST_small.tar.gz or notMNIST_small/")
    files = sorted(F.Archive(src).iter_files(lambda n: bool(_NOTMNIST_RE.search(n))))
    labels = np.array([ord(_NOTMNIST_RE.search(n).group(1)) - ord("A") for n, _ in files], np.int64)
    # notMNIST_small ships two unreadable (empty) PNGs; skipping them gives the paper's 18,724.
    x, skipped = F.decode_images(files, str(src), (28, 28), skip_unreadable=True)
    bad = set(skipped)
    keep = np.array([n not in bad for n, _ in files])
    out = DatasetSplit("notmnist", split, x, labels[keep], list(NOTMNIST_CLASSES), str(src), "images",
                       notes=[_NOTMNIST_NOTE])
    if skipped:
        out.notes.append(f"notmnist: skipped {len(skipped)} unreadable file(s): {', '.join(skipped[:4])}")
    return out


register_dataset(DatasetInfo(
    name="notmnist", title="notMNIST_small (Bulatov 2011): glyphs A-J in many fonts", directory="notmnist",
    splits=("test",), required_splits=("test",), num_classes=10, class_names=NOTMNIST_CLASSES, kind="glyph",
    label_convention="A=0..J=9",
    npz_layout="notmnist/notmnist.npz: x_test uint8 (18724,28,28), y_test 0..9",
    official_layout="notmnist/notMNIST_small.tar.gz (read in place) or notmnist/notMNIST_small/{A..J}/*.png",
    candidates=("notmnist/notmnist.npz", "notmnist/notMNIST_small.tar.gz", "notmnist/notMNIST_small"),
    resources=(Resource("notMNIST_small.tar.gz", ("http://yaroslavvb.com/upload/notMNIST/notMNIST_small.tar.gz",
                                                   "https://commondatastorage.googleapis.com/books1000/notMNIST_small.tar.gz"),
                        size=8458043,
                        checksum_source="no checksum published; only the size 8,458,043 B "
                                        "(Udacity deep-learning assignment 1)"),),
    loader=_load_notmnist, notes=(_NOTMNIST_NOTE,),
))
