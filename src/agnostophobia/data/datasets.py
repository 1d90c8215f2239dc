"""The paper's datasets by name: where they come from, how they are laid out on disk,
and how to load one split of them.

``DATASETS`` maps a name to a :class:`DatasetInfo` (official download URLs and
checksums, label convention, layouts); :func:`load_dataset` returns one split as a
:class:`DatasetSplit`. For every dataset the prepared ``.npz`` layout (see
``docs/data.md``) is preferred over the official files when both are present.

Labels are always returned as int64 ``0..num_classes-1``; conventions of the files
(EMNIST's a=1, SVHN's 10 for the digit 0, NHCD's per-group numbering) are undone here
and recorded in ``DatasetInfo.label_convention``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.registry import Registry
from agnostophobia.data import formats as F
from agnostophobia.data.paths import PathLike, data_dir as resolve_data_dir
from agnostophobia.data.preprocess import KINDS


class SplitUnavailable(DataError):
    """The dataset is present but this (optional) split is not in its files."""


@dataclass(frozen=True)
class Resource:
    """One official file: where to download it and how to verify it."""

    filename: str
    urls: Tuple[str, ...]
    md5: Optional[str] = None
    sha256: Optional[str] = None
    size: Optional[int] = None
    checksum_source: str = ""  # where the checksum comes from, or why there is none

    @property
    def verifiable(self) -> bool:
        return bool(self.md5 or self.sha256)


@dataclass
class DatasetSplit:
    """One split of one dataset, as stored (no model-specific preprocessing)."""

    dataset: str
    split: str
    images: np.ndarray                 # uint8 (N, H, W) or (N, H, W, 3) RGB
    labels: np.ndarray                 # int64 (N,), 0..num_classes-1
    class_names: List[str]
    source: str                        # file or directory it was read from
    format: str                        # "npz", "idx", "cifar-python", "mat", "images", "jpeg-npz"
    notes: List[str] = field(default_factory=list)      # substitutions, deviations
    extra: Dict[str, np.ndarray] = field(default_factory=dict)  # per-sample side info
    meta: Dict[str, Any] = field(default_factory=dict)  # e.g. {"padding": 2}

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def histogram(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=len(self.class_names))


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    title: str
    directory: str                       # sub-directory of the data dir
    splits: Tuple[str, ...]              # splits the dataset can have
    required_splits: Tuple[str, ...]     # splits every copy must have
    num_classes: int
    class_names: Tuple[str, ...]
    kind: str                            # "glyph" (white on black; polarity checked) or "natural"
    label_convention: str
    npz_layout: str
    official_layout: str
    candidates: Tuple[str, ...]          # files/dirs that mean "present", in preference order
    resources: Tuple[Resource, ...]      # official downloads (empty: none exists)
    loader: Callable[[Path, str], DatasetSplit]
    optional: bool = False               # not needed by the default LeNet++ experiment
    fetch_as: Optional[str] = None       # fetch another entry's files instead
    notes: Tuple[str, ...] = ()

    def find(self, root: Path) -> Optional[Path]:
        """The first candidate file or directory present under ``root``."""
        return F.first_existing([root / c for c in self.candidates])

    def fetch_hint(self) -> str:
        target = self.fetch_as or self.name
        if not self.resources and not self.fetch_as:
            return f"{self.name} has no official download; prepare it as described in docs/data.md"
        return f"get it with `agnostophobia data fetch {target}`"


DATASETS: Registry[DatasetInfo] = Registry("dataset")


def _register(info: DatasetInfo) -> DatasetInfo:
    if info.kind not in KINDS:  # the kind decides the polarity check: a typo must not skip it
        raise ValueError(f"dataset {info.name!r}: kind must be one of {KINDS}, got {info.kind!r}")
    DATASETS.register(info.name)(info)
    return info


# ------------------------------------------------------------------ helpers
def _npz_xy(path: Path, split: str, xkey: str, ykey: str, hw, channels: int,
            num_classes: int, offset: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    with F.open_npz(path) as npz:
        if xkey not in npz.files and ykey not in npz.files:
            raise SplitUnavailable(f"{path}: has no {split} split (arrays {xkey}, {ykey})")
        x = F.check_images(F.npz_array(npz, path, xkey), f"{path}: {xkey}", hw, channels)
        y = F.check_labels(F.npz_array(npz, path, ykey), f"{path}: {ykey}", len(x), num_classes, offset)
    return x, y


def _npz_optional(path: Path, key: str, n: int) -> Optional[np.ndarray]:
    with F.open_npz(path) as npz:
        if key not in npz.files:
            return None
        arr = F.npz_array(npz, path, key)
    if arr.shape[:1] != (n,):
        raise DataError(f"{path}: {key} has shape {arr.shape}, expected ({n},)")
    return arr


def _npz_strings(path: Path, key: str) -> Optional[List[str]]:
    with F.open_npz(path) as npz:
        if key not in npz.files:
            return None
        return [str(s) for s in F.npz_array(npz, path, key)]


def _unknown_split(info_name: str, split: str, splits: Sequence[str]) -> DataError:
    return DataError(f"{info_name} has no split {split!r}; splits: {', '.join(splits)}")


# -------------------------------------------------------------------- MNIST
DIGITS = tuple(str(d) for d in range(10))
_MNIST_IDX = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _idx_pair(directory: Path, stems: Tuple[str, str], what: str) -> Tuple[np.ndarray, np.ndarray, Path]:
    arrays = []
    for stem in stems:
        path = F.first_existing([directory / (stem + ".gz"), directory / stem])
        if path is None:
            raise DataError(f"{directory / stem}(.gz): missing {what} file")
        arrays.append((F.read_idx(path), path))
    (x, xp), (y, yp) = arrays
    return x, y, xp


def _load_mnist(root: Path, split: str) -> DatasetSplit:
    d = root / "mnist"
    if split not in _MNIST_IDX:
        raise _unknown_split("mnist", split, ("train", "test"))
    npz = d / "mnist.npz"
    if npz.exists():
        x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (28, 28), 1, 10)
        return DatasetSplit("mnist", split, x, y, list(DIGITS), str(npz), "npz")
    x, y, xp = _idx_pair(d, _MNIST_IDX[split], "MNIST idx")
    x = F.check_images(x, str(xp), (28, 28))
    y = F.check_labels(y, str(xp).replace("images-idx3", "labels-idx1"), len(x), 10)
    return DatasetSplit("mnist", split, x, y, list(DIGITS), str(xp.parent), "idx")


_register(DatasetInfo(
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


# ------------------------------------------------------------------ letters
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
_EMNIST_IDX = {s: (f"emnist-letters-{s}-images-idx3-ubyte", f"emnist-letters-{s}-labels-idx1-ubyte")
               for s in ("train", "test")}
_POOLED_NOTE = ("letters: real EMNIST letter images pooled from four EMNIST variants "
                "(ByClass/ByMerge/Letters/Balanced), not the official EMNIST-letters file; "
                "test = the ByClass test partition's letters, train = every other distinct image; "
                "classes follow English letter frequency instead of 4,800 per class")


def _load_letters(root: Path, split: str) -> DatasetSplit:
    d = root / "letters"
    if split not in _EMNIST_IDX:
        raise _unknown_split("letters", split, ("train", "test"))
    npz = d / "letters.npz"
    if npz.exists():
        x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (28, 28), 1, 26, offset=1)
        out = DatasetSplit("letters", split, x, y, list(LETTERS), str(npz), "npz")
        case = _npz_optional(npz, f"case_{split}", len(y))
        if case is not None:
            out.extra["case"] = case.astype(np.int8)
        if _npz_strings(npz, "source_names") is not None:  # the staged pooled copy
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
        x, y, xp = _idx_pair(sub, stems, "EMNIST letters idx")
        src, fmt = str(xp.parent), "idx"
    x = F.check_images(x, src, (28, 28))
    y = F.check_labels(y, src + f" ({stems[1]})", len(x), 26, offset=1)
    # EMNIST idx files store every image transposed (column-major); make them upright.
    x = np.ascontiguousarray(x.transpose(0, 2, 1))
    return DatasetSplit("letters", split, x, y, list(LETTERS), src, fmt)


_register(DatasetInfo(
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


def _substitute_loader(name: str, offset: int, note: str):
    def load(root: Path, split: str) -> DatasetSplit:
        if split != "train":
            raise _unknown_split(name, split, ("train",))
        npz = root / name / f"{name}.npz"
        if not npz.exists():
            raise DataError(f"{npz}: file not found")
        x, y = _npz_xy(npz, split, "x_train", "y_train", (28, 28), 1, 26, offset=offset)
        return DatasetSplit(name, split, x, y, list(LETTERS), str(npz), "npz", notes=[note])
    return load


_register(DatasetInfo(
    name="nist_sd19_vowels", title="NIST SD19 handprinted vowels rendered EMNIST-style (substitute)",
    directory="nist_sd19_vowels", splits=("train",), required_splits=("train",), num_classes=26,
    class_names=LETTERS, kind="glyph", optional=True,
    label_convention="a=1..z=26 in the file (only a, e, i, o, u occur); returned as a=0..z=25",
    npz_layout="nist_sd19_vowels/nist_sd19_vowels.npz: x_train uint8 (10000,28,28), y_train 1..26",
    official_layout="none: built from NIST SD19 by_class PNGs (see the data provenance)",
    candidates=("nist_sd19_vowels/nist_sd19_vowels.npz",), resources=(),
    loader=_substitute_loader("nist_sd19_vowels", 1, "nist_sd19_vowels: 5 of 26 letters, EMNIST-like "
                              "rendering of NIST SD19, not EMNIST itself"),
))
_register(DatasetInfo(
    name="az_handwritten_sample", title="Sample of the Kaggle 'A-Z Handwritten Data' (substitute)",
    directory="az_handwritten_sample", splits=("train",), required_splits=("train",), num_classes=26,
    class_names=LETTERS, kind="glyph", optional=True,
    label_convention="A=0..Z=25 in the file (Kaggle convention), unchanged",
    npz_layout="az_handwritten_sample/az_handwritten_sample.npz: x_train uint8 (5934,28,28), y_train 0..25",
    official_layout="none: a random sample of a Kaggle dataset",
    candidates=("az_handwritten_sample/az_handwritten_sample.npz",), resources=(),
    loader=_substitute_loader("az_handwritten_sample", 0, "az_handwritten_sample: a 5,934-image sample, "
                              "upper case only, skewed class balance"),
))


# ----------------------------------------------------------------- notMNIST
NOTMNIST_CLASSES = tuple("ABCDEFGHIJ")
_NOTMNIST_RE = re.compile(r"(?:^|/)([A-J])/[^/]+\.png$")
_NOTMNIST_NOTE = ("notmnist: about 23 % of the glyphs fill or touch the frame (some fonts are reverse blocks), "
                  "so the median border pixel is about 93, not 0; used as published, no per-image flipping")


def _load_notmnist(root: Path, split: str) -> DatasetSplit:
    d = root / "notmnist"
    if split != "test":
        raise _unknown_split("notmnist", split, ("test",))
    npz = d / "notmnist.npz"
    if npz.exists():
        x, y = _npz_xy(npz, split, "x_test", "y_test", (28, 28), 1, 10)
        return DatasetSplit("notmnist", split, x, y, list(NOTMNIST_CLASSES), str(npz), "npz", notes=[_NOTMNIST_NOTE])
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


_register(DatasetInfo(
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


# ------------------------------------------------------------ NHCD and DHCD
_NHCD_GROUPS = ("consonants", "vowels", "numerals")
_NHCD_SIZES = (36, 12, 10)
_NHCD_OFFSETS = (0, 36, 48)          # consonants 0..35, vowels 36..47, numerals 48..57
_NHCD_FIRST = (1, 1, 0)              # folder numbering: consonants/vowels from 1, numerals from 0
_NHCD_RE = re.compile(r"(?:^|/)(consonants|vowels|numerals)/(\d+)/([^/]+)\.(?:jpe?g|png|bmp)$", re.I)


def _nhcd_names(npz: Optional[Path]) -> List[str]:
    names = []
    for g, group in enumerate(_NHCD_GROUPS):
        stored = _npz_strings(npz, f"{group[:-1]}_labels") if npz is not None else None
        for k in range(_NHCD_SIZES[g]):
            label = stored[k].split("|")[1] if stored and len(stored) == _NHCD_SIZES[g] else str(k + _NHCD_FIRST[g])
            names.append(f"{group[:-1]} {label}")
    return names


def _load_nhcd(root: Path, split: str) -> DatasetSplit:
    d = root / "nhcd"
    if split != "all":
        raise _unknown_split("nhcd", split, ("all",))
    npz = d / "nhcd.npz"
    if npz.exists():
        with F.open_npz(npz) as z:
            x = F.check_images(F.npz_array(z, npz, "x"), f"{npz}: x", (28, 28))
            group = F.check_labels(F.npz_array(z, npz, "group"), f"{npz}: group", len(x), 3)
            y = np.asarray(F.npz_array(z, npz, "y"))
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"{npz}: y has shape {y.shape} dtype {y.dtype}, expected integer ({len(x)},)")
        labels = np.empty(len(x), np.int64)
        for g in range(3):
            m = group == g
            labels[m] = F.check_labels(y[m], f"{npz}: y ({_NHCD_GROUPS[g]})", int(m.sum()), _NHCD_SIZES[g],
                                       _NHCD_FIRST[g]) + _NHCD_OFFSETS[g]
        return DatasetSplit("nhcd", split, x, labels, _nhcd_names(npz), str(npz), "npz",
                            extra={"group": group.astype(np.int8)})
    src = F.first_existing([d / "nhcd", d / "devanagari-character-dataset.zip"]
                           + ([d] if any((d / g).is_dir() for g in _NHCD_GROUPS) else []))
    if src is None:
        raise DataError(f"{d}: no nhcd.npz, NHCD zip or consonants/vowels/numerals folders")
    found = {}
    for name, data in F.Archive(src).iter_files(lambda n: "__MACOSX" not in n and bool(_NHCD_RE.search(n))):
        m = _NHCD_RE.search(name)
        g = _NHCD_GROUPS.index(m.group(1).lower())
        k = int(m.group(2)) - _NHCD_FIRST[g]
        if not 0 <= k < _NHCD_SIZES[g]:
            raise DataError(f"{src}: {name}: class folder {m.group(2)} out of range for {_NHCD_GROUPS[g]}")
        found.setdefault((g, k, m.group(3)), (name, data))  # an archive may hold a copy twice
    keys = sorted(found)
    x, _ = F.decode_images([found[k] for k in keys], str(src), (28, 28))
    # NHCD is published black glyph on white paper; invert to this package's white on black.
    x = 255 - x
    group = np.array([g for g, _, _ in keys], np.int8)
    labels = np.array([_NHCD_OFFSETS[g] + k for g, k, _ in keys], np.int64)
    return DatasetSplit("nhcd", split, x, labels, _nhcd_names(None), str(src), "images",
                        notes=["nhcd: official images inverted to white glyph on black"], extra={"group": group})


_NHCD_RESOURCE = Resource(
    "devanagari-character-dataset.zip",
    ("https://www.kaggle.com/api/v1/datasets/download/ashokpant/devanagari-character-dataset",),
    checksum_source="no checksum published; NHCD is distributed by its author (A. K. Pant) on Kaggle, "
                    "which may require a Kaggle login (download by hand into DATA/nhcd/ if so); "
                    "the original host cvresearchnepal.com is gone")

_register(DatasetInfo(
    name="nhcd", title="Nepali Handwritten Character Dataset (Pant et al. 2012): consonants, vowels, numerals",
    directory="nhcd", splits=("all",), required_splits=("all",), num_classes=58, class_names=tuple(_nhcd_names(None)),
    kind="glyph", optional=True,
    label_convention="files: consonants 1..36, vowels 1..12, numerals 0..9 per group; returned as "
                     "consonants 0..35, vowels 36..47, numerals 48..57 (extra['group']: 0/1/2)",
    npz_layout="nhcd/nhcd.npz: x uint8 (12912,28,28) white on black, y int (folder number), group int8 "
               "(0 consonant, 1 vowel, 2 numeral); optional consonant_labels/vowel_labels/numeral_labels",
    official_layout="nhcd/<zip> or nhcd/nhcd/{consonants/1..36,vowels/1..12,numerals/0..9}/*.jpg "
                    "(black on white; inverted when loaded)",
    candidates=("nhcd/nhcd.npz", "nhcd/nhcd", "nhcd/devanagari-character-dataset.zip", "nhcd/consonants"),
    resources=(_NHCD_RESOURCE,),
    loader=_load_nhcd,
    notes=("No official train/test split; the whole set is one split 'all'.",),
))

DHCD_CLASSES = tuple([f"character_{i}" for i in range(1, 37)] + [f"digit_{d}" for d in range(10)])
_DHCD_RE = re.compile(r"(?:^|/)(Train|Test)/(?:character_(\d+)_[^/]*|digit_(\d))/[^/]+\.png$", re.I)


def _load_dhcd(root: Path, split: str) -> DatasetSplit:
    d = root / "devanagari"
    if split not in ("train", "test"):
        raise _unknown_split("dhcd", split, ("train", "test"))
    npz = d / "devanagari.npz"
    if npz.exists():
        x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (32, 32), 1, 46)
        names = _npz_strings(npz, "class_names")
        names = names if names and len(names) == 46 else list(DHCD_CLASSES)
        return DatasetSplit("dhcd", split, x, y, names, str(npz), "npz", meta={"padding": 2})
    src = F.first_existing([d / "DevanagariHandwrittenCharacterDataset.zip", d / "DevanagariHandwrittenCharacterDataset"])
    if src is None:
        raise DataError(f"{d}: no devanagari.npz or DevanagariHandwrittenCharacterDataset(.zip)")
    want = split.lower()
    files, labels, names = [], [], {}
    for name, data in F.Archive(src).iter_files(lambda n: bool(_DHCD_RE.search(n))):
        m = _DHCD_RE.search(name)
        if m.group(1).lower() != want:
            continue
        label = int(m.group(2)) - 1 if m.group(2) else 36 + int(m.group(3))
        if not 0 <= label < 46:
            raise DataError(f"{src}: {name}: unknown DHCD class folder")
        names[label] = name.split("/")[-2]
        files.append((name, data))
        labels.append(label)
    order = sorted(range(len(files)), key=lambda i: (labels[i], files[i][0]))
    x, _ = F.decode_images([files[i] for i in order], str(src), (32, 32))
    class_names = [names.get(k, DHCD_CLASSES[k]) for k in range(46)]
    return DatasetSplit("dhcd", split, x, np.array([labels[i] for i in order], np.int64), class_names,
                        str(src), "images", meta={"padding": 2})


_register(DatasetInfo(
    name="dhcd", title="Devanagari Handwritten Character Dataset (Acharya et al. 2015)", directory="devanagari",
    splits=("train", "test"), required_splits=("test",), num_classes=46, class_names=DHCD_CLASSES,
    kind="glyph", optional=True,
    label_convention="character_1_ka..character_36_gya = 0..35, digit_0..digit_9 = 36..45",
    npz_layout="devanagari/devanagari.npz: x_test uint8 (13800,32,32), y_test 0..45, optional x_train/y_train, "
               "class_names",
    official_layout="devanagari/DevanagariHandwrittenCharacterDataset.zip (read in place) or that folder, "
                    "{Train,Test}/<class>/<id>.png, 32x32 white on black with a 2-px blank border",
    candidates=("devanagari/devanagari.npz", "devanagari/DevanagariHandwrittenCharacterDataset.zip",
                "devanagari/DevanagariHandwrittenCharacterDataset"),
    resources=(Resource("DevanagariHandwrittenCharacterDataset.zip",
                        ("https://archive.ics.uci.edu/ml/machine-learning-databases/00389/DevanagariHandwrittenCharacterDataset.zip",
                         "https://archive.ics.uci.edu/static/public/389/devanagari+handwritten+character+dataset.zip"),
                        checksum_source="no checksum published by the UCI repository"),),
    loader=_load_dhcd,
    notes=("The staged copy holds the DHCD test split only (13,800); the train split is absent.",),
))


def _load_devanagari(root: Path, split: str) -> DatasetSplit:
    """The paper's Devanagari unknowns: NHCD consonants + vowels (10,032); DHCD if NHCD is absent."""
    if split != "test":
        raise _unknown_split("devanagari", split, ("test",))
    if DATASETS.get("nhcd").find(root) is not None:
        full = _load_nhcd(root, "all")
        keep = full.extra["group"] < 2
        return DatasetSplit("devanagari", split, full.images[keep], full.labels[keep], full.class_names[:48],
                            full.source, full.format,
                            notes=full.notes + ["devanagari: NHCD consonants + vowels (10,032), as in the paper"],
                            extra={"group": full.extra["group"][keep]})
    full = _load_dhcd(root, "test")
    keep = full.labels < 36  # characters only, mirroring the paper's NHCD choice (no numerals)
    return DatasetSplit("devanagari", split, full.images[keep], full.labels[keep], full.class_names[:36],
                        full.source, full.format, meta=dict(full.meta),
                        notes=full.notes + ["devanagari: NHCD not found, substituted DHCD test consonants "
                                            "(36 classes x 300 = 10,800, 32x32) for the paper's NHCD 10,032"])


