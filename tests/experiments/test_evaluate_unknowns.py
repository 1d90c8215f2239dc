"""``evaluate --unknowns``: a user's set is prepared exactly like the run's protocol prepared
its own sets (one ``prepare_images``), polarity is checked by the kind of images, and every
bad input or name is refused in one line before any model runs or any file changes.

Everything here runs on small synthetic files; the one trained run is LeNet++ at the smoke
budget on them (a few seconds).
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from runs import one_error_line, snapshot
from PIL import Image
from torchvision.transforms.v2 import CenterCrop, Resize

from tests.conftest import Synth, glyphs
from agnostophobia.cli import main
from agnostophobia.data import build_protocol
from agnostophobia.errors import DataError
from agnostophobia.experiments import evaluate_unknowns as ev
from agnostophobia.training.outputs import load_outputs

LENET_RUN = {"protocol": "lenet++", "model": "lenet++"}
CIFAR_RUN = {"protocol": "cifar10-split", "model": "resnet18"}


def bright_photos(rng: np.random.Generator, n: int, size: int = 32) -> np.ndarray:
    """Photograph stand-ins with a bright background (sky, a wall) and a darker object."""
    x = rng.integers(200, 256, (n, size, size, 3), dtype=np.uint8)
    x[:, size // 4:-size // 4, size // 4:-size // 4] = rng.integers(0, 120, (n, size // 2, size // 2, 3))
    return x


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data directory for the lenet++ and cifar10-split protocols: DHCD (a declared 2-px
    frame) as the Devanagari set, CIFAR-10 test images with bright backgrounds."""
    root = tmp_path_factory.mktemp("data")
    synth = Synth(root)
    synth.mnist_npz()
    synth.letters_npz()
    synth.dhcd_npz()
    synth.notmnist_npz()
    cifar = synth.cifar10_npz()
    np.savez_compressed(root / "cifar10" / "cifar10.npz", x_test=bright_photos(synth.rng, len(cifar["y_test"])),
                        y_test=cifar["y_test"].astype(np.uint8))
    return root


def evaluate_path(spec, cfg, data_dir=None) -> np.ndarray:
    """What `evaluate` feeds a model of a run trained with ``cfg`` for ``--unknowns spec``."""
    return ev.model_input(ev.read_unknowns(str(spec), data_dir), cfg)


def save_pngs(folder, images) -> None:
    folder.mkdir()
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:03d}.png")


# ------------------------------------------------------------- one preparation
def test_evaluate_prepares_like_the_lenet_protocol(data, tmp_path):
    """LeNet++ (grey): registered sets, an .npz and a folder of the same raw images go through
    exactly the protocol's path: DHCD's declared frame cropped, CIFAR-10 to luma and resized,
    and CIFAR-10's bright photographs not refused as 'glyphs on white'."""
    protocol = build_protocol("lenet++", data, seed=0)
    assert set(protocol.test_unknowns) == {"letters", "devanagari", "notmnist", "cifar10"}
    for name, split in protocol.test_unknowns.items():
        assert np.array_equal(evaluate_path(name, LENET_RUN, data), split.images), name
    raw_notmnist = np.load(data / "notmnist" / "notmnist.npz")["x_test"]
    np.savez(tmp_path / "mine.npz", x=raw_notmnist)
    save_pngs(tmp_path / "mine_pngs", raw_notmnist)
    expected = protocol.test_unknowns["notmnist"].images
    assert np.array_equal(evaluate_path(tmp_path / "mine.npz", LENET_RUN), expected)
    assert np.array_equal(evaluate_path(tmp_path / "mine_pngs", LENET_RUN), expected)


def test_evaluate_prepares_like_the_cifar_protocol(data, tmp_path):
    """ResNet (RGB): the protocol's dog+truck test set and the same raw images given as an
    .npz, as a folder and as part of the registered CIFAR-10 test set are the same input."""
    from agnostophobia.data.protocols import CIFAR10_UNKNOWN

    protocol = build_protocol("cifar10-split", data, seed=0)
    expected = protocol.test_unknowns["cifar10-dog-truck"].images
    with np.load(data / "cifar10" / "cifar10.npz") as z:
        raw = z["x_test"][np.isin(z["y_test"], CIFAR10_UNKNOWN)]
    np.savez(tmp_path / "dog_truck.npz", x_test=raw)
    save_pngs(tmp_path / "dog_truck_pngs", raw)
    assert expected.shape == (len(raw), 3, 32, 32)
    assert np.array_equal(evaluate_path(tmp_path / "dog_truck.npz", CIFAR_RUN), expected)
    assert np.array_equal(evaluate_path(tmp_path / "dog_truck_pngs", CIFAR_RUN), expected)
    with np.load(data / "cifar10" / "cifar10.npz") as z:
        registered = evaluate_path("cifar10", CIFAR_RUN, data)[np.isin(z["y_test"], CIFAR10_UNKNOWN)]
    assert np.array_equal(registered, expected)


