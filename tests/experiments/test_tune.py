"""Cross-class calibration (paper Sec. 6): negative-class identity in the protocols, the
split of the negative classes into halves, and the `tune` command on a tiny synthetic
protocol (a 2 x 1 grid of one-epoch runs)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from agnostophobia.cli import main
from agnostophobia.data import build_protocol
from agnostophobia.data.datasets import LETTERS, load_dataset
from agnostophobia.data.protocols import HELD_OUT_NEGATIVES, hold_out_negative_classes, split_negative_classes
from agnostophobia.detectors import softmax_scores
from agnostophobia.experiments import reproduce
from agnostophobia.experiments import tune as tune_module
from agnostophobia.losses import LOSSES, loss_settings
from agnostophobia.metrics import ccr_at_fpr
from agnostophobia.training.config import load_experiment
from agnostophobia.training.outputs import load_outputs
from reliability_table import proves
from runs import snapshot
from synthetic import synthetic_protocol

# 96 negatives in 4 classes to train on, 24 in validation: the 2 held-out classes give 12
# validation unknowns, so FPR 0.1 is resolved (one false positive allowed).
SYNTHETIC = dict(n_unknown=96, negative_classes=4)
FPR = 0.1
CONFIG = {"name": "synth", "protocol": "lenet++", "model": "lenet++",
          "model_kwargs": {"activation": "prelu", "feature_dim": 2},
          "approaches": ["softmax", "entropic", "objectosphere"], "epochs": 1, "batch_size": 32, "lr": 0.001,
          "tensorboard": False, "openmax": {"tail_size": 3, "alpha": 2, "distance": "eucos"},
          "budgets": {"smoke": {}}}


# ------------------------------------------------------------------ the split
def test_negative_classes_split_into_disjoint_seeded_halves():
    protocol = synthetic_protocol(n_unknown=70, negative_classes=7)
    trained, held_out = split_negative_classes(protocol, seed=3)
    assert sorted(trained + held_out) == list(range(7))  # every class in exactly one half
    assert (len(trained), len(held_out)) == (4, 3)      # the odd one out is trained on
    assert split_negative_classes(protocol, seed=3) == (trained, held_out)
    assert len({tuple(split_negative_classes(protocol, seed)[0]) for seed in range(10)}) > 1


def test_a_folder_protocol_moved_elsewhere_gets_the_same_halves(tmp_path):
    """A protocol from files is named by its root's path; the halves must not depend on where the
    folder lies (they did: the path seeded the permutation)."""
    import dataclasses

    protocol = synthetic_protocol(n_unknown=70, negative_classes=7)
    here, there = (dataclasses.replace(protocol, name=f"imagefolder:{tmp_path / place}") for place in ("a", "b"))
    assert split_negative_classes(here, seed=3) == split_negative_classes(there, seed=3)
    halves = {tuple(split_negative_classes(here, seed)[0]) for seed in range(10)}
    assert len(halves) > 1  # still drawn from the data seed


def test_held_out_protocol_trains_on_one_half_and_validates_on_the_other():
    protocol = synthetic_protocol(n_unknown=80, negative_classes=4)
    trained, held_out = split_negative_classes(protocol, seed=0)
    cross = hold_out_negative_classes(protocol, seed=0)
    train_negatives = cross.train.negative_class[cross.train.labels < 0]
    assert set(train_negatives) == set(trained)
    assert set(cross.val.negative_class[cross.val.labels < 0]) == set(trained)
    assert (cross.train.labels >= 0).sum() == (protocol.train.labels >= 0).sum()  # every known kept
    unseen = cross.test_unknowns[HELD_OUT_NEGATIVES]
    assert list(cross.test_unknowns) == [HELD_OUT_NEGATIVES]  # the protocol's test sets are not used
    assert set(unseen.negative_class) == set(held_out) and (unseen.labels == -1).all()
    assert len(unseen) == np.isin(protocol.val.negative_class, held_out).sum()
    assert {img.tobytes() for img in unseen.images} <= {img.tobytes() for img in protocol.val.images}
    assert np.array_equal(cross.test_known.images, protocol.val.images[protocol.val.labels >= 0])


def test_protocol_without_negative_classes_cannot_be_split():
    with pytest.raises(ValueError, match="does not keep the class of its negatives"):
        hold_out_negative_classes(synthetic_protocol(), seed=0)


# ------------------------------------------------------- identity in protocols
def test_lenet_protocol_keeps_each_letter_through_subsetting(real_data_dir):
    p = build_protocol("lenet++", real_data_dir, seed=0, max_known_train=100, max_unknown_train=260, max_val=52,
                       max_test_per_set=10)
    assert p.negative_class_names == list(LETTERS)
    letters = load_dataset("letters", "train", real_data_dir)
    letter_of = {img.tobytes(): label for img, label in zip(letters.images, letters.labels)}
    for split in (p.train, p.val):
        negative = split.labels < 0
        assert (split.negative_class[~negative] == -1).all()
        expected = [letter_of[img[0].tobytes()] for img in split.images[negative]]
        assert split.negative_class[negative].tolist() == expected
        assert set(expected) == set(range(26))  # the class-stratified cap keeps every letter


def test_cifar10_split_and_cifar_protocols_name_their_negative_classes(synth):
    c10 = synth.cifar10_python(per_batch=40)
    synth.mnist_npz(), synth.notmnist_npz()  # the split's far unknowns
    p = build_protocol("cifar10-split", synth.root, seed=0, max_unknown_train=10)
    assert p.negative_class_names == ["horse", "ship"]
    xtr, ytr = c10["train"]
    label_of = {img.tobytes(): y for img, y in zip(xtr.transpose(0, 3, 1, 2), ytr)}
    for split in (p.train, p.val):
        source = np.array([label_of[img.tobytes()] for img in split.images])
        assert np.array_equal(split.negative_class, np.select([source == 7, source == 8], [0, 1], -1))

    synth.cifar100_python()
    synth.svhn_mat()
    p = build_protocol("cifar", synth.root, seed=0)
    assert p.negative_class_names[:2] == ["aquatic_mammals", "fish"] and len(p.negative_class_names) == 10
    assert set(p.train.negative_class[p.train.labels < 0]) == set(range(10))
    assert (p.train.negative_class[p.train.labels >= 0] == -1).all()


def test_protocol_without_negatives_has_no_classes_to_split(synth):
    synth.lenet_set()
    p = build_protocol("mnist-notmnist", synth.root, seed=0, max_test_per_set=20)
    assert p.negative_class_names == []
    with pytest.raises(ValueError, match="'mnist-notmnist' does not keep the class of its negatives"):
        split_negative_classes(p, seed=0)


def test_loss_settings_say_which_losses_read_xi_and_lambda():
    expected = {
        "softmax": (), "background": (), "entropic": (), "objectosphere": ("xi", "lambda_"),
        "outlier-exposure": ("outlier_weight", "outlier_average"),
        "energy-regularized": ("energy_weight", "energy_margin_in", "energy_margin_out"),
        "mixoe": ("mix", "mix_alpha", "mix_weight"), "maximal-entropy": ("margin",),
        "logitnorm": ("temperature",),
        "vos": ("vos_weight", "vos_start", "queue_size", "candidates", "selected"),
        # the fine-tuning variants read their loss's settings
        "outlier-exposure-ft": ("outlier_weight", "outlier_average"),
        "energy-regularized-ft": ("energy_weight", "energy_margin_in", "energy_margin_out"),
        "mixoe-ft": ("mix", "mix_alpha", "mix_weight")}
    assert {name: tuple(loss_settings(name)) for name in expected} == expected  # the package's own losses
    xi = loss_settings("objectosphere")["xi"]
    assert (xi.type, xi.default, xi.low) == (float, 50.0, 0)


# ------------------------------------------------------------------ the command
@pytest.fixture
def config(tmp_path):
    path = tmp_path / "synth.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


@pytest.fixture
def synthetic_data(monkeypatch):
    protocol = synthetic_protocol(**SYNTHETIC)
    monkeypatch.setattr(tune_module, "protocol_for", lambda cfg: protocol)
    return protocol


def tune_args(config, out, *extra):
    return ["tune", str(config), "--param", "xi=10,50", "--param", "lambda=0.0001", "--fpr", str(FPR),
            "--out", str(out), "--no-progress", *extra]


def recomputed_ccr(model_dir, fprs):
    """CCR at FPR from the stored validation outputs, scored by the softmax (Objectosphere's paper score)."""
    outputs = load_outputs(model_dir / "outputs.npz")
    known, unseen = outputs["known"], outputs[HELD_OUT_NEGATIVES]
    scores = np.concatenate([softmax_scores(known["logits"]), softmax_scores(unseen["logits"])])
    labels = np.concatenate([known["labels"], unseen["labels"]])
    return [None if math.isnan(v) else v for v in ccr_at_fpr(scores, labels, fprs)]


def test_tune_trains_each_point_and_chooses_by_validation_ccr(config, synthetic_data, tmp_path):
    out = tmp_path / "tune"
    assert main(tune_args(config, out)) == 0
    record = json.loads((out / "tune.json").read_text())
    assert record["approaches"] == ["objectosphere"] and record["not_tuned"] == ["softmax", "entropic"]
    assert record["fpr"] == FPR and FPR in record["fpr_values"] and 1e-3 in record["fpr_values"]
    assert [row["point"] for row in record["grid"]] == ["xi=10,lambda=0.0001", "xi=50,lambda=0.0001"]
    _, held_out = split_negative_classes(synthetic_data, seed=0)
    assert record["negative_classes"]["held_out"] == [f"neg{i}" for i in held_out]
    expected = {}
    for row in record["grid"]:
        model_dir = out / row["runs"][0]
        assert sorted(p.name for p in model_dir.parent.iterdir()) == ["objectosphere"]  # no other approach trained
        outputs = load_outputs(model_dir / "outputs.npz")
        assert len(outputs[HELD_OUT_NEGATIVES]["labels"]) == np.isin(synthetic_data.val.negative_class, held_out).sum()
        ccr = recomputed_ccr(model_dir, record["fpr_values"])
        assert row["ccr"] == pytest.approx(ccr) and row["ccr"][record["fpr_values"].index(FPR)] is not None
        expected[row["point"]] = ccr[record["fpr_values"].index(FPR)]
        assert yaml.safe_load((model_dir.parent.parent / "config.yaml").read_text())["loss"]["xi"] == row["params"]["xi"]
    best = max(expected.values())
    # ties go to the config's own values (xi = 50, lambda = 1e-4)
    winner = "xi=50,lambda=0.0001" if expected["xi=50,lambda=0.0001"] == best else "xi=10,lambda=0.0001"
    chosen = record["chosen"]["objectosphere"]
    assert chosen["point"] == winner and chosen["ccr"] == pytest.approx(best)
    assert load_experiment(out / chosen["config"]).train.loss["xi"] == chosen["params"]["xi"]
    table = (out / "tune.md").read_text()
    assert f"| {winner.split(',')[0][3:]} | 0.0001 | objectosphere ✓ |" in table


def test_choice_prefers_the_config_values_then_the_smallest():
    rows = [{"params": {"xi": xi, "lambda": 1e-4}, "ccr": [ccr]} for xi, ccr in ((10.0, 0.9), (50.0, 0.9), (100.0, 0.9))]
    assert tune_module.choose(rows, {"xi": 50.0, "lambda": 1e-4}, 0)["params"]["xi"] == 50.0
    assert tune_module.choose(rows, {"xi": 7.0, "lambda": 1e-4}, 0)["params"]["xi"] == 10.0
    rows[2]["ccr"] = [0.95]
    assert tune_module.choose(rows, {"xi": 50.0, "lambda": 1e-4}, 0)["params"]["xi"] == 100.0
    assert tune_module.choose([{"params": {"xi": 1.0}, "ccr": [None]}], {"xi": 1.0}, 0) is None


def test_tune_resumes_without_retraining_finished_points(config, synthetic_data, tmp_path, monkeypatch):
    (config.parent / "two.yaml").write_text(yaml.safe_dump({**CONFIG, "epochs": 2}))
    config = config.parent / "two.yaml"
    out = tmp_path / "tune"
    real_fit, calls = reproduce.fit, []

    def killed_in_second_point(cfg, protocol, run_dir, **kwargs):  # as if killed after epoch 1
        calls.append(cfg.loss["xi"])
        if cfg.loss["xi"] == 50:
            real_fit(cfg, protocol, run_dir, stop_after_epoch=1, **kwargs)
            raise KeyboardInterrupt
        return real_fit(cfg, protocol, run_dir, **kwargs)

    monkeypatch.setattr(reproduce, "fit", killed_in_second_point)
    assert main(tune_args(config, out)) == 130
    first = out / "xi=10,lambda=0.0001" / "seed0" / "objectosphere"
    second = out / "xi=50,lambda=0.0001" / "seed0" / "objectosphere"
    kept = {name: (first / name).stat().st_mtime_ns for name in ("last.pt", "outputs.npz")}
    interrupted = (second / "metrics.csv").read_text().splitlines()
    assert len(interrupted) == 2 and not (out / "tune.json").exists()

    def counted(cfg, protocol, run_dir, **kwargs):
        calls.append(cfg.loss["xi"])
        return real_fit(cfg, protocol, run_dir, **kwargs)

    calls.clear()
    monkeypatch.setattr(reproduce, "fit", counted)
    assert main(tune_args(config, out)) == 1  # an existing tuning run needs --resume
    assert main(tune_args(config, out, "--resume")) == 0
    assert calls == [50.0]  # the finished point is not trained again
    assert {name: (first / name).stat().st_mtime_ns for name in kept} == kept
    resumed = (second / "metrics.csv").read_text().splitlines()
    assert len(resumed) == 3 and resumed[:2] == interrupted  # epoch 1 kept, epoch 2 added
    assert len(json.loads((out / "tune.json").read_text())["grid"]) == 2


def test_protocol_without_negative_classes_stops_tune(config, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tune_module, "protocol_for", lambda cfg: synthetic_protocol())
    out = tmp_path / "tune"
    assert main(tune_args(config, out)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not keep the class of its negatives" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("params, message", [
    (["xi"], "--param 'xi': expected NAME=V1,V2"),
    (["gamma=0.1"], "unknown parameter 'gamma'; tunable (read by a loss): xi, lambda"),
    (["xi=10,abc"], "'abc' is not a number"),
    (["xi=-1"], "'-1': xi must be a number >= 0"),
    (["xi=10,10"], "the value 10 is given twice"),
    (["xi=10", "xi=50"], "--param xi is given twice"),
    ([], "give at least one --param"),
])
def test_bad_param_is_one_line(config, tmp_path, capsys, params, message):
    args = ["tune", str(config), "--out", str(tmp_path / "tune")]
    for param in params:
        args += ["--param", param]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("agnostophobia: error: ") and message in err[0]
    assert not (tmp_path / "tune").exists()


