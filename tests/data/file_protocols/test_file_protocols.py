"""Protocols from files (issue 11): a folder tree and openset-imagenet ``path,label`` CSV
files, the one check pass that lists every problem, the shorter-side resize with centre
crop, and, end to end on real MNIST images written by ``examples/make_folder_protocol.py``,
``train`` then ``evaluate`` of a folder protocol and of a CSV protocol.

The unit tests use small synthetic white-on-black glyphs (tests/conftest.py ``glyphs``).
"""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from torchvision.transforms.v2 import CenterCrop, Resize

from tests.conftest import glyphs, make_example, png_bytes
from reliability_table import proves
from agnostophobia.cli import main
from agnostophobia.data import build_protocol
from agnostophobia.data.file_protocols import (MAX_SHOWN, build_file_protocol, check_file_protocol,
                                               parse_file_protocol, resolve_paths)
from agnostophobia.data.file_protocols.spec import PATH_KEYS, PROTOCOL_KEYS, TYPE_KEY, TYPES
from agnostophobia.data.preprocess import LENET_INPUT, InputSpec, prepare_images
from agnostophobia.data.protocols import protocol_input
from agnostophobia.errors import ConfigError, DataError
from agnostophobia.training.config import load_experiment

RNG = np.random.default_rng(0)


_UNIQUE = itertools.count()


