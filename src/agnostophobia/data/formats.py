"""Readers for the on-disk formats: our prepared ``.npz`` layout and the official
formats (idx(.gz), CIFAR python pickles, SVHN ``.mat``, folders/archives of images,
and the staged CIFAR-10 JPEG-bytes file).

Every reader turns a missing, truncated or malformed file into a one-line
:class:`~agnostophobia.errors.DataError` that names the file and the problem; the
callers in :mod:`.datasets` append how to get the data.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import pickle
import re
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._atomic import atomic_write
from agnostophobia._reading import check_declared_bytes, check_regular_file, read_input_bytes, walk_files
from agnostophobia.errors import DataError
from agnostophobia.data.paths import cache_dir

# Errors raised by zipfile/tarfile/gzip/numpy on truncated or corrupt containers.
_CORRUPT = (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile,
            OSError, ValueError, KeyError, struct.error)


def short_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = re.sub(r"\s*<[^<>]* object at 0x[0-9a-fA-F]+>", "", text)  # Pillow names its BytesIO: noise to a user
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- npz
@contextlib.contextmanager
def open_npz(path: Path):
    """``np.load`` of an npz with corrupt/truncated files reported as DataError; a FIFO or
    device is refused before it is opened (:func:`~agnostophobia._reading.check_regular_file`)."""
    if Path(path).exists() or Path(path).is_symlink():
        check_regular_file(path)
    try:
        npz = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except _CORRUPT as exc:
        raise DataError(f"{path}: not a readable npz file, truncated or corrupt ({short_error(exc)})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: is a single .npy array, expected an npz archive")
    with npz:
        yield npz


def npz_array(npz, path: Path, key: str) -> np.ndarray:
    """One array of an open npz; a missing key or a corrupt member is a DataError."""
    if key not in npz.files:
        raise DataError(f"{path}: has no array {key!r} (it has: {', '.join(npz.files) or 'none'})")
    try:
        declared = _declared_npz_bytes(npz, key)
    except DataError:
        raise
    except _CORRUPT as exc:
        raise DataError(f"{path}: array {key!r} cannot be read, the file is truncated or corrupt "
                        f"({short_error(exc)})") from None
    check_declared_bytes(declared, f"{path}: array {key!r}")  # before a byte of it is allocated
    try:
        return npz[key]
    except _CORRUPT as exc:
        raise DataError(f"{path}: array {key!r} cannot be read, the file is truncated or corrupt "
                        f"({short_error(exc)})") from None


def _declared_npz_bytes(npz, key: str) -> int:
    """The bytes member ``key`` of an open npz says it holds (shape x itemsize), read from its
    ``.npy`` header without loading the array."""
    name = f"{key}.npy" if f"{key}.npy" in npz.zip.namelist() else key
    with npz.zip.open(name) as member:
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(member)
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


# ------------------------------------------------------------------- validation
def check_images(arr: np.ndarray, source: str, hw: Optional[Tuple[int, int]] = None,
                 channels: int = 1) -> np.ndarray:
    """uint8 images of shape (N, H, W) (channels=1) or (N, H, W, 3) (channels=3)."""
    if arr.dtype != np.uint8:
        raise DataError(f"{source}: images must be uint8 (raw 0..255 pixels), got dtype {arr.dtype}")
    want = "(N, H, W)" if channels == 1 else "(N, H, W, 3)"
    ok = arr.ndim == 3 if channels == 1 else (arr.ndim == 4 and arr.shape[-1] == 3)
    if ok and hw is not None and tuple(arr.shape[1:3]) != tuple(hw):
        ok = False
        want = want.replace("H, W", f"{hw[0]}, {hw[1]}")
    if not ok:
        raise DataError(f"{source}: images have shape {arr.shape}, expected {want}")
    if arr.shape[0] == 0:
        raise DataError(f"{source}: contains 0 images")
    return arr


def check_labels(arr: np.ndarray, source: str, n: int, num_classes: int, offset: int = 0) -> np.ndarray:
    """Integer labels of length ``n`` in ``offset..offset+num_classes-1``; returned as
    int64 ``0..num_classes-1`` (the offset is removed, e.g. EMNIST's a=1)."""
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise DataError(f"{source}: labels have shape {arr.shape}, expected (N,)")
    if not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{source}: labels must be integers, got dtype {arr.dtype}")
    if arr.shape[0] != n:
        raise DataError(f"{source}: {arr.shape[0]} labels for {n} images")
    lo, hi = offset, offset + num_classes - 1
    if arr.size and (arr.min() < lo or arr.max() > hi):
        bad = arr[(arr < lo) | (arr > hi)]
        raise DataError(f"{source}: label {int(bad[0])} out of range {lo}..{hi} "
                        f"({bad.size} bad label(s))")
    return arr.astype(np.int64) - offset


# ------------------------------------------------------------------- archives
class Archive:
    """Read-only access to the files of a directory, a ``.zip`` or a ``.tar(.gz)``.

    Archives are read in place (never extracted), so a user can keep the official
    download as it is. gzip'd tars can only be read front to back, hence the
    single-pass :meth:`iter_files` interface.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        name = self.path.name.lower()
        if self.path.is_dir():
            self.kind = "dir"
        elif name.endswith(".zip"):
            self.kind = "zip"
        elif name.endswith((".tar", ".tar.gz", ".tgz")):
            self.kind = "tar"
        else:
            raise DataError(f"{self.path}: not a directory, .zip or .tar(.gz)")

    def iter_files(self, want: Callable[[str], bool], read: bool = True) -> Iterator[Tuple[str, bytes]]:
        """Yield ``(relative posix name, bytes)`` for every file ``want`` accepts (a FIFO, socket
        or device among them is refused); with ``read=False`` of a directory, the bytes are b""."""
        try:
            if self.kind == "dir":
                for root, files in walk_files(self.path):  # bounded depth, no recursion
                    for f in files:
                        full = Path(root) / f
                        rel = full.relative_to(self.path).as_posix()
                        if want(rel):
                            yield rel, read_input_bytes(full) if read else b""
            elif self.kind == "zip":
                with zipfile.ZipFile(self.path) as zf:
                    for info in zf.infolist():
                        if not info.is_dir() and want(info.filename):
                            check_declared_bytes(info.file_size, f"{self.path}: {info.filename}")
                            yield info.filename, zf.read(info)
            else:
                with tarfile.open(self.path, "r:*") as tf:
                    for member in tf:  # sequential: random access into .tar.gz is quadratic
                        if member.isfile() and want(member.name):
                            check_declared_bytes(member.size, f"{self.path}: {member.name}")
                            fh = tf.extractfile(member)
                            yield member.name, fh.read() if fh is not None else b""
        except DataError:
            raise
        except _CORRUPT as exc:
            raise DataError(f"{self.path}: truncated or corrupt {self.kind} ({short_error(exc)})") from None

    def read(self, suffix: str) -> bytes:
        """The one file whose name ends with ``suffix`` (``/``-separated)."""
        for name, data in self.iter_files(lambda n: n == suffix or n.endswith("/" + suffix)):
            return data
        raise DataError(f"{self.path}: has no file {suffix!r}")


# ------------------------------------------------------------------------ idx
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def parse_idx(data: bytes, source: str) -> np.ndarray:
    """Decode an idx file (LeCun's MNIST format): magic 0,0,dtype,ndim; big-endian dims."""
    if source.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{source}: truncated or corrupt gzip ({short_error(exc)})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DataError(f"{source}: not an idx file (bad magic number {data[:4].hex() or 'empty'})")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{source}: truncated idx header")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != need:
        raise DataError(f"{source}: idx body has {len(data) - header} bytes, its header "
                        f"{tuple(dims)} needs {need} (truncated file?)")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(arr.dtype.newbyteorder("="), copy=True)


def read_idx(path: Path) -> np.ndarray:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({short_error(exc)})") from None
    return parse_idx(data, str(path))


# -------------------------------------------------------------- CIFAR pickles
class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle plain containers and numpy arrays only.

    The CIFAR batches are pickles; loading an arbitrary pickle runs arbitrary code, so
    anything but the numpy array reconstructors is refused.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("codecs", "encode"), ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def parse_cifar_pickle(data: bytes, source: str) -> Dict[str, object]:
    """A CIFAR python batch (Python 2 pickle) as a dict with ``str`` keys."""
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(data), encoding="latin1").load()
    except Exception as exc:  # any unpickling failure means a bad file
        raise DataError(f"{source}: not a readable CIFAR python batch ({short_error(exc)})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{source}: expected a dict in the pickle, got {type(obj).__name__}")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def cifar_images(batch: Dict[str, object], source: str) -> np.ndarray:
    """``data`` (N, 3072) row-major R, G, B planes -> (N, 32, 32, 3) RGB, no transpose bug."""
    data = np.asarray(batch.get("data"))
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{source}: 'data' has shape {data.shape} dtype {data.dtype}, "
                        f"expected uint8 (N, 3072)")
    return np.ascontiguousarray(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))


