"""What every dataset module shares: the registry :data:`DATASETS`, the record of a dataset
(:class:`DatasetInfo`, its official files :class:`Resource`), one loaded split
(:class:`DatasetSplit`), :func:`load_dataset`, and the readers of the prepared ``.npz`` and
idx files that several loaders use.

A dataset family's module registers its :class:`DatasetInfo` with
:func:`register_dataset`, beside its loader.
"""
from __future__ import annotations

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
    """One official file: where to download it and how to verify it.

    Examples:
        >>> from agnostophobia.data import DATASETS
        >>> official = DATASETS.get("mnist").resources[0]
        >>> official.filename, official.verifiable  # verifiable: a published checksum to check it against
        ('train-images-idx3-ubyte.gz', True)
    """

    filename: str  # the file's name in the dataset's directory
    urls: Tuple[str, ...]  # where to download it, tried in order (mirrors)
    md5: Optional[str] = None  # its MD5 checksum, hex (None: not published)
    sha256: Optional[str] = None  # its SHA-256 checksum, hex (None: not published)
    size: Optional[int] = None  # its size in bytes, where known
    checksum_source: str = ""  # where the checksum comes from, or why there is none

    @property
    def verifiable(self) -> bool:
        """Whether a checksum was published (MD5 or SHA-256) to check a download against."""
        return bool(self.md5 or self.sha256)


