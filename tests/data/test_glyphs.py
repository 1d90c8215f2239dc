"""The synthetic glyph folders (agnostophobia.data.glyphs) and run_command, which the gallery's
examples use instead of each drawing its own images and wrapping the command line."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.cli import CommandFailed, run_command
from agnostophobia.data import GLYPH_SHAPES, build_protocol, check_file_protocol, draw_glyph, make_glyph_folders
from agnostophobia.errors import AgnostophobiaError


@pytest.mark.parametrize("shape", sorted(GLYPH_SHAPES))
def test_a_glyph_is_a_28x28_uint8_image_the_same_for_the_same_seed(shape):
    image = draw_glyph(shape, np.random.default_rng(3))
    assert image.shape == (28, 28) and image.dtype == np.uint8
    assert np.array_equal(image, draw_glyph(shape, np.random.default_rng(3)))
    assert (image >= 255).sum() >= 10, "the glyph's own pixels are white"
    assert np.median(image) < 40, "the background stays dark"


def test_every_glyph_differs_from_every_other_on_average():
    mean = {shape: np.mean([draw_glyph(shape, np.random.default_rng(i)) for i in range(20)], axis=0)
            for shape in GLYPH_SHAPES}
    for a in GLYPH_SHAPES:
        for b in GLYPH_SHAPES:
            if a < b:
                assert np.abs(mean[a] - mean[b]).mean() > 5, (a, b)


def test_glyph_folders_are_a_folder_protocol_with_unknowns_in_test_only(tmp_path):
    protocol = make_glyph_folders(tmp_path / "glyphs", known=["hbar", "vbar", "box"], negative=["diag"],
                                  unknown=["dots", "cross"], per_split={"train": 8, "val": 4, "test": 5}, seed=1)
    root = tmp_path / "glyphs"
    counts = {(split, c.name): len(list(c.glob("*.png"))) for split in ("train", "val", "test")
              for c in (root / split).iterdir()}
    assert counts[("train", "hbar")] == 8 and counts[("val", "diag")] == 4 and counts[("test", "cross")] == 5
    assert ("train", "dots") not in counts and ("val", "cross") not in counts
    assert check_file_protocol(protocol) == []
    built = build_protocol(protocol)
    assert built.num_classes == 3 and list(built.class_names) == ["box", "hbar", "vbar"]  # folders sort their names
    assert len(built.test_known.labels) == 15 and (built.train.labels < 0).sum() == 8
    assert {name: len(split.labels) for name, split in built.test_unknowns.items()} == {"negatives": 5, "unknowns": 10}


def test_the_same_seed_writes_the_same_images(tmp_path):
    for name in ("a", "b"):
        make_glyph_folders(tmp_path / name, per_split={"train": 2}, seed=5)
    first = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.png"))
    assert first and first == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.png"))
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in first)


@pytest.mark.parametrize("kwargs, names", [
    ({"known": ["hbar", "star"]}, "'star' is not a glyph"),
    ({"known": ["hbar", "vbar"], "negative": ["hbar"]}, "hbar is listed twice"),
    ({"known": ["hbar"]}, "two known classes"),
    ({"known": "hbar"}, "not the string 'hbar'"),
    ({"per_split": {"train": -1}}, "per_split['train']"),
    ({"per_split": {"training": 3}}, "'training' is not a split"),
])
def test_a_bad_layout_is_refused_naming_what_is_wrong_and_writes_nothing(tmp_path, kwargs, names):
    with pytest.raises(AgnostophobiaError, match="^.*" + __import__("re").escape(names)):
        make_glyph_folders(tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_a_folder_holding_files_is_never_written_into(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(AgnostophobiaError, match="not an empty folder"):
        make_glyph_folders(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
    with pytest.raises(AgnostophobiaError, match="drawing.*not a glyph"):
        draw_glyph("drawing", np.random.default_rng(0))


def test_run_command_runs_a_command_and_raises_naming_it_when_it_fails(tmp_path, capsys):
    run_command("--version")
    assert capsys.readouterr().out.startswith("agnostophobia ")
    with pytest.raises(CommandFailed, match="exit status 2"):
        run_command("train", "--no-such-flag")
    with pytest.raises(CommandFailed, match=r"agnostophobia evaluate .*missing failed with exit status 1"):
        run_command("evaluate", tmp_path / "missing")
    assert "agnostophobia: error:" in capsys.readouterr().err