def test_approach_whose_loss_reads_no_tuned_parameter_is_refused(config, tmp_path, capsys):
    assert main(["tune", str(config), "--param", "xi=10", "--approach", "entropic", "--out", str(tmp_path)]) == 1
    assert "--approach entropic: its loss reads none of xi" in capsys.readouterr().err


def test_tune_searches_a_parameter_of_a_loss_registered_here(config, synthetic_data, tmp_path, monkeypatch):
    """A loss written as docs/architecture.md shows (a keyword with an annotation and a default,
    no declaration) is tunable by name: its points go under ``loss:`` (TrainConfig has no field
    ``temperature``: both the grid point and the config's own value once crashed here)."""
    from tests.contracts.test_new_loss import tempered_loss

    monkeypatch.setitem(LOSSES._items, "tempered", tempered_loss(True))
    path = tmp_path / "tempered.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "approaches": ["entropic", "tempered"]}))
    out = tmp_path / "tune"
    assert main(["tune", str(path), "--param", "temperature=0.5,2", "--fpr", str(FPR), "--out", str(out),
                 "--no-progress"]) == 0
    record = json.loads((out / "tune.json").read_text())
    assert record["approaches"] == ["tempered"] and record["not_tuned"] == ["entropic"]
    assert [row["point"] for row in record["grid"]] == ["temperature=0.5", "temperature=2"]
    for row in record["grid"]:
        saved = yaml.safe_load((out / row["runs"][0]).parent.parent.joinpath("config.yaml").read_text())
        assert saved["loss"] == {"temperature": row["params"]["temperature"]}
    chosen = record["chosen"]["tempered"]
    assert load_experiment(out / chosen["config"]).train.loss == {"temperature": chosen["params"]["temperature"]}


