"""Turning stored images into each model's input, keeping uint8 to save memory.

:func:`prepare_images` is the one path from stored images to a model's input: the
protocols call it for every training, validation and test set, and ``evaluate``
(and prediction) call it for sets a user brings, with the :class:`InputSpec` of the
protocol the run was trained on, so both see exactly the same pixels.

LeNet++ input is ``uint8 (N, 1, 28, 28)``, white glyph on black for every dataset
(MNIST's convention; the model side does ``x.float() / 255``). ResNet input is
``uint8 (N, 3, 32, 32)`` RGB.

The authors' data preparation had three bugs we deliberately do not copy:
CIFAR images were reshaped with ``order='F'`` (every image transposed), converted
with ``COLOR_BGR2GRAY`` on RGB data (R and B weights swapped), and the foreground
polarity differed between sets (MNIST, letters and notMNIST inverted, CIFAR and
Devanagari not). Here grey is ITU-R BT.601 luma on RGB exactly as Pillow's ``'L'``
mode, images stay upright, and all glyph sets share one polarity.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np

from agnostophobia.errors import DataError

# What a set of images shows: DatasetInfo.kind of a registered dataset, InputSpec.kind of a protocol.
GLYPH, NATURAL = "glyph", "natural"
KINDS = (GLYPH, NATURAL)


@dataclass(frozen=True)
class InputSpec:
    """A model's input and the kind of images its protocol trains it on.

    ``channels`` 1 is grey (BT.601 luma), 3 is RGB; ``size`` is the square side.
    A model trained on glyphs (``kind`` "glyph") expects white glyphs on black.
    """

    channels: int
    size: int
    kind: str

    def __post_init__(self):
        if self.channels not in (1, 3) or self.size < 1 or self.kind not in KINDS:
            raise ValueError(f"bad input spec {self}")

    @property
    def shape(self) -> tuple:
        return (self.channels, self.size, self.size)


# Sec. 5: LeNet++ on 28x28 grey digits, ResNet-18 on 32x32 RGB CIFAR-10.
LENET_INPUT = InputSpec(1, 28, GLYPH)
RESNET_INPUT = InputSpec(3, 32, NATURAL)

StoredImages = Union[np.ndarray, Sequence[np.ndarray]]


def prepare_images(images: StoredImages, spec: InputSpec, *, name: str, kind: Optional[str] = None,
                   padding: int = 0) -> np.ndarray:
    """Stored images -> ``uint8 (N, *spec.shape)`` model input; the one preparation path.

    ``images`` is ``uint8 (N, H, W)`` grey or ``(N, H, W, 3)`` RGB, or a sequence of
    single ``(H, W)`` / ``(H, W, 3)`` images of mixed sizes (a folder), each of which is
    resized once, straight to the model's size. Grey input goes to RGB by repeating the
    channel, RGB input to grey by BT.601 luma (:func:`rgb_to_grey`); other sizes are
    resized with antialiasing, the shorter side to the model's size and then centre-cropped
    to a square (:func:`resize`; square images, as in every built-in dataset, are simply
    resized). ``padding``: the width of a blank frame
    the dataset declares around its glyph box (DHCD: 2, in ``DatasetSplit.meta``), cropped
    instead of resized when every image's frame is blank; it is never guessed.

    ``kind`` is what the images show (``DatasetInfo.kind``); ``None`` (a user's own set)
    means the kind the model was trained on. Glyph sets for a glyph model must be white on
    black (:func:`check_polarity`); natural images have no glyph polarity and are not
    checked. ``name`` names the set in error messages.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if isinstance(images, np.ndarray):
        out = _convert(_check_stored(images, name), spec, padding)
    else:
        out = _convert_each_size(images, spec, padding, name)
    if spec.kind == GLYPH and (kind or spec.kind) == GLYPH:
        check_polarity(out, name)
    return out


def prepare_image(image: np.ndarray, spec: InputSpec, *, name: str) -> np.ndarray:
    """One stored image, uint8 ``(H, W)`` grey or ``(H, W, 3)`` RGB -> ``uint8 spec.shape``:
    the conversion :func:`prepare_images` applies to each image (streaming decodes one image
    at a time, ``data.streaming``), so both paths give the same pixels. The glyph polarity
    check is a property of a set, not of one image (a glyph may fill its frame): whoever
    streams a set checks it once on a sample of the set (``file_protocols``)."""
    return _convert(_check_stored(image[None], name), spec, 0)[0]


def _check_stored(images: np.ndarray, name: str) -> np.ndarray:
    if images.dtype != np.uint8 or not (images.ndim == 3 or (images.ndim == 4 and images.shape[-1] == 3)):
        raise DataError(f"{name}: images must be uint8 (N, H, W) grey or (N, H, W, 3) RGB, "
                        f"got {images.dtype} {images.shape}")
    return images


def _convert_each_size(images: Sequence[np.ndarray], spec: InputSpec, padding: int, name: str) -> np.ndarray:
    """Images of mixed sizes: each group of one size is converted as a batch, in place."""
    out = np.empty((len(images), *spec.shape), np.uint8)
    groups: dict = {}
    for i, image in enumerate(images):
        groups.setdefault(np.shape(image), []).append(i)
    for idx in groups.values():
        out[idx] = _convert(_check_stored(np.stack([images[i] for i in idx]), name), spec, padding)
    return out


def _convert(images: np.ndarray, spec: InputSpec, padding: int) -> np.ndarray:
    if spec.channels == 1:
        grey = rgb_to_grey(images) if images.ndim == 4 else images
        if padding > 0 and grey.shape[1] - 2 * padding == spec.size == grey.shape[2] - 2 * padding \
                and not border_pixels(grey, padding).any():
            grey = crop_border(grey, padding)  # lossless, keeps the glyph scale
        return np.ascontiguousarray(resize(grey, spec.size)[:, None])
    rgb = images if images.ndim == 4 else np.repeat(images[..., None], 3, axis=-1)
    return to_chw(resize(rgb, spec.size))


def rgb_to_grey(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) RGB uint8 -> (N, H, W) uint8 luma, bit-identical to PIL ``convert('L')``.

    Pillow computes ``L = (19595 R + 38470 G + 7471 B + 2**15) >> 16`` (BT.601 weights
    0.299, 0.587, 0.114 in 16-bit fixed point); vectorised here.
    """
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 (N, H, W, 3) RGB images, got {images.dtype} {images.shape}")
    rgb = images.astype(np.uint32)
    luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return luma.astype(np.uint8)


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """Resize (N, H, W) grey or (N, H, W, 3) RGB uint8 images to ``size`` x ``size``:
    the shorter side to ``size``, then the centre ``size`` x ``size`` crop, so a non-square
    image keeps its aspect ratio instead of being squashed (torchvision's ``Resize(size)``
    followed by ``CenterCrop(size)``, same rounding). A square image is one plain resize.

    Pillow's bilinear filter widens its support by the scale factor when shrinking,
    i.e. it antialiases (unlike OpenCV's INTER_CUBIC on a 32->28 shrink, which samples).
    """
    from PIL import Image

    if images.shape[1:3] == (size, size):
        return images
    new_h, new_w = shorter_side_to(images.shape[1], images.shape[2], size)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    out = np.empty((images.shape[0], size, size, *images.shape[3:]), np.uint8)
    for i, img in enumerate(images):
        resized = np.asarray(Image.fromarray(img).resize((new_w, new_h), Image.Resampling.BILINEAR))
        out[i] = resized[top:top + size, left:left + size]
    return out


def shorter_side_to(height: int, width: int, size: int) -> tuple:
    """``(height, width)`` scaled so that the shorter side is ``size`` (the longer one
    truncated, as torchvision does)."""
    if height <= width:
        return size, int(size * width / height)
    return int(size * height / width), size


def crop_border(images: np.ndarray, width: int) -> np.ndarray:
    return np.ascontiguousarray(images[:, width:images.shape[1] - width, width:images.shape[2] - width])


def border_pixels(images: np.ndarray, width: int = 2) -> np.ndarray:
    """(N, K) pixels of the ``width``-pixel frame of each (N, H, W) image."""
    mask = np.ones(images.shape[1:3], bool)
    mask[width:-width, width:-width] = False
    return images[:, mask]


def border_mean(images: np.ndarray, width: int = 2) -> np.ndarray:
    """Per-image mean of the frame: about 0 for a white glyph on black."""
    return border_pixels(images, width).mean(axis=1)


def check_polarity(images: np.ndarray, name: str, limit: float = 128.0) -> float:
    """Raise unless most images have a dark frame (white glyph on black).

    The median, not the mean, is tested: notMNIST legitimately has ~23 % of glyphs
    that fill the frame. Returns the median frame mean.
    """
    grey = images[:, 0] if images.ndim == 4 and images.shape[1] == 1 else images
    median = float(np.median(border_mean(grey)))
    if median >= limit:
        raise DataError(f"{name}: looks like a black glyph on white (median border pixel {median:.0f}); "
                        f"LeNet++ inputs must be white on black: invert the prepared file (255 - x)")
    return median


def to_lenet(images: np.ndarray, padding: int = 0) -> np.ndarray:
    """Any stored images -> uint8 (N, 1, 28, 28) grey: :func:`prepare_images` for LeNet++
    without the polarity check, for callers that check (or need not check) themselves."""
    return _convert(_check_stored(images, "images"), LENET_INPUT, padding)


def to_chw(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) RGB -> uint8 (N, 3, H, W) for ResNet-style models."""
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected (N, H, W, 3) RGB images, got shape {images.shape}")
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))