@dataclass
class DatasetSplit:
    """One split of one dataset, as stored (no model-specific preprocessing, the dataset's own
    labels); protocols build their :class:`~agnostophobia.data.protocol_types.ProtocolSplit` from it.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import DatasetSplit
        >>> split = DatasetSplit("toy", "train", np.zeros((5, 28, 28), np.uint8), np.array([0, 1, 1, 2, 2]),
        ...                      ["a", "b", "c"], source="memory", format="npz")
        >>> len(split), split.histogram().tolist()
        (5, [1, 2, 2])
    """

    dataset: str                       # the registered dataset's name
    split: str                         # the split's name: "train", "test", ...
    images: np.ndarray                 # uint8 (N, H, W) or (N, H, W, 3) RGB
    labels: np.ndarray                 # int64 (N,), 0..num_classes-1
    class_names: List[str]             # the name of each label, by label
    source: str                        # file or directory it was read from
    format: str                        # "npz", "idx", "cifar-python", "mat", "images", "jpeg-npz"
    notes: List[str] = field(default_factory=list)      # substitutions, deviations
    extra: Dict[str, np.ndarray] = field(default_factory=dict)  # per-sample side info
    meta: Dict[str, Any] = field(default_factory=dict)  # e.g. {"padding": 2}

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def histogram(self) -> np.ndarray:
        """How many samples each class has.

        Returns:
            A (num_classes,) int64 NumPy array of counts, by label.
        """
        return np.bincount(self.labels, minlength=len(self.class_names))


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's declaration: where its files are, how they are laid out and read, and where the
    official ones are downloaded from; registered by ``register_dataset`` in :data:`DATASETS`
    (``agnostophobia data list`` and ``data check`` show it).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import DATASETS
        >>> mnist = DATASETS.get("mnist")
        >>> mnist.num_classes, mnist.kind
        (10, 'glyph')
        >>> with tempfile.TemporaryDirectory() as empty:
        ...     print(mnist.find(Path(empty)))  # not present there
        ...
        None
        >>> mnist.fetch_hint()
        'get it with `agnostophobia data fetch mnist`'
    """

    name: str                            # the registered name (``mnist``), a folder name too
    title: str                           # what it is, with its source, in listings and reports
    directory: str                       # sub-directory of the data dir
    splits: Tuple[str, ...]              # splits the dataset can have
    required_splits: Tuple[str, ...]     # splits every copy must have
    num_classes: int                     # how many classes its labels have
    class_names: Tuple[str, ...]         # the name of each label, by label
    kind: str                            # "glyph" (white on black; polarity checked) or "natural"
    label_convention: str                # what its labels mean (e.g. "digits 0..9, unchanged")
    npz_layout: str                      # the keys, types and shapes of its .npz form
    official_layout: str                 # the official files' names, as downloaded
    candidates: Tuple[str, ...]          # files/dirs that mean "present", in preference order
    resources: Tuple[Resource, ...]      # official downloads (empty: none exists)
    loader: Callable[[Path, str], DatasetSplit]  # (data directory, split) -> the split as stored
    optional: bool = False               # not needed by the default LeNet++ experiment
    fetch_as: Optional[str] = None       # fetch another entry's files instead
    notes: Tuple[str, ...] = ()          # what a user should know (substitutions, deviations)

    def find(self, root: Path) -> Optional[Path]:
        """The first candidate file or directory present under ``root``.

        Args:
            root: the data directory.

        Returns:
            Its path, or None where none is present.
        """
        return F.first_existing([root / c for c in self.candidates])

    def fetch_hint(self) -> str:
        """How to get the dataset, for the message that says it is missing.

        Returns:
            One line, the ``agnostophobia data fetch`` command, or where the documentation says
            how to prepare a dataset without an official download.
        """
        target = self.fetch_as or self.name
        if not self.resources and not self.fetch_as:
            return f"{self.name} has no official download; prepare it as described in docs/data.md"
        return f"get it with `agnostophobia data fetch {target}`"


DATASETS: Registry[DatasetInfo] = Registry("dataset", path_names=True)


def register_dataset(info: DatasetInfo) -> DatasetInfo:
    """Add ``info`` to :data:`DATASETS` under its name (once), after checking its kind."""
    if info.kind not in KINDS:  # the kind decides the polarity check: a typo must not skip it
        raise ValueError(f"dataset {info.name!r}: kind must be one of {KINDS}, got {info.kind!r}")
    DATASETS.register(info.name)(info)
    return info


# ------------------------------------------------------------ shared readers
def npz_xy(path: Path, split: str, hw, channels: int, num_classes: int,
           offset: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Checked images and labels (file labels ``offset..``, returned from 0) of one split of a
    prepared ``.npz``, stored as every prepared file stores a split: arrays ``x_<split>`` and
    ``y_<split>``; :class:`SplitUnavailable` where the file has neither array."""
    xkey, ykey = f"x_{split}", f"y_{split}"
    with F.open_npz(path) as npz:
        if xkey not in npz.files and ykey not in npz.files:
            raise SplitUnavailable(f"{path}: has no {split} split (arrays {xkey}, {ykey})")
        x = F.check_images(F.npz_array(npz, path, xkey), f"{path}: {xkey}", hw, channels)
        y = F.check_labels(F.npz_array(npz, path, ykey), f"{path}: {ykey}", len(x), num_classes, offset)
    return x, y


def npz_optional(path: Path, key: str, n: int) -> Optional[np.ndarray]:
    """The per-sample array ``key`` (``n`` rows) of a prepared ``.npz``, or None where it is absent."""
    with F.open_npz(path) as npz:
        if key not in npz.files:
            return None
        arr = F.npz_array(npz, path, key)
    if arr.shape[:1] != (n,):
        raise DataError(f"{path}: {key} has shape {arr.shape}, expected ({n},)")
    return arr


def npz_strings(path: Path, key: str) -> Optional[List[str]]:
    """The strings stored as ``key`` in a prepared ``.npz``, or None where it is absent."""
    with F.open_npz(path) as npz:
        if key not in npz.files:
            return None
        return [str(s) for s in F.npz_array(npz, path, key)]


