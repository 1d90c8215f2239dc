"""One table of bad command-line inputs: files, configs, flags and run directories.

Each case must end with a non-zero exit code and exactly one line on stderr that names
the input, with no traceback, and must leave every file of an existing run as it was.
"""
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from runs import one_error_line, refused_config_line, run_main, snapshot, unwritable_folder, write_config

from agnostophobia.cli import main


def yaml_file(tmp, text):
    path = tmp / "bad.yaml"
    path.write_text(text)
    return path


def npz(tmp, name="set.npz", **arrays):
    path = tmp / name
    np.savez(path, **arrays)
    return path


def truncated_npz(tmp):
    good = npz(tmp, "whole.npz", x=np.zeros((20, 28, 28), np.uint8))
    path = tmp / "truncated.npz"
    path.write_bytes(good.read_bytes()[:300])
    return path


def empty_folder(tmp):
    (tmp / "no_images").mkdir()
    (tmp / "no_images" / "readme.txt").write_text("no pictures here")
    return tmp / "no_images"


def broken_image_folder(tmp):
    (tmp / "broken").mkdir()
    (tmp / "broken" / "a.png").write_bytes(b"\x89PNG not really")
    return tmp / "broken"


def image_folder(tmp, name, pixels):
    """A folder holding one image file ``name`` of ``pixels`` (a mode the decoder must refuse)."""
    from PIL import Image

    (tmp / "images").mkdir(exist_ok=True)
    Image.fromarray(pixels).save(tmp / "images" / name)
    return tmp / "images"


def leaking_protocol(tmp):
    """A folder protocol whose test image is a symlink to a training image (issue 22, item 5)."""
    from PIL import Image

    for name in ("train/a/0.png", "train/n/0.png", "val/a/0.png", "test/n/0.png"):
        (tmp / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((28, 28), 9, np.uint8)).save(tmp / "tree" / name)
    (tmp / "tree" / "test" / "a").mkdir()
    (tmp / "tree" / "test" / "a" / "0.png").symlink_to(tmp / "tree" / "train" / "a" / "0.png")
    return yaml_file(tmp, "protocol: {type: folders, root: tree, known: [a], negative: [n], image_size: 28, "
                          "channels: 1}\napproaches: [softmax]\n")


def not_an_archive(tmp):
    path = tmp / "notzip.npz"
    path.write_text("this is text")
    return path


def zip_without_arrays(tmp):
    path = tmp / "other.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "hi")
    return path


