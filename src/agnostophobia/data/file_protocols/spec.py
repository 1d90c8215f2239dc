"""The ``protocol:`` mapping of a protocol from files, checked (:func:`parse_file_protocol`, no file
read) into a :class:`FileProtocolSpec`, its paths made absolute against the YAML's folder
(:func:`resolve_paths`); and what the three types' readers list: an :class:`Item` per image, one
:class:`Listing` per protocol."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from agnostophobia.data.preprocess import KINDS, NATURAL, InputSpec
from agnostophobia.errors import ConfigError
from agnostophobia.settings import Setting, check_settings, field_settings, setting

TYPES = ("csv", "folders", "imagefolder")
#: The types whose classes are folders that the config lists (known, negative, unknown).
FOLDER_TYPES = ("folders", "imagefolder")
SPLITS = ("train", "val", "test")
NEGATIVE, UNKNOWN = -1, -2
#: The most known classes a protocol from files may have (ImageNet-21k has 21,843).
MAX_CLASSES = 100_000
#: An imagefolder split written to a run, in the csv type's format: split -> file name
SPLIT_FILES = {"train": "train.csv", "val": "val.csv", "test": "test.csv"}
CLASS_NAMES_FILE = "class_names.txt"


def _csv_file(split: str) -> Any:
    return setting(Path, None, required=True, types=("csv",),
                   doc=f"the {split} split's CSV file: path,label[,source class of a negative] per line, the "
                       f"paths relative to root")


def _class_folders(what: str, required: bool = False) -> Any:
    return setting(list, (), required=required, types=FOLDER_TYPES, items=(str, int),
                   refusal="must be a list of class-folder names",
                   rule=(lambda names: None if names else "must list at least one class folder") if required else None,
                   doc=what)


@dataclass(frozen=True)
class FileProtocolSpec:
    """A checked ``protocol:`` mapping, a field per key; paths as given (relative ones to the
    working directory). Each key is declared once, here, by its
    :class:`~agnostophobia.settings.Setting` (``types``: the protocol types it belongs to, none: every
    type); the checks of :func:`parse_file_protocol`, the keys each type allows (``TYPE_KEYS``),
    the paths :func:`resolve_paths` makes absolute (``PATH_KEYS``) and the reference's table of
    the keys derive from the declarations."""

    type: str = setting(str, required=True, choices=TYPES, refusal=f"must be one of {', '.join(TYPES)}",
                        doc="csv: a CSV file per split; folders: ROOT/<split>/<class>/<image>; imagefolder: "
                            "ROOT/<class>/<image>, split here")
    root: Path = setting(Path, required=True, doc="the folder the images are under")
    image_size: int = setting(int, required=True, low=8, high=4096,
                              refusal="must be an integer from 8 to 4096 (the square side in pixels)",
                              doc="the square side in pixels: shorter side resized, then centre-cropped")
    channels: int = setting(int, required=True, choices=(1, 3), refusal="must be 1 (grey) or 3 (RGB)",
                            doc="1: grey (BT.601 luma); 3: RGB (grey images repeated)")
    kind: str = setting(str, NATURAL, choices=KINDS, refusal=f"must be one of {', '.join(KINDS)}",
                        doc="glyph: white on black, polarity checked; natural: any image")
    allow_duplicates: bool = setting(bool, False, doc="a file listed twice within a split is kept, each entry a "
                                                      "sample (with two labels it is still refused)")
    train: Optional[Path] = _csv_file("train")
    val: Optional[Path] = _csv_file("val")
    test: Optional[Path] = _csv_file("test")
    class_names: Optional[Path] = setting(Path, None, types=("csv",),
                                          doc="a file with one known class name per line (without it the known "
                                              "labels must be 0..K-1)")
    allow_outside_root: bool = setting(bool, False, types=("csv",),
                                       doc="a CSV path may lead out of root (climbing above it, or absolute)")
    known: Tuple[str, ...] = _class_folders("the known classes' folders (D_c', D_c); the class indices: sorted "
                                            "order (folders), the order listed (imagefolder)", required=True)
    negative: Tuple[str, ...] = _class_folders("the negatives' folders (D_b', D_b): trained on as unknown")
    unknown: Tuple[str, ...] = _class_folders("the unknowns' folders (D_a): test only")
    split: Optional[Path] = setting(Path, None, types=("imagefolder",),
                                    doc="a split written by a run (its CSV files) to reuse instead of drawing one")
    val_fraction: float = setting(float, 0.15, low=0, high=0.45, low_open=True, types=("imagefolder",),
                                  doc="the share of each known and negative class for validation")
    test_fraction: float = setting(float, 0.15, low=0, high=0.45, low_open=True, types=("imagefolder",),
                                   doc="the share of each known and negative class for testing")

    @property
    def files(self) -> Dict[str, Path]:
        """The CSV file of each split (csv, or imagefolder reusing a written split); empty otherwise."""
        return {split: getattr(self, split) for split in SPLITS if getattr(self, split) is not None}

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


#: Every key of a ``protocol:`` mapping, by name, in the order declared: :class:`FileProtocolSpec`'s fields.
PROTOCOL_KEYS: Dict[str, Setting] = field_settings(FileProtocolSpec)
#: The key whose value is the protocol's type (the one whose choices are ``TYPES``).
TYPE_KEY = next(key for key, declared in PROTOCOL_KEYS.items() if declared.choices == TYPES)
#: The keys every type takes, and those of each type alone.
COMMON_KEYS = tuple(key for key, declared in PROTOCOL_KEYS.items() if not declared.types)
TYPE_KEYS = {kind: tuple(key for key, declared in PROTOCOL_KEYS.items() if kind in declared.types) for kind in TYPES}
#: The keys that hold a path: made absolute against the YAML file's folder (:func:`resolve_paths`).
PATH_KEYS = tuple(key for key, declared in PROTOCOL_KEYS.items() if declared.type is Path)


def protocol_keys(kind: str) -> Dict[str, Setting]:
    """The keys a protocol of type ``kind`` takes, those of every type first.

    Returns:
        ``{key: Setting}``.
    """
    return {key: PROTOCOL_KEYS[key] for key in COMMON_KEYS + TYPE_KEYS[kind]}


def is_file_protocol(protocol: Any) -> bool:
    """True for a ``protocol:`` mapping, False for a registered protocol's name."""
    return isinstance(protocol, dict)


