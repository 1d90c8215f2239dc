"""The ``protocol:`` mapping of a protocol from files, checked (:func:`parse_file_protocol`, no file
read) into a :class:`FileProtocolSpec`, its paths made absolute against the YAML's folder
(:func:`resolve_paths`); and what the three types' readers list: an :class:`Item` per image, one
:class:`Listing` per protocol."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from agnostophobia.data.preprocess import KINDS, NATURAL, InputSpec
from agnostophobia.errors import ConfigError
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


def _title(spec: FileProtocolSpec) -> str:
    if spec.type == "imagefolder":
        how = (f"the split in {spec.split}" if spec.split else
               f"split here: val {spec.val_fraction:g}, test {spec.test_fraction:g} of each known and negative "
               f"class, seeded by the data seed")
        return f"protocol from one image folder per class under {spec.root} ({how})"
    return (f"protocol from a folder tree under {spec.root}" if spec.type == "folders"
            else f"protocol from CSV files ({', '.join(str(spec.files[s]) for s in SPLITS)}; images under {spec.root})")
