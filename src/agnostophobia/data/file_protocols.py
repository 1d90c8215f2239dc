"""Open-set protocols described by files: a folder tree, or ``path,label`` CSV files.

A protocol names the paper's sets (Sec. 1, used throughout Sec. 5): known classes (D_c'
for training, D_c for testing), known unknowns or *negatives* (D_b' in training and
validation with label -1, D_b in testing) and unknown unknowns (D_a, test only).

``type: folders``
    ``ROOT/<split>/<class>/<image>`` for split = train, val, test, and three lists of
    class-folder names: ``known`` (class index = position in sorted order), ``negative``
    (D_b', D_b) and ``unknown`` (D_a, test only).
``type: csv``
    one file per split, ``path,label`` with image paths relative to ``root``: label >= 0
    a known class, -1 a negative, -2 an unknown (test only). This is the convention of
    openset-imagenet (Palechor, Bhoumik, Guenther, WACV 2023), so its protocol files work
    as they are: no header (a ``path,label`` header line is recognised), spaces after the
    comma allowed. An optional third column names a negative's source class (name or id);
    it is ignored on other lines. Optional ``class_names``: a file with one name per line;
    without it the known labels must be 0..K-1 for the K known labels of the train file.
    A path must stay under ``root`` (``../`` or an absolute path elsewhere is a problem)
    unless ``allow_outside_root: true``.
``type: imagefolder``
    one ``ROOT/<class>/<image>`` tree (torchvision's ImageFolder layout), not yet split, and the
    three lists of class-folder names; here a known class's index is its position in ``known``
    as the config lists it. Each known and negative class is split into train, val and test
    (seeded by the data seed, stratified by class, ``val_fraction`` / ``test_fraction``, paths
    sorted so every machine draws the same split); unknown classes are test only. The split is
    written to the run as CSV files of the ``csv`` type (:func:`split_tables`); ``split: DIR``
    reuses such a folder, read by the CSV reader.

In an experiment YAML the ``protocol`` key takes the mapping (:func:`parse_file_protocol`).
Every path in it is relative to the YAML file's directory; :func:`resolve_paths` makes
them absolute when the file is loaded, so a run's ``config.yaml`` resolves them from
anywhere. Images are decoded with :func:`~agnostophobia.data.formats.decode_image` and
prepared by :func:`~agnostophobia.data.preprocess.prepare_images` (shorter side resized,
centre-cropped to ``image_size``), the path every protocol's images take.

Before anything is built, one pass lists every problem of the protocol, each naming its
file or class (:func:`check_file_protocol`), leakage included: the same file (its real path)
in two splits, or twice in one split unless ``allow_duplicates: true``;
:func:`build_file_protocol` raises them as one :class:`DataError`. The test negatives and
test unknowns become two unknown test sets, ``negatives`` (D_b) and ``unknowns`` (D_a).
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._reading import check_declared_bytes, read_input_bytes, read_input_text, walk_files
from agnostophobia.data.formats import decode_image
from agnostophobia.data.fingerprint import file_fingerprint, listing_fingerprint
from agnostophobia.data.preprocess import KINDS, NATURAL, OURS, InputSpec, prepare_images
from agnostophobia.data.image_files import ImageFiles, choose_loading
from agnostophobia.data.protocol_types import (OpenSetProtocol, ProtocolSpec, ProtocolSplit, UnknownSet,
                                               declare_unknown_sets, purpose_rng, stratified_subset)
from agnostophobia.errors import AgnostophobiaError, ConfigError, DataError
from agnostophobia.settings import check_settings, field_settings, setting

TYPES = ("csv", "folders", "imagefolder")
SPLITS = ("train", "val", "test")
NEGATIVE, UNKNOWN = -1, -2
#: The most known classes a protocol from files may have (ImageNet-21k has 21,843).
MAX_CLASSES = 100_000
COMMON_KEYS = ("type", "root", "image_size", "channels", "kind", "allow_duplicates")
TYPE_KEYS = {"csv": ("train", "val", "test", "class_names", "allow_outside_root"),
             "folders": ("known", "negative", "unknown"),
             "imagefolder": ("known", "negative", "unknown", "split", "val_fraction", "test_fraction")}
PATH_KEYS = ("root", "train", "val", "test", "class_names", "split")
#: An imagefolder split written to a run, in the csv type's format: split -> file name
SPLIT_FILES = {"train": "train.csv", "val": "val.csv", "test": "test.csv"}
CLASS_NAMES_FILE = "class_names.txt"
#: A split class gives each of train, val and test at least one image.
MIN_SPLIT_IMAGES = 3
MAX_SHOWN = 20      # problems listed in the error; the rest are counted
CHUNK = 2048        # images decoded before they are prepared (and their originals dropped)


# ------------------------------------------------------------------ the mapping
@dataclass(frozen=True)
class FileProtocolSpec:
    """A checked ``protocol:`` mapping; paths as given (relative ones to the working directory)."""

    type: str
    root: Path
    image_size: int
    channels: int
    kind: str = NATURAL
    files: Dict[str, Path] = field(default_factory=dict)   # csv: split -> CSV file
    class_names: Optional[Path] = None                      # csv: one name per line
    known: Tuple[str, ...] = ()                             # folders: class-folder names
    negative: Tuple[str, ...] = ()
    unknown: Tuple[str, ...] = ()
    allow_duplicates: bool = False                          # a file listed twice within a split
    allow_outside_root: bool = False                        # csv: a path that leads out of ``root``
    split: Optional[Path] = None                            # imagefolder: a written split to reuse
    # imagefolder: the share of each known and negative class held out for validation and for testing
    val_fraction: float = setting(float, 0.15, low=0, high=0.45, low_open=True,
                                  doc="imagefolder: share of each known and negative class for validation")
    test_fraction: float = setting(float, 0.15, low=0, high=0.45, low_open=True,
                                   doc="imagefolder: share of each known and negative class for testing")

    @property
    def input(self) -> InputSpec:
        return InputSpec(self.channels, self.image_size, self.kind)

    def source(self, split: str) -> str:
        """What a problem of a whole split names: its CSV file or its folder."""
        if self.files:
            return str(self.files[split])
        return f"{self.root} ({split} split)" if self.type == "imagefolder" else str(self.root / split)

    @property
    def reads_csv(self) -> bool:
        """Listed by the CSV reader: a csv protocol, or an imagefolder one reusing a written split."""
        return bool(self.files)


def is_file_protocol(protocol: Any) -> bool:
    """True for a ``protocol:`` mapping, False for a registered protocol's name."""
    return isinstance(protocol, dict)


