"""Devanagari handwriting: NHCD (Pant et al. 2012), DHCD (Acharya et al. 2015), and
``devanagari``, the unknowns D_a of the LeNet++ experiment (Sec. 5): NHCD consonants +
vowels, or DHCD's consonants where NHCD is absent."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DATASETS, DatasetInfo, DatasetSplit, Resource, dataset_paths,
                                               npz_strings, npz_xy, register_dataset, unknown_split)

_NHCD_GROUPS = ("consonants", "vowels", "numerals")
_NHCD_SIZES = (36, 12, 10)
_NHCD_OFFSETS = (0, 36, 48)          # consonants 0..35, vowels 36..47, numerals 48..57
_NHCD_FIRST = (1, 1, 0)              # folder numbering: consonants/vowels from 1, numerals from 0
_NHCD_RE = re.compile(r"(?:^|/)(consonants|vowels|numerals)/(\d+)/([^/]+)\.(?:jpe?g|png|bmp)$", re.I)


def _nhcd_names(npz: Optional[Path]) -> List[str]:
    names = []
    for g, group in enumerate(_NHCD_GROUPS):
        stored = npz_strings(npz, f"{group[:-1]}_labels") if npz is not None else None
        for k in range(_NHCD_SIZES[g]):
            label = stored[k].split("|")[1] if stored and len(stored) == _NHCD_SIZES[g] else str(k + _NHCD_FIRST[g])
            names.append(f"{group[:-1]} {label}")
    return names


def _load_nhcd(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "nhcd", split, ("all",))
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

register_dataset(DatasetInfo(
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
    d, npz = dataset_paths(root, "dhcd", split, ("train", "test"), directory="devanagari")
    if npz.exists():
        x, y = npz_xy(npz, split, (32, 32), 1, 46)
        names = npz_strings(npz, "class_names")
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


register_dataset(DatasetInfo(
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
        raise unknown_split("devanagari", split, ("test",))
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


register_dataset(DatasetInfo(
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