_register(DatasetInfo(
    name="devanagari", title="The paper's Devanagari unknowns: NHCD consonants + vowels (DHCD fallback)",
    directory="nhcd", splits=("test",), required_splits=("test",), num_classes=48,
    class_names=tuple(_nhcd_names(None)[:48]), kind="glyph",
    label_convention="NHCD: consonants 0..35, vowels 36..47; DHCD fallback: characters 0..35",
    npz_layout="read from nhcd/nhcd.npz (groups 0 and 1); else devanagari/devanagari.npz (classes 0..35)",
    official_layout="as for nhcd, else as for dhcd",
    candidates=DATASETS.get("nhcd").candidates + DATASETS.get("dhcd").candidates,
    resources=(), fetch_as="nhcd",
    loader=_load_devanagari,
))


# -------------------------------------------------------------------- CIFAR
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100_CLASSES = tuple("""apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus
butterfly camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup
dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion
lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear
pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal shark shrew
skunk skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank telephone television
tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman worm""".split())
CIFAR100_COARSE = ("aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
                   "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
                   "large_man-made_outdoor_things", "large_natural_outdoor_scenes",
                   "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates", "people",
                   "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2")
# fine label -> coarse label (the standard CIFAR-100 mapping; each coarse id occurs 5 times)
FINE_TO_COARSE = np.array([
    4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11,
    6, 11, 5, 10, 7, 6, 13, 15, 3, 15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5,
    5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17,
    10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13,
    16, 19, 2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15, 6, 0, 17, 8, 14, 13], np.int64)


