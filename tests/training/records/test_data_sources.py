"""A run knows its data (issue 31, item 6): each run records what its protocol was built from
(``data_sources.json``), and a command that rebuilds the run's split from other data refuses in
one line naming the file; a run from before the record works and says so once."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from runs import run_cli, run_main, snapshot
from tests.data.file_protocols.test_imagefolder import make_tree, mapping, write_split
from agnostophobia.data import build_protocol
from agnostophobia.data import fingerprint
from agnostophobia.data.fingerprint import changed_source, file_fingerprint, listing_fingerprint
from agnostophobia.rundir import DATA_SOURCES, RecordError
from agnostophobia.training.records import check_data_sources, read_data_sources


# ------------------------------------------------------------------------ fingerprints
def test_a_file_is_known_by_its_content_and_its_digest_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("AGNOSTOPHOBIA_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "set.npz"
    path.write_bytes(b"0123456789")
    first = file_fingerprint(path)
    assert first["sha256"] == hashlib.sha256(b"0123456789").hexdigest() and first["size"] == 10
    assert (tmp_path / "cache" / fingerprint.CACHE_NAME).is_file()

    def no_hashing(*args):
        raise AssertionError("hashed again although size and mtime are unchanged")

    monkeypatch.setattr(fingerprint.hashlib, "sha256", no_hashing)
    assert file_fingerprint(path) == first  # from the cache: one stat
    monkeypatch.undo()
    monkeypatch.setenv("AGNOSTOPHOBIA_CACHE", str(tmp_path / "cache"))
    stat = path.stat()
    path.write_bytes(b"9876543210")  # the same size, another content, the old mtime restored
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert file_fingerprint(path)["sha256"] != first["sha256"]
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))  # touched: the same data
    assert file_fingerprint(path)["sha256"] == first["sha256"]
    (tmp_path / "cache" / fingerprint.CACHE_NAME).write_text("{not json")  # a damaged cache costs time only
    assert file_fingerprint(path)["sha256"] == first["sha256"]


def test_a_listing_is_known_by_its_files_paths_sizes_and_times(tmp_path):
    root = tmp_path / "images"
    for name in ("a.png", "b/c.png"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x" * 5)
    files = [root / "a.png", root / "b/c.png"]
    first = listing_fingerprint(root, files)
    assert first["files"] == 2
    assert listing_fingerprint(root, files[::-1]) == first  # the walk's order does not count
    moved = tmp_path / "moved"
    shutil.copytree(root, moved, copy_function=shutil.copy2)  # another place, the same files and times
    assert listing_fingerprint(moved, [moved / "a.png", moved / "b/c.png"])["listing"] == first["listing"]
    (root / "a.png").write_bytes(b"y" * 6)
    assert listing_fingerprint(root, files)["listing"] != first["listing"]
    assert listing_fingerprint(root, files[:1])["files"] == 1


def test_a_changed_source_is_named_by_the_file_read_now():
    old = {"mnist/train": {"path": "/a/mnist.npz", "size": 3, "sha256": "aa"}}
    assert changed_source(old, {"mnist/train": {"path": "/b/mnist.npz", "size": 3, "sha256": "aa"}}) is None
    file, why = changed_source(old, {"mnist/train": {"path": "/b/mnist.npz", "size": 3, "sha256": "bb"}})
    assert file == "/b/mnist.npz" and "is not the mnist/train the run was built from" in why
    assert "no longer reads" in changed_source(old, {})[1]
    extra = {**old, "letters/train": {"path": "/a/letters.npz", "size": 1, "sha256": "cc"}}
    assert changed_source(old, extra) == ("/a/letters.npz", "the protocol now reads letters/train, which the "
                                                            "run was not built from")


@pytest.mark.parametrize("record", [[], {"mnist/train": "x"}, {"mnist/train": {"path": "p", "size": 1}},
                                    {"mnist/train": {"path": "p", "size": True, "sha256": "a"}},
                                    {"mnist/train": {"path": "p", "size": 1, "sha256": "a", "extra": 1}}])
def test_a_malformed_record_is_named(tmp_path, record):
    (tmp_path / DATA_SOURCES).write_text(json.dumps(record))
    with pytest.raises(RecordError, match=DATA_SOURCES):
        read_data_sources(tmp_path)


# ------------------------------------------------------------------ a protocol from files
def records(run: Path) -> dict:
    """The run's files and their times, but for its lock, which a command takes to read it."""
    return {path: value for path, value in snapshot(run).items() if path.name != ".lock"}


def train_folder_run(tmp_path, capsys):
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": mapping(tmp_path / "photos"), "model": "lenet++",
                                      "approaches": ["softmax"], "epochs": 1, "batch_size": 16,
                                      "tensorboard": False}))
    run = tmp_path / "run"
    code, _, err = run_main(["train", config, "--out", run, "--no-progress"], capsys)
    assert code == 0, err
    return config, run


