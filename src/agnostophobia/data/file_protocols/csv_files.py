"""``type: csv``: one ``path,label`` file per split (openset-imagenet's convention; a header line,
a negative's source class in a third column and a class-names file are optional), listed with
every problem found (:func:`_list_csv`). An imagefolder protocol's written split is read back
here too."""
from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Dict, List, Optional

from agnostophobia._reading import read_input_text
from agnostophobia.data.file_protocols.spec import (MAX_CLASSES, NEGATIVE, SPLITS, UNKNOWN, FileProtocolSpec, Item,
                                                    Listing)
from agnostophobia.errors import DataError


def _list_csv(spec: FileProtocolSpec) -> Listing:
    problems: List[str] = []
    names = _read_class_names(spec.class_names, problems) if spec.class_names else None
    splits = {split: _read_csv(spec, split, problems) for split in SPLITS}
    if names is None:  # as many classes as the training split has known labels: 0..K-1, gaps refused below
        names = [str(c) for c in range(len({item.label for item in splits["train"] if item.label >= 0}))]
        counted = f"{spec.files['train']} has {len(names)} known classes, and without a class_names file " \
                  f"known labels are 0..{len(names) - 1}"
    else:
        counted = f"{spec.class_names} has {len(names)} names"
    for items in splits.values():
        for item in items:
            if item.label >= len(names):
                problems.append(f"{item.where}: label {item.label} out of range 0..{len(names) - 1} ({counted})")
    trained = {item.label for item in splits["train"]}
    problems += [f"{spec.files['train']}: known class {c} ({name!r}) has no training image (known labels must "
                 f"be 0..{len(names) - 1} without gaps)" for c, name in enumerate(names) if c not in trained]
    return Listing(splits, names, _negative_sources(splits, problems), problems)


def _read_class_names(path: Path, problems: List[str]) -> Optional[List[str]]:
    try:
        names = [line.strip() for line in read_input_text(path, encoding="utf-8-sig").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, DataError) as exc:
        problems.append(f"{path}: class-names file cannot be read ({_reason(exc)})")
        return None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"{path}: class name {twice[0]!r} appears more than once")
    return names


def _read_csv(spec: FileProtocolSpec, split: str, problems: List[str]) -> List[Item]:
    path = spec.files[split]
    try:
        text = read_input_text(path, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, DataError) as exc:
        problems.append(f"{path}: {split} file cannot be read ({_reason(exc)})")
        return []
    items, first = [], True
    for number, fields in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), 1):
        fields = [f.strip() for f in fields]
        if not any(fields):
            continue
        if first and len(fields) >= 2 and fields[1].lower() == "label":
            first = False
            continue  # a header line
        first = False
        item = _csv_item(fields, f"{path}:{number}", spec, split, problems)
        if item is not None:
            items.append(item)
    return items


def _csv_item(fields: List[str], where: str, spec: FileProtocolSpec, split: str,
              problems: List[str]) -> Optional[Item]:
    if len(fields) not in (2, 3) or not fields[0]:
        problems.append(f"{where}: malformed line, expected path,label (optionally ,source class)")
        return None
    if not re.fullmatch(r"[+-]?[0-9]+", fields[1]):  # int() would also take "1_0" and non-ASCII digits
        problems.append(f"{where}: label {fields[1]!r} is not an integer")
        return None
    label = int(fields[1])
    if not spec.allow_outside_root and not _inside(spec.root, fields[0]):
        problems.append(f"{where}: path {fields[0]!r} leads outside the protocol root {spec.root} "
                        f"(allow_outside_root: true in the protocol mapping allows it)")
        return None
    if not UNKNOWN <= label < MAX_CLASSES:  # checked before any array holds it (10**30 overflowed int64)
        problems.append(f"{where}: label {label if abs(label) < 10**12 else fields[1][:20] + '...'} out of range "
                        f"(0..{MAX_CLASSES - 1:,} known class, -1 negative, -2 unknown)")
        return None
    if label == UNKNOWN and split != "test":
        problems.append(f"{where}: an unknown (-2) in the {split} split; unknowns (D_a) are test only")
        return None
    source = fields[2] if len(fields) == 3 and fields[2] and label == NEGATIVE else None
    return Item(spec.root / fields[0], label, source, where)


def _inside(root: Path, path: str) -> bool:
    """Whether ``path`` (relative to ``root``, or absolute) names a place under ``root`` as
    written, ``..`` resolved lexically; links inside the root are the tree's own business."""
    base = os.path.abspath(root)
    return os.path.commonpath([base, os.path.normpath(os.path.join(base, path))]) == base


def _negative_sources(splits: Dict[str, List[Item]], problems: List[str]) -> List[str]:
    """The negatives' source classes (third column): all or none of the negatives name one."""
    negatives = [item for items in splits.values() for item in items if item.label == NEGATIVE]
    named = {item.source for item in negatives if item.source is not None}
    if not named:
        return []
    problems += [f"{item.where}: a negative without a source class (third column), while other negatives "
                 f"name theirs" for item in negatives if item.source is None]
    return sorted(named, key=_source_order)


def _source_order(name: str):
    """Negative source classes in order: numbers by value first, then names."""
    return not name.isdigit(), int(name) if name.isdigit() else 0, name


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