# (id, argv as a function of (run, tmp, data), text the one line must contain, exit code)
CASES = [
    # flags
    ("budget-undefined", lambda r, t, d: ["reproduce", "lenet++", "--budget", "huge"], "--budget 'huge'", 1),
    ("seeds-zero", lambda r, t, d: ["reproduce", "lenet++", "--seeds", "0", "--out", r], "--seeds", 2),
    ("seeds-word", lambda r, t, d: ["train", "lenet++", "--seeds", "two", "--out", r], "--seeds", 2),
    ("train-no-out", lambda r, t, d: ["train", "lenet++"], "--out", 2),
    ("unknown-command", lambda r, t, d: ["frobnicate"], "frobnicate", 2),
    ("unknown-flag", lambda r, t, d: ["evaluate", r, "--unknown-flag"], "--unknown-flag", 2),
    ("plot-format", lambda r, t, d: ["plot", r, "--format", "bmpx"], "bmpx", 1),
    ("plot-max-points", lambda r, t, d: ["plot", r, "--max-points", "0"], "--max-points", 1),
    ("device-name", lambda r, t, d: ["evaluate", r, "--device", "tpu"], "tpu", 1),
    ("device-no-cuda", lambda r, t, d: ["reproduce", "lenet++", "--device", "cuda:7", "--out", r], "cuda:7", 1),
    ("experiment-name", lambda r, t, d: ["reproduce", "no-such-experiment", "--out", r], "no-such-experiment", 1),
    ("protocol-name", lambda r, t, d: ["reproduce", "cifar", "--protocol", "imagenet-p9", "--out", r],
     "imagenet-p9", 1),
    ("lenet-run-outside-ensemble", lambda r, t, d: ["reproduce", "lenet++", "--lenet-run", r, "--out", r],
     "--lenet-run", 1),
    # configs
    ("config-missing", lambda r, t, d: ["train", t / "missing.yaml", "--out", r], "missing.yaml", 1),
    ("config-not-yaml", lambda r, t, d: ["train", yaml_file(t, "epochs: [1,\n"), "--out", r], "bad.yaml", 1),
    ("config-top-list", lambda r, t, d: ["train", yaml_file(t, "- 1\n- 2\n"), "--out", r], "bad.yaml", 1),
    ("config-unknown-key", lambda r, t, d: ["train", yaml_file(t, "epochz: 3\n"), "--out", r], "epochz", 1),
    ("config-lr-bool", lambda r, t, d: ["train", yaml_file(t, "lr: true\n"), "--out", r], "'lr'", 1),
    ("config-lr-nan", lambda r, t, d: ["train", yaml_file(t, "lr: .nan\n"), "--out", r], "'lr'", 1),
    ("config-seeds-zero", lambda r, t, d: ["train", yaml_file(t, "seeds: 0\n"), "--out", r], "'seeds'", 1),
    ("config-approach", lambda r, t, d: ["train", yaml_file(t, "approaches: [magic]\n"), "--out", r], "magic", 1),
    ("config-loss-key", lambda r, t, d: ["train", yaml_file(t, "loss: {smoothing: 1}\n"), "--out", r], "loss.smoothing", 1),
    ("config-budget-key", lambda r, t, d: ["train", yaml_file(t, "budgets: {smoke: {epoch: 1}}\n"), "--out", r],
     "budgets.smoke.epoch", 1),
    ("config-protocol", lambda r, t, d: ["train", yaml_file(t, "protocol: imagenet\n"), "--out", r], "'protocol'", 1),
    ("config-model", lambda r, t, d: ["train", yaml_file(t, "model: vgg\n"), "--out", r], "'model'", 1),
    ("config-protocol-leakage", lambda r, t, d: ["train", leaking_protocol(t), "--out", t / "run"],
     "is in the train and the test split", 1),
    ("config-budget-undefined", lambda r, t, d: ["train", write_config(t / "tiny.yaml"), "--budget", "cpu",
                                                  "--out", r], "budget 'cpu'", 1),
    # run directories
    ("run-missing", lambda r, t, d: ["evaluate", t / "no-run"], "no-run", 1),
    ("run-empty", lambda r, t, d: ["evaluate", t], "no trained run", 1),
    ("plot-run-missing", lambda r, t, d: ["plot", t / "no-run"], "no-run", 1),
    ("resume-other-config", lambda r, t, d: ["reproduce", write_config(t / "tiny.yaml", lr=0.5), "--budget", "smoke",
                                             "--out", r, "--data-dir", d], "lr=0.001", 1),
    ("train-over-existing", lambda r, t, d: ["train", write_config(t / "tiny.yaml"), "--budget", "smoke",
                                             "--out", r, "--data-dir", d], "--resume", 1),
    ("resume-no-run", lambda r, t, d: ["train", write_config(t / "tiny.yaml"), "--budget", "smoke",
                                       "--out", t / "no-run", "--resume", "--data-dir", d], "holds no run", 1),
    ("resume-folder-without-run", lambda r, t, d: ["train", write_config(t / "tiny.yaml"), "--budget", "smoke",
                                                   "--out", t, "--resume", "--data-dir", d], "holds no run", 1),
    ("tune-resume-no-run", lambda r, t, d: ["tune", "lenet++", "--budget", "smoke", "--param", "xi=10",
                                            "--out", t / "no-run", "--resume", "--data-dir", d],
     "holds no tuning run", 1),
    # data directories
    ("data-dir-is-a-file", lambda r, t, d: ["data", "check", "--data-dir", yaml_file(t, "x: 1\n")],
     "bad.yaml is not a folder", 1),
    ("data-dir-missing", lambda r, t, d: ["data", "check", "--data-dir", t / "no-data"], "no-data does not exist", 1),
    ("data-dir-missing-named", lambda r, t, d: ["data", "check", "mnist", "--data-dir", t / "no-data"],
     "no-data does not exist; `agnostophobia data fetch mnist`", 1),
    ("reproduce-data-dir-is-a-file", lambda r, t, d: ["reproduce", write_config(t / "tiny.yaml"), "--budget", "smoke",
                                                      "--out", t / "new", "--data-dir", yaml_file(t, "x: 1\n")],
     "bad.yaml is not a folder", 1),
    # files given as unknowns
    ("unknowns-truncated", lambda r, t, d: ["evaluate", r, "--unknowns", truncated_npz(t)], "truncated.npz", 1),
    ("unknowns-empty", lambda r, t, d: ["evaluate", r, "--unknowns", npz(t, "empty.npz",
                                                                          x=np.zeros((0, 28, 28), np.uint8))],
     "empty.npz", 1),
    ("unknowns-float", lambda r, t, d: ["evaluate", r, "--unknowns", npz(t, "floats.npz",
                                                                          x=np.zeros((4, 28, 28)))], "floats.npz", 1),
    ("unknowns-no-array", lambda r, t, d: ["evaluate", r, "--unknowns", npz(t, "labels.npz", y=np.zeros(4))],
     "labels.npz", 1),
    ("unknowns-not-zip", lambda r, t, d: ["evaluate", r, "--unknowns", not_an_archive(t)], "notzip.npz", 1),
    ("unknowns-zip-no-arrays", lambda r, t, d: ["evaluate", r, "--unknowns", zip_without_arrays(t)], "other.npz", 1),
    ("unknowns-missing", lambda r, t, d: ["evaluate", r, "--unknowns", t / "nowhere.npz"], "nowhere.npz", 1),
    ("unknowns-no-images", lambda r, t, d: ["evaluate", r, "--unknowns", empty_folder(t)], "no_images", 1),
    ("unknowns-broken-image", lambda r, t, d: ["evaluate", r, "--unknowns", broken_image_folder(t)], "a.png", 1),
    ("unknowns-float-image-0-255", lambda r, t, d: ["evaluate", r, "--unknowns", image_folder(
        t, "f.tif", np.full((28, 28), 255, np.float32))], "f.tif: float pixels must lie in [0, 1]", 1),
    ("unknowns-32-bit-image", lambda r, t, d: ["evaluate", r, "--unknowns", image_folder(
        t, "i.tif", np.full((28, 28), 1 << 20, np.int32))], "i.tif: 32-bit integer pixels", 1),
    ("unknowns-inverted", lambda r, t, d: ["evaluate", r, "--unknowns", npz(t, "inverted.npz",
                                                                             x=np.full((5, 28, 28), 255, np.uint8))],
     "inverted.npz", 1),
    ("unknowns-named-known", lambda r, t, d: ["evaluate", r, "--unknowns", npz(t, "known.npz",
                                                                                x=np.zeros((5, 28, 28), np.uint8))],
     "known", 1),
    ("unknowns-existing-set", lambda r, t, d: ["evaluate", r, "--unknowns", "notmnist", "--data-dir", d],
     "--replace", 1),
]