def image(path: Path, label: int = 0, size=(28, 28)) -> Path:
    """A white-on-black glyph PNG at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    glyph = glyphs(RNG, np.array([label]), size=max(size))[0][:size[0], :size[1]]
    glyph[-1, :2] = divmod(next(_UNIQUE), 256)  # every image its own: equal content in two splits is leakage
    path.write_bytes(png_bytes(glyph))
    return path


def tree(root: Path, layout: dict) -> Path:
    """``{split: {class: n images}}`` under ``root``."""
    for split, classes in layout.items():
        for cls, n in classes.items():
            for i in range(n):
                image(root / split / cls / f"{i}.png", i)
    return root


def folders(root: Path, **changes) -> dict:
    return {"type": "folders", "root": str(root), "known": ["dog", "ant", "cat"], "negative": ["bird"],
            "unknown": ["car"], "image_size": 28, "channels": 1, "kind": "glyph", **changes}


GOOD_TREE = {"train": {"ant": 3, "cat": 2, "dog": 4, "bird": 3}, "val": {"ant": 1, "cat": 1, "dog": 1, "bird": 1},
             "test": {"ant": 2, "cat": 2, "dog": 2, "bird": 3, "car": 4}}


def csv_protocol(tmp_path: Path, train: str, val: str, test: str, **changes) -> dict:
    for split, text in (("train", train), ("val", val), ("test", test)):
        (tmp_path / f"{split}.csv").write_text(text)
    return {"type": "csv", "root": str(tmp_path / "img"), "train": str(tmp_path / "train.csv"),
            "val": str(tmp_path / "val.csv"), "test": str(tmp_path / "test.csv"), "image_size": 28, "channels": 1,
            **changes}


def images(root: Path, names) -> None:
    for i, name in enumerate(names):
        image(root / name, i)


# ------------------------------------------------------------------ CSV
@pytest.mark.parametrize("header", ["", "path,label\n", "path, label, source\n"])
def test_csv_openset_imagenet_convention(tmp_path, header):
    """No header (openset-imagenet's files) or a recognised header line; spaces after the
    comma; -1 negatives with their source class in a third column, -2 unknowns (test only)."""
    images(tmp_path / "img", [f"{n}.png" for n in "abcdefghijkl"])
    protocol = build_protocol(csv_protocol(
        tmp_path,
        train=header + "a.png,0\nb.png, 1\nc.png,  2\nd.png,-1, cow\ne.png, -1, 7\n\n",
        val=header + "f.png,1\ng.png,-1,cow\n",
        test=header + "h.png,0\ni.png,2\nj.png,-1,7\nk.png,-2\nl.png,-2\n"))
    assert protocol.num_classes == 3 and protocol.class_names == ["0", "1", "2"]
    assert protocol.train.labels.tolist() == [0, 1, 2, -1, -1] and protocol.val.labels.tolist() == [1, -1]
    assert protocol.negative_class_names == ["7", "cow"]  # ids before names, each in order
    assert protocol.train.negative_class.tolist() == [-1, -1, -1, 1, 0]
    assert protocol.val.negative_class.tolist() == [-1, 1]
    assert sorted(protocol.test_unknowns) == ["negatives", "unknowns"]
    assert protocol.test_unknowns["negatives"].negative_class.tolist() == [0]
    assert protocol.test_unknowns["unknowns"].labels.tolist() == [-1, -1]
    assert protocol.test_unknowns["unknowns"].negative_class is None  # D_a: no source class
    assert protocol.test_known.labels.tolist() == [0, 2]
    assert protocol.train.images.shape == (5, 1, 28, 28) and protocol.input_shape == (1, 28, 28)
    # the pixels are the files' pixels, prepared by the one preparation path
    with Image.open(tmp_path / "img" / "b.png") as img:
        assert np.array_equal(protocol.train.images[1, 0], np.asarray(img))


def test_csv_class_names_file_and_no_source_column(tmp_path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png", "f.png"])
    (tmp_path / "names.txt").write_text("tench\ngoldfish\n")
    protocol = build_protocol(csv_protocol(tmp_path, "a.png,0\nb.png,1\nc.png,-1\n", "f.png,0\n",
                                           "d.png,1\ne.png,-1\n", class_names=str(tmp_path / "names.txt")))
    assert protocol.class_names == ["tench", "goldfish"] and protocol.negative_class_names == []
    assert protocol.train.negative_class is None and list(protocol.test_unknowns) == ["negatives"]


def test_csv_limits_are_stratified_and_val_fraction_is_refused(tmp_path):
    names = [f"{i}.png" for i in range(24)]
    images(tmp_path / "img", names)
    train = "".join(f"{n},{i % 2}\n" for i, n in enumerate(names[:20])) + "20.png,-1\n"
    mapping = csv_protocol(tmp_path, train, "21.png,0\n", "22.png,1\n23.png,-2\n")
    protocol = build_protocol(mapping, seed=3, max_known_train=6)
    known = protocol.train.labels[protocol.train.labels >= 0]
    assert np.bincount(known).tolist() == [3, 3] and (protocol.train.labels == -1).sum() == 1
    assert any("max_known_train" in note for note in protocol.notes)
    assert np.array_equal(build_protocol(mapping, seed=3, max_known_train=6).train.images, protocol.train.images)
    with pytest.raises(ConfigError, match="val_fraction does not apply"):
        build_protocol(mapping, val_fraction=0.1)
    # called directly, a misspelled or bad cap is refused as build_protocol refuses it, never ignored
    with pytest.raises(ConfigError, match="unknown protocol option 'max_known_trian'"):
        build_file_protocol(mapping, max_known_trian=6)
    with pytest.raises(ConfigError, match="max_val must be a positive integer"):
        build_file_protocol(mapping, max_val=0)


# ------------------------------------------------------------------ folders
def test_folder_tree(tmp_path):
    protocol = build_protocol(folders(tree(tmp_path / "tree", GOOD_TREE)))
    assert protocol.class_names == ["ant", "cat", "dog"]  # sorted folder names, whatever the list's order
    assert protocol.negative_class_names == ["bird"]
    assert np.bincount(protocol.train.labels[protocol.train.labels >= 0]).tolist() == [3, 2, 4]
    assert (protocol.train.labels == -1).sum() == 3 and (protocol.train.negative_class == 0).sum() == 3
    assert {k: len(v) for k, v in protocol.test_unknowns.items()} == {"negatives": 3, "unknowns": 4}
    assert len(protocol.test_known) == 6 and len(protocol.val) == 4
    assert any("ant, cat, dog" in note for note in protocol.notes)


def test_glyph_polarity_is_checked_only_for_glyph_protocols(tmp_path):
    root = tree(tmp_path / "tree", GOOD_TREE)
    for png in root.rglob("*.png"):  # black glyphs on white
        with Image.open(png) as img:
            inverted = 255 - np.asarray(img)
        png.write_bytes(png_bytes(inverted))
    assert len(build_protocol(folders(root, kind="natural")).train) == 12
    with pytest.raises(DataError, match="black glyph on white"):
        build_protocol(folders(root))


# ------------------------------------------------------------------ the check pass
def test_check_lists_every_problem_of_a_broken_tree(tmp_path):
    root = tree(tmp_path / "tree", {"train": {"ant": 2, "cat": 1, "bird": 2, "car": 1, "owl": 1},
                                    "val": {"ant": 1}, "test": {"ant": 1, "bird": 1}})
    (root / "train" / "empty").mkdir()
    noise = png_bytes(RNG.integers(0, 256, (28, 28), dtype=np.uint8))
    (root / "train" / "cat" / "0.png").write_bytes(noise[:len(noise) // 2])  # truncated
    (root / "train" / "ant" / "notes.png").write_text("not an image")
    problems = check_file_protocol(folders(root, known=["ant", "cat", "dog", "empty"], negative=["bird", "cat"]))
    text = "\n".join(problems)
    expected = ["class 'cat' is listed as both known and negative",
                f"{root / 'train' / 'car'}: unknown class in the train split",
                f"{root / 'train' / 'owl'}: class folder listed in none of known, negative, unknown",
                f"{root / 'train' / 'empty'}: empty class folder",
                f"{root / 'train' / 'dog'}: known class has no train images",
                f"{root / 'test' / 'car'}: unknown class has no test images",
                f"{root / 'train' / 'cat' / '0.png'}: cannot decode image",
                f"{root / 'train' / 'ant' / 'notes.png'}: cannot decode image"]
    for line in expected:
        assert line in text
    with pytest.raises(DataError) as err:
        build_protocol(folders(root, known=["ant", "cat", "dog", "empty"], negative=["bird", "cat"]))
    assert f"{len(problems)} problem(s)" in str(err.value) and all(line in str(err.value) for line in expected)


def test_check_lists_every_problem_of_broken_csv_files(tmp_path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png"])
    (tmp_path / "names.txt").write_text("x\ny\nz\n")
    train, val, test = (tmp_path / f"{s}.csv" for s in ("train", "val", "test"))
    problems = "\n".join(check_file_protocol(csv_protocol(
        tmp_path, "a.png,0\nb.png\nmissing.png,1\nbad.png,-2\na.png,-3\n", "a.png,five\nb.png,7\n",
        "c.png,0\nd.png,-1\n", class_names=str(tmp_path / "names.txt"))))
    for line in (f"{train}:2: malformed line", f"{train}:3: {tmp_path / 'img' / 'missing.png'}: missing image",
                 f"{train}:4: an unknown (-2) in the train split", f"{train}:5: label -3 out of range",
                 f"{val}:1: label 'five' is not an integer", f"{val}:2: label 7 out of range 0..2",
                 f"{train}: known class 2 ('z') has no training image"):
        assert line in problems
    assert f"{test}" not in problems  # a sound file is not named


def test_more_than_twenty_problems_are_counted(tmp_path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png"])
    train = "a.png,0\n" + "".join(f"gone{i}.png,0\n" for i in range(25))
    with pytest.raises(DataError) as err:
        build_protocol(csv_protocol(tmp_path, train, "c.png,0\n", "d.png,0\nb.png,-2\n"))
    lines = str(err.value).splitlines()
    assert "25 problem(s)" in lines[0] and len(lines) == 1 + MAX_SHOWN + 1
    assert lines[-1].strip() == f"... and {25 - MAX_SHOWN} more" and f"{MAX_SHOWN}. " in lines[-2]
    assert "gone19.png" in lines[-2]


def test_the_mapping_is_checked_with_the_config(tmp_path):
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({"protocol": {**folders("tree"), "colour": "red"}}))
    with pytest.raises(ConfigError, match=r"unknown config key 'protocol.colour'"):
        load_experiment(tmp_path / "exp.yaml")
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({"protocol": folders("tree", channels=2)}))
    with pytest.raises(ConfigError, match=r"'protocol.channels': must be 1 \(grey\) or 3"):
        load_experiment(tmp_path / "exp.yaml")
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({"protocol": folders("../tree")}))
    protocol = load_experiment(tmp_path / "exp.yaml").train.protocol  # relative to the YAML's directory
    assert protocol["root"] == str(tmp_path.parent / "tree")
    assert protocol_input(protocol) == InputSpec(1, 28, "glyph")


# ------------------------------------------------------------------ preparation
def test_shorter_side_resize_then_centre_crop_and_square_images_unchanged():
    """Non-square images: the shorter side to the model's size, then the centre square, as
    torchvision's Resize + CenterCrop on the PIL image (not squashed). Square images, as in
    every built-in dataset, take the plain single antialiased resize they took before."""
    rng = np.random.default_rng(1)
    for h, w in [(37, 50), (50, 37), (28, 90)]:
        x = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        expected = np.asarray(CenterCrop(28)(Resize(28)(Image.fromarray(x))))
        assert np.array_equal(prepare_images([x], InputSpec(3, 28, "natural"), name="x")[0].transpose(1, 2, 0),
                              expected)
    bar = np.zeros((28, 56), np.uint8)
    bar[7:21, 21:35] = 255  # a centred square stays a centred square: nothing to resample at scale 1
    assert np.array_equal(prepare_images([bar], LENET_INPUT, name="bar")[0, 0], bar[:, 14:42])
    square = rng.integers(0, 256, (4, 32, 32), dtype=np.uint8)
    plain = np.stack([np.asarray(Image.fromarray(s).resize((28, 28), Image.Resampling.BILINEAR)) for s in square])
    assert np.array_equal(prepare_images(square, LENET_INPUT, name="s", kind="natural")[:, 0], plain)


# ------------------------------------------------------------------ end to end
def cli(*args) -> None:
    assert main([str(a) for a in args]) == 0


def check_run(run: Path, class_names) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["class_names"] == class_names
    assert {r["unknowns"] for r in metrics["results"]} >= {"negatives", "unknowns"}
    report = (run / "report.md").read_text()
    assert "test negatives (D_b" in report and "test unknowns (D_a)" in report and str(class_names) in report
    assert {p.name for p in (run / "figures").glob("oscr_*.png")} >= {"oscr_negatives.png", "oscr_unknowns.png"}
    return metrics


def test_example_folder_protocol_trains_and_evaluates(tmp_path, real_data_dir, monkeypatch):
    """The commands of docs/guide/your-data.md at smoke size; the run's config keeps the protocol's paths
    absolute, so `evaluate --unknowns` from elsewhere prepares a set as the protocol did."""
    config = make_example(tmp_path / "proto", real_data_dir, "folders")
    monkeypatch.chdir(tmp_path)
    cli("train", "proto/experiment.yaml", "--budget", "smoke", "--approach", "entropic", "--out", "run",
        "--no-progress")
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["protocol"]
    assert written == load_experiment(config).train.protocol  # absolute paths: the round trip changes nothing
    assert written["root"] == str(tmp_path / "proto" / "images")
    monkeypatch.chdir(tmp_path / "proto")
    cli("evaluate", tmp_path / "run", "--unknowns", tmp_path / "proto" / "images" / "test" / "8")
    metrics = check_run(tmp_path / "run", ["0", "1", "2", "3", "4", "5"])
    assert metrics["negative_class_names"] == ["6", "7"]
    assert "8" in {r["unknowns"] for r in metrics["results"]}


def test_example_csv_protocol_trains_and_evaluates(tmp_path, real_data_dir):
    config = make_example(tmp_path / "proto", real_data_dir, "csv")
    cli("train", config, "--budget", "smoke", "--approach", "softmax", "--out", tmp_path / "run", "--no-progress")
    cli("evaluate", tmp_path / "run")
    metrics = check_run(tmp_path / "run", ["zero", "one", "two", "three", "four", "five"])
    assert metrics["negative_class_names"] == ["seven", "six"]


def test_a_broken_protocol_or_a_model_that_cannot_take_it_writes_nothing(tmp_path, capsys):
    root = tree(tmp_path / "tree", GOOD_TREE)
    (root / "train" / "ant" / "0.png").write_bytes(b"\x89PNG\r\n")
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"protocol": folders("tree"), "approaches": ["softmax"], "epochs": 1}))
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("agnostophobia: error:") and len(error.strip().splitlines()) == 1
    assert f"1. {root / 'train' / 'ant' / '0.png'}: cannot decode image" in error
    assert not (tmp_path / "run").exists()
    image(root / "train" / "ant" / "0.png")
    config.write_text(yaml.safe_dump({"protocol": folders("tree", image_size=40), "approaches": ["softmax"]}))
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    assert "config key 'model': 'lenet++' cannot take the protocol's 1x40x40" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ leakage (issue 22, item 5)
def real(path) -> str:
    return os.path.realpath(path)


def test_a_csv_file_in_two_splits_is_refused_naming_both_lines(tmp_path):
    """The same file after resolving its path: spelled ``sub/../a.png``, or a symlink."""
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    (tmp_path / "img" / "sub").mkdir()
    (tmp_path / "img" / "link.png").symlink_to(tmp_path / "img" / "b.png")
    mapping = csv_protocol(tmp_path, "a.png,0\nb.png,1\nc.png,-1\n", "d.png,0\n",
                           "sub/../a.png,0\nlink.png,1\ne.png,-2\n")
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    expected = [f"{train}:1 and {test}:1: the same file {real(tmp_path / 'img' / 'a.png')} is in the train and "
                f"the test split", f"{train}:2 and {test}:2: the same file {real(tmp_path / 'img' / 'b.png')} is in "
                f"the train and the test split"]
    problems = check_file_protocol(mapping)
    assert len(problems) == 2 and all(any(line in p for p in problems) for line in expected), problems
    with pytest.raises(DataError) as err:
        build_protocol(mapping)
    assert all(line in str(err.value) for line in expected)
    with pytest.raises(DataError, match="in the train and the test split"):  # allow_duplicates is within a split
        build_protocol({**mapping, "allow_duplicates": True})


def test_a_folder_file_in_two_splits_is_refused_naming_both_paths(tmp_path):
    root = tree(tmp_path / "tree", GOOD_TREE)
    (root / "test" / "ant" / "link.png").symlink_to(root / "train" / "ant" / "0.png")
    (root / "val" / "cat" / "rel.png").symlink_to(Path("..", "..", "train", "dog", "..", "cat", "1.png"))
    problems = check_file_protocol(folders(root))
    expected = [f"{root / 'train' / 'ant' / '0.png'} and {root / 'test' / 'ant' / 'link.png'}: the same file "
                f"{real(root / 'train' / 'ant' / '0.png')} is in the train and the test split",
                f"{root / 'train' / 'cat' / '1.png'} and {root / 'val' / 'cat' / 'rel.png'}: the same file "
                f"{real(root / 'train' / 'cat' / '1.png')} is in the train and the val split"]
    assert len(problems) == 2 and all(any(line in p for p in problems) for line in expected), problems


@proves("refused input", "a protocol's image in two splits under two names (a hard link, or a copy of the same "
                         "content) is refused as leakage")
@pytest.mark.parametrize("how", ["hardlink", "copy"])
def test_the_same_image_under_two_names_in_two_splits_is_refused(tmp_path, how):
    root = tree(tmp_path / "tree", GOOD_TREE)
    original, again = root / "train" / "dog" / "3.png", root / "test" / "dog" / "again.png"
    if how == "hardlink":
        os.link(original, again)
    else:
        again.write_bytes(original.read_bytes())
    problems = check_file_protocol(folders(root))
    assert len(problems) == 1 and f"{original} and {again}" in problems[0], problems
    assert "in the train and the test split" in problems[0]
    with pytest.raises(DataError, match="leakage"):
        build_protocol(folders(root))


def test_a_file_twice_in_a_split_is_refused_unless_allowed(tmp_path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    mapping = csv_protocol(tmp_path, "a.png,0\nb.png,1\n./a.png,0\nc.png,-1\nb.png,1\n", "d.png,0\n",
                           "e.png,1\nc2.png,-2\n")
    image(tmp_path / "img" / "c2.png")
    train = tmp_path / "train.csv"
    problems = check_file_protocol(mapping)
    assert [p.split(": the same file")[0] for p in problems] == [f"{train}:1 and {train}:3", f"{train}:2 and {train}:5"]
    assert all("listed twice in the train split (allow_duplicates: true" in p for p in problems)
    protocol = build_protocol({**mapping, "allow_duplicates": True})
    assert protocol.train.labels.tolist() == [0, 1, 0, -1, 1]  # each entry a sample
    assert "allow_duplicates: 2 train entries repeat a file listed earlier in the split; each entry counts as a " \
           "sample" in protocol.notes
    assert not any("allow_duplicates" in note for note in build_protocol(csv_protocol(
        tmp_path, "a.png,0\nb.png,1\nc.png,-1\n", "d.png,0\n", "e.png,1\nc2.png,-2\n"), ).notes)


def test_a_file_with_two_labels_in_a_split_is_refused_even_when_duplicates_are_allowed(tmp_path):
    root = tree(tmp_path / "tree", GOOD_TREE)
    (root / "train" / "cat" / "ant.png").symlink_to(root / "train" / "ant" / "2.png")
    problems = check_file_protocol(folders(root, allow_duplicates=True))
    assert problems == [f"{root / 'train' / 'ant' / '2.png'} and {root / 'train' / 'cat' / 'ant.png'}: the same file "
                        f"{real(root / 'train' / 'ant' / '2.png')} is listed twice in the train split, with different "
                        f"labels"]
    with pytest.raises(ConfigError, match=r"'protocol.allow_duplicates': must be true or false, got 'yes'"):
        check_file_protocol(folders(root, allow_duplicates="yes"))


def test_allowed_duplicates_reach_the_runs_data_notes(tmp_path):
    root = tree(tmp_path / "tree", GOOD_TREE)
    (root / "train" / "dog" / "again.png").symlink_to(root / "train" / "dog" / "0.png")
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump({"protocol": folders("tree", allow_duplicates=True), "approaches": ["softmax"],
                                      "epochs": 1, "tensorboard": False}))
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    notes = json.loads((tmp_path / "run" / "data_notes.json").read_text())
    assert "allow_duplicates: 1 train entries repeat a file listed earlier in the split; each entry counts as a " \
           "sample" in notes


# ------------------------------------------------------------------ protocols as documented (issue 31, item 5)
UP = ".."  # spelled apart: these climb out of a temporary protocol root, not out of the repository
OUTSIDE = [f"{UP}/outside.png", f"sub/{UP}/{UP}/outside.png", f"./{UP}/outside.png", f"sub/{UP}/{UP}/x/outside.png"]


@pytest.mark.parametrize("path", OUTSIDE + ["ABSOLUTE"])
def test_a_csv_path_outside_the_root_is_a_problem_unless_allowed(tmp_path, path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    image(tmp_path / "outside.png")
    image(tmp_path / "x" / "outside.png")
    (tmp_path / "img" / "sub").mkdir()
    if path == "ABSOLUTE":
        path = str(tmp_path / "outside.png")
    mapping = csv_protocol(tmp_path, f"a.png,0\n{path},1\nd.png,1\n", "b.png,0\n", "c.png,0\ne.png,-2\n")
    problems = check_file_protocol(mapping)
    assert any(f"{tmp_path / 'train.csv'}:2: path {path!r} leads outside the protocol root" in p for p in problems)
    with pytest.raises(DataError, match="leads outside the protocol root"):
        build_protocol(mapping)
    allowed = {**mapping, "allow_outside_root": True}
    assert check_file_protocol(allowed) == []
    assert build_protocol(allowed).train.labels.tolist() == [0, 1, 1]


def test_a_csv_path_that_only_passes_through_a_parent_stays_inside(tmp_path):
    images(tmp_path / "img", ["a.png", "sub/b.png", "c.png", "d.png", "e.png"])
    mapping = csv_protocol(tmp_path, "a.png,0\nsub/../sub/b.png,1\n", "d.png,0\n", "c.png,0\ne.png,-2\n")
    assert check_file_protocol(mapping) == []


def test_allow_outside_root_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="'protocol.allow_outside_root': must be true or false"):
        check_file_protocol(csv_protocol(tmp_path, "", "", "", allow_outside_root="yes"))
    with pytest.raises(ConfigError, match="unknown config key 'protocol.allow_outside_root'"):
        check_file_protocol(folders(tmp_path, allow_outside_root=True))


@pytest.mark.parametrize("link", ["dangling", "loop", "chain-to-nothing"])
def test_broken_links_in_a_class_folder_are_listed_as_problems(tmp_path, link):
    root = tree(tmp_path / "tree", GOOD_TREE)
    bad = root / "train" / "ant" / "broken.png"
    if link == "dangling":
        bad.symlink_to(root / "train" / "ant" / "gone.png")
    elif link == "loop":
        bad.symlink_to(bad)
    else:
        (root / "train" / "ant" / "middle.png").symlink_to(root / "nowhere.png")
        bad.symlink_to(root / "train" / "ant" / "middle.png")
    problems = check_file_protocol(folders(root))
    assert any(p.startswith(f"{bad}: ") for p in problems), problems
    with pytest.raises(DataError, match="broken.png"):
        build_protocol(folders(root))


@pytest.mark.parametrize("label", ["10", "1_0", "\u0663", "1e3", "99999999999999999999999", "2.0"])
def test_csv_labels_out_of_range_or_not_plain_integers_are_problems(tmp_path, label):
    """Without a class_names file the known labels are 0..K-1 for the train file's K known labels;
    a huge label no longer makes K huge, and only plain decimal integers are labels."""
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    mapping = csv_protocol(tmp_path, "a.png,0\nb.png,1\n", f"c.png,{label}\n", "d.png,0\ne.png,-2\n")
    problems = check_file_protocol(mapping)
    assert any(p.startswith(f"{tmp_path / 'val.csv'}:1: label ") for p in problems), problems
    assert len(problems) == 1, problems


def test_a_gap_in_the_training_labels_is_named_without_a_class_names_file(tmp_path):
    images(tmp_path / "img", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    problems = "\n".join(check_file_protocol(csv_protocol(tmp_path, "a.png,0\nb.png,2\n", "c.png,0\n",
                                                          "d.png,0\ne.png,-2\n")))
    assert f"{tmp_path / 'train.csv'}:2: label 2 out of range 0..1" in problems
    assert "known class 1 ('1') has no training image" in problems


# ------------------------------------------------------------------ every key declared once (issue 45, item 1)
#: The smallest mapping of each type.
MINIMAL = {"csv": {"type": "csv", "root": "img", "image_size": 28, "channels": 1, "train": "a.csv", "val": "b.csv",
                   "test": "c.csv"},
           "folders": {"type": "folders", "root": "img", "image_size": 28, "channels": 1, "known": ["a"]},
           "imagefolder": {"type": "imagefolder", "root": "img", "image_size": 28, "channels": 3, "known": ["a"]}}
#: The keys each type takes, in the order the unknown-key message lists them (as before the declarations).
ALLOWED = {"csv": "type, root, image_size, channels, kind, allow_duplicates, train, val, test, class_names, "
                  "allow_outside_root",
           "folders": "type, root, image_size, channels, kind, allow_duplicates, known, negative, unknown",
           "imagefolder": "type, root, image_size, channels, kind, allow_duplicates, known, negative, unknown, split, "
                          "val_fraction, test_fraction"}
#: A good value of each kind a key may be, and one of the wrong kind.
GOOD = {str: None, Path: "somewhere/x", int: None, bool: True, list: ["b", 7], float: 0.2}
WRONG = {str: 5, Path: 5, int: "28", bool: "yes", list: "a", float: "a"}


def _types_of(key):
    return PROTOCOL_KEYS[key].types or TYPES


@pytest.mark.parametrize("key", [key for key in PROTOCOL_KEYS if key != TYPE_KEY])
def test_every_declared_key_is_taken_by_its_types_and_refused_by_the_others(key):
    declared = PROTOCOL_KEYS[key]
    value = GOOD[declared.type]
    if value is None:  # a str or int key: the last of its choices, or its smallest value
        value = declared.choices[-1] if declared.choices else int(declared.low)
    expected = Path(value) if declared.type is Path else ("b", "7") if declared.type is list else value
    for kind in TYPES:
        mapping = {**MINIMAL[kind], key: value}
        if kind in _types_of(key):
            assert getattr(parse_file_protocol(mapping), key) == expected, (key, kind)
        else:
            with pytest.raises(ConfigError) as error:
                parse_file_protocol(mapping)
            assert str(error.value) == (f"unknown config key 'protocol.{key}' for a protocol of type {kind}; "
                                        f"known: {ALLOWED[kind]}")


@pytest.mark.parametrize("key", list(PROTOCOL_KEYS))
def test_a_value_of_the_wrong_kind_is_one_line_naming_its_key(key):
    wrong = WRONG[PROTOCOL_KEYS[key].type]
    with pytest.raises(ConfigError) as error:
        parse_file_protocol({**MINIMAL[_types_of(key)[0]], key: wrong})
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"config key 'protocol.{key}': must be ")
    assert message.endswith(f", got {wrong!r}")


@pytest.mark.parametrize("key, value, message", [
    ("type", "tree", "must be one of csv, folders, imagefolder, got 'tree'"),
    ("type", None, "must be one of csv, folders, imagefolder, got None"),
    ("image_size", 4097, "must be an integer from 8 to 4096 (the square side in pixels), got 4097"),
    ("channels", True, "must be 1 (grey) or 3 (RGB), got True"),
    ("channels", 1.0, "must be 1 (grey) or 3 (RGB), got 1.0"),  # once let through as a float channel count
    ("kind", "photo", "must be one of glyph, natural, got 'photo'"),
    ("root", "", "must be a path, got ''"),
    ("known", [], "must list at least one class folder, got []"),
    ("negative", ["a", None], "must be a list of class-folder names, got ['a', None]"),
    ("val_fraction", 0.6, "must be a number in (0, 0.45], got 0.6"),
])
def test_a_refused_value_keeps_its_words(key, value, message):
    with pytest.raises(ConfigError) as error:
        parse_file_protocol({**MINIMAL["imagefolder"], key: value})
    assert str(error.value) == f"config key 'protocol.{key}': {message}"


def test_a_missing_key_names_what_its_type_needs():
    for kind, dropped, needs in (("csv", "test", "root, image_size, channels, train, val, test"),
                                 ("folders", "known", "root, image_size, channels, known"),
                                 ("imagefolder", "root", "root, image_size, channels, known")):
        with pytest.raises(ConfigError) as error:
            parse_file_protocol({k: v for k, v in MINIMAL[kind].items() if k != dropped})
        assert str(error.value) == (f"config key 'protocol.{dropped}' is missing (a protocol of type {kind} needs "
                                    f"{needs})")


def test_the_paths_made_absolute_are_the_keys_declared_as_paths(tmp_path):
    assert PATH_KEYS == tuple(key for key, declared in PROTOCOL_KEYS.items() if declared.type is Path) == \
        ("root", "train", "val", "test", "class_names", "split")
    mapping = {key: "rel/x" for key in PROTOCOL_KEYS}
    resolved = resolve_paths(mapping, tmp_path)
    assert {key for key in mapping if resolved[key] != "rel/x"} == set(PATH_KEYS)
    assert all(resolved[key] == str(tmp_path / "rel" / "x") for key in PATH_KEYS)


def test_the_reference_lists_every_declared_key():
    """The configuration reference's table of the protocol keys is generated from the declarations."""
    import sys

    from repo_paths import REPO

    sys.path.insert(0, str(REPO / "docs" / "_ext"))
    try:
        from agnostophobia_refs import protocol_rows
    finally:
        sys.path.remove(str(REPO / "docs" / "_ext"))
    rows = protocol_rows()
    assert [row[0] for row in rows] == list(PROTOCOL_KEYS)
    assert all(row[-1] for row in rows)  # each with its meaning
    assert ".. config-keys::\n   :which: protocol" in (REPO / "docs" / "reference" / "config.rst").read_text()