def parse_file_protocol(mapping: Mapping[str, Any], where: str = "protocol") -> FileProtocolSpec:
    """Check the keys and values of a ``protocol:`` mapping (no file is read); a bad one
    raises :class:`ConfigError` naming the key, e.g. ``config key 'protocol.channels'``."""
    def bad(key: str, what: str):
        return ConfigError(f"config key '{where}.{key}': {what}, got {mapping.get(key)!r}")

    if not is_file_protocol(mapping):
        raise ConfigError(f"config key {where!r}: must be a protocol name or a mapping, got {mapping!r}")
    kind = mapping.get("type")
    if kind not in TYPES:
        raise bad("type", f"must be one of {', '.join(TYPES)}")
    allowed = COMMON_KEYS + TYPE_KEYS[kind]
    for key in mapping:
        if key not in allowed:
            raise ConfigError(f"unknown config key '{where}.{key}' for a protocol of type {kind}; "
                              f"known: {', '.join(allowed)}")
    required = ("root", "image_size", "channels") + (("train", "val", "test") if kind == "csv" else ("known",))
    fractions = {key: mapping[key] for key in ("val_fraction", "test_fraction") if key in mapping}
    check_settings(field_settings(FileProtocolSpec), fractions, where, f"a protocol of type {kind}")
    for key in required:
        if key not in mapping:
            raise ConfigError(f"config key '{where}.{key}' is missing (a protocol of type {kind} needs "
                              f"{', '.join(required)})")
    for key in PATH_KEYS:
        if key in mapping and not (isinstance(mapping[key], str) and mapping[key]):
            raise bad(key, "must be a path")
    size = mapping["image_size"]
    if not isinstance(size, int) or isinstance(size, bool) or not 8 <= size <= 4096:
        raise bad("image_size", "must be an integer from 8 to 4096 (the square side in pixels)")
    if mapping["channels"] not in (1, 3) or isinstance(mapping["channels"], bool):
        raise bad("channels", "must be 1 (grey) or 3 (RGB)")
    if mapping.get("kind", NATURAL) not in KINDS:
        raise bad("kind", f"must be one of {', '.join(KINDS)}")
    for key in ("allow_duplicates", "allow_outside_root"):
        if not isinstance(mapping.get(key, False), bool):
            raise bad(key, "must be true or false")
    lists = {key: _names(mapping, key, where, bad) for key in TYPE_KEYS["folders"]}
    if kind != "csv" and not lists["known"]:
        raise bad("known", "must list at least one class folder")
    if kind == "imagefolder":
        _check_imagefolder_lists(lists, where, bad)
    files = {s: Path(mapping[s]) for s in SPLITS if s in mapping}
    class_names = Path(mapping["class_names"]) if "class_names" in mapping else None
    split = Path(mapping["split"]) if "split" in mapping else None
    if split is not None:  # a written split is read as the csv type reads its files
        files, class_names = {s: split / name for s, name in SPLIT_FILES.items()}, split / CLASS_NAMES_FILE
    return FileProtocolSpec(kind, Path(mapping["root"]), size, mapping["channels"], mapping.get("kind", NATURAL),
                            files, class_names, **lists,
                            allow_duplicates=mapping.get("allow_duplicates", False),
                            allow_outside_root=mapping.get("allow_outside_root", False), split=split,
                            **{k: float(v) for k, v in fractions.items()})