@pytest.mark.parametrize("case_id, argv, names, code", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_changes_nothing(case_id, argv, names, code, tiny_run, tmp_path,
                                                      real_data_dir, capsys):
    before = snapshot(tiny_run)
    args = argv(tiny_run, tmp_path, real_data_dir)
    result, _, err = run_main(args, capsys)
    assert result == code, (args, err)
    assert len(err) == 1, err
    assert names in err[0] and "Traceback" not in err[0], err
    assert snapshot(tiny_run) == before


def test_the_table_is_large_and_one_case_runs_as_a_user_would(tiny_run):
    assert len(CASES) >= 25
    # the same contract through the installed entry point, not only main(): no traceback on stderr
    result = subprocess.run([sys.executable, "-m", "agnostophobia", "reproduce", "lenet++", "--seeds", "0"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--seeds" in result.stderr
    assert "--help" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("out", ["no-run", "."])
def test_resume_without_a_run_starts_nothing(out, tmp_path, capsys):
    """``train --resume`` into a folder that holds no run stops before anything is written
    (it used to start a new training there); no data is needed to find that out."""
    config = write_config(tmp_path / "tiny.yaml")
    out = tmp_path / out
    before = sorted(tmp_path.rglob("*"))
    assert main(["train", str(config), "--budget", "smoke", "--out", str(out), "--resume", "--no-progress",
                 "--data-dir", str(tmp_path / "data")]) == 1
    assert one_error_line(capsys) == (f"agnostophobia: error: --resume: --out {out} holds no run to continue "
                                 f"(no config.yaml, no checkpoint); leave out --resume to start one there")
    assert sorted(tmp_path.rglob("*")) == before


def test_train_without_its_data_writes_nothing(tmp_path, capsys):
    """``train`` on a registered protocol whose datasets are absent stops in one line before the run
    folder, its ``config.yaml`` or its lock exist (it used to write them first)."""
    config = yaml_file(tmp_path, "protocol: lenet++\nepochs: 1\n")
    out, data = tmp_path / "run", tmp_path / "empty-data"
    data.mkdir()
    assert main(["train", str(config), "--out", str(out), "--no-progress", "--data-dir", str(data)]) == 1
    assert "not found in" in one_error_line(capsys) and not out.exists()


def test_the_data_directory_from_the_environment_that_is_a_file_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGNOSTOPHOBIA_DATA", str(yaml_file(tmp_path, "x: 1\n")))
    assert main(["data", "check"]) == 1
    assert one_error_line(capsys) == f"agnostophobia: error: $AGNOSTOPHOBIA_DATA {tmp_path / 'bad.yaml'} is not a folder"


def test_an_os_error_names_the_users_file_never_a_temporary_one(tiny_run, tmp_path, capsys):
    """``predict --out`` into a folder that refuses new files: the line names the CSV asked for."""
    run = shutil.copytree(tiny_run, tmp_path / "run")  # --fpr writes the run's calibration.json
    images = npz(tmp_path, "digits.npz", x=np.zeros((3, 28, 28), np.uint8))
    target = unwritable_folder(tmp_path) / "predictions.csv"
    assert main(["predict", str(run), str(images), "--fpr", "0.1", "--out", str(target)]) == 1
    line = one_error_line(capsys)
    assert line.endswith(f"Permission denied: '{target}'") and ".tmp" not in line, line


# ------------------------------------------------------------------ the Python API names the argument
@pytest.fixture(scope="module")
def classifier():
    """An :class:`OpenSetClassifier` around an untrained LeNet++ (no run, no data): its arguments
    are checked before any number is computed."""
    import torch

    from agnostophobia.deploy import OpenSetClassifier
    from agnostophobia.detectors.stored import fitted_detector
    from agnostophobia.models import build_model
    from agnostophobia.training.trained import TrainedModel

    model = build_model("lenet++", 10, activation="prelu").eval()
    trained = TrainedModel(model, {"protocol": "lenet++"}, torch.device("cpu"), "fp32", False, 8)
    return OpenSetClassifier(trained, fitted_detector("softmax", None, 10, {}), 0.5, [str(d) for d in range(10)],
                             "softmax", 0)


def _tensor(*shape, dtype="float32", device="cpu"):
    import torch

    return torch.zeros(*shape, dtype=getattr(torch, dtype), device=device)


def _meta(*shape, dtype="float32"):
    return _tensor(*shape, dtype=dtype, device="meta")


API_CASES = [  # (id, call on the classifier, what the one line must say)
    ("label-names-99", lambda c: c.label_names([0, 99]), "labels[1]: class id 99 is neither a class of this model "
                                                         "(0..9) nor -1 (unknown)"),
    ("label-names-minus-5", lambda c: c.label_names(np.array([-1, 3, -5])), "labels[2]: class id -5"),
    ("label-names-float", lambda c: c.label_names([0.5, 1.0]), "labels: expected a sequence of integer class ids"),
    ("label-names-2d", lambda c: c.label_names([[0, 1]]), "labels: expected a sequence of integer class ids"),
    ("label-names-bool", lambda c: c.label_names([True, -1]), "labels must be integers, got a boolean"),
    ("predict-meta", lambda c: c.predict(_meta(2, 1, 28, 28)), "x: a tensor on the meta device holds no values"),
    ("scores-meta", lambda c: c.scores(_meta(2, 1, 28, 28)), "x: a tensor on the meta device holds no values"),
    ("predict-meta-uint8", lambda c: c.predict(_meta(2, 28, 28, dtype="uint8")),
     "x: a tensor on the meta device"),
    ("predict-int32", lambda c: c.predict(_tensor(2, 1, 28, 28, dtype="int32")),
     "x: expected a float tensor (N, 1, 28, 28) in [0, 1] or uint8 images, got torch.int32"),
    ("scores-wrong-shape", lambda c: c.scores(_tensor(2, 3, 32, 32)),
     "x: expected a float tensor (N, 1, 28, 28)"),
    ("predict-strings", lambda c: c.predict(["a", "b"]), "x: expected a float tensor (N, 1, 28, 28) in [0, 1] or "
                                                         "uint8 images, got list"),
    ("predict-nan", lambda c: c.predict(np.full((1, 1, 28, 28), np.nan, np.float32)), "x: float input must lie in"),
]


@pytest.mark.parametrize("call, names", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_the_api_names_the_argument_in_one_line(classifier, call, names):
    from agnostophobia.errors import AgnostophobiaError

    with pytest.raises(AgnostophobiaError) as info:
        call(classifier)
    assert names in str(info.value) and "\n" not in str(info.value)


# ------------------------------------------------------------------ configs, checked at every depth
# (issue 22, item 4): nested mappings against what their consumer accepts, before anything trains
NESTED_CONFIG_CASES = [
    ("model-kwargs-type", "model_kwargs: {feature_dim: two}\n", "model_kwargs.feature_dim"),
    ("model-kwargs-unknown", "model_kwargs: {depth: 3}\n", "model_kwargs.depth"),
    ("model-kwargs-value", "model_kwargs: {activation: relu}\n", "model_kwargs.activation"),
    ("openmax-type", "openmax: {tail_size: x}\n", "openmax.tail_size"),
    ("openmax-distance", "openmax: {distance: manhattan}\n", "openmax.distance"),
    ("budget-openmax-type", "budgets: {cpu: {openmax: {tail_size: x}}}\n", "budgets.cpu.openmax.tail_size"),
    ("detectors-type", "detectors: {knn: {k: x}}\n", "detectors.knn.k"),
    ("detectors-unknown-setting", "detectors: {evm: {tail: 3}}\n", "detectors.evm.tail"),
    ("detectors-k-beyond-int64", f"detectors: {{knn: {{k: {10**30}}}}}\n", "detectors.knn.k"),
    ("detectors-unknown-detector", "detectors: {knm: {k: 3}}\n", "detectors.knm"),
    ("budget-detectors-range", "budgets: {cpu: {detectors: {postmax: {tail_fraction: 2}}}}\n",
     "budgets.cpu.detectors.postmax.tail_fraction"),
    ("budget-model-kwargs", "budgets: {cpu: {model_kwargs: {feature_dim: 2.5}}}\n",
     "budgets.cpu.model_kwargs.feature_dim"),
    ("protocol-limits-type", "protocol_limits: {max_val: many}\n", "protocol_limits.max_val"),
    ("protocol-limits-key", "protocol_limits: {max_vall: 3}\n", "protocol_limits.max_vall"),
]


@pytest.mark.parametrize("text, names", [c[1:] for c in NESTED_CONFIG_CASES], ids=[c[0] for c in NESTED_CONFIG_CASES])
def test_a_nested_config_value_is_refused_by_key_path_before_training(text, names, tmp_path, capsys):
    line = refused_config_line(text, tmp_path, capsys)
    assert names in line, line


# ------------------------------------------------------------------ run records (issue 22, item 3)
def rewrite_yaml(path, **changes):
    """``path`` with ``changes`` applied; a value None deletes the key."""
    import yaml

    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))


def rewrite_json(path, change):
    import json

    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def rewrite_npz(path, change):
    with np.load(path) as data:
        arrays = dict(data)
    change(arrays)
    np.savez(path, **arrays)


def calibrate(run):
    assert main(["calibrate", str(run), "--fpr", "0.1"]) == 0


def set_threshold(run, value):
    calibrate(run)
    rewrite_json(run / "calibration.json", lambda d: d["entries"][1].update(threshold=value))


def swap_models(run):
    (run / "seed0" / "softmax").rename(run / "seed0" / "tmp")
    (run / "seed0" / "entropic").rename(run / "seed0" / "softmax")
    (run / "seed0" / "tmp").rename(run / "seed0" / "entropic")


def truncate(path, keep=400):
    path.write_bytes(path.read_bytes()[:keep])


def both(run, **changes):
    """config.yaml and run_meta.json changed alike: the two records still agree."""
    rewrite_yaml(run / "config.yaml", **changes)
    rewrite_json(run / "run_meta.json", lambda d: d["train_config"].update(changes))


def nan_logits(arrays):
    arrays["known__logits"][3, 1] = np.nan


def image_npz(tmp):
    return npz(tmp, "images.npz", x=np.zeros((2, 28, 28), np.uint8))


def seed_link(run):
    import os

    os.symlink("seed0", run / "seed1")
    rewrite_yaml(run / "config.yaml", seeds=2)
    rewrite_json(run / "run_meta.json", lambda d: d.update(seeds=2))


# (id, how the run copy is broken, command as a function of (run, tmp), text the one line must contain)
EVALUATE = lambda r, t: ["evaluate", r, "--no-progress"]  # noqa: E731
PREDICT = lambda r, t: ["predict", r, image_npz(t), "--approach", "entropic"]  # noqa: E731
EXPORT = lambda r, t: ["export", r, "--approach", "entropic", "--out", t / "model.pt2"]  # noqa: E731
RECORD_CASES = [
    ("config-missing", lambda r: (r / "config.yaml").unlink(), EVALUATE, "config.yaml: missing"),
    ("config-empty", lambda r: (r / "config.yaml").write_text(""), EVALUATE, "config.yaml: is empty"),
    ("config-unparsable", lambda r: (r / "config.yaml").write_text("epochs: [1,\n"), EVALUATE, "not valid YAML"),
    ("config-top-list", lambda r: (r / "config.yaml").write_text("- 1\n"), EVALUATE, "config.yaml: top level"),
    ("config-wrong-type", lambda r: rewrite_yaml(r / "config.yaml", epochs="two"), EVALUATE, "'epochs'"),
    ("config-openmax-type", lambda r: both(r, openmax={"tail_size": "x"}), EVALUATE, "openmax.tail_size"),
    ("config-model-kwargs", lambda r: rewrite_yaml(r / "config.yaml", model_kwargs={"feature_dim": "two"}),
     EVALUATE, "model_kwargs.feature_dim"),
    # the silent re-score of the issue: a run fitted with OpenMax tail_size 3, its config.yaml now saying 20
    ("config-vs-meta", lambda r: rewrite_yaml(r / "config.yaml", openmax={"tail_size": 20}), EVALUATE,
     "train_config.openmax"),
    ("config-key-deleted", lambda r: rewrite_yaml(r / "config.yaml", openmax=None), EVALUATE, "disagree"),
    ("config-vs-checkpoint", lambda r: both(r, lr=0.5), EVALUATE, "lr=0.001"),
    ("meta-seeds", lambda r: rewrite_json(r / "run_meta.json", lambda d: d.update(seeds=3)), EVALUATE, "seeds"),
    ("meta-unparsable", lambda r: (r / "run_meta.json").write_text("{"), EVALUATE, "run_meta.json: not valid JSON"),
    ("meta-wrong-type", lambda r: rewrite_json(r / "run_meta.json", lambda d: d.update(class_names=[1, 2])),
     EVALUATE, "class_names"),
    ("checkpoint-in-other-folder", swap_models, EVALUATE, "was trained as seed0/"),
    ("seed-symlink", seed_link, EVALUATE, "symbolic link"),
    ("seed-leading-zero", lambda r: (r / "seed0").rename(r / "seed00"), EVALUATE, "leading zeros"),
    ("outputs-truncated-plot", lambda r: truncate(r / "seed0" / "softmax" / "outputs.npz"),
     lambda r, t: ["plot", r, "--out", t / "figures"], "outputs.npz: not a readable npz"),
    ("outputs-truncated-evaluate", lambda r: truncate(r / "seed0" / "entropic" / "outputs.npz"), EVALUATE,
     "outputs.npz"),
    ("outputs-nan", lambda r: rewrite_npz(r / "seed0" / "softmax" / "outputs.npz", nan_logits), EVALUATE,
     "known__logits: 1 non-finite"),
    ("outputs-no-labels", lambda r: rewrite_npz(r / "seed0" / "softmax" / "outputs.npz",
                                                lambda a: a.pop("notmnist__labels")), EVALUATE, "notmnist__labels"),
    ("outputs-float-labels", lambda r: rewrite_npz(r / "seed0" / "softmax" / "outputs.npz",
                                                   lambda a: a.update(known__labels=a["known__labels"] * 1.0)),
     EVALUATE, "known__labels"),
    ("fit-outputs-truncated", lambda r: truncate(r / "seed0" / "softmax" / "fit_outputs.npz"), EVALUATE,
     "fit_outputs.npz"),
    ("val-outputs-wrong-split", lambda r: rewrite_npz(r / "seed0" / "entropic" / "val_outputs.npz",
                                                      lambda a: a.update({k.replace("val", "test"): a.pop(k)
                                                                          for k in list(a)})),
     lambda r, t: ["calibrate", r, "--fpr", "0.1"], "val_outputs.npz"),
    ("calibration-nan", lambda r: set_threshold(r, float("nan")), PREDICT, "entries[1].threshold"),
    ("calibration-string", lambda r: set_threshold(r, "0.5"), PREDICT, "entries[1].threshold"),
    ("calibration-not-json", lambda r: (r / "calibration.json").write_text("thresholds"),
     lambda r, t: ["calibrate", r, "--fpr", "0.1"], "calibration.json"),
    ("calibration-nan-evaluate", lambda r: set_threshold(r, float("nan")), EVALUATE, "entries[1].threshold"),
    # export checks the whole run as predict does: records that disagree export no threshold
    ("config-vs-meta-export", lambda r: rewrite_yaml(r / "config.yaml", openmax={"tail_size": 20}), EXPORT,
     "train_config.openmax"),
    ("meta-seeds-export", lambda r: rewrite_json(r / "run_meta.json", lambda d: d.update(seeds=3)), EXPORT, "seeds"),
]


@pytest.mark.parametrize("case_id, damage, argv, names", RECORD_CASES, ids=[c[0] for c in RECORD_CASES])
def test_a_run_with_a_bad_record_is_refused_in_one_line_and_left_as_it_was(case_id, damage, argv, names, tiny_run,
                                                                           tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, symlinks=True)
    damage(run)
    capsys.readouterr()
    before = snapshot(run)
    args = [str(a) for a in argv(run, tmp_path)]
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, (args, err)
    assert len(err) == 1 and names in err[0] and "Traceback" not in err[0], err
    assert snapshot(run) == before  # nothing written, added or removed
