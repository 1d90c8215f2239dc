"""``type: imagefolder``: one ``ROOT/<class>/<image>`` tree split here, each known and negative
class by its own seeded permutation (:func:`split_class`), and the split written to the run as
the csv type's files (:func:`split_tables`), which ``split: DIR`` reads back."""
from __future__ import annotations

import csv
import io
import unicodedata
from pathlib import Path
from typing import Dict, List, Optional

from agnostophobia._reading import walk_files
from agnostophobia.data.file_protocols.csv_files import _source_order
from agnostophobia.data.file_protocols.folders import _overlaps
from agnostophobia.data.file_protocols.roots import missing_class_folder
from agnostophobia.data.file_protocols.spec import (CLASS_NAMES_FILE, NEGATIVE, SPLIT_FILES, SPLITS, UNKNOWN,
                                                    FileProtocolSpec, Item, Listing)
from agnostophobia.data.protocol_types import purpose_rng

#: A split class gives each of train, val and test at least one image.
MIN_SPLIT_IMAGES = 3


def _list_imagefolder(spec: FileProtocolSpec, seed: int) -> Listing:
    """Each named class folder's images, sorted by their path under the root (so the listing
    order of the file system never matters), and each known and negative class split into
    train, val and test by its own seeded permutation (:func:`split_class`)."""
    problems = _overlaps(spec)
    splits: Dict[str, List[Item]] = {split: [] for split in SPLITS}
    roles = [(c, i) for i, c in enumerate(spec.known)] + [(c, NEGATIVE) for c in spec.negative]
    for cls, label in roles + [(c, UNKNOWN) for c in spec.unknown]:
        files = _class_files(spec.root, cls, problems)
        if files is None:
            continue
        if label == UNKNOWN:  # D_a: test only
            splits["test"] += [Item(p, UNKNOWN, None, str(p)) for p in files]
            continue
        if len(files) < MIN_SPLIT_IMAGES:
            problems.append(f"{spec.root / cls}: {len(files)} image(s); a known or negative class needs at least "
                            f"{MIN_SPLIT_IMAGES} (one each for train, val and test)")
            continue
        source = cls if label == NEGATIVE else None
        for split, idx in split_class(len(files), spec.val_fraction, spec.test_fraction, seed, cls).items():
            splits[split] += [Item(files[i], label, source, str(files[i])) for i in idx]
    negatives = sorted(spec.negative, key=_source_order)  # as a reused split's CSV reader orders them
    return Listing(splits, list(spec.known), negatives, problems)


def _class_files(root: Path, cls: str, problems: List[str]) -> Optional[List[Path]]:
    """The image files under ``root/cls`` (hidden ones skipped, a dangling link kept so that
    reading it is a problem), sorted by their path relative to the root; None with a problem
    where the folder is missing or holds nothing."""
    folder = root / cls
    missing = missing_class_folder(root, cls)
    if missing:
        problems.append(missing)
        return None
    files = [p for p in (Path(d, name) for d, names in walk_files(folder) for name in names)
             if (p.is_file() or p.is_symlink() and not p.exists())
             and not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    if not files:
        problems.append(f"{folder}: empty class folder")
        return None
    # NFC: macOS spells accented names decomposed, Linux as typed; both must sort alike
    return sorted(files, key=lambda p: unicodedata.normalize("NFC", p.relative_to(root).as_posix()))


def split_class(n: int, val_fraction: float, test_fraction: float, seed: int, cls: str) -> Dict[str, List[int]]:
    """Indices of one class's ``n`` sorted files per split: ``round(fraction * n)`` (at least one)
    for val and for test, the rest (at least one) for train. The permutation is drawn from the
    class's own stream of the data seed, so adding a class never moves another class's images."""
    n_val = max(1, round(val_fraction * n))
    n_test = min(max(1, round(test_fraction * n)), n - n_val - 1)
    order = purpose_rng(seed, f"imagefolder/{cls}").permutation(n)
    return {"val": sorted(order[:n_val].tolist()), "test": sorted(order[n_val:n_val + n_test].tolist()),
            "train": sorted(order[n_val + n_test:].tolist())}


def _check_reused_split(spec: FileProtocolSpec, listing: Listing) -> None:
    """A reused split must name the config's known classes in the config's order: another order
    would silently give every class another index."""
    if listing.class_names and list(listing.class_names) != list(spec.known):
        listing.problems.append(f"{spec.class_names}: the split's known classes {listing.class_names} differ from "
                                f"the config's protocol.known {list(spec.known)} (the order is the class indices; "
                                f"list them as the split does, or drop split: to draw a new one)")


def split_tables(spec: FileProtocolSpec, listing: Listing) -> Dict[str, str]:
    """The split of an imagefolder protocol as the csv type's files (file name -> text): one
    ``path,label,class`` line per image, its path relative to the root (-1 negative, -2 unknown;
    the class column names each image's folder, read back for negatives), and the known classes
    in index order. ``split: DIR`` in the config reads them back."""
    names = {**{c: c for c in spec.known}, **{c: c for c in spec.negative}, **{c: c for c in spec.unknown}}
    tables = {}
    for split, file_name in SPLIT_FILES.items():
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["path", "label", "class"])
        for item in listing.splits[split]:
            relative = item.path.relative_to(spec.root).as_posix()
            writer.writerow([relative, item.label, names.get(relative.split("/")[0], "")])
        tables[file_name] = text.getvalue()
    tables[CLASS_NAMES_FILE] = "".join(f"{name}\n" for name in listing.class_names)
    return tables