def _check_imagefolder_lists(lists: Dict[str, Tuple[str, ...]], where: str, bad) -> None:
    """The config's order is the class indices here, so a name twice would be two classes;
    and a name must be one folder directly under the root."""
    for key, names in lists.items():
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise bad(key, f"lists {twice[0]!r} twice")
        odd = [n for n in names if not n or n in (".", "..") or "/" in n or "\\" in n]
        if odd:
            raise bad(key, f"{odd[0]!r} is not a folder name directly under the root")


def _names(mapping, key: str, where: str, bad) -> Tuple[str, ...]:
    value = mapping.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise bad(key, "must be a list of class-folder names")
    return tuple(str(v) for v in value)


def resolve_paths(mapping: Mapping[str, Any], base_dir) -> Dict[str, Any]:
    """The mapping with every path made absolute against ``base_dir`` (the directory of
    the YAML file it came from); absolute paths are kept."""
    base = Path(base_dir).absolute()
    out = dict(mapping)
    for key in PATH_KEYS:
        if isinstance(out.get(key), str) and out[key]:
            out[key] = os.path.normpath(base / Path(out[key]).expanduser())
    return out


@dataclass(frozen=True)
class FileProtocol(ProtocolSpec):
    """The declaration of a protocol from files, like a registered protocol's
    (:func:`file_protocol_spec`): it reads no registered dataset and allows ``ours`` only."""

    mapping: Mapping[str, Any] = field(default_factory=dict)  # the config's ``protocol`` value
    files: Optional[FileProtocolSpec] = None                  # the checked mapping
    check_by_building = True  # its files are checked when it is built (the check pass)

    @property
    def what(self) -> str:
        return "a protocol from files"

    def config_value(self, base_dir) -> Dict[str, Any]:
        return resolve_paths(self.mapping, base_dir)

    def make(self, data_dir=None, seed: int = 0, preprocessing: str = OURS, data_loading: str = "memory",
             **limits) -> OpenSetProtocol:
        """:func:`build_file_protocol` (``data_dir`` unused: every path is in the mapping)."""
        self.check_preprocessing(preprocessing)
        return self.build(self.files, seed=seed, data_loading=data_loading, **limits)


def file_protocol_spec(mapping: Mapping[str, Any], where: str = "protocol") -> FileProtocol:
    """The declaration of the protocol a ``protocol:`` mapping describes (checked by
    :func:`parse_file_protocol`; no file is read)."""
    files = parse_file_protocol(mapping, where)
    return FileProtocol(f"{files.type}:{files.root}", build_file_protocol, files.input, mapping=dict(mapping),
                        files=files)


