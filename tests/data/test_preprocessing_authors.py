"""``preprocessing: authors`` (issue 15): the data preparation of the authors' MNIST/data_prep.py on
our loaders, each quirk checked on real images against a hand computation written out here,
and every command that reads a run preparing inputs the way the run was trained.

What the authors' code did (Vastlab/Reducing-Network-Agnostophobia, MNIST/data_prep.py):
``read_images`` returns ``255 - x`` of the idx files (MNIST, EMNIST letters), ``NOT_MNIST``
returns ``1 - x`` of the PNGs, ``hindi_letters`` reads the NHCD JPEGs as published (black glyph
on light paper; our staged copy is ``255 - original``, docs/data.md) and resizes them with
INTER_CUBIC, ``cifar_prep`` reshapes ``data_batch_1`` with ``order='F'`` (a transpose), applies
``COLOR_BGR2GRAY`` to RGB data and resizes with INTER_CUBIC.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml
from PIL import Image
from runs import write_config

from agnostophobia.cli import main
from agnostophobia.data import build_protocol, load_dataset
from agnostophobia.data.inputs import UnknownSet, model_input, run_input
from agnostophobia.data.preprocess import (AUTHORS_NOTES, INPUT_CONVENTIONS, LENET_INPUT, InputSpec,
                                           prepare_images)
from agnostophobia.data.protocols import purpose_rng, stratified_subset
from agnostophobia.errors import ConfigError, DataError
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.resume import check_saved_config

AUTHORS_INPUT = InputSpec(1, 28, "glyph", "authors")
LIMITS = {"max_known_train": 20, "max_unknown_train": 20, "max_val": 10, "max_test_per_set": 12}


def protocol_sample(ds, key: str, n: int = LIMITS["max_test_per_set"]) -> np.ndarray:
    """The indices of ``ds`` the lenet++ protocol (seed 0) keeps for its test set ``key``."""
    return stratified_subset(ds.labels, n, purpose_rng(0, f"lenet++/test-{key}"))


@pytest.fixture(scope="module")
def protocols(real_data_dir):
    """The lenet++ protocol, small, prepared both ways."""
    return {p: build_protocol("lenet++", real_data_dir, seed=0, preprocessing=p, **LIMITS) for p in ("ours", "authors")}


# ------------------------------------------------------------------ each quirk, by hand
def test_mnist_letters_notmnist_are_inverted_as_the_authors_did(real_data_dir, protocols):
    authors = protocols["authors"]
    mnist = load_dataset("mnist", "test", real_data_dir)
    stored = mnist.images[protocol_sample(mnist, "known")]            # white on black, 28x28
    assert np.array_equal(authors.test_known.images[:, 0], 255 - stored)  # read_images: 255 - x
    for key, dataset in (("letters", "letters"), ("notmnist", "notmnist")):
        ds = load_dataset(dataset, "test", real_data_dir)
        assert np.array_equal(authors.test_unknowns[key].images[:, 0], 255 - ds.images[protocol_sample(ds, key)])
    # training and validation sets (MNIST knowns, letter negatives) alike
    ours = protocols["ours"]
    for part in ("train", "val"):
        assert np.array_equal(getattr(authors, part).images, 255 - getattr(ours, part).images)
        assert np.array_equal(getattr(authors, part).labels, getattr(ours, part).labels)


def test_devanagari_is_read_as_published_by_the_authors(real_data_dir, protocols):
    """The authors did not invert NHCD: they read the published JPEGs, black glyph on light paper.
    Our staged copy holds them inverted (x = 255 - original), so their pixels are 255 - ours."""
    ds = load_dataset("devanagari", "test", real_data_dir)
    assert "NHCD" in " ".join(ds.notes)
    published = 255 - ds.images[protocol_sample(ds, "devanagari")]
    got = protocols["authors"].test_unknowns["devanagari"].images[:, 0]
    assert np.array_equal(got, published)
    assert np.median(got[:, 0, :]) > 128  # black glyph on light paper: a bright top row


def test_dhcd_is_resized_bicubic_whole_and_inverted(real_data_dir):
    """Devanagari resized with cubic interpolation, straight to 28x28 (no crop of DHCD's blank frame)."""
    x = load_dataset("dhcd", "test", real_data_dir).images[::1150]         # 12 images, 32x32
    bicubic = np.stack([np.asarray(Image.fromarray(img).resize((28, 28), Image.Resampling.BICUBIC)) for img in x])
    got = prepare_images(x, AUTHORS_INPUT, name="dhcd", kind="glyph", padding=2)[:, 0]
    assert np.array_equal(got, 255 - bicubic)
    assert np.array_equal(prepare_images(x, LENET_INPUT, name="dhcd", kind="glyph", padding=2)[:, 0],
                          x[:, 2:30, 2:30])  # ours crops the frame


def test_cifar10_is_transposed_bgr_grey_and_bicubic(real_data_dir, protocols):
    ds = load_dataset("cifar10", "test", real_data_dir)
    rgb = ds.images[protocol_sample(ds, "cifar10")].astype(np.int64)        # (N, 32, 32, 3) RGB
    swapped = rgb.transpose(0, 2, 1, 3)                                     # reshape order='F': H and W swapped
    r, g, b = swapped[..., 0], swapped[..., 1], swapped[..., 2]
    # COLOR_BGR2GRAY on RGB data: the red weight lands on blue and vice versa (PIL's 16-bit fixed point)
    grey = ((19595 * b + 38470 * g + 7471 * r + 32768) >> 16).astype(np.uint8)
    expected = np.stack([np.asarray(Image.fromarray(img).resize((28, 28), Image.Resampling.BICUBIC)) for img in grey])
    got = protocols["authors"].test_unknowns["cifar10"].images[:, 0]
    assert np.array_equal(got, expected)
    assert not np.array_equal(got, protocols["ours"].test_unknowns["cifar10"].images[:, 0])
    assert not np.array_equal(got, expected.transpose(0, 2, 1))  # the transpose is there


def test_polarity_check_skipped_under_authors_raised_under_ours(real_data_dir):
    wrong = 255 - load_dataset("mnist", "test", real_data_dir).images[:40]  # a wrongly inverted glyph set
    with pytest.raises(DataError, match="black glyph on white"):
        prepare_images(wrong, LENET_INPUT, name="inverted", kind="glyph")
    assert np.array_equal(prepare_images(wrong, AUTHORS_INPUT, name="inverted", kind="glyph")[:, 0], 255 - wrong)
    # a user's own images (no kind) follow our convention whatever the run, so they are still checked
    with pytest.raises(DataError, match="user: looks like a black glyph on white"):
        prepare_images(wrong, AUTHORS_INPUT, name="user")


def test_protocol_with_a_wrongly_inverted_set_builds_only_under_authors(real_data_dir, tmp_path):
    data = tmp_path / "data"
    for name in ("letters", "nhcd", "notmnist", "cifar10"):
        (data / name).mkdir(parents=True)
        for f in (real_data_dir / name).iterdir():
            (data / name / f.name).symlink_to(f)
    mnist = load_dataset("mnist", "train", real_data_dir)
    test = load_dataset("mnist", "test", real_data_dir)
    (data / "mnist").mkdir()
    np.savez(data / "mnist" / "mnist.npz", x_train=255 - mnist.images[:300], y_train=mnist.labels[:300],
             x_test=255 - test.images[:50], y_test=test.labels[:50])
    with pytest.raises(DataError, match="MNIST.*black glyph on white"):
        build_protocol("lenet++", data, **LIMITS)
    authors = build_protocol("lenet++", data, preprocessing="authors", **LIMITS)
    assert authors.test_known.images.mean() < 128  # the authors' inversion undid the wrong one
    assert any("polarity check skipped" in note for note in authors.preprocessing_notes)


def test_protocol_notes_name_every_quirk(protocols):
    notes = protocols["authors"].preprocessing_notes
    assert notes[:len(AUTHORS_NOTES)] == list(AUTHORS_NOTES)
    text = " ".join(notes)
    for quirk in ("255 - x", "NHCD, as published", "polarity check skipped", "transposed", "reversed channels",
                  "bicubic", "CIFAR-10 test set, not the authors' data_batch_1"):
        assert quirk in text, quirk
    assert protocols["ours"].preprocessing_notes == []
    assert not any("white on black (checked" in n for n in protocols["authors"].notes)  # ours' claim not made


# ------------------------------------------------------------------ configuration
def test_config_key_checked():
    with pytest.raises(ConfigError, match="config key 'preprocessing': must be one of ours, authors, got 'author'"):
        TrainConfig(preprocessing="author").validate()
    for protocol in ("cifar", "cifar10-split", "mnist-notmnist"):
        with pytest.raises(ConfigError, match=f"config key 'preprocessing'.*not to protocol '{protocol}'"):
            TrainConfig(protocol=protocol, preprocessing="authors").validate()
    files = {"type": "folders", "root": "/nowhere", "known": ["a", "b"], "image_size": 28, "channels": 1}
    with pytest.raises(ConfigError, match="config key 'preprocessing'.*not to a protocol from files"):
        TrainConfig(protocol=files, preprocessing="authors").validate()
    assert TrainConfig(preprocessing="authors").validate().to_dict()["preprocessing"] == "authors"


def test_cli_refuses_authors_on_cifar_before_writing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["reproduce", "cifar", "--budget", "smoke", "--preprocessing", "authors", "--out", str(out),
                 "--no-progress"]) == 1
    assert "config key 'preprocessing'" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["train", "lenet++", "--out", str(out), "--preprocessing", "theirs"])
    assert exc.value.code == 2 and "--preprocessing" in capsys.readouterr().err