def parse_file_protocol(mapping: Mapping[str, Any], where: str = "protocol") -> FileProtocolSpec:
    """Check the keys and values of a ``protocol:`` mapping (no file is read) against their
    declarations (``PROTOCOL_KEYS``); a bad one raises :class:`ConfigError` naming the key,
    e.g. ``config key 'protocol.channels'``."""
    def bad(key: str, what: str):
        return ConfigError(f"config key '{where}.{key}': {what}, got {mapping.get(key)!r}")

    if not is_file_protocol(mapping):
        raise ConfigError(f"config key {where!r}: must be a protocol name or a mapping, got {mapping!r}")
    kind = mapping.get(TYPE_KEY)
    problem = PROTOCOL_KEYS[TYPE_KEY].problem(kind)
    if problem:
        raise bad(TYPE_KEY, problem)
    declared = protocol_keys(kind)
    for key in mapping:
        if key not in declared:
            raise ConfigError(f"unknown config key '{where}.{key}' for a protocol of type {kind}; "
                              f"known: {', '.join(declared)}")
    required = [key for key, declaration in declared.items() if declaration.required and key != TYPE_KEY]
    for key in required:
        if key not in mapping:
            raise ConfigError(f"config key '{where}.{key}' is missing (a protocol of type {kind} needs "
                              f"{', '.join(required)})")
    check_settings(declared, mapping, where, f"a protocol of type {kind}")
    spec = FileProtocolSpec(**{key: _value(declared[key], value) for key, value in mapping.items()})
    if kind == "imagefolder":
        _check_imagefolder_lists({key: getattr(spec, key) for key, declaration in declared.items()
                                  if declaration.type is list}, where, bad)
    if spec.split is not None:  # a written split is read as the csv type reads its files
        spec = replace(spec, class_names=spec.split / CLASS_NAMES_FILE,
                       **{split: spec.split / name for split, name in SPLIT_FILES.items()})
    return spec


def _value(declared: Setting, value: Any) -> Any:
    """A checked value as the spec keeps it: a path as a :class:`~pathlib.Path`, a list of
    class-folder names as a tuple of strings, a number of a float setting as a float."""
    if declared.type is Path:
        return Path(value)
    if declared.type is list:
        return tuple(str(v) for v in value)
    return declared.check(value, "")


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