# ------------------------------------------------------------------ listing
@dataclass
class Item:
    """One image of the protocol, before it is read."""

    path: Path
    label: int              # >= 0 known class, -1 negative, -2 unknown
    source: Optional[str]   # a negative's source class; None where not given
    where: str              # what a problem names: "train.csv:12", or the image file itself

    @property
    def name(self) -> str:
        return self.where if self.where == str(self.path) else f"{self.where}: {self.path}"


@dataclass
class Listing:
    """Every image of every split, the class names, and the problems found so far."""

    splits: Dict[str, List[Item]]
    class_names: List[str]
    negative_class_names: List[str]
    problems: List[str]
    repeats: Dict[str, int] = field(default_factory=dict)  # split -> entries repeating an earlier one (allowed)


def list_protocol(spec: FileProtocolSpec, seed: int = 0) -> Listing:
    """Read the CSV files, walk the folders or split the image folders (with the data ``seed``);
    structural problems are collected, not raised."""
    if spec.reads_csv:
        listing = _list_csv(spec)
        if spec.type == "imagefolder":
            _check_reused_split(spec, listing)
    else:
        listing = _list_folders(spec) if spec.type == "folders" else _list_imagefolder(spec, seed)
    _check_split_contents(spec, listing)
    _check_duplicates(spec, listing)
    return listing


def _check_split_contents(spec: FileProtocolSpec, listing: Listing) -> None:
    """Sets the protocol cannot do without: a validation split, knowns to test (D_c) and
    something unknown to test (D_b or D_a); not repeated where the split's file or folder
    already has a problem."""
    def need(split: str, present: bool, what: str) -> None:
        source = spec.source(split)
        if not present and not any(p.startswith(source) for p in listing.problems):
            listing.problems.append(f"{source}: {what}")

    test = [item.label for item in listing.splits["test"]]
    need("val", bool(listing.splits["val"]), "no validation images")
    need("test", any(label >= 0 for label in test), "no known test images (D_c)")
    need("test", any(label < 0 for label in test), "no negatives (D_b) and no unknowns (D_a) to test on")


def _check_duplicates(spec: FileProtocolSpec, listing: Listing) -> None:
    """Leakage: the same file (after resolving its path: symlinks, ``..``) in two splits is a
    problem, since testing on training images gives a silent wrong number. One listed twice
    within a split is a problem too unless ``allow_duplicates: true`` (then counted in
    ``listing.repeats`` for the report), and always when the two entries give it different
    labels. Each problem names both entries (CSV ``file:line``, or both image paths)."""
    first: Dict[Any, Tuple[str, Item]] = {}
    for split in SPLITS:
        for item in listing.splits[split]:
            real = os.path.realpath(item.path)
            seen_split, seen = first.setdefault(_file_identity(item.path), (split, item))
            if seen is item:
                continue
            both = f"{seen.where} and {item.where}: the same file {real}"
            if seen_split != split:
                listing.problems.append(f"{both} is in the {seen_split} and the {split} split (leakage: a file "
                                        f"may be in one split only)")
            elif (seen.label, seen.source) != (item.label, item.source):
                listing.problems.append(f"{both} is listed twice in the {split} split, with different labels")
            elif not spec.allow_duplicates:
                listing.problems.append(f"{both} is listed twice in the {split} split (allow_duplicates: true in "
                                        f"the protocol mapping keeps repeated entries)")
            else:
                listing.repeats[split] = listing.repeats.get(split, 0) + 1
    _check_same_content(first, listing)


def _file_identity(path: Path):
    """What makes two names one file: its device and inode (a hard link, a symbolic link, ``..``),
    or its real path where it cannot be read (a missing file, reported elsewhere)."""
    try:
        found = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return found.st_dev, found.st_ino


