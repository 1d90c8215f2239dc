"""One table of bad command-line inputs: files, configs, flags and run directories.

Each case must end with a non-zero exit code and exactly one line on stderr that names
the input, with no traceback, and must leave every file of an existing run as it was.
"""
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from runs import snapshot, write_config

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
    ("config-budget-key", lambda r, t, d: ["train", yaml_file(t, "budgets: {smoke: {epoch: 1}}\n"), "--out", r],
     "budgets.smoke.epoch", 1),
    ("config-protocol", lambda r, t, d: ["train", yaml_file(t, "protocol: imagenet\n"), "--out", r], "'protocol'", 1),
    ("config-model", lambda r, t, d: ["train", yaml_file(t, "model: vgg\n"), "--out", r], "'model'", 1),
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
    args = [str(a) for a in argv(tiny_run, tmp_path, real_data_dir)]
    try:
        result = main(args)
    except SystemExit as exc:  # argparse exits by itself
        result = exc.code
    err = capsys.readouterr().err.strip().splitlines()
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



# ------------------------------------------------------------------ configs, checked at every depth
# (issue 22, item 4): nested mappings against what their consumer accepts, before anything trains
NESTED_CONFIG_CASES = [
    ("model-kwargs-type", "model_kwargs: {feature_dim: two}\n", "model_kwargs.feature_dim"),
    ("model-kwargs-unknown", "model_kwargs: {depth: 3}\n", "model_kwargs.depth"),
    ("model-kwargs-value", "model_kwargs: {activation: relu}\n", "model_kwargs.activation"),
    ("openmax-type", "openmax: {tail_size: x}\n", "openmax.tail_size"),
    ("openmax-distance", "openmax: {distance: manhattan}\n", "openmax.distance"),
    ("budget-openmax-type", "budgets: {cpu: {openmax: {tail_size: x}}}\n", "budgets.cpu.openmax.tail_size"),
    ("budget-model-kwargs", "budgets: {cpu: {model_kwargs: {feature_dim: 2.5}}}\n",
     "budgets.cpu.model_kwargs.feature_dim"),
    ("protocol-limits-type", "protocol_limits: {max_val: many}\n", "protocol_limits.max_val"),
    ("protocol-limits-key", "protocol_limits: {max_vall: 3}\n", "protocol_limits.max_vall"),
]


@pytest.mark.parametrize("text, names", [c[1:] for c in NESTED_CONFIG_CASES], ids=[c[0] for c in NESTED_CONFIG_CASES])
def test_a_nested_config_value_is_refused_by_key_path_before_training(text, names, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", str(yaml_file(tmp_path, text)), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and names in err[0] and "Traceback" not in err[0], err
    assert not out.exists()  # nothing trained, nothing written


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
