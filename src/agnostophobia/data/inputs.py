"""Images a user brings: single image files, folders of images, ``.npz`` files in our layout
and registered datasets, read as stored and prepared for a run's models by the one
preparation path, :func:`agnostophobia.data.preprocess.prepare_images`.

Shared by ``evaluate --unknowns`` (an unknown set per path), ``predict`` and the Python
API (one row per image), so every command sees the same pixels the run's protocol
prepared its own sets with (Sec. 5):

* an image file (:data:`IMAGE_SUFFIXES`) is one sample, decoded to RGB at its own size;
* a folder is every image file below it, recursively, in the order of their sorted
  relative paths, each at its own size (resized once, straight to the model's size);
* an ``.npz`` holds ``x_test``, ``x`` or ``images`` (the first found): uint8 (N, H, W) grey
  or (N, H, W, 3) RGB, samples in array order.

Every problem is a one-line :class:`~agnostophobia.errors.DataError` naming the file.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from agnostophobia._reading import check_declared_bytes, check_regular_file, read_input_bytes
from agnostophobia.data import formats as F
from agnostophobia.data.datasets import DATASETS, load_dataset
from agnostophobia.data.preprocess import OURS, InputSpec, StoredImages, prepare_images
from agnostophobia.data.protocols import protocol_input
from agnostophobia.errors import AgnostophobiaError, DataError
from agnostophobia.rundir import check_path_name

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
NPZ_IMAGE_KEYS = ("x_test", "x", "images")


@dataclass
class UnknownSet:
    """A set of images as stored, before it is prepared for a run's models."""

    name: str                     # its split name in outputs.npz
    source: str                   # what it was read from, for messages
    images: StoredImages
    kind: Optional[str] = None    # a registered dataset's kind; None: the kind the run was trained on
    padding: int = 0              # a blank frame the dataset declares (DHCD: 2); never guessed
    samples: List[str] = field(default_factory=list)  # where each image came from (a file, file.npz[i])


