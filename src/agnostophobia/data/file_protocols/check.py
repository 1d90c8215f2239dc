"""The check pass, before anything is built: every image listed by its type's reader
(:func:`list_protocol`), leakage between and within splits found (:func:`_check_duplicates`), and
every image decoded once (:func:`check_file_protocol`); the problems raised as one
:class:`DataError` (:func:`raise_problems`)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._reading import check_declared_bytes, read_input_bytes
from agnostophobia.data.file_protocols.csv_files import _list_csv
from agnostophobia.data.file_protocols.folders import _list_folders
from agnostophobia.data.file_protocols.imagefolder import _check_reused_split, _list_imagefolder
from agnostophobia.data.file_protocols.roots import missing_root
from agnostophobia.data.file_protocols.spec import SPLITS, FileProtocolSpec, Item, Listing, _title, parse_file_protocol
from agnostophobia.data.formats import decode_image
from agnostophobia.data.preprocess import prepare_images
from agnostophobia.errors import AgnostophobiaError, DataError

MAX_SHOWN = 20      # problems listed in the error; the rest are counted
CHUNK = 2048        # images decoded before they are prepared (and their originals dropped)


def list_protocol(spec: FileProtocolSpec, seed: int = 0) -> Listing:
    """Read the CSV files, walk the folders or split the image folders (with the data ``seed``);
    structural problems are collected, not raised."""
    root = None if spec.reads_csv else missing_root(spec)
    if root:  # one problem, not one per class folder under it
        return Listing({split: [] for split in SPLITS}, list(spec.known), sorted(spec.negative), [root])
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


def check_file_protocol(protocol, seed: int = 0) -> List[str]:
    """Every problem of a protocol from files (a mapping or a :class:`FileProtocolSpec`),
    each naming its file or class: a class both known and negative, an unknown in train or
    val, an empty class, a missing, unreadable, truncated or non-image file (a dangling or
    looping link included), a CSV path outside the root, a label out of
    range, a malformed CSV line, a file in two splits or twice in one (:func:`_check_duplicates`).
    This opens and fully decodes every image file once.

    Args:
        protocol: the ``protocol:`` mapping of an experiment YAML, or the
            :class:`FileProtocolSpec` ``parse_file_protocol`` made of one (as for
            :func:`build_file_protocol`).
        seed: the data seed an imagefolder protocol splits with (the other types ignore it).

    Returns:
        The problems, one line each naming its file or class, in the order found (empty when there is none).

    Raises:
        ConfigError: a bad key or value of ``protocol`` (checked before any file is read).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name) / "glyphs"  # two negative classes, a few images of each
        >>> layout = make_glyph_folders(root, negative=("diag", "cross"), per_split={"train": 4, "val": 2, "test": 2})
        >>> from agnostophobia.data import check_file_protocol
        >>> check_file_protocol(layout)  # no problem
        []
        >>> _ = (root / "train" / "box" / "000.png").write_bytes(b"not an image")
        >>> problem = check_file_protocol(layout)[0]
        >>> print(problem.replace(str(root), "glyphs").split(" (")[0])
        glyphs/train/box/000.png: cannot decode image: not an image, or a truncated or corrupt one
        >>> folder.cleanup()
    """
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