def _check_same_content(first: Dict[Any, Tuple[str, Item]], listing: Listing) -> None:
    """Leakage by copy: two files of the same content in two splits. Only files whose size another
    split's file shares are hashed (a stat each for the rest)."""
    by_size: Dict[int, List[Tuple[str, Item]]] = {}
    for split, item in first.values():
        try:
            by_size.setdefault(os.stat(item.path).st_size, []).append((split, item))
        except OSError:
            continue
    for group in by_size.values():
        if len({split for split, _ in group}) < 2:
            continue
        seen: Dict[str, Tuple[str, Item]] = {}
        for split, item in group:
            try:
                digest = hashlib.sha256(read_input_bytes(item.path)).hexdigest()
            except (OSError, AgnostophobiaError):
                continue
            other_split, other = seen.setdefault(digest, (split, item))
            if other_split != split:
                listing.problems.append(f"{other.where} and {item.where}: the same content (SHA-256 {digest[:12]}...) "
                                        f"is in the {other_split} and the {split} split (leakage: an image may be "
                                        f"in one split only)")


# ------------------------------------------------------------------ CSV files
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


# ------------------------------------------------------------------ folders
def _list_folders(spec: FileProtocolSpec) -> Listing:
    known, negative = sorted(set(spec.known)), sorted(set(spec.negative))
    roles = {**{c: UNKNOWN for c in spec.unknown}, **{c: NEGATIVE for c in negative},
             **{c: i for i, c in enumerate(known)}}
    problems = _overlaps(spec)
    splits = {split: _list_split_folder(spec.root / split, split, roles, problems) for split in SPLITS}
    for split, classes, what in (("train", known, "known"), ("train", negative, "negative"),
                                 ("test", spec.unknown, "unknown")):
        present = {item.path.relative_to(spec.root / split).parts[0] for item in splits[split]}
        if (spec.root / split).is_dir():  # (a missing split folder is one problem, not one per class)
            problems += [f"{spec.root / split / c}: {what} class has no {split} images (no such folder)"
                         for c in classes if c not in present and not (spec.root / split / c).is_dir()]
    return Listing(splits, known, negative, problems)


def _overlaps(spec: FileProtocolSpec) -> List[str]:
    lists = {"known": spec.known, "negative": spec.negative, "unknown": spec.unknown}
    problems = []
    for i, a in enumerate(lists):
        for b in list(lists)[i + 1:]:
            problems += [f"class {c!r} is listed as both {a} and {b}" for c in sorted(set(lists[a]) & set(lists[b]))]
    return problems


def _list_split_folder(folder: Path, split: str, roles: Dict[str, int], problems: List[str]) -> List[Item]:
    if not folder.is_dir():
        problems.append(f"{folder}: missing {split} folder (expected ROOT/{split}/<class>/<image>)")
        return []
    items = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue  # .DS_Store and the like
        if not entry.is_dir():
            problems.append(f"{entry}: a file outside any class folder")
        elif entry.name not in roles:
            problems.append(f"{entry}: class folder listed in none of known, negative, unknown")
        elif roles[entry.name] == UNKNOWN and split != "test":
            problems.append(f"{entry}: unknown class in the {split} split; unknowns (D_a) are test only")
        else:
            # a link to nothing (dangling, or a loop), a FIFO, socket or device is listed too:
            # reading it is a problem, not a skip
            files = sorted(Path(folder, name) for folder, names in walk_files(entry) for name in names
                           if not name.startswith("."))
            if not files:
                problems.append(f"{entry}: empty class folder")
            source = entry.name if roles[entry.name] == NEGATIVE else None
            items += [Item(p, roles[entry.name], source, str(p)) for p in files]
    return items


# ------------------------------------------------------------------ one image folder, split here
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
    if not folder.is_dir():
        problems.append(f"{folder}: the class folder named in the config does not exist")
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


# ------------------------------------------------------------------ reading images
def check_file_protocol(protocol, seed: int = 0) -> List[str]:
    """Every problem of a protocol from files (a mapping or a :class:`FileProtocolSpec`),
    each naming its file or class: a class both known and negative, an unknown in train or
    val, an empty class, a missing, unreadable, truncated or non-image file (a dangling or
    looping link included), a CSV path outside the root, a label out of
    range, a malformed CSV line, a file in two splits or twice in one (:func:`_check_duplicates`).
    This opens and fully decodes every image file once. ``seed``: the data seed an imagefolder
    protocol splits with."""
    spec = protocol if isinstance(protocol, FileProtocolSpec) else parse_file_protocol(protocol)
    listing = list_protocol(spec, seed)
    problems = list(listing.problems)
    for split in SPLITS:
        _read_split(listing.splits[split], set(), spec, split, problems)
    return problems