def npz_split(npz: Path, dataset: str, split: str, class_names: Sequence[str], image_shape: Tuple[int, ...],
              offset: int = 0, **fields) -> DatasetSplit:
    """One split of a prepared ``.npz`` (:func:`npz_xy`, file labels ``offset..``) as a
    :class:`DatasetSplit` of format ``npz`` with one label per name of ``class_names``;
    ``image_shape`` is ``(H, W)`` for grey images, ``(H, W, 3)`` for RGB; ``fields`` are the
    split's ``notes``, ``extra`` or ``meta``."""
    channels = image_shape[2] if len(image_shape) > 2 else 1
    x, y = npz_xy(npz, split, image_shape[:2], channels, len(class_names), offset)
    return DatasetSplit(dataset, split, x, y, list(class_names), str(npz), "npz", **fields)


def unknown_split(info_name: str, split: str, splits: Sequence[str]) -> DataError:
    """The error for a split name the dataset does not have."""
    return DataError(f"{info_name} has no split {split!r}; splits: {', '.join(splits)}")


def dataset_paths(root: Path, dataset: str, split: str, splits: Sequence[str],
                  directory: Optional[str] = None) -> Tuple[Path, Path]:
    """A loader's first step: refuse a split the dataset does not have (:func:`unknown_split`),
    then the dataset's folder ``root/<directory>`` (default: the dataset's name) and the path of
    its prepared ``<directory>.npz`` there, which a loader reads in preference when it exists."""
    if split not in splits:
        raise unknown_split(dataset, split, splits)
    name = directory or dataset
    return root / name, root / name / f"{name}.npz"


def idx_pair(directory: Path, stems: Tuple[str, str], what: str) -> Tuple[np.ndarray, np.ndarray, Path]:
    """Images and labels of an idx file pair (``<stem>.gz`` or ``<stem>``), and the images' path."""
    arrays = []
    for stem in stems:
        path = F.first_existing([directory / (stem + ".gz"), directory / stem])
        if path is None:
            raise DataError(f"{directory / stem}(.gz): missing {what} file")
        arrays.append((F.read_idx(path), path))
    (x, xp), (y, yp) = arrays
    return x, y, xp


# --------------------------------------------------------------------- API
def _with_hint(info: DatasetInfo, exc: DataError) -> DataError:
    msg = str(exc)
    hint = info.fetch_hint()
    cls = type(exc)
    return cls(msg if hint in msg else f"{msg}; {hint}")


def load_dataset(name: str, split: str, data_dir: Optional[PathLike] = None) -> DatasetSplit:
    """Load one split of a registered dataset, as stored (no model-specific preparation).

    Args:
        name: the registered dataset (``agnostophobia data list``).
        split: one of its splits (``train``, ``test``, ...).
        data_dir: the datasets' folder; default: ``$AGNOSTOPHOBIA_DATA``, else the default folder
            (:func:`data_dir`).

    Returns:
        The :class:`DatasetSplit`.

    Raises:
        ~agnostophobia.errors.DataError: the dataset is missing or a file is malformed; one line
            naming the file, the problem and how to get the data.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> data = Path(tempfile.mkdtemp()); (data / "mnist").mkdir()
        >>> rng = np.random.default_rng(0)  # a stand-in for the real file: 20 + 10 random digits
        >>> np.savez(data / "mnist" / "mnist.npz", x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        ...          y_train=np.arange(20) % 10, x_test=rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
        ...          y_test=np.arange(10))
        >>> from agnostophobia.data import load_dataset
        >>> digits = load_dataset("mnist", "test", data_dir=data)  # the layout of docs/data.md
        >>> digits.images.shape, digits.images.dtype, digits.labels[:4].tolist(), digits.format
        ((10, 28, 28), dtype('uint8'), [0, 1, 2, 3], 'npz')
        >>> import shutil; shutil.rmtree(data)  # the example leaves nothing behind
    """
    info = DATASETS.get(name)
    root = resolve_data_dir(data_dir)
    if split not in info.splits:
        raise unknown_split(name, split, info.splits)
    if info.find(root) is None:
        raise DataError(f"{name} not found in {root}; {info.fetch_hint()} "
                        f"(looked for {', '.join(info.candidates[:3])})")
    try:
        return info.loader(root, split)
    except DataError as exc:
        raise _with_hint(info, exc) from None
