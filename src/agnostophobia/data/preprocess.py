"""Turning stored images into each model's input, keeping uint8 to save memory.

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

from typing import Optional

import numpy as np

from agnostophobia.errors import DataError


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
    """Resize (N, H, W) grey uint8 images to ``size`` x ``size``.

    Pillow's bilinear filter widens its support by the scale factor when shrinking,
    i.e. it antialiases (unlike OpenCV's INTER_CUBIC on a 32->28 shrink, which samples).
    """
    from PIL import Image

    if images.shape[1:] == (size, size):
        return images
    out = np.empty((images.shape[0], size, size), np.uint8)
    for i, img in enumerate(images):
        out[i] = np.asarray(Image.fromarray(img).resize((size, size), Image.Resampling.BILINEAR))
    return out


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


def to_lenet(images: np.ndarray, padding: Optional[int] = None) -> np.ndarray:
    """Any stored images -> uint8 (N, 1, 28, 28) grey.

    RGB goes to BT.601 luma first. A blank ``padding`` frame around a 28x28 glyph box
    (DHCD: 32x32 = 28x28 plus 2 blank pixels each side) is cropped, which is lossless
    and keeps the glyph scale; ``padding=None`` crops such a frame whenever every image
    of a grey batch has one, ``0`` never crops. Anything else that is not 28x28 is
    resized with antialiasing.
    """
    if images.ndim == 4 and images.shape[-1] == 3:
        images = rgb_to_grey(images)
    elif padding is None:
        padding = (images.shape[1] - 28) // 2 if images.ndim == 3 else 0
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 (N, H, W) or (N, H, W, 3) images, got {images.dtype} {images.shape}")
    if padding and padding > 0 and images.shape[1] - 2 * padding == 28 == images.shape[2] - 2 * padding \
            and not border_pixels(images, padding).any():
        images = crop_border(images, padding)
    images = resize(images, 28)
    return np.ascontiguousarray(images[:, None])


def to_chw(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) RGB -> uint8 (N, 3, H, W) for ResNet-style models."""
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected (N, H, W, 3) RGB images, got shape {images.shape}")
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))
