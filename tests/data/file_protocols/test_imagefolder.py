"""The imagefolder protocol (issue 33, item 1): one ``ROOT/<class>/`` tree, split here into
train, val and test (seeded, class-stratified, the same on every machine), the split written to
the run as the csv type's files and reusable with ``split:``."""
from __future__ import annotations

import importlib.util
import json
import os
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import glyphs, png_bytes
from agnostophobia.cli import main
from agnostophobia.data import build_protocol
from agnostophobia.data.file_protocols import parse_file_protocol, split_class
from agnostophobia.errors import ConfigError, DataError
from repo_paths import REPO

CLASSES = {"seven": 12, "one": 12, "four": 12, "bird": 8, "car": 6}


def make_tree(root: Path, counts=None) -> Path:
    """``root/<class>/<n>.png``: white-on-black glyphs, one bar position per class."""
    rng = np.random.default_rng(0)
    for c, (cls, n) in enumerate((counts or CLASSES).items()):
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i, glyph in enumerate(glyphs(rng, np.full(n, 3 * c))):
            (root / cls / f"{i:03d}.png").write_bytes(png_bytes(glyph))
    return root


def mapping(root: Path, **changes) -> dict:
    return {"type": "imagefolder", "root": str(root), "known": ["seven", "one", "four"], "negative": ["bird"],
            "unknown": ["car"], "image_size": 28, "channels": 1, "kind": "glyph", **changes}


def rows(text: str):
    return text.splitlines()[1:]


def test_classes_follow_the_config_order_and_every_class_is_split(tmp_path):
    protocol = build_protocol(mapping(make_tree(tmp_path / "img")), seed=0)
    assert protocol.class_names == ["seven", "one", "four"] and protocol.negative_class_names == ["bird"]
    assert protocol.sizes()["val"] == {"known": 6, "unknown": 1}  # round(0.15 * 12) = 2 per class, 1 of 8
    assert protocol.sizes()["test_unknowns/unknowns"]["unknown"] == 6  # unknowns: test only
    test = rows(protocol.split_files["test.csv"])
    assert "seven/" in test[0] and test[0].split(",")[1:] == ["0", "seven"]
    assert {line.split(",")[1] for line in test if line.startswith("car/")} == {"-2"}
    assert protocol.split_files["class_names.txt"] == "seven\none\nfour\n"
    files = {name: set(rows(text)) for name, text in protocol.split_files.items() if name.endswith(".csv")}
    assert not (files["train.csv"] & files["val.csv"] or files["train.csv"] & files["test.csv"]
                or files["val.csv"] & files["test.csv"])
    assert sum(map(len, files.values())) == sum(CLASSES.values())


def test_the_split_depends_on_the_seed_not_on_the_listing_order(tmp_path, monkeypatch):
    root = make_tree(tmp_path / "img")
    first = build_protocol(mapping(root), seed=0).split_files
    listed = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: list(reversed(list(listed(self, pattern)))))
    assert build_protocol(mapping(root), seed=0).split_files == first
    assert build_protocol(mapping(root), seed=1).split_files["val.csv"] != first["val.csv"]


def test_split_class_is_fixed_for_a_seed():
    """The numbers themselves: a change of the drawing would move users' splits between versions."""
    assert split_class(10, 0.15, 0.15, 0, "cat") == split_class(10, 0.15, 0.15, 0, "cat")
    split = split_class(3, 0.15, 0.15, 0, "cat")
    assert sorted(len(v) for v in split.values()) == [1, 1, 1]
    sizes = {k: len(v) for k, v in split_class(100, 0.2, 0.1, 7, "cat").items()}
    assert sizes == {"val": 20, "test": 10, "train": 70}


def write_split(protocol, split: Path) -> Path:
    """The protocol's split files written into the folder ``split`` (a split to reuse)."""
    split.mkdir()
    for name, text in protocol.split_files.items():
        (split / name).write_text(text)
    return split


def test_a_written_split_is_reused_and_a_changed_class_order_is_refused(tmp_path):
    root = make_tree(tmp_path / "img")
    protocol = build_protocol(mapping(root), seed=0)
    split = write_split(protocol, tmp_path / "split")
    reused = build_protocol(mapping(root, split=str(split)), seed=5)  # the seed no longer draws anything
    assert reused.split_files == protocol.split_files
    assert np.array_equal(reused.train.images, protocol.train.images)
    assert np.array_equal(reused.train.negative_class, protocol.train.negative_class)
    with pytest.raises(DataError, match=r"class_names.txt: the split's known classes \['seven', 'one', 'four'\] "
                                        r"differ from the config's protocol.known \['one', 'seven', 'four'\]"):
        build_protocol(mapping(root, split=str(split), known=["one", "seven", "four"]))


def test_a_small_class_and_a_missing_folder_are_refused(tmp_path):
    root = make_tree(tmp_path / "img", {**CLASSES, "bird": 2})
    with pytest.raises(DataError) as error:
        build_protocol(mapping(root, known=["seven", "one", "four", "emu"]))
    message = str(error.value)
    assert f"{root / 'bird'}: 2 image(s); a known or negative class needs at least 3" in message
    assert f"{root / 'emu'}: the class folder named in the config does not exist" in message


@pytest.mark.parametrize("change, message", [
    ({"val_fraction": 0.6}, "config key 'protocol.val_fraction': must be a number in (0, 0.45], got 0.6"),
    ({"test_fraction": "a"}, "config key 'protocol.test_fraction': must be a number, got 'a'"),
    ({"known": ["one", "one"]}, "config key 'protocol.known': lists 'one' twice"),
    ({"unknown": ["a/b"]}, "config key 'protocol.unknown': 'a/b' is not a folder name directly under the root"),
])
def test_bad_settings_name_their_key(tmp_path, change, message):
    with pytest.raises(ConfigError) as error:
        parse_file_protocol(mapping(tmp_path, **change))
    assert str(error.value).startswith(message)


