"""Model-input preprocessing: BT.601 luma on RGB, no transpose, antialiased resize, one polarity."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from agnostophobia.data import border_mean, check_polarity, rgb_to_grey, to_chw, to_lenet
from agnostophobia.errors import DataError


def test_luma_is_bit_identical_to_pil_L():
    x = np.random.default_rng(0).integers(0, 256, (200, 32, 32, 3), dtype=np.uint8)
    pil = np.stack([np.asarray(Image.fromarray(img).convert("L")) for img in x])
    assert np.array_equal(rgb_to_grey(x), pil)


def test_rgb_order_not_bgr():
    px = np.zeros((3, 1, 1, 3), np.uint8)
    px[0, ..., 0] = px[1, ..., 1] = px[2, ..., 2] = 255  # pure red, green, blue
    assert rgb_to_grey(px).ravel().tolist() == [76, 150, 29]  # 0.299, 0.587, 0.114 of 255


def test_no_transpose():
    img = np.zeros((1, 32, 32, 3), np.uint8)
    img[0, 2:8, 20:30] = 255  # a bar in the top-right corner
    out = to_lenet(img)[0, 0]
    assert out[:10, 14:].mean() > 50 and out[14:, :10].max() == 0


def test_resize_is_antialiased():
    checker = (np.indices((32, 32)).sum(0) % 2 * 255).astype(np.uint8)[None]
    out = to_lenet(checker)
    assert out.shape == (1, 1, 28, 28)
    assert 50 < out.min() and out.max() < 205  # point sampling would give only 0 and 255


def test_blank_padding_is_cropped_losslessly():
    glyph = np.random.default_rng(1).integers(0, 256, (4, 28, 28), dtype=np.uint8)
    padded = np.zeros((4, 32, 32), np.uint8)
    padded[:, 2:30, 2:30] = glyph
    assert np.array_equal(to_lenet(padded, padding=2)[:, 0], glyph)
    # a frame is cropped only where the dataset declares one (DHCD), never guessed from the pixels
    assert np.array_equal(to_lenet(padded)[:, 0], to_lenet(padded, padding=0)[:, 0])
    assert not np.array_equal(to_lenet(padded, padding=0)[:, 0], glyph)  # 0: always resize
    padded[:, 0, 0] = 9  # not blank after all: resized instead of cropped
    assert not np.array_equal(to_lenet(padded, padding=2)[:, 0], glyph)


def test_28x28_passes_through_and_shape():
    x = np.random.default_rng(2).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    out = to_lenet(x)
    assert out.dtype == np.uint8 and out.shape == (5, 1, 28, 28) and np.array_equal(out[:, 0], x)


def test_polarity_check():
    white_on_black = np.zeros((10, 28, 28), np.uint8)
    white_on_black[:, 10:18, 10:18] = 255
    assert check_polarity(white_on_black, "ok") == 0
    assert border_mean(255 - white_on_black).tolist() == [255.0] * 10
    with pytest.raises(DataError, match="black glyph on white"):
        check_polarity((255 - white_on_black)[:, None], "inverted")


def test_to_chw():
    x = np.random.default_rng(3).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    out = to_chw(x)
    assert out.shape == (2, 3, 32, 32) and np.array_equal(out[1, 2], x[1, :, :, 2])