def test_a_parameter_value_is_checked_against_its_declaration():
    with pytest.raises(Exception, match="xi must be a number >= 0"):
        tune_module.parse_param("xi=10,-1")


@proves("refused input", "`tune` refused after a good tuning (its --out again, without --resume) leaves "
                         "tune.json, tune.md and the chosen configs byte for byte")
def test_a_refused_tune_leaves_the_last_good_result(config, synthetic_data, tmp_path, capsys):
    out = tmp_path / "tune"
    assert main(tune_args(config, out)) == 0
    written = {path: path.read_bytes() for path in out.iterdir() if path.is_file()}
    assert {"tune.json", "tune.md"} <= {path.name for path in written}
    capsys.readouterr()
    assert main(tune_args(config, out)) == 1  # an existing tuning run needs --resume
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert {path: path.read_bytes() for path in out.iterdir() if path.is_file()} == written


@proves("refused input", "`tune --out DIR` into a folder of the user's files is refused in one line naming one, "
                         "before anything is written; the folder is left byte for byte")
@pytest.mark.parametrize("held", ["tune.json", "notes.txt", "seed0/kept.txt"])
def test_tune_into_a_folder_of_other_files_is_refused(config, synthetic_data, tmp_path, capsys, held):
    out = tmp_path / "mine"
    (out / held).parent.mkdir(parents=True, exist_ok=True)
    (out / held).write_text("the user's own")
    before = snapshot(out)
    assert main(tune_args(config, out)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder of other files" in err[0] and str(out / held.split("/")[0]) in err[0], err
    assert snapshot(out) == before


# ------------------------------------------------------------------ a protocol with splits
def test_a_protocol_with_splits_tunes_on_the_split_named(synth, tmp_path, monkeypatch, capsys):
    """``tune osr-mnist`` names the split it tunes on (``--split K``); without one it is refused in
    one line naming --split; the default folder and tune.md name the split, and the chosen config
    trains every split."""
    synth.lenet_set()
    monkeypatch.chdir(tmp_path)
    args = ["tune", "osr-mnist", "--budget", "smoke", "--param", "xi=10", "--approach", "objectosphere",
            "--fpr", "0.1", "--data-dir", str(synth.root), "--no-progress"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("protocol 'osr-mnist' has 5 splits; name one, 0-4 (--split)")
    assert not (tmp_path / "runs").exists()
    assert main(args + ["--split", "3"]) == 0
    out = tmp_path / "runs" / "osr-mnist-tune-smoke-split-3"
    record = json.loads((out / "tune.json").read_text())
    assert record["protocol_split"] == 3
    assert yaml.safe_load((out / "xi=10" / "config.yaml").read_text())["protocol_split"] == 3
    assert "(tuned on split 3; the chosen config trains every split)" in (out / "tune.md").read_text()
    chosen = record["chosen"]["objectosphere"]  # the shipped config with the value: every split, none named
    assert load_experiment(out / chosen["config"]).train.protocol_split is None