def _cifar_batches(src: Path, members: Sequence[str]) -> List[Tuple[str, Dict[str, object]]]:
    """Parse the named batch files of a CIFAR tar.gz or extracted folder, in order."""
    arch = F.Archive(src)
    got = {}
    for name, data in arch.iter_files(lambda n: n.split("/")[-1] in members):
        got.setdefault(name.split("/")[-1], (name, data))
    missing = [m for m in members if m not in got]
    if missing:
        raise DataError(f"{src}: missing batch file(s) {', '.join(missing)} (incomplete download?)")
    return [(f"{src}:{got[m][0]}", F.parse_cifar_pickle(got[m][1], f"{src}:{got[m][0]}")) for m in members]


_STAGED_CIFAR_NOTE = ("cifar10: real CIFAR-10 images re-encoded as JPEG q75 4:2:0 (not bit-exact; pixel "
                      "error about +-5, up to +-15), sorted by class")


def _load_cifar10(root: Path, split: str) -> DatasetSplit:
    d = root / "cifar10"
    if split not in ("train", "test"):
        raise _unknown_split("cifar10", split, ("train", "test"))
    npz, jpeg = d / "cifar10.npz", d / "cifar10_train_jpeg.npz"
    names = list(CIFAR10_CLASSES)
    if npz.exists() or jpeg.exists():
        if npz.exists():
            try:
                x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (32, 32), 3, 10)
                out = DatasetSplit("cifar10", split, x, y, names, str(npz), "npz")
                if jpeg.exists():  # the staged copy: both splits come from the JPEG images
                    out.notes.append(_STAGED_CIFAR_NOTE)
                return out
            except SplitUnavailable:
                if split != "train" or not jpeg.exists():
                    raise
        elif split == "test":
            raise DataError(f"{npz}: file not found (only {jpeg.name} is present)")
        # Decoded lazily, only when the train split is asked for, and cached outside the data dir.
        x = F.check_images(F.decode_jpeg_npz(jpeg, "train_jpeg", "train_jpeg_offsets"), str(jpeg), (32, 32), 3)
        with F.open_npz(jpeg) as z:
            y = F.check_labels(F.npz_array(z, jpeg, "y_train"), f"{jpeg}: y_train", len(x), 10)
        return DatasetSplit("cifar10", split, x, y, names, str(jpeg), "jpeg-npz", notes=[_STAGED_CIFAR_NOTE])
    src = F.first_existing([d / "cifar-10-python.tar.gz", d / "cifar-10-batches-py"])
    if src is None:
        raise DataError(f"{d}: no cifar10.npz, cifar-10-python.tar.gz or cifar-10-batches-py/")
    members = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    xs, ys = [], []
    for where, batch in _cifar_batches(src, members):
        x = F.cifar_images(batch, where)
        xs.append(x)
        ys.append(F.check_labels(F.cifar_labels(batch, "labels", where), where, len(x), 10))
    return DatasetSplit("cifar10", split, np.concatenate(xs), np.concatenate(ys), names, str(src), "cifar-python")