def test_resume_refused_across_preprocessing():
    saved = TrainConfig().validate().to_dict()
    del saved["preprocessing"]  # a checkpoint from before the key: trained with ours
    check_saved_config(saved, TrainConfig(), "last.pt")
    with pytest.raises(ConfigError, match="preprocessing='ours' but the config now says 'authors'"):
        check_saved_config(saved, TrainConfig(preprocessing="authors"), "last.pt")


# ------------------------------------------------------------------ a run trained with authors
@pytest.fixture(scope="module")
def authors_run(real_data_dir, tmp_path_factory):
    """A tiny run (one approach, one epoch) trained by ``train --preprocessing authors`` into the
    directory ``reproduce --preprocessing authors`` would choose by default."""
    root = tmp_path_factory.mktemp("authors")
    config = write_config(root / "tiny.yaml", approaches=["entropic"], epochs=1)
    out = root / "runs" / "lenet++-smoke-authors"
    assert main(["train", str(config), "--budget", "smoke", "--preprocessing", "authors", "--out", str(out),
                 "--no-progress", "--data-dir", str(real_data_dir)]) == 0
    return config, out


@pytest.fixture
def digits(real_data_dir, tmp_path):
    """Eight real MNIST test digits as a user brings them (white on black), in an .npz."""
    x = load_dataset("mnist", "test", real_data_dir).images[100:108]
    np.savez(tmp_path / "digits.npz", x=x)
    return x, tmp_path / "digits.npz"


