"""Turning stored images into each model's input, keeping uint8 to save memory.

:func:`prepare_images` is the one path from stored images to a model's input: the
protocols call it for every training, validation and test set, and ``evaluate``
(and prediction) call it for sets a user brings, with the :class:`InputSpec` of the
protocol the run was trained on, so both see exactly the same pixels.

LeNet++ input is ``uint8 (N, 1, 28, 28)``, white glyph on black for every dataset
(MNIST's convention; the model side does ``x.float() / 255``). ResNet input is
``uint8 (N, 3, 32, 32)`` RGB.

Two preparations exist, chosen by ``InputSpec.preprocessing`` (config key ``preprocessing``):

* ``ours`` (default): grey is ITU-R BT.601 luma on RGB exactly as Pillow's ``'L'`` mode,
  images stay upright, resizing is bilinear and antialiased, and every glyph set is white on
  black, checked (:func:`check_polarity`).
* ``authors``: the preparation of the authors' ``MNIST/data_prep.py`` (Vastlab Keras code),
  on the same loaders, for the LeNet++ protocol: CIFAR images transposed (their reshape with
  ``order='F'``) and made grey as if RGB were BGR (their ``COLOR_BGR2GRAY`` on RGB data);
  MNIST, letters and notMNIST inverted (255 - x) and Devanagari read as published, which
  (NHCD is published black on white) leaves every glyph set black on white; bicubic resizing
  (their ``INTER_CUBIC``); no polarity check. :func:`recipe_for` says what applies to
  which set, :data:`AUTHORS_NOTES` lists it for reports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence, Union

import numpy as np

from agnostophobia._reading import check_declared_bytes
from agnostophobia.errors import DataError

# What a set of images shows: DatasetInfo.kind of a registered dataset, InputSpec.kind of a protocol.
GLYPH, NATURAL = "glyph", "natural"
KINDS = (GLYPH, NATURAL)

# How a run prepares its images: the config key ``preprocessing``.
OURS, AUTHORS = "ours", "authors"
PREPROCESSINGS = (OURS, AUTHORS)


@dataclass(frozen=True)
class InputSpec:
    """A model's input, the kind of images its protocol trains it on, and how they are prepared.

    ``channels`` 1 is grey (BT.601 luma), 3 is RGB; ``size`` is the square side.
    A model trained on glyphs (``kind`` "glyph") expects white glyphs on black under
    ``preprocessing`` ``ours``, black glyphs on white under ``authors`` (grey input only).
    """

    channels: int
    size: int
    kind: str
    preprocessing: str = OURS

    def __post_init__(self):
        if self.channels not in (1, 3) or self.size < 1 or self.kind not in KINDS \
                or self.preprocessing not in PREPROCESSINGS or (self.preprocessing == AUTHORS and self.channels != 1):
            raise ValueError(f"bad input spec {self}")

    @property
    def shape(self) -> tuple:
        return (self.channels, self.size, self.size)


# Sec. 5: LeNet++ on 28x28 grey digits, ResNet-18 on 32x32 RGB CIFAR-10.
LENET_INPUT = InputSpec(1, 28, GLYPH)
RESNET_INPUT = InputSpec(3, 32, NATURAL)

StoredImages = Union[np.ndarray, Sequence[np.ndarray]]


@dataclass(frozen=True)
class Recipe:
    """How one set of stored images (upright; glyphs white on black) becomes model input."""

    resample: str = "bilinear"   # the filter of every resize (PIL)
    crop_padding: bool = True    # a blank frame the dataset declares is cropped, not resized
    check_polarity: bool = True  # a glyph set for a glyph model must be white on black
    invert: bool = False         # 255 - x, the last step
    transpose: bool = False      # H and W swapped (the authors' CIFAR reshape with order='F')
    bgr: bool = False            # grey with the luma weights on reversed channels (their COLOR_BGR2GRAY on RGB)


OURS_RECIPE = Recipe()
# The authors' MNIST/data_prep.py. Glyph sets: read_images() and NOT_MNIST() invert MNIST, letters and
# notMNIST (published white on black); hindi_letters() reads NHCD as published, black on light paper,
# which our copies hold inverted. Either way each ends black on white: 255 - our stored image.
AUTHORS_GLYPHS = Recipe("bicubic", crop_padding=False, check_polarity=False, invert=True)
# Natural images: their CIFAR-10 (cifar_prep), transposed and made grey as if RGB were BGR.
AUTHORS_NATURAL = Recipe("bicubic", crop_padding=False, check_polarity=False, transpose=True, bgr=True)
# A user's own images for an `authors` run (the authors defined nothing for them): prepared as their
# known training set, MNIST, i.e. inverted, after the check that they follow our convention (white on
# black), so that one file serves runs of either preparation.
AUTHORS_USER = replace(AUTHORS_GLYPHS, check_polarity=True)

#: How the ``authors`` preparation differs from ``ours``, for a run's report (every quirk copied).
AUTHORS_NOTES = (
    "preprocessing `authors`: the data preparation of the authors' MNIST/data_prep.py (Vastlab Keras code) on "
    "our loaders, instead of our corrected one; numbers are not comparable with runs prepared `ours`",
    "polarity: MNIST, letters and notMNIST inverted as the authors inverted them (255 - x: black glyph on white); "
    "Devanagari read as the authors read NHCD, as published, black glyph on light paper, which is 255 - our "
    "white-on-black copy (DHCD, where it substitutes NHCD, is inverted likewise); so every glyph set is black on "
    "white, as in the authors' code",
    "polarity check skipped: the authors checked no set, so a wrongly inverted set is not refused "
    "(`ours` refuses a glyph set whose median border pixel is 128 or more)",
    "natural images (CIFAR-10): each image transposed, H and W swapped (the authors' reshape with order='F'), and "
    "made grey with the BT.601 weights on reversed channels, 0.299 B + 0.587 G + 0.114 R (their COLOR_BGR2GRAY on "
    "RGB data; Pillow's fixed-point rounding)",
    "resizing: bicubic, the whole image straight to 28x28 with no blank-frame crop (the authors' cv2 INTER_CUBIC; "
    "here PIL BICUBIC, which antialiases when it shrinks, cv2 does not); MNIST, letters, notMNIST and NHCD are "
    "stored 28x28, so of the lenet++ sets only CIFAR-10 (32x32) is resized",
    "images a user brings (evaluate --unknowns, predict, OpenSetClassifier): the authors defined nothing for them; "
    "they are prepared as the authors prepared MNIST: expected white on black (checked), then inverted; "
    "registered natural sets as the authors prepared CIFAR-10",
)

#: What the input of an exported model must look like, by preparation (``export``'s metadata).
INPUT_CONVENTIONS = {
    OURS: "as for training: grey = BT.601 luma, white glyph on black for glyph models, resized to the model's "
          "size, pixel / 255",
    AUTHORS: "as for training with the authors' preparation: grey = BT.601 luma, resized bicubic to the model's "
             "size, black glyph on white (255 - a white-on-black image), pixel / 255",
}


def recipe_for(spec: InputSpec, kind: Optional[str]) -> Recipe:
    """The recipe of a set of ``kind`` (a registered dataset's ``DatasetInfo.kind``; None: a
    user's own set) for a model of ``spec``: :data:`OURS_RECIPE` under ``ours``, else the
    authors' recipe for natural images, for glyphs, or for a user's own images."""
    if spec.preprocessing == OURS:
        return OURS_RECIPE
    if kind is None:
        return AUTHORS_USER
    return AUTHORS_NATURAL if kind == NATURAL else AUTHORS_GLYPHS


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

    That is ``spec.preprocessing`` ``ours``. Under ``authors`` the authors' recipe of the
    set's kind applies instead (:func:`recipe_for`): bicubic resizing, no frame crop, glyph
    sets inverted, natural images transposed and made grey as BGR, registered sets unchecked.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    recipe = recipe_for(spec, kind)
    # what the prepared set will take (count x channels x size x size, and the inversion's copy),
    # refused before a byte of it is allocated: a model of image_size 4096 asked for terabytes
    check_declared_bytes(len(images) * math.prod(spec.shape) * (2 if recipe.invert else 1),
                         f"{name}: {len(images):,} images prepared as {'x'.join(map(str, spec.shape))}")
    if isinstance(images, np.ndarray):
        out = _convert(_check_stored(images, name), spec, recipe, padding)
    else:
        out = _convert_each_size(images, spec, recipe, padding, name)
    if recipe.check_polarity and spec.kind == GLYPH and (kind or spec.kind) == GLYPH:
        check_polarity(out, name)
    return _finish(out, recipe)


def check_prepared_polarity(model_input: np.ndarray, spec: InputSpec, *, name: str) -> None:
    """The polarity check :func:`prepare_images` makes on a user's set, for a set given already
    prepared, uint8 ``(N, *spec.shape)`` (a float input in [0, 1] as ``round(255 x)``): the
    same rule, so that no accepted layout of the same images skips it. Under ``authors`` the
    prepared images are inverted, so the check looks at ``255 - x``."""
    recipe = recipe_for(spec, None)
    if recipe.check_polarity and spec.kind == GLYPH and len(model_input):
        check_polarity(255 - model_input if recipe.invert else model_input, name)


def prepare_image(image: np.ndarray, spec: InputSpec, *, name: str) -> np.ndarray:
    """One stored image, uint8 ``(H, W)`` grey or ``(H, W, 3)`` RGB -> ``uint8 spec.shape``:
    the conversion :func:`prepare_images` applies to each image (streaming decodes one image
    at a time, ``data.streaming``), so both paths give the same pixels. The glyph polarity
    check is a property of a set, not of one image (a glyph may fill its frame): whoever
    streams a set checks it once on a sample of the set (``file_protocols``)."""
    recipe = recipe_for(spec, None)
    return _finish(_convert(_check_stored(image[None], name), spec, recipe, 0), recipe)[0]


def _check_stored(images: np.ndarray, name: str) -> np.ndarray:
    if images.dtype != np.uint8 or not (images.ndim == 3 or (images.ndim == 4 and images.shape[-1] == 3)):
        raise DataError(f"{name}: images must be uint8 (N, H, W) grey or (N, H, W, 3) RGB, "
                        f"got {images.dtype} {images.shape}")
    return images


def _convert_each_size(images: Sequence[np.ndarray], spec: InputSpec, recipe: Recipe, padding: int,
                       name: str) -> np.ndarray:
    """Images of mixed sizes: each group of one size is converted as a batch, in place."""
    out = np.empty((len(images), *spec.shape), np.uint8)
    groups: dict = {}
    for i, image in enumerate(images):
        groups.setdefault(np.shape(image), []).append(i)
    for idx in groups.values():
        out[idx] = _convert(_check_stored(np.stack([images[i] for i in idx]), name), spec, recipe, padding)
    return out


def _convert(images: np.ndarray, spec: InputSpec, recipe: Recipe, padding: int) -> np.ndarray:
    """Grey or RGB, resized to the model's size; everything of the recipe but the inversion."""
    if recipe.transpose:
        images = np.ascontiguousarray(images.swapaxes(1, 2))
    if spec.channels == 1:
        grey = rgb_to_grey(images[..., ::-1] if recipe.bgr else images) if images.ndim == 4 else images
        if recipe.crop_padding and _blank_frame_fits(grey, padding, spec.size):
            grey = crop_border(grey, padding)  # lossless, keeps the glyph scale
        return np.ascontiguousarray(resize(grey, spec.size, recipe.resample)[:, None])
    rgb = images if images.ndim == 4 else np.repeat(images[..., None], 3, axis=-1)
    return to_chw(resize(rgb, spec.size, recipe.resample))


def _blank_frame_fits(grey: np.ndarray, padding: int, size: int) -> bool:
    """Whether cropping the declared ``padding`` frame leaves the model's size and drops only 0s."""
    return padding > 0 and grey.shape[1] - 2 * padding == size == grey.shape[2] - 2 * padding \
        and not border_pixels(grey, padding).any()


def _finish(images: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The recipe's last step, after the polarity check: the inversion (a new array: ``images``
    may be a view of the caller's stored images)."""
    return 255 - images if recipe.invert else images


def rgb_to_grey(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) RGB uint8 -> (N, H, W) uint8 luma, bit-identical to PIL ``convert('L')``.

    Pillow computes ``L = (19595 R + 38470 G + 7471 B + 2**15) >> 16`` (BT.601 weights
    0.299, 0.587, 0.114 in 16-bit fixed point); vectorised here.

    Args:
        images: (N, H, W, 3) uint8 RGB images.

    Returns:
        An (N, H, W) uint8 NumPy array.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import rgb_to_grey
        >>> rgb = np.zeros((1, 2, 2, 3), dtype=np.uint8)
        >>> rgb[..., 0] = 255  # pure red
        >>> rgb_to_grey(rgb)
        array([[[76, 76],
                [76, 76]]], dtype=uint8)
    """
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 (N, H, W, 3) RGB images, got {images.dtype} {images.shape}")
    out = np.empty(images.shape[:3], np.uint8)
    # a few images at a time: the 32-bit arithmetic of a whole 1.6 GB set took 4 times its size, twice over
    step = max(1, GREY_CHUNK_PIXELS // max(1, images.shape[1] * images.shape[2]))
    for start in range(0, len(images), step):
        rgb = images[start:start + step].astype(np.uint32)
        out[start:start + step] = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return out


#: The pixels :func:`rgb_to_grey` converts at a time (its 32-bit working copy: 4 x 3 bytes each).
GREY_CHUNK_PIXELS = 1 << 20

RESAMPLE_FILTERS = ("bilinear", "bicubic")


def resize(images: np.ndarray, size: int, resample: str = "bilinear") -> np.ndarray:
    """Resize (N, H, W) grey or (N, H, W, 3) RGB uint8 images to ``size`` x ``size``:
    the shorter side to ``size``, then the centre ``size`` x ``size`` crop, so a non-square
    image keeps its aspect ratio instead of being squashed (torchvision's ``Resize(size)``
    followed by ``CenterCrop(size)``, same rounding). A square image is one plain resize.

    ``resample``: Pillow's ``bilinear`` (ours) or ``bicubic`` (the authors' preparation).
    Both widen their support by the scale factor when shrinking, i.e. they antialias
    (unlike OpenCV's INTER_CUBIC on a 32->28 shrink, which samples).
    """
    from PIL import Image

    if resample not in RESAMPLE_FILTERS:
        raise ValueError(f"resample must be one of {RESAMPLE_FILTERS}, got {resample!r}")
    if images.shape[1:3] == (size, size):
        return images
    pil_filter = Image.Resampling.BICUBIC if resample == "bicubic" else Image.Resampling.BILINEAR
    new_h, new_w = shorter_side_to(images.shape[1], images.shape[2], size)
    channels = images.shape[3] if images.ndim == 4 else 1
    # a 1 x 300,000 image resized to 32 would take 9.6 M x 32 pixels: refused before Pillow allocates them
    check_declared_bytes(new_h * new_w * channels, f"an image of {images.shape[1]}x{images.shape[2]} pixels "
                                                   f"resized to a shorter side of {size} ({new_h}x{new_w})")
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    out = np.empty((images.shape[0], size, size, *images.shape[3:]), np.uint8)
    for i, img in enumerate(images):
        resized = np.asarray(Image.fromarray(img).resize((new_w, new_h), pil_filter))
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
    """Per-image mean of the frame: about 0 for a white glyph on black.

    Args:
        images: (N, H, W) uint8 grey images.
        width: the frame's width in pixels.

    Returns:
        An (N,) float64 NumPy array, each image's frame mean in [0, 255].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import draw_glyph
        >>> rng = np.random.default_rng(0)
        >>> images = np.stack([draw_glyph("box", rng), draw_glyph("hbar", rng)])  # (2, 28, 28) uint8, white on black
        >>> from agnostophobia.data import border_mean
        >>> border_mean(images).round(1)  # a dark frame, noise only (white is 255)
        array([19.8, 20.4])
    """
    return border_pixels(images, width).mean(axis=1)


def check_polarity(images: np.ndarray, name: str, limit: float = 128.0) -> float:
    """Raise unless most images have a dark frame (white glyph on black).

    The median, not the mean, is tested: notMNIST legitimately has ~23 % of glyphs
    that fill the frame.

    Args:
        images: (N, H, W) or (N, 1, H, W) uint8 grey images.
        name: what they are, in the message.
        limit: the largest median frame mean that passes (0..255).

    Returns:
        The median frame mean, a float in [0, 255].

    Raises:
        ~agnostophobia.errors.DataError: the frame is bright: black glyphs on white.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import draw_glyph
        >>> rng = np.random.default_rng(0)
        >>> images = np.stack([draw_glyph("box", rng), draw_glyph("hbar", rng)])  # (2, 28, 28) uint8, white on black
        >>> from agnostophobia.data import check_polarity
        >>> check_polarity(images, "glyphs") < 128  # the median border pixel: dark, so no error
        True
        >>> from agnostophobia.errors import DataError
        >>> try:
        ...     check_polarity(255 - images, "inverted")
        ... except DataError as error:
        ...     print(str(error).split(";")[0])
        ...
        inverted: looks like a black glyph on white (median border pixel 235)
    """
    grey = images[:, 0] if images.ndim == 4 and images.shape[1] == 1 else images
    median = float(np.median(border_mean(grey)))
    if median >= limit:
        raise DataError(f"{name}: looks like a black glyph on white (median border pixel {median:.0f}); "
                        f"LeNet++ inputs must be white on black: invert the prepared file (255 - x)")
    return median


def to_lenet(images: np.ndarray, padding: int = 0) -> np.ndarray:
    """Any stored images -> uint8 (N, 1, 28, 28) grey: ``prepare_images`` for LeNet++
    without the polarity check, for callers that check (or need not check) themselves.

    Args:
        images: uint8 (N, H, W) grey or (N, H, W, 3) RGB, any size.
        padding: the width of a blank frame the stored images carry (Devanagari: 2); it is
            cropped where that leaves 28 x 28 and drops only zeros.

    Returns:
        An (N, 1, 28, 28) uint8 NumPy array.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import draw_glyph
        >>> rng = np.random.default_rng(0)
        >>> images = np.stack([draw_glyph("box", rng), draw_glyph("hbar", rng)])  # (2, 28, 28) uint8, white on black
        >>> from agnostophobia.data import to_lenet
        >>> to_lenet(images).shape, to_lenet(images).dtype
        ((2, 1, 28, 28), dtype('uint8'))
    """
    return _convert(_check_stored(images, "images"), LENET_INPUT, OURS_RECIPE, padding)


def to_chw(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) RGB -> uint8 (N, 3, H, W) for ResNet-style models.

    Args:
        images: (N, H, W, 3) uint8 RGB images.

    Returns:
        An (N, 3, H, W) uint8 NumPy array.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import to_chw
        >>> to_chw(np.zeros((5, 32, 32, 3), dtype=np.uint8)).shape
        (5, 3, 32, 32)
    """
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected (N, H, W, 3) RGB images, got shape {images.shape}")
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))