def mixed_size_images(rng) -> list:
    """White-on-black glyphs, grey and RGB, at four sizes; the first is not a model's size."""
    images = []
    for i, (h, w) in enumerate([(40, 40), (28, 28), (36, 50), (32, 32)]):
        img = np.zeros((h, w), np.uint8)
        box = img[h // 4:3 * h // 4, w // 3:2 * w // 3]
        box[:] = rng.integers(100, 256, box.shape)
        images.append(np.stack([img, img // 5 * 4, img // 5 * 3], -1) if i % 2 else img)
    return images


@pytest.mark.parametrize("cfg, mode, size", [(LENET_RUN, "L", 28), (CIFAR_RUN, "RGB", 32)])
def test_a_folder_of_mixed_sizes_is_resized_once(tmp_path, cfg, mode, size):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for i, image in enumerate(mixed_size_images(np.random.default_rng(0))):
        Image.fromarray(image).save(folder / f"{i}.png")
    expected = []
    for file in sorted(folder.iterdir()):
        with Image.open(file) as img:  # one antialiased resize of the shorter side, straight from the file
            # to the model's size, then the centre crop: torchvision's Resize + CenterCrop on the PIL image
            expected.append(np.asarray(CenterCrop(size)(Resize(size)(img.convert(mode)))))
    expected = np.stack(expected)
    expected = expected[:, None] if mode == "L" else expected.transpose(0, 3, 1, 2)
    assert np.array_equal(evaluate_path(folder, cfg), expected)


def test_an_undeclared_frame_is_resized_not_cropped(tmp_path):
    """A user's 32x32 glyphs with a blank border: no dataset declares a frame for them, so
    they are resized like every such set in the protocol, not cropped as a guess."""
    x = glyphs(np.random.default_rng(0), np.arange(12), 32, pad=2)
    assert not x[:, :2].any() and not x[:, :, -2:].any()
    np.savez(tmp_path / "framed.npz", x=x)
    resized = np.stack([np.asarray(Image.fromarray(im).resize((28, 28), Image.Resampling.BILINEAR)) for im in x])
    assert np.array_equal(evaluate_path(tmp_path / "framed.npz", LENET_RUN)[:, 0], resized)


# ------------------------------------------------------------------- polarity
def test_polarity_is_checked_by_the_kind_of_images(data, tmp_path):
    photos = bright_photos(np.random.default_rng(1), 20)
    np.savez(tmp_path / "photos.npz", x=photos)
    inverted = 255 - glyphs(np.random.default_rng(2), np.arange(20))
    np.savez(tmp_path / "inverted.npz", x=inverted)
    # a run trained on photographs: a user's bright photographs are fine
    assert evaluate_path(tmp_path / "photos.npz", CIFAR_RUN).shape == (20, 3, 32, 32)
    # a run trained on glyphs: a registered photo set (kind "natural") is fine ...
    assert evaluate_path("cifar10", LENET_RUN, data).shape[1:] == (1, 28, 28)
    # ... a user's own set is taken to be glyphs, so black on white is refused, naming the file
    for name in ("inverted.npz", "photos.npz"):
        with pytest.raises(DataError, match=f"{name}: looks like a black glyph on white"):
            evaluate_path(tmp_path / name, LENET_RUN)


# --------------------------------------------------- refusals on a trained run
@pytest.fixture(scope="module")
def lenet_run(tiny_run):
    """The session's tiny LeNet++ run (tests/_support/runs.py); refusals must leave it untouched."""
    return tiny_run


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail the test if `evaluate` loads a checkpoint (the first step of running a model)."""
    def refuse(*args, **kwargs):
        raise RuntimeError("a checkpoint was loaded before the input was refused")
    monkeypatch.setattr(ev, "load_trained_model", refuse)


def _truncated(path):
    np.savez(path, x=glyphs(np.random.default_rng(0), np.arange(50)))
    path.write_bytes(path.read_bytes()[:300])


def _folder(path, files):
    path.mkdir()
    for name, data in files.items():
        (path / name).write_bytes(data)


BAD_INPUTS = {
    "truncated": ("bad.npz", _truncated, "bad.npz: not a readable npz file"),
    "empty": ("bad.npz", lambda p: np.savez(p, x=np.zeros((0, 28, 28), np.uint8)), "bad.npz: x: contains 0 images"),
    "float": ("bad.npz", lambda p: np.savez(p, x=np.zeros((3, 28, 28), np.float32)), "bad.npz: x: images must be uint8"),
    "shape": ("bad.npz", lambda p: np.savez(p, x=np.zeros((3, 784), np.uint8)), "bad.npz: x: images have shape (3, 784)"),
    "no image array": ("bad.npz", lambda p: np.savez(p, y=np.zeros(3)), "bad.npz: no image array"),
    "no images in folder": ("bad", lambda p: _folder(p, {"notes.txt": b"hi"}), "bad: no image files"),
    "unreadable image": ("bad", lambda p: _folder(p, {"a.png": b"not a png"}), "a.png: cannot decode image"),
    "missing path": ("bad.npz", lambda p: None, "bad.npz: no such file or folder"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_one_line_before_any_model_runs(lenet_run, tmp_path, capsys, no_model_loading, case):
    """Also when a good set comes first: nothing is evaluated or written until all inputs are read."""
    good = tmp_path / "good.npz"
    np.savez(good, x=glyphs(np.random.default_rng(3), np.arange(10)))
    name, make, message = BAD_INPUTS[case]
    make(tmp_path / name)
    before = snapshot(lenet_run)
    assert main(["evaluate", str(lenet_run), "--unknowns", str(good), str(tmp_path / name)]) == 1
    assert message in one_error_line(capsys)
    assert snapshot(lenet_run) == before


@pytest.mark.parametrize("spec", ["known.npz", "known"])
def test_a_set_called_known_is_refused_before_any_work(lenet_run, tmp_path, capsys, no_model_loading, spec):
    if spec == "known":  # a folder, not even read: the name alone is refused
        (tmp_path / spec).mkdir()
    else:
        np.savez(tmp_path / spec, x=glyphs(np.random.default_rng(4), np.arange(10)))
    before = snapshot(lenet_run)
    assert main(["evaluate", str(lenet_run), "--unknowns", str(tmp_path / spec)]) == 1
    assert "must not be called 'known'" in one_error_line(capsys)
    assert snapshot(lenet_run) == before


def test_two_sets_of_one_name_are_refused(lenet_run, tmp_path, capsys, no_model_loading):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        np.savez(tmp_path / sub / "mine.npz", x=glyphs(np.random.default_rng(5), np.arange(10)))
    before = snapshot(lenet_run)
    assert main(["evaluate", str(lenet_run), "--unknowns", str(tmp_path / "a" / "mine.npz"),
                 str(tmp_path / "b" / "mine.npz")]) == 1
    assert "more than one set would be called 'mine'" in one_error_line(capsys)
    assert snapshot(lenet_run) == before


def test_replacing_a_set_needs_replace(lenet_run, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    first, second = tmp_path / "first" / "mine.npz", tmp_path / "second" / "mine.npz"
    for path, n in ((first, 12), (second, 7)):
        path.parent.mkdir()
        np.savez(path, x=glyphs(np.random.default_rng(n), np.arange(n)))
    assert main(["evaluate", str(run), "--unknowns", str(first)]) == 0
    assert len(load_outputs(run / "seed0" / "entropic" / "outputs.npz")["mine"]["labels"]) == 12
    capsys.readouterr()
    before = snapshot(run)
    for spec in (str(second), "letters"):  # a user's set, and one of the protocol's own sets
        with monkeypatch.context() as m:
            m.setattr(ev, "load_trained_model", lambda *a, **k: pytest.fail("checkpoint loaded before refusing"))
            assert main(["evaluate", str(run), "--unknowns", spec, "--data-dir", "/nonexistent"]) == 1
        line = one_error_line(capsys)
        assert "already holds" in line and "--replace" in line
        assert snapshot(run) == before
    assert main(["evaluate", str(run), "--unknowns", str(second), "--replace"]) == 0
    assert len(load_outputs(run / "seed0" / "entropic" / "outputs.npz")["mine"]["labels"]) == 7


# ------------------------------------------- adding a set recomputes that set alone
@pytest.fixture
def scoring_log(monkeypatch):
    """What `evaluate` computes: the sizes of the splits detectors score, and the unknown sets
    whose metrics rows are computed."""
    from agnostophobia.detectors import stored

    log = {"scored_sizes": set(), "rows_of": set()}
    top_scores, known_vs_unknown = stored.top_scores, stored.ModelScores.known_vs_unknown

    def scored(detector, outputs, num_classes):
        log["scored_sizes"].add(len(outputs["labels"]))
        return top_scores(detector, outputs, num_classes)

    def rows(self, detector, unknown):
        log["rows_of"].add(unknown)
        return known_vs_unknown(self, detector, unknown)

    monkeypatch.setattr(stored, "top_scores", scored)
    monkeypatch.setattr(stored.ModelScores, "known_vs_unknown", rows)
    return log


def glyph_set(path, n, seed):
    path.parent.mkdir(exist_ok=True)
    np.savez(path, x=glyphs(np.random.default_rng(seed), np.arange(n)))
    return path


def metrics_of(run):
    return json.loads((run / "metrics.json").read_text())


def assert_equals_full_evaluation(run, tmp_path):
    """metrics.json and report.md as `evaluate RUN` writes them with every score computed and
    every detector fitted anew."""
    full = tmp_path / "full"
    shutil.copytree(run, full)
    for cache in [*full.glob("seed*/*/detector_scores*.npz"), *full.glob("seed*/*/fitted_detectors.npz")]:
        cache.unlink()
    shutil.rmtree(full / "figures")
    assert main(["evaluate", str(full)]) == 0
    assert (full / "metrics.json").read_bytes() == (run / "metrics.json").read_bytes()
    assert (full / "report.md").read_text() == (run / "report.md").read_text()
    assert sorted(p.name for p in (full / "figures").iterdir()) == sorted(p.name for p in (run / "figures").iterdir())


def test_adding_a_set_computes_that_set_alone(lenet_run, tmp_path, scoring_log):
    """The new set's outputs, scores, metrics rows and figures; every other set's rows and
    figures stay as they were, and the result is what a full evaluation computes."""
    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    before = metrics_of(run)
    figures = {p: p.stat().st_mtime_ns for p in (run / "figures").iterdir()}
    assert main(["evaluate", str(run), "--unknowns", str(glyph_set(tmp_path / "extra.npz", 37, 6))]) == 0
    assert scoring_log["scored_sizes"] == {37} and scoring_log["rows_of"] == {"extra"}
    after = metrics_of(run)
    assert [r for r in after["per_seed"] if r["unknowns"] != "extra"] == before["per_seed"]
    new_rows = [r for r in after["per_seed"] if r["unknowns"] == "extra"]
    assert len(new_rows) == len({(r["seed"], r["approach"], r["detector"]) for r in before["per_seed"]})
    assert {p: p.stat().st_mtime_ns for p in figures} == figures  # no old figure redrawn
    assert (run / "figures" / "oscr_extra.png").exists()
    assert "figures/oscr_extra.png" in (run / "report.md").read_text()
    assert_equals_full_evaluation(run, tmp_path)


def test_replace_recomputes_the_replaced_set_alone(lenet_run, tmp_path, scoring_log):
    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    assert main(["evaluate", str(run), "--unknowns", str(glyph_set(tmp_path / "a" / "extra.npz", 37, 7))]) == 0
    before = metrics_of(run)
    scoring_log["scored_sizes"].clear(), scoring_log["rows_of"].clear()
    assert main(["evaluate", str(run), "--unknowns", str(glyph_set(tmp_path / "b" / "extra.npz", 23, 8)),
                 "--replace"]) == 0
    assert scoring_log["scored_sizes"] == {23} and scoring_log["rows_of"] == {"extra"}
    after = metrics_of(run)
    assert [r for r in after["per_seed"] if r["unknowns"] != "extra"] == \
        [r for r in before["per_seed"] if r["unknowns"] != "extra"]
    assert {r["num_unknown"] for r in after["per_seed"] if r["unknowns"] == "extra"} == {23}
    assert_equals_full_evaluation(run, tmp_path)


def test_rows_from_other_scores_are_computed_again(lenet_run, tmp_path, scoring_log):
    """metrics.json rows not computed from the stored scores (their fingerprint differs, e.g. an
    older metrics.json) are never kept: every set's rows are computed again."""
    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    metrics = metrics_of(run)
    metrics["scores_fingerprints"] = {key: "elsewhere" for key in metrics["scores_fingerprints"]}
    metrics["per_seed"][0]["auroc"] = -1.0  # a number that must not survive
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["evaluate", str(run), "--unknowns", str(glyph_set(tmp_path / "extra.npz", 37, 9))]) == 0
    assert scoring_log["scored_sizes"] == {37}  # the stored scores themselves are still valid
    assert scoring_log["rows_of"] == {r["unknowns"] for r in metrics["per_seed"]} | {"extra"}
    assert_equals_full_evaluation(run, tmp_path)


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_a_tuned_run_fits_nothing_and_scores_the_new_set_alone(lenet_run, tmp_path, scoring_log, monkeypatch):
    """A tuned run's report also shows each tuned detector with the config's settings: those
    scores are kept too (detector_scores_config.npz), and every fitted detector is restored from
    fitted_detectors.npz, so adding a set fits no detector and scores that set alone."""
    from agnostophobia.detectors import DETECTORS

    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    assert main(["tune-detectors", str(run), "--fpr", "0.5", "--detector", "knn", "postmax", "--partial"]) == 0
    assert main(["evaluate", str(run)]) == 0  # the report with the chosen settings: every fit kept
    assert all((d / "detector_scores_config.npz").exists() for d in run.glob("seed*/*"))
    fits = []
    for name in DETECTORS.names():
        cls = DETECTORS.get(name)
        if "fit" in vars(cls):
            monkeypatch.setattr(cls, "fit", lambda self, *a, _fit=cls.fit: fits.append(self.name) or _fit(self, *a))
    scoring_log["scored_sizes"].clear()
    assert main(["evaluate", str(run), "--unknowns", str(glyph_set(tmp_path / "extra.npz", 37, 10))]) == 0
    assert scoring_log["scored_sizes"] == {37}
    assert set(fits) <= {"knn"}  # k-NN declares no state worth keeping: its fit is a copy
    tuned = metrics_of(run)["tuned_detectors"]["results"]
    assert {row["unknowns"] for row in tuned} >= {"extra", "letters"}
    assert_equals_full_evaluation(run, tmp_path)


# ------------------------------------------------------------------- names that cannot collide (issue 31, item 4)
def test_sets_whose_names_differ_only_in_punctuation_keep_their_own_figures(lenet_run, tmp_path):
    """Each set's figures go to their own files, named after the set (numbered where two names
    would give one file name, also one differing in case only); the report links them all."""
    names = ("a b", "a_b", "a-b", "a_b-2", "A B")
    run = tmp_path / "run"
    shutil.copytree(lenet_run, run)
    before = {p.name for p in (run / "figures").iterdir()}
    specs = [str(glyph_set(tmp_path / "in" / f"{name}.npz", 12 + i, i)) for i, name in enumerate(names)]
    assert main(["evaluate", str(run), "--unknowns", *specs, "--no-progress"]) == 0
    new = {p.name for p in (run / "figures").iterdir()} - before
    oscr = sorted(n for n in new if n.startswith("oscr_") and not n.startswith("oscr_counts_"))
    assert len(oscr) == len(names) and len({n.casefold() for n in oscr}) == len(names), oscr
    assert all(n.lower().startswith(("oscr_a_b", "oscr_a-b")) for n in oscr), oscr  # the set's name kept
    report = (run / "report.md").read_text()
    assert all(f"figures/{n}" in report for n in oscr)


@pytest.mark.parametrize("name", ["new\nline", "tab\there", "bell\x07", "rtl\u202eoverride", "line\u2028sep"])
def test_a_set_name_with_a_control_character_is_refused(lenet_run, tmp_path, capsys, no_model_loading, name):
    folder = tmp_path / name
    save_pngs(folder, glyphs(np.random.default_rng(6), np.arange(4)))
    before = snapshot(lenet_run)
    assert main(["evaluate", str(lenet_run), "--unknowns", str(folder), "--no-progress"]) == 1
    line = one_error_line(capsys)
    assert "control character" in line and repr(folder.name) in line, line
    assert snapshot(lenet_run) == before