def test_a_hidden_file_is_not_an_image(tmp_path):
    root = make_tree(tmp_path / "img")
    (root / "one" / ".DS_Store").write_bytes(b"junk")
    (root / "one" / ".thumbs").mkdir()
    (root / "one" / ".thumbs" / "x.png").write_bytes(b"junk")
    assert build_protocol(mapping(root)).sizes() == build_protocol(mapping(make_tree(tmp_path / "b"))).sizes()


# ------------------------------------------------------------------ end to end
def cli(*args) -> None:
    assert main([str(a) for a in args]) == 0


def test_one_folder_tree_trains_evaluates_calibrates_predicts_and_exports(tmp_path, capsys):
    """One config, no hand-made split: the whole practitioner's path at a tiny budget."""
    root = make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({
        "protocol": mapping(Path("photos")), "model": "lenet++", "approaches": ["entropic"],
        "epochs": 1, "batch_size": 16, "tensorboard": False}))
    run = tmp_path / "run"
    cli("train", config, "--out", run, "--no-progress")
    assert (run / "data_split" / "class_names.txt").read_text() == "seven\none\nfour\n"
    assert json.loads((run / "classes.json").read_text())["class_names"] == ["seven", "one", "four"]
    cli("evaluate", run)
    metrics = json.loads((run / "metrics.json").read_text())
    assert {r["unknowns"] for r in metrics["results"]} >= {"negatives", "unknowns"}
    cli("calibrate", run, "--fpr", "1")
    assert json.loads((run / "calibration.json").read_text())
    capsys.readouterr()
    cli("predict", run, root / "car")
    table = capsys.readouterr().out
    assert "car" in table and len(table.strip().splitlines()) >= 6
    cli("export", run, "--format", "torchscript", "--out", tmp_path / "model.pt")
    assert (tmp_path / "model.pt").stat().st_size > 0

    # the written split is the csv type's files: the same protocol reads it back
    reused = tmp_path / "reuse.yaml"
    reused.write_text(yaml.safe_dump({"protocol": mapping(Path("photos"), split="run/data_split"),
                                      "model": "lenet++", "approaches": ["softmax"], "epochs": 1, "batch_size": 16,
                                      "tensorboard": False}))
    cli("train", reused, "--out", tmp_path / "run2", "--no-progress")
    assert all((tmp_path / "run2" / "data_split" / name).read_text() == (run / "data_split" / name).read_text()
               for name in os.listdir(run / "data_split"))


def test_a_run_refuses_a_changed_class_order(tmp_path, capsys):
    """A resumed run whose protocol now gives its classes in another order is refused in one line,
    before anything is written (never a silent relabelling)."""
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    body = {"protocol": mapping(Path("photos")), "model": "lenet++", "approaches": ["softmax"], "epochs": 1,
            "batch_size": 16, "tensorboard": False}
    config.write_text(yaml.safe_dump(body))
    run = tmp_path / "run"
    cli("train", config, "--out", run, "--no-progress")
    before = (run / "config.yaml").read_text()
    body["protocol"]["known"] = ["one", "seven", "four"]
    body["approaches"] = ["entropic"]
    config.write_text(yaml.safe_dump(body))
    capsys.readouterr()
    assert main(["train", str(config), "--out", str(run), "--resume", "--no-progress"]) == 1
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert "the run was trained with the classes ['seven', 'one', 'four'], the protocol now gives ['one', " \
           "'seven', 'four']" in error
    assert (run / "config.yaml").read_text() == before


# ------------------------------------------------------------------ the examples, offline
EXAMPLES = REPO / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_folder_protocol_runs_offline_or_says_what_it_needs(tmp_path, capsys):
    example = load_example("make_folder_protocol")
    with pytest.raises(SystemExit) as stop:
        example.main(["--out", str(tmp_path / "a"), "--per-class", "5", "--data-dir", str(tmp_path / "none")])
    assert str(stop.value).startswith(f"make_folder_protocol: needs the staged MNIST and EMNIST letters in "
                                      f"{tmp_path / 'none'}") and "\n" not in str(stop.value)
    assert example.main(["--out", str(tmp_path / "b"), "--per-class", "5", "--generated"]) == 0
    config = yaml.safe_load((tmp_path / "b" / "experiment.yaml").read_text())
    protocol = build_protocol({**config["protocol"], "root": str(tmp_path / "b" / "images")})
    assert protocol.sizes()["train"] == {"known": 30, "unknown": 10}  # glyph polarity checked too


@pytest.mark.slow  # the whole example, as the gallery runs it (12-26 s); make test keeps its 10-minute margin
def test_the_own_images_gallery_example_deploys_a_model(tmp_path, monkeypatch):
    """The gallery runs it top to bottom as a script; here too, with one epoch (the path, not the
    model's quality) and ``--out``, so that its files stay to be read."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setattr(sys, "argv", ["own_images.py", "--out", str(tmp_path / "demo"), "--epochs", "1"])
    example = runpy.run_path(str(EXAMPLES / "own_images.py"), run_name="__main__")
    assert (tmp_path / "demo" / "model.pt2").stat().st_size > 0
    assert len((tmp_path / "demo" / "star_predictions.csv").read_text().splitlines()) == example["IMAGES_PER_CLASS"] + 1
    assert yaml.safe_load((tmp_path / "demo" / "experiment.yaml").read_text())["epochs"] == 1
    assert (tmp_path / "demo" / "run" / "data_split" / "class_names.txt").read_text() == "circle\nsquare\ntriangle\n"
    import matplotlib.pyplot as plt
    plt.close("all")
