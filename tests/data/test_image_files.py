"""Image files are decoded by their real bit depth (issue 22, item 2): one rule per Pillow mode
(:func:`agnostophobia.data.formats.decode_image`), each checked against the same image saved
in 8 bits; what cannot be interpreted is refused in one line naming the file. The rule reaches
every reader: ``predict`` (and ``evaluate --unknowns``, which reads inputs the same way) and
protocols from files, in memory and streamed.
"""
from __future__ import annotations

import io
import json
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from agnostophobia.cli import main
from agnostophobia.data.file_protocols import build_file_protocol
from agnostophobia.data.formats import decode_image
from agnostophobia.data.inputs import read_images
from agnostophobia.errors import DataError

RNG = np.random.default_rng(22)
GREY = RNG.integers(0, 256, (6, 7), dtype=np.uint8)
RGB = RNG.integers(0, 256, (6, 7, 3), dtype=np.uint8)


def saved(img: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def png16(values: np.ndarray, colour_type: int) -> bytes:
    """A 16-bit PNG written by hand (Pillow writes 16 bits for grey only): colour type
    0 grey, 2 RGB, 4 grey + alpha, 6 RGBA; ``values`` (H, W[, channels]) in 0..65535."""
    h, w = values.shape[:2]
    rows = b"".join(b"\x00" + values[r].astype(">u2").tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 16, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def on_black(colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The stated rule, in floating point: round(c * a / 255)."""
    weight = alpha.astype(np.float64)
    return np.round(colour * (weight[..., None] if colour.ndim == 3 else weight) / 255).astype(np.uint8)


# ------------------------------------------------------------------ one rule per mode
@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_16_bit_grey_maps_0_to_65535_onto_0_to_255(fmt):
    data = saved(Image.fromarray(GREY.astype(np.uint16) * 257), fmt)
    assert Image.open(io.BytesIO(data)).mode == "I;16"
    np.testing.assert_array_equal(decode_image(data, "x", "L"), GREY)
    np.testing.assert_array_equal(decode_image(data, "x", "RGB"), np.repeat(GREY[..., None], 3, -1))
    values = RNG.integers(0, 65536, (9, 11)).astype(np.uint16)  # not multiples of 257: rounded
    values[0, :4] = [128, 129, 385, 65535]                       # 0.498 -> 0, 0.502 -> 1, 1.498 -> 1
    got = decode_image(saved(Image.fromarray(values), fmt), "x")
    np.testing.assert_array_equal(got, np.round(values / 257).astype(np.uint8))
    assert got[0, :4].tolist() == [0, 1, 1, 255]


def test_16_bit_big_endian_and_32_bit_integer_tiffs_in_range():
    big = saved(Image.fromarray(GREY.astype(">u2") * 257), "TIFF")
    np.testing.assert_array_equal(decode_image(big, "x"), GREY)
    wide = saved(Image.fromarray(GREY.astype(np.int32) * 257), "TIFF")
    assert Image.open(io.BytesIO(wide)).mode == "I"
    np.testing.assert_array_equal(decode_image(wide, "x"), GREY)


def test_16_bit_colour_pngs_keep_the_high_byte_within_1_of_the_rule():
    values = GREY.astype(np.int64)[..., None] * 257 + np.array([0, 100, 200])  # not all multiples of 257
    colour = decode_image(png16(RGB.astype(np.int64) * 257, 2), "x", "RGB")
    np.testing.assert_array_equal(colour, RGB)  # x257 values: exact
    off = decode_image(png16(values, 2), "x", "RGB").astype(int)
    assert np.abs(off - np.round(values / 257)).max() <= 1
    grey_alpha = np.stack([GREY.astype(np.int64) * 257, np.full(GREY.shape, 65535)], -1)
    np.testing.assert_array_equal(decode_image(png16(grey_alpha, 4), "x"), GREY)  # opaque: as stored


def test_float_images_map_0_to_1_onto_0_to_255():
    data = saved(Image.fromarray(GREY.astype(np.float32) / 255), "TIFF")
    assert Image.open(io.BytesIO(data)).mode == "F"
    np.testing.assert_array_equal(decode_image(data, "x"), GREY)


def test_1_bit_images_are_0_and_255():
    data = saved(Image.fromarray(GREY > 127))
    assert Image.open(io.BytesIO(data)).mode == "1"
    np.testing.assert_array_equal(decode_image(data, "x"), np.where(GREY > 127, 255, 0))


def test_palette_images_convert_through_their_palette():
    palette = RNG.integers(0, 256, (16, 3), dtype=np.uint8)
    index = RNG.integers(0, 16, (6, 7), dtype=np.uint8)
    img = Image.fromarray(index, "P")
    img.putpalette(palette.tobytes())
    for fmt in ("PNG", "GIF", "BMP"):
        data = saved(img, fmt)
        assert Image.open(io.BytesIO(data)).mode == "P"
        np.testing.assert_array_equal(decode_image(data, "x", "RGB"), palette[index])
        np.testing.assert_array_equal(decode_image(data, "x", "L"), decode_image(saved(Image.fromarray(palette[index])),
                                                                                 "x", "L"))


def test_alpha_is_composited_on_black():
    alpha = RNG.integers(0, 256, (6, 7), dtype=np.uint8)
    alpha[0, :3] = [0, 255, 128]
    rgba = saved(Image.fromarray(np.dstack([RGB, alpha]), "RGBA"))
    np.testing.assert_array_equal(decode_image(rgba, "x", "RGB"), on_black(RGB, alpha))
    assert decode_image(rgba, "x", "RGB")[0, 0].tolist() == [0, 0, 0]           # transparent: black
    np.testing.assert_array_equal(decode_image(rgba, "x", "RGB")[0, 1], RGB[0, 1])  # opaque: as stored
    la = saved(Image.fromarray(np.dstack([GREY, alpha]), "LA"))
    np.testing.assert_array_equal(decode_image(la, "x", "L"), on_black(GREY, alpha))
    opaque = saved(Image.fromarray(np.dstack([RGB, np.full((6, 7), 255, np.uint8)]), "RGBA"))
    np.testing.assert_array_equal(decode_image(opaque, "x", "RGB"), RGB)  # as the same image saved in 8-bit RGB


def test_transparent_colours_and_palette_entries_are_composited_on_black():
    keyed = Image.fromarray(GREY)
    keyed.info["transparency"] = int(GREY[0, 0])
    np.testing.assert_array_equal(decode_image(saved(keyed, transparency=int(GREY[0, 0])), "x"),
                                  np.where(GREY == GREY[0, 0], 0, GREY))
    keyed16 = saved(Image.fromarray(GREY.astype(np.uint16) * 257), transparency=int(GREY[0, 0]) * 257)
    np.testing.assert_array_equal(decode_image(keyed16, "x"), np.where(GREY == GREY[0, 0], 0, GREY))
    palette = np.array([[255, 255, 255], [200, 100, 50], [0, 0, 0]], np.uint8)
    index = RNG.integers(0, 3, (6, 7), dtype=np.uint8)
    img = Image.fromarray(index, "P")
    img.putpalette(palette.tobytes())
    data = saved(img, transparency=bytes([255, 64, 255]))  # entry 1 is a quarter opaque
    alpha = np.array([255, 64, 255], np.uint8)[index]
    np.testing.assert_array_equal(decode_image(data, "x", "RGB"), on_black(palette[index], alpha))


def test_cmyk_and_ycbcr_convert_to_rgb():
    cmyk = saved(Image.fromarray(RGB).convert("CMYK"), "TIFF")
    assert Image.open(io.BytesIO(cmyk)).mode == "CMYK"
    np.testing.assert_array_equal(decode_image(cmyk, "x", "RGB"), RGB)  # Pillow's formula, K = 0: exact
    ycbcr = saved(Image.fromarray(np.repeat(GREY[..., None], 3, -1)).convert("YCbCr"), "TIFF")
    assert Image.open(io.BytesIO(ycbcr)).mode == "YCbCr"
    assert np.abs(decode_image(ycbcr, "x", "L").astype(int) - GREY).max() <= 1


def test_grey_and_rgb_8_bit_are_read_as_stored():
    np.testing.assert_array_equal(decode_image(saved(Image.fromarray(GREY)), "x", "L"), GREY)
    np.testing.assert_array_equal(decode_image(saved(Image.fromarray(RGB)), "x", "RGB"), RGB)


# ------------------------------------------------------------------ refusals
def refusals():
    lab = saved(Image.new("LAB", (4, 4), (50, 128, 128)), "TIFF")
    frames = [Image.fromarray(GREY).convert("P"), Image.fromarray(255 - GREY).convert("P")]
    animated = io.BytesIO()
    frames[0].save(animated, format="GIF", save_all=True, append_images=frames[1:])
    return [
        ("above_1.tif", saved(Image.fromarray(GREY.astype(np.float32)), "TIFF"), "float pixels must lie in [0, 1]"),
        ("nan.tif", saved(Image.fromarray(np.full((4, 4), np.nan, np.float32)), "TIFF"), "float pixels must lie in"),
        ("negative.tif", saved(Image.fromarray(np.full((4, 4), -0.5, np.float32)), "TIFF"), "float pixels must lie in"),
        ("wide.tif", saved(Image.fromarray(np.full((4, 4), 70000, np.int32)), "TIFF"), "outside 0..65535"),
        ("signed.tif", saved(Image.fromarray(np.full((4, 4), -1, np.int32)), "TIFF"), "outside 0..65535"),
        ("lab.tif", lab, "image mode 'LAB' is not supported"),
        ("animated.gif", animated.getvalue(), "has 2 frames"),
        ("empty.png", b"", "cannot decode image"),
        ("truncated.png", saved(Image.fromarray(GREY))[:60], "cannot decode image"),
    ]


@pytest.mark.parametrize("name, data, what", refusals(), ids=[r[0] for r in refusals()])
def test_what_cannot_be_interpreted_is_refused_in_one_line_naming_the_file(tmp_path, name, data, what):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError) as error:
        read_images(str(path))
    assert str(error.value).startswith(f"{path}: ") and what in str(error.value)
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------ every reader
def test_a_folder_protocol_of_16_bit_pngs_builds_as_its_8_bit_original(tmp_path):
    """The check pass, the in-memory build and the streamed one all decode through the rule."""
    images = {}
    for depth, scale, dtype in ((8, 1, np.uint8), (16, 257, np.uint16)):
        root = tmp_path / f"bits{depth}"
        for s, split in enumerate(("train", "val", "test")):
            for c, cls in enumerate(("a", "b", "neg")):
                folder = root / split / cls
                folder.mkdir(parents=True)
                for i in range(3):
                    glyph = np.zeros((12, 12), np.uint16)
                    glyph[2 + c * 3:4 + c * 3, 2:10] = 40 + 70 * i + 5 * c
                    glyph[2:10, 6] = 255
                    glyph[11, s] = 255  # one image in one split only (the protocol refuses leaked copies)
                    Image.fromarray((glyph * scale).astype(dtype)).save(folder / f"{i}.png")
        mapping = {"type": "folders", "root": str(root), "known": ["a", "b"], "negative": ["neg"],
                   "image_size": 12, "channels": 1, "kind": "glyph"}
        memory = build_file_protocol(mapping, data_loading="memory")
        streamed = build_file_protocol(mapping, data_loading="stream")
        images[depth] = [np.asarray(s.images) for s in (memory.train, memory.val, memory.test_known,
                                                        streamed.train, streamed.test_known)]
    for eight, sixteen in zip(images[8], images[16]):
        np.testing.assert_array_equal(sixteen, eight)
    assert images[8][0].max() == 255 and len(np.unique(images[8][0])) > 3  # grey levels, not just 0/255


def test_predict_labels_16_bit_pngs_as_their_8_bit_originals(calibrated, real_data_dir, tmp_path):
    """Issue 22: 16-bit grey PNGs (values x257) were clipped to 0/255 and changed labels silently."""
    digits = np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:60]
    letters = np.load(real_data_dir / "notmnist" / "notmnist.npz")["x_test"][:20]
    rows = {}
    for depth, scale, dtype in ((8, 1, np.uint8), (16, 257, np.uint16)):
        folder = tmp_path / f"bits{depth}"
        folder.mkdir()
        for i, image in enumerate(np.concatenate([digits, letters])):
            Image.fromarray((image.astype(np.uint32) * scale).astype(dtype)).save(folder / f"{i:03d}.png")
        out = tmp_path / f"bits{depth}.json"
        assert main(["predict", str(calibrated), str(folder), "--out", str(out)]) == 0
        rows[depth] = json.loads(out.read_text())
    assert len(rows[16]) == 80
    assert [(r["label"], r["score"]) for r in rows[16]] == [(r["label"], r["score"]) for r in rows[8]]


# ------------------------------------------------------------------ EXIF orientation (issue 31, item 7)
# What each orientation tag means, from the EXIF specification (where the stored 0th row and 0th
# column are shown): the display operation on the stored pixels, written out here independently
# of Pillow. An 8x8-block pattern, 16 x 24 (not square), so that JPEG keeps it and no flip or
# rotation of it equals another.
UPRIGHT = np.kron(np.array([[0, 40, 80], [120, 160, 240]], np.uint8), np.ones((8, 8), np.uint8))
SHOWN = {1: lambda s: s, 2: lambda s: s[:, ::-1], 3: lambda s: s[::-1, ::-1], 4: lambda s: s[::-1],
         5: lambda s: s.swapaxes(0, 1), 6: lambda s: np.rot90(s, -1), 7: lambda s: s[::-1, ::-1].swapaxes(0, 1),
         8: lambda s: np.rot90(s, 1)}
STORED_AS = {6: 8, 8: 6}  # the stored pixels of tag k: the inverse operation applied to the upright image


def with_orientation(upright: np.ndarray, orientation: int, fmt: str) -> bytes:
    stored = np.ascontiguousarray(SHOWN[STORED_AS.get(orientation, orientation)](upright))
    assert np.array_equal(SHOWN[orientation](stored), upright)
    exif = Image.Exif()
    exif[0x0112] = orientation
    options = {"JPEG": {"quality": 100, "subsampling": 0}, "WEBP": {"lossless": True}}.get(fmt, {})
    return saved(Image.fromarray(stored), fmt, exif=exif, **options)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF"])
def test_exif_orientation_is_applied_as_viewers_show_the_image(fmt, orientation):
    data = with_orientation(UPRIGHT, orientation, fmt)
    with Image.open(io.BytesIO(data)) as img:  # the tag was written where this format keeps it
        assert img.getexif().get(0x0112) == orientation
    for mode in ("L", "RGB"):
        decoded = decode_image(data, f"photo.{fmt.lower()}", mode)
        grey = decoded if mode == "L" else decoded[..., 0]
        assert grey.shape == UPRIGHT.shape
        assert np.abs(grey.astype(int) - UPRIGHT).max() <= (2 if fmt == "JPEG" else 0)


def test_a_folder_of_tagged_photos_is_read_upright(tmp_path):
    """The path of `evaluate --unknowns FOLDER` and `predict`: every file decoded upright."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for orientation in range(1, 9):
        (folder / f"{orientation}.jpg").write_bytes(with_orientation(UPRIGHT, orientation, "JPEG"))
    images = read_images(folder, "photos").images
    assert len(images) == 8
    for image in images:
        assert np.abs(image[..., 0].astype(int) - UPRIGHT).max() <= 2


def test_an_unreadable_exif_block_leaves_the_image_as_stored():
    data = saved(Image.fromarray(UPRIGHT), "PNG", exif=b"Exif\x00\x00" + b"\xff" * 10)
    assert np.array_equal(decode_image(data, "odd.png"), UPRIGHT)
