"""EMNIST letters, the paper's "NIST letters": the known unknowns D_b of the LeNet++
experiment (Sec. 5); and two optional letter substitutes (NIST SD19 vowels, a sample of
Kaggle's A-Z handwritten data)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DatasetInfo, DatasetSplit, Resource, dataset_paths, idx_pair,
                                               npz_optional, npz_split, npz_strings, register_dataset)

LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
_EMNIST_IDX = {s: (f"emnist-letters-{s}-images-idx3-ubyte", f"emnist-letters-{s}-labels-idx1-ubyte")
               for s in ("train", "test")}
_POOLED_NOTE = ("letters: real EMNIST letter images pooled from four EMNIST variants "
                "(ByClass/ByMerge/Letters/Balanced), not the official EMNIST-letters file; "
                "test = the ByClass test partition's letters, train = every other distinct image; "
                "classes follow English letter frequency instead of 4,800 per class")


def _load_letters(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "letters", split, ("train", "test"))
    if npz.exists():
        out = npz_split(npz, "letters", split, LETTERS, (28, 28), offset=1)
        case = npz_optional(npz, f"case_{split}", len(out))
        if case is not None:
            out.extra["case"] = case.astype(np.int8)
        if npz_strings(npz, "source_names") is not None:  # the staged pooled copy
            out.notes.append(_POOLED_NOTE)
        return out
    stems = _EMNIST_IDX[split]
    zpath = F.first_existing([d / "gzip.zip", d / "emnist-gzip.zip"])
    if zpath is not None:  # the official EMNIST download, read in place
        archive = F.Archive(zpath)
        x = F.parse_idx(archive.read(f"gzip/{stems[0]}.gz"), f"{zpath}:{stems[0]}.gz")
        y = F.parse_idx(archive.read(f"gzip/{stems[1]}.gz"), f"{zpath}:{stems[1]}.gz")
        src, fmt = str(zpath), "idx-zip"
    else:
        sub = d / "gzip" if (d / "gzip").is_dir() else d
        x, y, xp = idx_pair(sub, stems, "EMNIST letters idx")
        src, fmt = str(xp.parent), "idx"
    x = F.check_images(x, src, (28, 28))
    y = F.check_labels(y, src + f" ({stems[1]})", len(x), 26, offset=1)
    # EMNIST idx files store every image transposed (column-major); make them upright.
    x = np.ascontiguousarray(x.transpose(0, 2, 1))
    return DatasetSplit("letters", split, x, y, list(LETTERS), src, fmt)


register_dataset(DatasetInfo(
    name="letters", title="EMNIST letters (Cohen et al. 2017), the paper's 'NIST letters'", directory="letters",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=26, class_names=LETTERS,
    kind="glyph",
    label_convention="files store a=1..z=26 (EMNIST); returned as a=0..z=25",
    npz_layout="letters/letters.npz: x_train uint8 (N,28,28) upright, y_train 1..26, x_test, y_test; "
               "optional case_train/case_test int8 (0 upper, 1 lower, -1 unknown)",
    official_layout="letters/gzip.zip (the EMNIST download, read in place) or "
                    "letters/emnist-letters-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz] (transposed, as published)",
    candidates=("letters/letters.npz", "letters/gzip.zip", "letters/emnist-gzip.zip",
                "letters/emnist-letters-train-images-idx3-ubyte.gz", "letters/gzip/emnist-letters-train-images-idx3-ubyte.gz",
                "letters/emnist-letters-train-images-idx3-ubyte"),
    resources=(Resource("gzip.zip", ("https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip",),
                        md5="58c8d27c78d21e728a6bc7b3cc06412e", checksum_source="torchvision.datasets.EMNIST.md5"),),
    loader=_load_letters,
    notes=("The official EMNIST zip (~560 MB) holds every EMNIST variant; only the letters files are read. "
           "Members, for reference (Git LFS pointers): emnist-letters-train-images-idx3-ubyte.gz sha256 "
           "6288f418a917e007bf5fddb823a2dc7a5c6a35031401b93292a539cb12bd881f, "
           "emnist-letters-test-images-idx3-ubyte.gz sha256 "
           "50f0e93d75b99b463e9760b8345866f22587fa2c2fba472730a5ba09c693412d.",),
))


@dataclass(frozen=True)
class _LetterSubstitute:
    """A letter set that stands in for EMNIST letters: optional, one split "train" read from
    ``<name>/<name>.npz`` (file labels from ``offset``), no official download."""

    name: str
    title: str
    offset: int                # the file's label of "a"
    label_convention: str
    npz_layout: str
    official_layout: str
    note: str                  # said with every split loaded: how it differs from EMNIST letters

    def load(self, root: Path, split: str) -> DatasetSplit:
        _, npz = dataset_paths(root, self.name, split, ("train",))
        if not npz.exists():
            raise DataError(f"{npz}: file not found")
        return npz_split(npz, self.name, split, LETTERS, (28, 28), offset=self.offset, notes=[self.note])

    def register(self) -> None:
        register_dataset(DatasetInfo(
            name=self.name, title=self.title, directory=self.name, splits=("train",), required_splits=("train",),
            num_classes=26, class_names=LETTERS, kind="glyph", optional=True,
            label_convention=self.label_convention, npz_layout=self.npz_layout,
            official_layout=self.official_layout, candidates=(f"{self.name}/{self.name}.npz",), resources=(),
            loader=self.load,
        ))


_LetterSubstitute(
    "nist_sd19_vowels", "NIST SD19 handprinted vowels rendered EMNIST-style (substitute)", offset=1,
    label_convention="a=1..z=26 in the file (only a, e, i, o, u occur); returned as a=0..z=25",
    npz_layout="nist_sd19_vowels/nist_sd19_vowels.npz: x_train uint8 (10000,28,28), y_train 1..26",
    official_layout="none: built from NIST SD19 by_class PNGs (see the data provenance)",
    note="nist_sd19_vowels: 5 of 26 letters, EMNIST-like rendering of NIST SD19, not EMNIST itself",
).register()
_LetterSubstitute(
    "az_handwritten_sample", "Sample of the Kaggle 'A-Z Handwritten Data' (substitute)", offset=0,
    label_convention="A=0..Z=25 in the file (Kaggle convention), unchanged",
    npz_layout="az_handwritten_sample/az_handwritten_sample.npz: x_train uint8 (5934,28,28), y_train 0..25",
    official_layout="none: a random sample of a Kaggle dataset",
    note="az_handwritten_sample: a 5,934-image sample, upper case only, skewed class balance",
).register()