def test_run_records_preprocessing(authors_run):
    _, out = authors_run
    assert yaml.safe_load((out / "config.yaml").read_text())["preprocessing"] == "authors"
    cfg = load_checkpoint(out / "seed0" / "entropic" / "best.pt")["config"]
    assert cfg["preprocessing"] == "authors" and run_input(cfg) == AUTHORS_INPUT
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["train_config"]["preprocessing"] == "authors"
    assert meta["preprocessing_notes"][:len(AUTHORS_NOTES)] == list(AUTHORS_NOTES)


def test_reproduce_flag_resumes_the_authors_run_and_reports_every_quirk(authors_run, real_data_dir, monkeypatch):
    config, out = authors_run
    monkeypatch.chdir(out.parent.parent)  # the default --out: runs/lenet++-smoke-authors
    assert main(["reproduce", str(config), "--budget", "smoke", "--preprocessing", "authors", "--no-plots",
                 "--no-progress", "--data-dir", str(real_data_dir)]) == 0
    report = (out / "report.md").read_text()
    assert "### Preprocessing: the authors' data preparation" in report
    for note in AUTHORS_NOTES:
        assert f"- {note}" in report
    assert "- `preprocessing`: authors" in report


def test_predict_prepares_inputs_as_the_run_trained(authors_run, digits, tmp_path):
    from agnostophobia.deploy import OpenSetClassifier
    from agnostophobia.deploy.export import metadata
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.deploy.predict import predict_files

    run = tmp_path / "run"
    shutil.copytree(authors_run[1], run)
    x, npz = digits
    rows = predict_files(ModelRequest(run, approach="entropic", fpr=0.1), [str(npz)],
                         log=lambda m: None)
    clf = OpenSetClassifier.from_run(run, approach="entropic", log=lambda m: None)
    labels, scores = clf.decide(255 - x[:, None])  # the authors' input of these digits, by hand
    assert [r["score"] for r in rows] == scores.tolist()
    assert [r["label"] for r in rows] == clf.label_names(labels)
    with pytest.raises(DataError, match="black glyph on white"):  # our preparation, given as prepared: refused
        clf.decide(x[:, None])
    assert np.array_equal(clf.predict(x), labels)  # stored uint8 images take the run's preparation too
    info = json.loads(metadata(clf, "torchscript"))["input"]
    assert info["preprocessing"] == "authors" and info["preparation"] == INPUT_CONVENTIONS["authors"]


def test_evaluate_unknowns_prepares_as_the_run_trained(authors_run, digits, tmp_path):
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.experiments.evaluate_unknowns import evaluate_run
    from agnostophobia.training.outputs import load_outputs
    from agnostophobia.training.trained import load_trained_model

    run = tmp_path / "run"
    shutil.copytree(authors_run[1], run)
    x, npz = digits
    evaluate_run(ModelRequest(run), unknowns=[str(npz)], plots=False, log=lambda m: None)
    model_dir = run / "seed0" / "entropic"
    stored = load_outputs(model_dir / "outputs.npz")["digits"]["logits"]
    expected = load_trained_model(model_dir).outputs(255 - x[:, None])[0]
    assert np.array_equal(stored, expected)
    cfg = load_checkpoint(model_dir / "best.pt")["config"]
    assert np.array_equal(model_input(UnknownSet("d", "d", x), cfg)[:, 0], 255 - x)