def _cifar10_notes() -> Tuple[str, ...]:
    return ("The staged copy is a lossy JPEG re-encoding of the real CIFAR-10, sorted by class; "
            "the test split is stored decoded in cifar10.npz, the train split as JPEG bytes.",)


_register(DatasetInfo(
    name="cifar10", title="CIFAR-10 (Krizhevsky 2009)", directory="cifar10",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=10, class_names=CIFAR10_CLASSES,
    kind="natural",
    label_convention="0 airplane .. 9 truck (standard order), unchanged",
    npz_layout="cifar10/cifar10.npz: x_test uint8 (10000,32,32,3) RGB NHWC, y_test, optional x_train/y_train; "
               "or the train split as cifar10/cifar10_train_jpeg.npz: train_jpeg uint8 bytes, "
               "train_jpeg_offsets int64 (N+1,), y_train",
    official_layout="cifar10/cifar-10-python.tar.gz (read in place) or cifar10/cifar-10-batches-py/",
    candidates=("cifar10/cifar10.npz", "cifar10/cifar-10-python.tar.gz", "cifar10/cifar-10-batches-py",
                "cifar10/cifar10_train_jpeg.npz"),
    resources=(Resource("cifar-10-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                        md5="c58f30108f718f92721af3b95e74349a", checksum_source="torchvision.datasets.CIFAR10.tgz_md5"),),
    loader=_load_cifar10, notes=_cifar10_notes(),
))


def _load_cifar100(root: Path, split: str) -> DatasetSplit:
    d = root / "cifar100"
    if split not in ("train", "test"):
        raise _unknown_split("cifar100", split, ("train", "test"))
    npz = d / "cifar100.npz"
    names = list(CIFAR100_CLASSES)
    if npz.exists():
        x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (32, 32), 3, 100)
        coarse = _npz_optional(npz, f"y_{split}_coarse", len(y))
        where, src, fmt = f"{npz}: y_{split}_coarse", str(npz), "npz"
    else:
        src_path = F.first_existing([d / "cifar-100-python.tar.gz", d / "cifar-100-python"])
        if src_path is None:
            raise DataError(f"{d}: no cifar100.npz, cifar-100-python.tar.gz or cifar-100-python/")
        ((where, batch),) = _cifar_batches(src_path, [split])
        x = F.cifar_images(batch, where)
        y = F.check_labels(F.cifar_labels(batch, "fine_labels", where), where, len(x), 100)
        coarse = F.cifar_labels(batch, "coarse_labels", where)
        src, fmt = str(src_path), "cifar-python"
    if coarse is not None:
        coarse = F.check_labels(coarse, where, len(y), 20)
        if np.any(coarse != FINE_TO_COARSE[y]):
            raise DataError(f"{where}: coarse labels disagree with the standard fine->coarse map")
    return DatasetSplit("cifar100", split, x, y, names, src, fmt, extra={"coarse": FINE_TO_COARSE[y]})


_register(DatasetInfo(
    name="cifar100", title="CIFAR-100 (Krizhevsky 2009), fine and coarse labels", directory="cifar100",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=100, class_names=CIFAR100_CLASSES,
    kind="natural", optional=True,
    label_convention="fine labels 0..99 (alphabetical, apple=0); extra['coarse'] = 20 super-classes 0..19 "
                     "via the standard fine->coarse map",
    npz_layout="cifar100/cifar100.npz: x_train uint8 (50000,32,32,3) RGB, y_train fine 0..99, x_test, y_test, "
               "optional y_train_coarse/y_test_coarse (checked against the map)",
    official_layout="cifar100/cifar-100-python.tar.gz (read in place) or cifar100/cifar-100-python/{train,test,meta}",
    candidates=("cifar100/cifar100.npz", "cifar100/cifar-100-python.tar.gz", "cifar100/cifar-100-python"),
    resources=(Resource("cifar-100-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
                        md5="eb9058c3a382ffc7106e4002c42a8d85", checksum_source="torchvision.datasets.CIFAR100.tgz_md5"),),
    loader=_load_cifar100,
))


def _load_svhn(root: Path, split: str) -> DatasetSplit:
    d = root / "svhn"
    if split not in ("train", "test"):
        raise _unknown_split("svhn", split, ("train", "test"))
    names = list(DIGITS)
    npz = d / "svhn.npz"
    if npz.exists():
        x, y = _npz_xy(npz, split, f"x_{split}", f"y_{split}", (32, 32), 3, 10)
        return DatasetSplit("svhn", split, x, y, names, str(npz), "npz")
    mat = d / f"{split}_32x32.mat"
    if not mat.exists():
        if any(d.glob("*_32x32.mat")):
            raise SplitUnavailable(f"{mat}: file not found")
        raise DataError(f"{d}: no svhn.npz or {split}_32x32.mat")
    x, y = F.read_svhn_mat(mat)
    return DatasetSplit("svhn", split, x, y, names, str(mat), "mat")


_register(DatasetInfo(
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


# --------------------------------------------------------------------- API
def _with_hint(info: DatasetInfo, exc: DataError) -> DataError:
    msg = str(exc)
    hint = info.fetch_hint()
    cls = type(exc)
    return cls(msg if hint in msg else f"{msg}; {hint}")


def load_dataset(name: str, split: str, data_dir: Optional[PathLike] = None) -> DatasetSplit:
    """Load one split of a registered dataset.

    Raises :class:`DataError` with a one-line message (file, problem, how to get the
    data) when the dataset is missing or a file is malformed.
    """
    info = DATASETS.get(name)
    root = resolve_data_dir(data_dir)
    if split not in info.splits:
        raise _unknown_split(name, split, info.splits)
    if info.find(root) is None:
        raise DataError(f"{name} not found in {root}; {info.fetch_hint()} "
                        f"(looked for {', '.join(info.candidates[:3])})")
    try:
        return info.loader(root, split)
    except DataError as exc:
        raise _with_hint(info, exc) from None