def cifar_labels(batch: Dict[str, object], key: str, source: str) -> np.ndarray:
    if key not in batch:
        raise DataError(f"{source}: has no {key!r} entry (has: {', '.join(batch)})")
    return np.asarray(batch[key], dtype=np.int64)


# ------------------------------------------------------------------ SVHN .mat
def read_svhn_mat(path: Path) -> Tuple[np.ndarray, np.ndarray]:
    """``X`` (32, 32, 3, N) and ``y`` (N, 1) with digit 0 stored as 10."""
    import scipy.io  # only needed for this format

    try:
        mat = scipy.io.loadmat(str(path), variable_names=("X", "y"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except Exception as exc:  # scipy raises many types for truncated files
        raise DataError(f"{path}: not a readable .mat file, truncated or corrupt ({short_error(exc)})") from None
    for key in ("X", "y"):
        if key not in mat:
            raise DataError(f"{path}: has no variable {key!r}")
    x, y = mat["X"], np.asarray(mat["y"])
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise DataError(f"{path}: X has shape {x.shape} dtype {x.dtype}, expected uint8 (32, 32, 3, N)")
    y = y.reshape(-1)
    if not np.issubdtype(y.dtype, np.number) or np.any(y != np.round(y)):
        raise DataError(f"{path}: y must hold integer digit labels")
    y = y.astype(np.int64)
    if y.size and (y.min() < 1 or y.max() > 10):
        raise DataError(f"{path}: label {int(y[(y < 1) | (y > 10)][0])} out of range 1..10")
    return np.ascontiguousarray(x.transpose(3, 0, 1, 2)), y % 10


# --------------------------------------------------------------------- images
#: Pillow modes read as stored, and what each other mode is read as before any colour
#: conversion (the rule of :func:`decode_image`; docs/guide/your-data.md, docs/data.md).
_EIGHT_BIT = ("L", "RGB")
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
_ALPHA = ("LA", "RGBA", "PA", "P", "La", "RGBa")
_COLOUR_SPACES = ("CMYK", "YCbCr")
_OTHER = ("1", "F", "RGBX")
IMAGE_MODES = _EIGHT_BIT + _SIXTEEN_BIT + _ALPHA + _COLOUR_SPACES + _OTHER


def decode_image(data: bytes, name: str, mode: str = "L") -> np.ndarray:
    """Decode one image file to uint8 ``mode`` (``L`` grey or ``RGB``) by its real bit depth.

    Every image file of the package (the official archives, a user's files and folders,
    protocols from files, streamed ones) is decoded here. Each Pillow mode is first read
    as 8-bit grey or RGB by one rule, and only then converted to ``mode`` (RGB to grey by
    BT.601 luma, grey to RGB by repetition):

    * ``L``, ``RGB``: as stored; ``1`` (1-bit): 0 and 255; ``RGBX``: the padding byte dropped.
    * 16-bit integers (``I;16``, ``I;16B``, ``I;16L``, and ``I`` whose values lie in
      0..65535): 0..65535 to 0..255, ``round(v / 257)``, so that ×257 values come back exact.
      ``I`` values outside 0..65535 are refused (their scale cannot be told). Pillow reads
      16-bit RGB, RGBA and grey+alpha PNGs as 8-bit itself, keeping each sample's high byte
      (``v // 256``: exact for ×257 values, within 1 of the rule otherwise).
    * ``F`` (32-bit float): 0..1 to 0..255, rounded; a value outside [0, 1], or NaN, is refused.
    * ``P`` (palette) and ``PA``: through the palette, its transparency becoming alpha.
    * alpha (``LA``, ``RGBA``, ``PA``, ``P``, and ``L``/``RGB`` with a transparent colour):
      composited on **black**, ``round(c * a / 255)``: the package's glyphs are white on
      black, so a transparent background reads as the black background. Premultiplied
      ``La``/``RGBa`` are already composited on black.
    * ``CMYK`` and ``YCbCr``: to RGB by Pillow's formulas (no colour profile is applied).
    * an EXIF orientation (JPEG, PNG ``eXIf``, WebP, TIFF) is applied, so the image is upright
      as every viewer shows it (a phone photo is stored sideways with a tag saying so); an
      unreadable EXIF block is ignored, as viewers ignore it.
    * anything else (e.g. ``LAB``, ``I;16S``, ``HSV``) and files with several frames (an
      animation, a multi-page TIFF) are refused; an MPO camera file gives its primary image.

    Every refusal, and a file Pillow cannot open or decode, is a one-line
    :class:`DataError` naming ``name``.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            frames = getattr(img, "n_frames", 1)
            if frames > 1 and img.format != "MPO":
                raise DataError(f"{name}: has {frames} frames (an animation or a multi-page file); "
                                f"which one to use is ambiguous, save it as a single image")
            check_declared_bytes(img.width * img.height * len(img.getbands()), f"{name}: {img.width}x{img.height} image")
            img.load()
            _upright(img)
            return np.asarray(Image.fromarray(_eight_bit(img, name)).convert(mode), dtype=np.uint8)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{name}: cannot decode image: not an image, or a truncated or corrupt one "
                        f"({short_error(exc)})") from None


#: The EXIF tag of the orientation (TIFF/EXIF 274): 1 is upright, 2..8 a flip and/or rotation.
EXIF_ORIENTATION = 0x0112


def _upright(img) -> None:
    """Flip and rotate the loaded ``img`` in place as its EXIF orientation says (Pillow reads it
    from JPEG APP1, PNG eXIf, WebP EXIF and TIFF tags alike); the tag is then reset to 1."""
    from PIL import ImageOps

    try:
        orientation = img.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # a malformed EXIF block: viewers show the pixels as stored, and so do we
        return
    if orientation != 1:
        ImageOps.exif_transpose(img, in_place=True)


def _eight_bit(img, name: str) -> np.ndarray:
    """``img`` as uint8 (H, W) grey or (H, W, 3) RGB by the rule of :func:`decode_image`."""
    mode = img.mode
    if mode not in IMAGE_MODES:
        raise DataError(f"{name}: image mode {mode!r} is not supported (supported: {', '.join(IMAGE_MODES)})")
    if mode in _SIXTEEN_BIT:
        return _keyed(_from_sixteen_bit(np.asarray(img), name), np.asarray(img), img.info.get("transparency"))
    if mode == "F":
        return _from_unit_float(np.asarray(img), name)
    if mode in ("La", "RGBa"):
        return np.asarray(img)[..., :-1].squeeze(-1) if mode == "La" else np.asarray(img)[..., :3]
    if mode in ("P", "PA") or (mode in ("L", "RGB", "1") and "transparency" in img.info):
        img = img.convert("RGBA")  # the palette or the transparent colour, as alpha
    elif mode in ("1", "RGBX") + _COLOUR_SPACES:
        img = img.convert("L" if mode == "1" else "RGB")
    pixels = np.asarray(img)
    if img.mode in ("LA", "RGBA"):
        return _on_black(pixels[..., :-1], pixels[..., -1])
    return pixels


def _from_sixteen_bit(values: np.ndarray, name: str) -> np.ndarray:
    low, high = int(values.min(initial=0)), int(values.max(initial=0))
    if low < 0 or high > 65535:
        raise DataError(f"{name}: 32-bit integer pixels range over {low}..{high}, outside 0..65535; "
                        f"their scale cannot be told (save 8- or 16-bit images)")
    return ((values.astype(np.uint32) + 128) // 257).astype(np.uint8)  # round(v / 257): v / 257 is never k + 1/2


def _from_unit_float(values: np.ndarray, name: str) -> np.ndarray:
    outside = ~((values >= 0) & (values <= 1))  # NaN included
    if outside.any():
        bad = values[outside].flat[0]
        raise DataError(f"{name}: float pixels must lie in [0, 1]; {int(outside.sum())} do not "
                        f"(e.g. {float(bad)!r}), their scale cannot be told")
    return np.rint(values.astype(np.float64) * 255).astype(np.uint8)


def _keyed(grey: np.ndarray, values: np.ndarray, key) -> np.ndarray:
    """A 16-bit image's transparent value (PNG tRNS) composited on black."""
    return grey if key is None else np.where(values == key, np.uint8(0), grey)


def _on_black(colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``round(c * a / 255)``: ``colour`` (H, W, C) over a black background."""
    mixed = (colour.astype(np.uint32) * alpha[..., None] + 127) // 255  # c * a / 255 is never k + 1/2
    return mixed.astype(np.uint8).squeeze(-1) if mixed.shape[-1] == 1 else mixed.astype(np.uint8)


def decode_images(items: Iterable[Tuple[str, bytes]], source: str, hw: Tuple[int, int],
                  skip_unreadable: bool = False) -> Tuple[np.ndarray, list]:
    """Decode grey images of size ``hw``; returns (array, names of skipped files)."""
    out, skipped = [], []
    for name, data in items:
        try:
            img = decode_image(data, f"{source}: {name}")
        except DataError:
            if skip_unreadable:
                skipped.append(name)
                continue
            raise
        if img.shape != tuple(hw):
            raise DataError(f"{source}: {name} is {img.shape[1]}x{img.shape[0]}, expected {hw[1]}x{hw[0]}")
        out.append(img)
    if not out:
        raise DataError(f"{source}: no images found")
    return np.stack(out), skipped


# ---------------------------------------------------- staged CIFAR-10 JPEG npz
def decode_jpeg_npz(path: Path, buf_key: str, off_key: str, hw: Tuple[int, int] = (32, 32),
                    use_cache: bool = True) -> np.ndarray:
    """Decode the concatenated JPEG bytes of ``path`` to (N, H, W, 3) RGB uint8.

    Decoding 50,000 CIFAR JPEGs takes seconds, so the result is cached as ``.npy``
    under :func:`cache_dir` (never next to the data, which may be read-only), keyed by
    the file's path, size, mtime and the Pillow version (decoders may differ by a few
    grey levels between libjpeg versions).
    """
    import PIL

    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({short_error(exc)})") from None
    key = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{PIL.__version__}".encode()).hexdigest()[:16]
    cached = cache_dir() / f"{path.stem}-{key}.npy"
    with open_npz(path) as npz:
        off = npz_array(npz, path, off_key)
        if off.ndim != 1 or off.size < 2 or not np.issubdtype(off.dtype, np.integer):
            raise DataError(f"{path}: {off_key} must be a 1-D integer array of N+1 offsets")
        n = off.size - 1
        if use_cache and cached.exists():
            try:
                arr = np.load(cached, allow_pickle=False)
                if arr.shape == (n, hw[0], hw[1], 3) and arr.dtype == np.uint8:
                    return arr
            except (OSError, ValueError):
                pass  # a broken cache file is simply rebuilt
        buf = npz_array(npz, path, buf_key)
    if buf.dtype != np.uint8 or buf.ndim != 1:
        raise DataError(f"{path}: {buf_key} must be a 1-D uint8 byte array")
    if off[0] != 0 or off[-1] != buf.size or np.any(np.diff(off) <= 0):
        raise DataError(f"{path}: {off_key} are not increasing offsets 0..{buf.size} into {buf_key}")
    arr = np.empty((n, hw[0], hw[1], 3), np.uint8)
    for i in range(n):
        img = decode_image(buf[off[i]:off[i + 1]].tobytes(), f"{path}: image {i}", mode="RGB")
        if img.shape[:2] != tuple(hw):
            raise DataError(f"{path}: image {i} is {img.shape[1]}x{img.shape[0]}, expected {hw[1]}x{hw[0]}")
        arr[i] = img
    if use_cache:
        _save_cache(cached, arr)
    return arr


def _save_cache(target: Path, arr: np.ndarray) -> None:
    """Atomically write a cache file; an unwritable cache only costs time."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:  # a file object: np.save would append ".npy" to a name
            np.save(fh, arr)

    try:
        atomic_write(target, write)
    except OSError:
        pass


def _file_digest(path: Path, algorithm: str, chunk: int = 1 << 20) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    return _file_digest(path, "sha256")


def md5_file(path: Path) -> str:
    return _file_digest(path, "md5")


def first_existing(candidates: Sequence[Path]) -> Optional[Path]:
    for c in candidates:
        if c.exists():
            return c
    return None