def test_a_run_records_its_files_and_refuses_to_continue_on_changed_ones(tmp_path, capsys):
    config, run = train_folder_run(tmp_path, capsys)
    sources = read_data_sources(run)
    assert sources["images"]["files"] == sum(1 for _ in (tmp_path / "photos").rglob("*.png"))
    image = tmp_path / "photos" / "seven" / "000.png"
    original, stat = image.read_bytes(), image.stat()
    other = Image.open(tmp_path / "photos" / "seven" / "001.png")  # another image under its name (not a copy of
    other.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(image)  # one: a copy in another split is leakage)
    before = records(run)
    code, _, err = run_main(["train", config, "--out", run, "--resume", "--seeds", "2", "--no-progress"], capsys)
    assert code == 1 and len(err) == 1, err
    assert f"error: {tmp_path / 'photos'}: is not the images the run was built from" in err[0]
    assert records(run) == before
    # calibrate rebuilds the validation split where the run holds no validation outputs
    for stored in run.glob("seed*/*/val_outputs*.npz"):
        stored.unlink()
    before = records(run)
    code, _, err = run_main(["calibrate", run, "--fpr", "0.5", "--device", "cpu"], capsys)
    assert code != 0 and len(err) == 1 and "is not the images the run was built from" in err[0], err
    assert records(run) == before
    image.write_bytes(original)  # the run's own data again: both commands work
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code, _, err = run_main(["calibrate", run, "--fpr", "0.5", "--device", "cpu"], capsys)
    assert code in (0, 1) and not any("built from" in line for line in err), err  # 1: too few unknowns
    code, _, err = run_main(["train", config, "--out", run, "--resume", "--seeds", "2", "--no-progress"], capsys)
    assert code == 0, err


def test_a_changed_split_list_is_named(tmp_path):
    images = make_tree(tmp_path / "photos")
    split = write_split(build_protocol(mapping(images), seed=0), tmp_path / "split")
    sources = build_protocol(mapping(images, split=str(split)), seed=0).sources
    assert {"split list train", "split list class names", "images"} <= set(sources)
    lines = (split / "val.csv").read_text().splitlines()
    (split / "val.csv").write_text("\n".join(lines[:1] + lines[1:][::-1]) + "\n")  # the same rows, reordered
    file, why = changed_source(sources, build_protocol(mapping(images, split=str(split)), seed=0).sources)
    assert file == str(split / "val.csv") and "split list val" in why


def test_a_run_from_before_the_record_works_and_says_so_once(tmp_path, capsys):
    _, run = train_folder_run(tmp_path, capsys)
    (run / DATA_SOURCES).unlink()
    lines = []
    check_data_sources(run, build_protocol(mapping(tmp_path / "photos"), seed=0), lines.append)
    assert len(lines) == 1 and "no record of the data it was built from" in lines[0]
    for stored in run.glob("seed*/*/val_outputs*.npz"):
        stored.unlink()
    code, out, err = run_main(["calibrate", run, "--fpr", "0.5", "--device", "cpu"], capsys)
    assert out.count("no record of the data") == 1, out
    assert not (run / DATA_SOURCES).exists()  # a command that only reads the data asserts nothing of it


# --------------------------------------------------------------------- the paper's data
@pytest.mark.slow  # two commands that rebuild the LeNet++ protocol (~15 s): make test-slow, which CI runs
def test_the_same_images_shuffled_under_a_datasets_name_are_refused(real_data_dir, tiny_run, tmp_path):
    """A data folder whose mnist.npz holds MNIST's images in another order: ``calibrate`` would
    rebuild another validation split from it; it refuses, naming the file."""
    data = tmp_path / "data"
    data.mkdir()
    for entry in Path(real_data_dir).iterdir():
        if entry.name != "mnist":
            (data / entry.name).symlink_to(entry)
    with np.load(Path(real_data_dir) / "mnist" / "mnist.npz") as npz:
        arrays = dict(npz)
    order = np.random.default_rng(0).permutation(len(arrays["y_train"]))
    arrays["x_train"], arrays["y_train"] = arrays["x_train"][order], arrays["y_train"][order]
    (data / "mnist").mkdir()
    np.savez(data / "mnist" / "mnist.npz", **arrays)
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert "mnist/train" in read_data_sources(run)
    for stored in run.glob("seed*/*/val_outputs*.npz"):
        stored.unlink()
    result = run_cli(["calibrate", run, "--fpr", "0.5", "--device", "cpu", "--data-dir", data])
    err = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(err) == 1, result.stderr
    assert f"error: {data / 'mnist' / 'mnist.npz'}: is not the mnist/" in err[0]  # its test or train split
    assert "the run was built from" in err[0]
    result = run_cli(["calibrate", run, "--fpr", "0.5", "--device", "cpu", "--data-dir", real_data_dir])
    assert result.returncode == 0, result.stderr