def is_image_file(path: Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def read_image_file(path: Path) -> np.ndarray:
    """One image file as RGB uint8 (H, W, 3), at its own size."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    return F.decode_image(read_input_bytes(path), str(path), "RGB")


def read_image_folder(folder: Path) -> Tuple[List[str], List[np.ndarray]]:
    """Every image under ``folder``, recursively, in the order of their sorted relative paths:
    ``(paths, RGB images at their own sizes)``."""
    folder = Path(folder)
    files = sorted(F.Archive(folder).iter_files(is_image_file))
    if not files:
        raise DataError(f"{folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    return ([str(folder / name) for name, _ in files],
            [F.decode_image(data, str(folder / name), "RGB") for name, data in files])


def read_npz_images(path: Path) -> np.ndarray:
    """The image array of an ``.npz`` in our layout (:data:`NPZ_IMAGE_KEYS`), checked."""
    path = Path(path)
    with F.open_npz(path) as npz:
        key = next((k for k in NPZ_IMAGE_KEYS if k in npz.files), None)
        if key is None:
            raise DataError(f"{path}: no image array; expected one of {', '.join(NPZ_IMAGE_KEYS)} "
                            f"(it has: {', '.join(npz.files) or 'none'})")
        images = F.npz_array(npz, path, key)
    return F.check_images(images, f"{path}: {key}", channels=3 if images.ndim == 4 else 1)


def read_images(spec: str, name: Optional[str] = None) -> UnknownSet:
    """An image file, a folder of images or an ``.npz`` as one set, with each sample's source."""
    path = Path(spec)
    if path.is_dir():
        samples, images = read_image_folder(path)
        return UnknownSet(name or path.name, str(path), images, samples=samples)
    if not path.exists():
        raise DataError(f"{spec}: no such file or folder")
    check_regular_file(path)  # a FIFO, socket or device: refused before anything is read
    if path.suffix.lower() == ".npz":
        images = read_npz_images(path)
        return UnknownSet(name or path.stem, str(path), images, samples=[f"{path}[{i}]" for i in range(len(images))])
    if is_image_file(path):
        return UnknownSet(name or path.stem, str(path), [read_image_file(path)], samples=[str(path)])
    raise DataError(f"{spec}: not an image file ({', '.join(sorted(IMAGE_SUFFIXES))}), "
                    f"a folder of images nor an .npz")


@dataclass
class ImageInput:
    """One ``predict`` input, listed and checked from file headers, decoded batch by batch
    (:meth:`batches`): a folder of 100,000 images never holds more than one batch decoded."""

    spec: str
    files: List[Path] = field(default_factory=list)  # image files, in sample order; empty for an .npz
    stored: Optional[UnknownSet] = None               # an .npz, read whole (its array is stored so)
    #: One line for each image file that cannot be read (its header when listed, its pixels when
    #: decoded): left out of the batches, so that the other images are still classified.
    unreadable: List[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.files) if self.stored is None else len(self.stored.samples)

    def batches(self, size: int):
        """The input as :class:`UnknownSet` pieces of at most ``size`` images, in sample order;
        an image file that cannot be decoded is left out and named in :attr:`unreadable`."""
        for start in range(0, len(self), size):
            if self.stored is not None:
                piece = self.stored.images[start:start + size]
                yield UnknownSet(self.stored.name, self.stored.source, piece,
                                 samples=self.stored.samples[start:start + size])
                continue
            decoded = [(path, self._decoded(path)) for path in self.files[start:start + size]]
            decoded = [(path, image) for path, image in decoded if image is not None]
            if decoded:
                yield UnknownSet(Path(self.spec).name, self.spec, [image for _, image in decoded],
                                 samples=[str(path) for path, _ in decoded])

    def _decoded(self, path: Path) -> Optional[np.ndarray]:
        try:
            return read_image_file(path)
        except DataError as exc:
            self.unreadable.append(str(exc))
            return None


def open_image_input(spec: str) -> ImageInput:
    """An image file, a folder of images or an ``.npz``, listed and checked without decoding an
    image (each file a regular file whose header declares a size that fits, :func:`check_image_header`)."""
    path = Path(spec)
    if path.is_dir():
        files = folder_image_files(path)
    elif path.exists() and check_regular_file(path) and is_image_file(path):
        files = [path]
    else:
        return ImageInput(spec, stored=read_images(spec))
    readable, unreadable = [], []
    for file in files:
        try:
            check_image_header(file)
            readable.append(file)
        except UnreadableImage as exc:  # one bad file of a folder: named, the others still classified
            unreadable.append(str(exc))
    return ImageInput(spec, readable, unreadable=unreadable)


def folder_image_files(folder: Path) -> List[Path]:
    """The image files below ``folder``, in the order of their sorted relative paths (the order of
    :func:`read_image_folder`)."""
    names = [rel for rel, _ in F.Archive(folder).iter_files(is_image_file, read=False)]
    if not names:
        raise DataError(f"{folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    return [folder / name for name in sorted(names)]


class UnreadableImage(DataError):
    """An image file whose header cannot be read (truncated, empty, not an image): ``predict``
    names it and classifies the other images. A special file, or a header declaring more pixels
    than fit, stays a refusal of the whole command (a hostile input, not a damaged one)."""


def check_image_header(path: Path) -> None:
    """``path`` is a regular file holding an image whose header declares a size that fits
    (:func:`~agnostophobia._reading.check_declared_bytes`); the pixels are not decoded. A header
    that cannot be read raises :class:`UnreadableImage`."""
    from PIL import Image

    info = check_regular_file(path)
    check_declared_bytes(info.st_size, str(path))
    try:
        with Image.open(path) as img:
            width, height, bands = img.width, img.height, len(img.getbands())
    except Exception as exc:  # Pillow raises many kinds on a file that is no image
        raise UnreadableImage(f"{path}: cannot decode image: not an image, or a truncated or corrupt one "
                              f"({F.short_error(exc)})") from None
    check_declared_bytes(width * height * bands, f"{path}: {width}x{height} image")


def unknown_set_name(spec: str) -> str:
    """The split name ``evaluate --unknowns spec`` stores a set under; a DataError when
    ``spec`` names nothing usable (a folder, an ``.npz`` or a registered dataset)."""
    path = Path(spec)
    if path.is_dir():
        return _printable_set_name(path.name, spec)
    if path.exists():
        check_regular_file(path, "--unknowns")
        if path.suffix.lower() != ".npz":
            raise DataError(f"--unknowns {spec}: not an .npz file nor a folder of images")
        return _printable_set_name(path.stem, spec)
    if spec in DATASETS:
        return spec
    raise DataError(f"--unknowns {spec}: no such file or folder, and not a registered dataset "
                    f"({', '.join(DATASETS.names())})")


#: Unicode categories of characters a set name must not hold: control characters (a newline
#: broke the report's tables), format characters (bidirectional overrides disguise a name) and
#: line or paragraph separators.
_UNPRINTABLE = {"Cc", "Cf", "Zl", "Zp"}


def _printable_set_name(name: str, spec: str) -> str:
    """``name``, refused when it holds a character that is not printed as itself (reports, tables,
    file names, messages show the name); the message shows both escaped, on one line."""
    bad = next((c for c in name if unicodedata.category(c) in _UNPRINTABLE), None)
    if bad is not None:
        raise DataError(f"--unknowns {spec!r}: the set name {name!r} contains the control character "
                        f"{bad!r}; rename the file or folder")
    try:
        return check_path_name(name, f"--unknowns {spec}: the set name")  # it names the set's figures
    except AgnostophobiaError as exc:
        raise DataError(f"{exc}; rename the file or folder") from None


def read_unknowns(spec: str, data_dir=None) -> UnknownSet:
    """Read one ``--unknowns`` argument; every problem is a one-line DataError naming it."""
    name = unknown_set_name(spec)
    if Path(spec).exists():
        return read_images(spec, name)
    info = DATASETS.get(spec)
    ds = load_dataset(spec, "test" if "test" in info.splits else info.splits[0], data_dir)
    return UnknownSet(name, f"{spec} ({ds.source})", ds.images, info.kind, ds.meta.get("padding", 0))


def run_input(cfg: Dict) -> InputSpec:
    """The :class:`InputSpec` of a model trained with ``cfg`` (a run's config dict): its
    protocol's, with the run's ``preprocessing`` (``ours`` for runs from before that key).
    The one place a run's input is derived: ``evaluate --unknowns``, ``predict``,
    :class:`~agnostophobia.deploy.OpenSetClassifier` and ``export`` all read it here.

    Under ``authors`` a user's own images (no registered dataset) are prepared as the
    authors prepared their known training set, MNIST: our convention is expected (white
    glyph on black, checked) and the images are inverted (``data.preprocess.AUTHORS_USER``);
    a registered dataset takes the authors' recipe of its kind."""
    return protocol_input(cfg["protocol"], cfg.get("preprocessing", OURS))


def model_input(images: UnknownSet, cfg: Dict) -> np.ndarray:
    """``images`` as input of a model trained with ``cfg`` (a run's config dict): prepared
    with the run's input spec (:func:`run_input`), as its protocol prepared its own sets."""
    return prepare_images(images.images, run_input(cfg), name=images.source, kind=images.kind,
                          padding=images.padding)