def raise_problems(spec: FileProtocolSpec, problems: Sequence[str]) -> None:
    """One :class:`DataError` listing up to ``MAX_SHOWN`` problems, then a count of the rest."""
    if not problems:
        return
    # one line per problem; the CLI joins them with "; " into its one error line
    lines = [f"{_title(spec)}: {len(problems)} problem(s), nothing is trained until they are fixed"]
    lines += [f"  {i}. {p}" for i, p in enumerate(problems[:MAX_SHOWN], 1)]
    if len(problems) > MAX_SHOWN:
        lines.append(f"  ... and {len(problems) - MAX_SHOWN} more")
    raise DataError("\n".join(lines))


def _read_split(items: List[Item], keep: set, spec: FileProtocolSpec, split: str, problems: List[str]) -> np.ndarray:
    """Decode every image of ``items`` (the check); the ones whose index is in ``keep`` are
    prepared as model input, in chunks so that few originals are held at once."""
    mode = "L" if spec.channels == 1 else "RGB"
    shape = spec.input.shape  # what the prepared split will take, refused before an image is decoded
    check_declared_bytes(len(keep) * int(np.prod(shape)), f"{spec.source(split)}: {len(keep):,} images of "
                                                          f"{'x'.join(map(str, shape))}")
    prepared, batch = [], []
    for i, item in enumerate(items):
        image = _read_image(item, mode, problems)
        if image is not None and i in keep:
            batch.append(image)
        if len(batch) == CHUNK or (batch and i == len(items) - 1):
            prepared.append(_prepare(batch, spec, spec.source(split), problems))
            batch = []
    return np.concatenate(prepared) if prepared else np.zeros((0, *spec.input.shape), np.uint8)


def _read_image(item: Item, mode: str, problems: List[str]) -> Optional[np.ndarray]:
    if not item.path.exists():
        problems.append(f"{item.name}: " + ("a link to nothing (dangling symbolic link to "
                                            f"{os.readlink(item.path)})" if item.path.is_symlink() else "missing image"))
        return None
    try:  # a FIFO, socket or device, or a file too large, is refused before it is read
        data = read_input_bytes(item.path)
    except DataError as exc:
        problems.append(f"{item.name}: unreadable image ({str(exc).removeprefix(f'{item.path}: ')})")
        return None
    try:
        return decode_image(data, item.name, mode)  # converts every pixel, so truncation shows here
    except DataError as exc:  # not an image, truncated, or a mode the decoder refuses
        problems.append(str(exc))
        return None


def _prepare(batch: List[np.ndarray], spec: FileProtocolSpec, where: str, problems: List[str]) -> np.ndarray:
    if problems:  # nothing will be built; keep checking, skip the preparation
        return np.zeros((0, *spec.input.shape), np.uint8)
    try:
        return prepare_images(batch, spec.input, name=where)
    except DataError as exc:  # e.g. a glyph protocol whose images are black on white
        problems.append(str(exc))
        return np.zeros((0, *spec.input.shape), np.uint8)


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# ------------------------------------------------------------------ building
# (part, split, the labels it takes, the limit that caps it)
PARTS = (("train-known", "train", "known", "max_known_train"),
         ("train-negative", "train", "negative", "max_unknown_train"),
         ("val-known", "val", "known", "max_val"),
         ("val-negative", "val", "negative", "max_val"),
         ("test-known", "test", "known", "max_test_per_set"),
         ("test-negative", "test", "negative", "max_test_per_set"),
         ("test-unknown", "test", "unknown", "max_test_per_set"))


