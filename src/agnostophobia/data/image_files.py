"""Image files read on demand: the lazy stand-in for a split's uint8 array when a protocol
from files is streamed (``data.streaming``). Free of torch, so that building a protocol (and
the ``data`` commands) does not import it.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np

from agnostophobia._reading import read_input_bytes
from agnostophobia.data.formats import decode_image
from agnostophobia.data.preprocess import InputSpec, prepare_image
from agnostophobia.errors import ConfigError, DataError

LOADINGS = ("auto", "memory", "stream")
#: ``data_loading: auto`` streams a protocol from files when its decoded uint8 training set
#: would reach this size; below it the images are held in memory (faster, no decoding per epoch).
MEMORY_LIMIT_BYTES = 2 * 1024 ** 3


def choose_loading(mode: str, n_train: int, shape: Sequence[int]) -> str:
    """``memory`` or ``stream`` for ``data_loading: mode`` and ``n_train`` training images of
    ``shape``; ``auto`` streams from :data:`MEMORY_LIMIT_BYTES` of decoded uint8 images on."""
    if mode not in LOADINGS:
        raise ConfigError(f"config key 'data_loading': must be one of {', '.join(LOADINGS)}, got {mode!r}")
    if mode != "auto":
        return mode
    return "stream" if n_train * math.prod(shape) >= MEMORY_LIMIT_BYTES else "memory"


class ImageFiles:
    """A lazy ``uint8 (N, C, S, S)`` array of image files, each decoded and prepared when read."""

    dtype = np.dtype(np.uint8)
    ndim = 4

    def __init__(self, paths: Sequence[str], spec: InputSpec):
        self.paths = [str(p) for p in paths]
        self.spec = spec

    @property
    def shape(self) -> Tuple[int, ...]:
        return (len(self.paths), *self.spec.shape)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.load(int(key))
        if hasattr(key, "cpu"):  # a torch tensor of indices or a mask
            key = key.cpu().numpy()
        if isinstance(key, slice):
            return ImageFiles(self.paths[key], self.spec)
        key = np.asarray(key)
        if key.dtype == bool:
            if key.shape != (len(self),):
                raise IndexError(f"boolean index of shape {key.shape} for {len(self)} images")
            key = np.flatnonzero(key)
        return ImageFiles([self.paths[i] for i in key.tolist()], self.spec)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(self.shape, np.uint8)
        for i in range(len(self)):
            out[i] = self.load(i)
        return out if dtype is None else out.astype(dtype)

    def load(self, i: int) -> np.ndarray:
        """Image ``i`` as model input; a file that cannot be read any more (it passed the
        check when the protocol was built) raises a one-line :class:`DataError` naming it."""
        path = self.paths[i]
        try:
            data = read_input_bytes(path, error=OSError)  # a FIFO swapped in is refused, never waited on
        except OSError as exc:
            raise DataError(f"{path}: image cannot be read while streaming "
                            f"({getattr(exc, 'strerror', None) or exc}); was it moved or changed after "
                            f"the protocol was checked?") from None
        image = decode_image(data, f"{path} (while streaming)", "L" if self.spec.channels == 1 else "RGB")
        return prepare_image(image, self.spec, name=path)