def build_file_protocol(mapping, seed: int = 0, data_loading: str = "memory", **limits) -> OpenSetProtocol:
    """The :class:`OpenSetProtocol` a mapping describes, after the check pass (every image is
    opened; any problem raises one :class:`DataError` listing them, before anything is built).

    ``data_loading`` (``data.image_files.choose_loading``): ``memory`` prepares every image now;
    ``stream`` keeps the paths (each split's images are an :class:`ImageFiles`, decoded when
    read) after the same check pass, and prepares only a first chunk of each split, so that
    the set-level checks of ``prepare_images`` (glyph polarity) still run; ``auto`` streams
    when the decoded training set would not fit comfortably in memory.

    ``limits`` as for the registered protocols (``max_known_train``, ``max_unknown_train``,
    ``max_val``, ``max_test_per_set``): seeded, stratified by class (negatives by their
    source class where known). ``val_fraction`` does not apply: the protocol has its own val.
    """
    spec = mapping if isinstance(mapping, FileProtocolSpec) else parse_file_protocol(mapping)
    if "val_fraction" in limits:
        raise ConfigError("protocol_limits: val_fraction does not apply to a protocol from files "
                          + ("(an imagefolder protocol takes protocol.val_fraction)" if spec.type == "imagefolder"
                             else "(its val split is given)"))
    listing = list_protocol(spec, seed)
    chosen, notes = _choose(listing, seed, limits)
    n_train = sum(len(chosen[p]) for p, s, _, _ in PARTS if s == "train")
    stream = choose_loading(data_loading, n_train, spec.input.shape) == "stream"
    problems = list(listing.problems)
    prepared = {}
    for split in SPLITS:
        keep = sorted(set().union(*(chosen[p] for p, s, _, _ in PARTS if s == split)))
        images = _read_split(listing.splits[split], set(keep[:CHUNK] if stream else keep), spec, split, problems)
        prepared[split] = None if stream else dict(zip(keep, images)) if not problems else {}
    raise_problems(spec, problems)
    if listing.repeats:
        notes.append("allow_duplicates: " + ", ".join(f"{n} {split} entries repeat a file listed earlier in the "
                                                      f"split" for split, n in listing.repeats.items())
                     + "; each entry counts as a sample")
    if stream:
        notes.append(f"data loading: streamed ({n_train} training images decoded on the fly, "
                     f"data_loading: {data_loading})")
    protocol = _assemble(spec, listing, chosen, prepared, notes)
    if spec.type == "imagefolder":
        protocol.split_files = split_tables(spec, listing)
    protocol.sources = file_sources(spec, listing)
    return protocol


def file_sources(spec: FileProtocolSpec, listing: Listing) -> Dict[str, Dict[str, object]]:
    """What the protocol was built from (``data.fingerprint``): each split list's content (its
    CSV files and class-name file), and the path, size and mtime of every image it lists."""
    lists = dict(spec.files)
    if spec.class_names is not None:
        lists["class names"] = spec.class_names
    sources = {f"split list {name}": file_fingerprint(path) for name, path in lists.items()}
    images = [item.path for items in listing.splits.values() for item in items]
    sources["images"] = listing_fingerprint(spec.root, images)
    return sources


def _role(label: int) -> str:
    return "known" if label >= 0 else "negative" if label == NEGATIVE else "unknown"


def _choose(listing: Listing, seed: int, limits: Dict) -> Tuple[Dict[str, List[int]], List[str]]:
    """Indices (into each split's items) of every part, capped by ``limits``."""
    chosen, notes = {}, []
    sources = {name: i for i, name in enumerate(listing.negative_class_names)}
    for part, split, role, key in PARTS:
        items = listing.splits[split]
        idx = np.array([i for i, item in enumerate(items) if _role(item.label) == role], np.int64)
        strata = np.array([items[i].label if role == "known" else sources.get(items[i].source, -1) for i in idx],
                          np.int64)
        keep = idx[stratified_subset(strata, limits.get(key), purpose_rng(seed, f"files/{part}"))]
        if len(keep) < len(idx):
            notes.append(f"{part}: subsampled {len(idx)} -> {len(keep)} ({key}, class-stratified, seed {seed})")
        chosen[part] = keep.tolist()
    return chosen, notes


def _split(name: str, idx: Sequence[int], items: List[Item], images: Optional[Dict[int, np.ndarray]],
           spec: FileProtocolSpec, sources: Optional[Dict[str, int]]) -> ProtocolSplit:
    """The split of the items ``idx``; ``images`` None: streamed (their files, read on demand)."""
    idx = sorted(idx)
    labels = np.array([max(items[i].label, NEGATIVE) for i in idx], np.int64)  # unknowns (-2) are -1 here
    negative_class = None
    if sources is not None:
        negative_class = np.array([sources[items[i].source] if items[i].label == NEGATIVE else -1 for i in idx],
                                  np.int64)
    if images is None:
        stacked = ImageFiles([items[i].path for i in idx], spec.input)
    else:
        stacked = np.stack([images[i] for i in idx]) if idx else np.zeros((0, *spec.input.shape), np.uint8)
    return ProtocolSplit(name, stacked, labels, negative_class)


# The two unknown sets of every protocol from files: the test negatives (classes trained as
# negatives, D_b) and the test unknowns (classes never seen in training, D_a).
declare_unknown_sets(UnknownSet("negatives", "the protocol's test negatives", known_unknowns=True),
                     UnknownSet("unknowns", "the protocol's test unknowns"))


def _assemble(spec: FileProtocolSpec, listing: Listing, chosen, prepared, notes: List[str]) -> OpenSetProtocol:
    names = listing.negative_class_names
    sources = {n: i for i, n in enumerate(names)} if names else None

    def split(name, split_name, *parts, with_sources=True):
        idx = [i for p in parts for i in chosen[p]]
        return _split(name, idx, listing.splits[split_name], prepared[split_name], spec,
                      sources if with_sources else None)

    unknowns = {"negatives": split("negatives", "test", "test-negative"),
                "unknowns": split("unknowns", "test", "test-unknown", with_sources=False)}
    unknowns = {k: v for k, v in unknowns.items() if len(v)}
    protocol = OpenSetProtocol(f"{spec.type}:{spec.root}", len(listing.class_names), spec.input.shape,
                               split("train", "train", "train-known", "train-negative"),
                               split("val", "val", "val-known", "val-negative"),
                               split("known", "test", "test-known"), unknowns, [], list(listing.class_names),
                               list(names))
    protocol.notes = describe(spec, listing, protocol) + notes
    return protocol


def describe(spec: FileProtocolSpec, listing: Listing, protocol: OpenSetProtocol) -> List[str]:
    """Notes for the report: the sets, the class names (shortened) and the preparation."""
    def some(names: Sequence[str]) -> str:
        return ", ".join(names[:30]) + (f", ... ({len(names) - 30} more)" if len(names) > 30 else "")

    sizes = protocol.sizes()
    notes = [_title(spec),
             f"known classes D_c ({protocol.num_classes}): {some(listing.class_names)}"]
    if spec.type != "csv":
        notes.append(f"negatives D_b' / D_b ({len(spec.negative)}): {some(sorted(set(spec.negative))) or 'none'}; "
                     f"unknowns D_a, test only ({len(spec.unknown)}): {some(list(spec.unknown)) or 'none'}")
    elif listing.negative_class_names:
        notes.append(f"negatives' source classes ({len(listing.negative_class_names)}): "
                     f"{some(listing.negative_class_names)}")
    notes.append(f"train: {sizes['train']['known']} knowns + {sizes['train']['unknown']} negatives (D_b'); "
                 f"val: {sizes['val']['known']} + {sizes['val']['unknown']}; test sets: known (D_c) "
                 f"{sizes['test_known']['known']}, " + ", ".join(
                     f"{k} ({'D_b' if k == 'negatives' else 'D_a'}) {len(v)}" for k, v in protocol.test_unknowns.items()))
    colour = "grey (BT.601 luma)" if spec.channels == 1 else "RGB"
    notes.append(f"images: {colour}, shorter side resized to {spec.image_size} (antialiased bilinear), centre "
                 f"crop {spec.image_size}x{spec.image_size}; kind {spec.kind}"
                 + ("; glyph polarity checked (white on black)" if spec.kind == "glyph" else ""))
    return notes


def _title(spec: FileProtocolSpec) -> str:
    if spec.type == "imagefolder":
        how = (f"the split in {spec.split}" if spec.split else
               f"split here: val {spec.val_fraction:g}, test {spec.test_fraction:g} of each known and negative "
               f"class, seeded by the data seed")
        return f"protocol from one image folder per class under {spec.root} ({how})"
    return (f"protocol from a folder tree under {spec.root}" if spec.type == "folders"
            else f"protocol from CSV files ({', '.join(str(spec.files[s]) for s in SPLITS)}; images under {spec.root})")
