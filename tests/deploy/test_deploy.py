"""Deployment (issue 12): a threshold chosen on validation data (``calibrate``), predictions with
"unknown" (``predict``, :class:`OpenSetClassifier`) and an exported file that decides the same
without agnostophobia (``export``).

The rule is checked on hand-made scores; everything else on the session's tiny LeNet++ run
on the real staged data (tests/_support/runs.py: 32 validation knowns and 32 validation negatives),
copied before anything writes into it.
"""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from runs import TINY, reproduce_args, run_cli, run_main, snapshot, write_config

from agnostophobia.cli import main
from agnostophobia.data import build_protocol
from agnostophobia.deploy import OpenSetClassifier
from agnostophobia.deploy.calibration import ModelScore, calibrate_model, check_resolved
from agnostophobia.deploy.export import FORMATS, TORCHSCRIPT_NOTE, DeployedClassifier, check_exportable
from agnostophobia.detectors import DETECTORS
from agnostophobia.detectors.stored import fitted_detector, top_scores
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning
from agnostophobia.metrics import ccr_at_fpr, threshold_at_fpr
from agnostophobia.rundir import LAST_LAYER, ModelDir
from agnostophobia.rundir import VAL_OUTPUTS
from agnostophobia.training.outputs import load_outputs, save_last_layer

FPR = 0.1  # the FPR of the session's calibrated run (tests/conftest.py): 32 validation negatives, k = 3
DIGITS = [str(d) for d in range(10)]


@pytest.fixture
def run(tiny_run, tmp_path):
    """A private copy of the tiny run, not yet calibrated."""
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    return copy


@pytest.fixture(scope="module")
def test_images(real_data_dir):
    """1,000 real test images as the tiny run's protocol prepares them: 200 MNIST test digits and
    200 of each unknown set (letters, Devanagari, notMNIST, CIFAR-10), uint8 (N, 1, 28, 28)."""
    limits = {**TINY["protocol_limits"], "max_test_per_set": 200}
    protocol = build_protocol("lenet++", real_data_dir, seed=0, **limits)
    images = np.concatenate([protocol.test_known.images, *(s.images for s in protocol.test_unknowns.values())])
    assert images.shape == (1000, 1, 28, 28)
    return images


def softmax(logits):
    """The ``softmax`` detector's (N, C) scores: the log-odds of the softmax (tie-free scores, score
    scale 2), in the order of the probabilities, which ``expit`` gives back."""
    from scipy.special import expit, softmax as scipy_softmax

    from agnostophobia.detectors import softmax_log_odds

    logits = np.asarray(logits, np.float64)
    scores = softmax_log_odds(logits)
    np.testing.assert_allclose(expit(scores), scipy_softmax(logits, axis=1), rtol=1e-12, atol=1e-300)
    return scores


# ------------------------------------------------------------------ shared pieces
def test_inputs_are_image_files_folders_in_sorted_path_order_and_npz(tmp_path):
    from agnostophobia.data.inputs import read_images

    for name, value in (("b/z.png", 1), ("b/a.png", 2), ("c.png", 3), ("a.bmp", 4), ("notes.txt", None)):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        if value is None:
            (tmp_path / name).write_text("skipped: not an image")
        else:
            Image.fromarray(np.full((5, 7), value, np.uint8)).save(tmp_path / name)
    folder = read_images(str(tmp_path))
    assert folder.samples == [str(tmp_path / n) for n in ("a.bmp", "b/a.png", "b/z.png", "c.png")]
    assert [int(image[0, 0, 0]) for image in folder.images] == [4, 2, 1, 3]  # RGB, each at its own size
    one = read_images(str(tmp_path / "c.png"))
    assert one.samples == [str(tmp_path / "c.png")] and one.images[0].shape == (5, 7, 3)
    with pytest.raises(AgnostophobiaError, match="notes.txt: not an image file"):
        read_images(str(tmp_path / "notes.txt"))


def test_the_network_takes_stored_uint8_float_and_empty_input():
    from agnostophobia.models import build_model
    from agnostophobia.training.outputs import predict

    model = build_model("lenet++", 10, activation="prelu")
    images = np.random.default_rng(0).integers(0, 256, (5, 1, 28, 28), dtype=np.uint8)
    logits, features = predict(model, images, batch_size=2)
    as_float = predict(model, torch.from_numpy(images).float() / 255, batch_size=2)  # already in [0, 1]
    np.testing.assert_array_equal(as_float[0], logits)
    empty = predict(model, images[:0])  # a protocol without a validation split
    assert empty[0].shape == (0, 10) and empty[1].shape == (0, 2) and features.shape == (5, 2)


# ------------------------------------------------------------------ the threshold rule
def test_threshold_is_just_above_the_k_plus_first_negative_score():
    # knowns: (score, correct?) 0.95 yes, 0.85 yes, 0.5 no (predicted 1, label 0); negatives 0.9, 0.8, 0.3
    predicted = np.array([0, 1, 1, 0, 0, 0])
    score = np.array([0.95, 0.85, 0.5, 0.9, 0.8, 0.3])
    labels = np.array([0, 1, 0, -1, -1, -1])
    scores = np.full((6, 2), -1.0)
    scores[np.arange(6), predicted] = score
    point = threshold_at_fpr(scores, labels, 1 / 3)  # one false positive allowed: 0.9; 0.8 must be rejected
    assert point.threshold == np.nextafter(0.8, np.inf) and point.allowed == 1
    assert point.fpr == 1 / 3 and point.ccr == 2 / 3
    assert ccr_at_fpr(scores, labels, 1 / 3)[0] == point.ccr  # the oracle's readout rule, on the same data
    point = threshold_at_fpr(scores, labels, 0.5)  # still one: 1/3 <= 0.5 < 2/3
    assert point.threshold == np.nextafter(0.8, np.inf) and point.fpr == 1 / 3
    point = threshold_at_fpr(scores, labels, 1.0)  # every negative allowed: accept everything
    assert point.threshold == 0.3 and point.fpr == 1.0 and point.ccr == 2 / 3
    point = threshold_at_fpr(scores, labels, 0.2)  # 0.2 < 1/3: three negatives cannot resolve it
    assert math.isnan(point.threshold) and point.allowed == 0


def test_tied_negative_scores_are_never_split():
    # two negatives tie at 0.7: allowing one false positive must reject both (FPR 0, not 1/4)
    scores = np.array([[0.9, 0.0], [0.0, 0.8], [0.7, 0.0], [0.7, 0.0], [0.6, 0.0], [0.1, 0.0]])
    labels = np.array([0, 1, -1, -1, -1, -1])
    point = threshold_at_fpr(scores, labels, 0.25)
    assert point.threshold == np.nextafter(0.7, np.inf) and point.fpr == 0.0 and point.ccr == 1.0


def val_outputs(max_logits, labels, num_classes=3):
    """Validation outputs whose max-logit score is ``max_logits``, predicted class = label mod C."""
    labels = np.asarray(labels)
    logits = np.zeros((len(labels), num_classes), np.float32)
    logits[np.arange(len(labels)), np.maximum(labels, 0) % num_classes] = max_logits
    return {"logits": logits, "features": np.ones((len(labels), 2), np.float32), "labels": labels}


def test_a_calibration_entry_holds_threshold_rates_counts_and_rule():
    val = val_outputs([5.0, 4.0, 3.0, 2.0, 4.5, 3.5, 2.5, 1.5, 1.0, 0.5], [0, 1, 2, 0, -1, -1, -1, -1, -1, -1])
    entry = calibrate_model(val, ModelScore("entropic", "max-logit", 3), 0.2)
    # 6 negatives, k = floor(0.2 * 6) = 1 allowed (4.5); the threshold sits just above 3.5
    assert entry["threshold"] == np.nextafter(np.float64(np.float32(3.5)), np.inf)
    assert (entry["val_fpr"], entry["val_ccr"]) == (1 / 6, 2 / 4)
    assert (entry["val_knowns"], entry["val_negatives"], entry["false_positives_allowed"]) == (4, 6, 1)
    assert (entry["approach"], entry["detector"], entry["seed"], entry["target_fpr"]) == ("entropic", "max-logit", 3, 0.2)
    assert "FPR <= target on the validation negatives" in entry["rule"] and entry["reason"] is None


@pytest.mark.parametrize("negatives, fpr, resolved", [(9, 0.1, False), (10, 0.1, True), (99, 0.01, False),
                                                      (100, 0.01, True)])
def test_too_few_validation_negatives_give_a_reason_not_a_number(negatives, fpr, resolved):
    val = val_outputs(np.linspace(9, 1, 5 + negatives), [0, 1, 2, 0, 1] + [-1] * negatives)
    entry = calibrate_model(val, ModelScore("entropic", "max-logit", 0), fpr)
    assert (entry["threshold"] is not None) == resolved
    if not resolved:
        assert entry["val_fpr"] is None and f"{negatives} negative(s)" in entry["reason"]
        assert f"= {math.ceil(round(1 / fpr))}" in entry["reason"]


def test_check_resolved_names_unresolved_models_and_warns_on_few_false_positives(tmp_path):
    """Issue 33, item 2: an error naming every model without a threshold, the smallest FPR the
    validation negatives resolve (1/n) and the negatives the target needs (ceil(1/FPR)); a
    warning where n x FPR < 10, naming ceil(10/FPR)."""
    few = val_outputs(np.linspace(9, 1, 5 + 40), [0, 1, 2, 0, 1] + [-1] * 40)  # 40 x 0.05 = 2 false positives
    entries = [calibrate_model(few, ModelScore("entropic", "max-logit", 0), 0.05),
               calibrate_model(few, ModelScore("softmax", "max-logit", 0), 0.05)]
    with pytest.warns(AgnostophobiaWarning, match=r"calibrate at FPR 0.05: entropic/max-logit \(seed 0\), "
                                                  r"softmax/max-logit \(seed 0\): the 40 validation negatives allow "
                                                  r"2 false positive\(s\), fewer than 10.*ceil\(10/0.05\) = 200"):
        check_resolved(tmp_path, entries, 0.05)
    entries.append(calibrate_model(few, ModelScore("entropic", "max-logit", 1), 0.02))  # 40 x 0.02 < 1
    with pytest.warns(AgnostophobiaWarning), pytest.raises(AgnostophobiaError) as error:
        check_resolved(tmp_path, entries, 0.02)
    message = str(error.value)
    assert "\n" not in message and message.startswith("calibrate: no threshold at FPR 0.02 for entropic/max-logit "
                                                      "(seed 1): the validation split holds 40 negative(s): the "
                                                      "smallest FPR they resolve is 1/40 = 0.025")
    assert "needs at least ceil(1/0.02) = 50 validation negatives" in message
    assert "(2 threshold(s) that resolve written to" in message
    enough = val_outputs(np.linspace(9, 1, 5 + 100), [0, 1, 2, 0, 1] + [-1] * 100)  # 100 x 0.1 = 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_resolved(tmp_path, [calibrate_model(enough, ModelScore("entropic", "max-logit", 0), 0.1)], 0.1)


def test_calibrate_exits_1_naming_models_without_a_threshold_and_keeps_the_file(run, capsys):
    code, out, err = run_main(["calibrate", run, "--fpr", "0.01"], capsys)  # 32 validation negatives
    assert code == 1 and len(err) == 1
    assert err[0].startswith("agnostophobia: error: calibrate: no threshold at FPR 0.01 for softmax/softmax "
                             "(seed 0), entropic/softmax (seed 0): the validation split holds 32 negative(s): the "
                             "smallest FPR they resolve is 1/32 = 0.0312, above 0.01; FPR 0.01 needs at least "
                             "ceil(1/0.01) = 100 validation negatives")
    assert "(nothing written, calibration.json is as it was; --partial would write the 0 threshold(s)" in err[0]
    assert not (run / "calibration.json").exists()
    code, out, err = run_main(["calibrate", run, "--fpr", "0.01", "--partial"], capsys)  # the reasons, written
    assert code == 1 and "(0 threshold(s) that resolve written to" in err[0], err
    entries = json.loads((run / "calibration.json").read_text())["entries"]
    assert [e["threshold"] for e in entries] == [None, None]
    code, out, err = run_main(["calibrate", run, "--fpr", "0.1"], capsys)
    assert code == 0 and len(err) == 1
    assert err[0].startswith("agnostophobia: warning: calibrate at FPR 0.1: softmax/softmax (seed 0), "
                             "entropic/softmax (seed 0): the 32 validation negatives allow 3 false positive(s), fewer "
                             "than 10") and "ceil(10/0.1) = 100 validation negatives would allow 10" in err[0]


def test_a_protocol_without_validation_negatives_says_so():
    entry = calibrate_model(val_outputs([3.0, 2.0], [0, 1]), ModelScore("softmax", "max-logit", 0), 0.5)
    assert entry["threshold"] is None and "no negatives" in entry["reason"]


# ------------------------------------------------------------------ calibrate on a real run
def test_new_runs_store_their_validation_outputs(tiny_run):
    for approach in TINY["approaches"]:
        val = load_outputs(tiny_run / "seed0" / approach / VAL_OUTPUTS)["val"]
        assert (val["labels"] >= 0).sum() == 32 and (val["labels"] == -1).sum() == 32  # knowns and negatives
    assert json.loads((tiny_run / "run_meta.json").read_text())["class_names"] == DIGITS


def test_calibration_json_is_computed_from_validation_outputs_only(calibrated):
    calibration = json.loads((calibrated / "calibration.json").read_text())
    assert calibration["class_names"] == DIGITS
    entries = {(e["approach"], e["detector"], e["seed"]): e for e in calibration["entries"]}
    assert set(entries) == {("softmax", "softmax", 0), ("entropic", "softmax", 0)}  # each approach's paper score
    for (approach, _, _), entry in entries.items():
        val = deployed_val(calibrated / "seed0" / approach)  # the network in fp32, as every deployed form
        log_odds = softmax(val["logits"])
        score, correct = log_odds.max(axis=1), log_odds.argmax(axis=1) == val["labels"]
        negative = val["labels"] < 0
        k = math.floor(FPR * negative.sum())
        assert entry["threshold"] == np.nextafter(np.sort(score[negative])[::-1][k], np.inf)
        assert entry["val_fpr"] == np.mean(score[negative] >= entry["threshold"]) <= FPR
        assert entry["val_ccr"] == np.sum(correct & (score >= entry["threshold"])) / np.sum(~negative)
        assert (entry["val_knowns"], entry["val_negatives"], entry["target_fpr"]) == (32, 32, FPR)
        assert (entry["precision"], entry["arithmetic"]) == ("fp32", "fp32 network, float64 score")


def deployed_val(model_dir):
    """The stored validation outputs with the network in fp32: split "val" of a run trained in
    fp32, "val_fp32" beside it for a run trained in another precision."""
    splits = load_outputs(model_dir / VAL_OUTPUTS)
    return splits["val_fp32"] if "val_fp32" in splits else splits["val"]


def test_a_run_without_validation_outputs_gets_them_from_best_pt(run, calibrated):
    stored = {a: deployed_val(run / "seed0" / a) for a in TINY["approaches"]}
    for approach in TINY["approaches"]:
        (run / "seed0" / approach / VAL_OUTPUTS).unlink()
    meta = json.loads((run / "run_meta.json").read_text())
    del meta["class_names"]  # as a run trained before they were recorded
    (run / "run_meta.json").write_text(json.dumps(meta))
    assert main(["calibrate", str(run), "--fpr", str(FPR)]) == 0
    for approach, val in stored.items():  # the run's protocol rebuilt with its data seed: the same split
        again = deployed_val(run / "seed0" / approach)
        for field in ("logits", "features", "labels"):
            np.testing.assert_array_equal(again[field], val[field])
    assert json.loads((run / "calibration.json").read_text()) == json.loads((calibrated / "calibration.json").read_text())


def test_calibrating_another_detector_keeps_the_other_entries(run, capsys):
    assert run_main(["calibrate", run, "--fpr", "0.5"], capsys)[0] == 0
    code, out, _ = run_main(["calibrate", run, "--fpr", "0.25", "--detector", "energy", "--approach", "entropic"],
                            capsys)
    assert code == 0 and "entropic / energy at FPR <= 0.25" in out
    entries = json.loads((run / "calibration.json").read_text())["entries"]
    assert {(e["approach"], e["detector"], e["target_fpr"]) for e in entries} == {
        ("softmax", "softmax", 0.5), ("entropic", "softmax", 0.5), ("entropic", "energy", 0.25)}


def test_the_report_shows_test_rates_at_the_validation_threshold(calibrated, tmp_path):
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.experiments.evaluate_unknowns import evaluate_run

    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    evaluate_run(ModelRequest(run), plots=False, log=lambda message: None)
    metrics = json.loads((run / "metrics.json").read_text())
    section = metrics["at_validation_threshold"]
    thresholds = {e["approach"]: e["threshold"] for e in json.loads((run / "calibration.json").read_text())["entries"]}
    table2 = {(r["approach"], r["detector"], r["unknowns"]): r for r in metrics["results"]}
    rows = section["results"]
    assert {(r["approach"], r["unknowns"]) for r in rows} == {
        (a, u) for a in TINY["approaches"] for u in ("letters", "devanagari", "notmnist", "cifar10")}
    report = (run / "report.md").read_text()
    assert "## At the threshold chosen on validation data" in report
    for r in rows:
        outputs = load_outputs(run / "seed0" / r["approach"] / "outputs.npz")
        known, unknown = outputs["known"], outputs[r["unknowns"]]
        log_odds = softmax(known["logits"])
        accepted = log_odds.max(axis=1) >= thresholds[r["approach"]]
        assert r["test_ccr"] == np.mean(accepted & (log_odds.argmax(axis=1) == known["labels"]))
        assert r["test_fpr"] == np.mean(softmax(unknown["logits"]).max(axis=1)
                                        >= thresholds[r["approach"]])
        # the oracle beside it is Table 2's CCR at the same FPR (1e-1), read on the test set
        assert r["oracle_ccr"] == table2[(r["approach"], "softmax", r["unknowns"])]["ccr_at_fpr"]["1e-1"]
        assert f"{r['test_fpr']:.4f} | {r['test_ccr']:.4f} | {r['oracle_ccr']:.4f} |" in report


# ------------------------------------------------------------------ OpenSetClassifier
def test_the_classifier_scores_new_images_as_the_run_scored_its_own(calibrated, real_data_dir):
    from agnostophobia.deploy.calibration import trained_precision

    protocol = build_protocol("lenet++", real_data_dir, seed=0, **TINY["protocol_limits"])
    clf = OpenSetClassifier.from_run(calibrated)  # default: entropic (trained with negatives), softmax, seed 0
    entry = next(e for e in json.loads((calibrated / "calibration.json").read_text())["entries"]
                 if e["approach"] == "entropic")
    assert (clf.approach, clf.detector_name, clf.threshold, clf.class_names) == ("entropic", "softmax",
                                                                                 entry["threshold"], DIGITS)
    assert clf.trained.precision == "fp32"  # the deployment arithmetic, whatever the run trained in
    images = protocol.test_unknowns["notmnist"].images
    # in the run's own precision the network gives the outputs the run stored, and the threshold
    # is the one chosen on its validation outputs in that precision
    own = OpenSetClassifier.from_run(calibrated, precision=trained_precision(clf.trained.config))
    stored = load_outputs(calibrated / "seed0" / "entropic" / "outputs.npz")["notmnist"]
    logits, _ = own.trained.outputs(images)
    np.testing.assert_array_equal(logits, stored["logits"])
    labels, scores = own.decide(images)
    log_odds = softmax(stored["logits"])
    np.testing.assert_array_equal(scores, log_odds.max(axis=1))
    np.testing.assert_array_equal(labels, np.where(scores >= own.threshold, log_odds.argmax(axis=1), -1))
    # the default classifier: the same rule on the fp32 network's outputs
    labels, scores = clf.decide(images)
    log_odds = softmax(clf.trained.outputs(images)[0])
    np.testing.assert_array_equal(scores, log_odds.max(axis=1))
    np.testing.assert_array_equal(labels, np.where(scores >= clf.threshold, log_odds.argmax(axis=1), -1))
    as_float = torch.from_numpy(images).float() / 255  # (N, C, H, W) in [0, 1]
    np.testing.assert_array_equal(clf.predict(as_float), labels)
    np.testing.assert_array_equal(clf.predict(images[:, 0]), labels)  # stored (N, H, W) images, prepared here
    assert clf.predict(images[:0]).shape == (0,)


def test_the_classifier_refuses_input_it_cannot_take(calibrated):
    clf = OpenSetClassifier.from_run(calibrated, approach="softmax")
    with pytest.raises(AgnostophobiaError, match=r"in \[0, 1\]"):
        clf.predict(torch.full((2, 1, 28, 28), 255.0))
    with pytest.raises(AgnostophobiaError, match=r"\(N, 1, 28, 28\)"):
        clf.predict(torch.rand(2, 3, 32, 32))


# ------------------------------------------------------------------ predict
def write_pngs(folder, real_data_dir):
    """Real MNIST test digits and notMNIST letters as PNG files, written out of sorted order,
    one of them in a subfolder; returns the grey images in sorted path order."""
    mnist = np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:6]
    letters = np.load(real_data_dir / "notmnist" / "notmnist.npz")["x_test"][:4]
    files = {"z_digit.png": mnist[0], "sub/b_digit.png": mnist[1], "a_letter.png": letters[0],
             "m_digit.png": mnist[2], "sub/a_letter.png": letters[1], "c_letter.png": letters[2],
             "k_digit.png": mnist[3], "d_digit.png": mnist[4], "y_letter.png": letters[3], "b_digit.png": mnist[5]}
    for name, image in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / name)
    return sorted(files), np.stack([files[name] for name in sorted(files)])


def test_predict_on_a_folder_of_png_images(calibrated, real_data_dir, tmp_path, capsys):
    names, images = write_pngs(tmp_path / "pngs", real_data_dir)
    before = snapshot(calibrated)
    code, out, err = run_main(["predict", calibrated, tmp_path / "pngs", "--out", tmp_path / "rows.csv"], capsys)
    assert code == 0, err
    with open(tmp_path / "rows.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["source"] for row in rows] == [str(tmp_path / "pngs" / name) for name in names]  # sorted paths
    clf = OpenSetClassifier.from_run(calibrated)
    labels, scores = clf.decide(images)
    assert [row["label"] for row in rows] == clf.label_names(labels)
    assert [float(row["score"]) for row in rows] == scores.tolist()
    assert {float(row["threshold"]) for row in rows} == {clf.threshold}
    code, out, _ = run_main(["predict", calibrated, tmp_path / "pngs" / "sub", tmp_path / "pngs" / "b_digit.png"],
                            capsys)  # a table on stdout, inputs in the order given
    table = out.strip().splitlines()
    assert code == 0 and table[0].split() == ["source", "label", "score", "threshold"] and len(table) == 4
    assert [line.split()[0] for line in table[1:]] == [str(tmp_path / "pngs" / n)
                                                       for n in ("sub/a_letter.png", "sub/b_digit.png", "b_digit.png")]
    assert snapshot(calibrated) == before  # predict only reads the run


def test_predict_keeps_the_array_order_of_an_npz(calibrated, real_data_dir, tmp_path, capsys):
    digits = np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:7]
    np.savez(tmp_path / "set.npz", x_test=digits)
    np.savez(tmp_path / "reversed.npz", images=digits[::-1])
    rows = {}
    for name in ("set", "reversed"):
        out = tmp_path / f"{name}.json"
        assert run_main(["predict", calibrated, tmp_path / f"{name}.npz", "--approach", "softmax", "--out", out],
                        capsys)[0] == 0
        rows[name] = json.loads(out.read_text())
    assert [r["source"] for r in rows["set"]] == [f"{tmp_path / 'set.npz'}[{i}]" for i in range(7)]
    expected = OpenSetClassifier.from_run(calibrated, approach="softmax").decide(digits)
    assert [r["label"] for r in rows["set"]] == [DIGITS[c] if c >= 0 else "unknown" for c in expected[0]]
    assert [r["score"] for r in rows["reversed"]] == [r["score"] for r in rows["set"]][::-1]


def test_predict_without_calibration_says_what_to_run(tiny_run, tmp_path, real_data_dir, capsys):
    names, _ = write_pngs(tmp_path / "pngs", real_data_dir)
    before = snapshot(tiny_run)
    code, _, err = run_main(["predict", tiny_run, tmp_path / "pngs"], capsys)
    assert code == 1 and len(err) == 1 and "no calibration.json" in err[0]
    assert f"agnostophobia calibrate {tiny_run} --fpr T" in err[0] and "--fpr T" in err[0]
    assert snapshot(tiny_run) == before


def test_predict_with_fpr_calibrates_on_the_spot(run, real_data_dir, tmp_path, capsys):
    write_pngs(tmp_path / "pngs", real_data_dir)
    code, _, err = run_main(["predict", run, tmp_path / "pngs", "--fpr", "0.25", "--out", tmp_path / "r.json"],
                            capsys)
    assert code == 0, err
    entries = json.loads((run / "calibration.json").read_text())["entries"]
    assert [(e["approach"], e["detector"], e["target_fpr"]) for e in entries] == [("entropic", "softmax", 0.25)]
    assert {r["threshold"] for r in json.loads((tmp_path / "r.json").read_text())} == {entries[0]["threshold"]}


def bad_inputs(tmp):
    (tmp / "notes.txt").write_text("not an image")
    (tmp / "broken.png").write_bytes(b"\x89PNG truncated")
    np.savez(tmp / "labels.npz", y=np.arange(3))
    Image.fromarray(np.full((28, 28), 255, np.uint8)).save(tmp / "white.png")  # black-on-white polarity
    return tmp


BAD = [  # (arguments after RUN, what the one line must name, exit code)
    (["{tmp}/missing.png"], "{tmp}/missing.png: no such file", 1),
    (["{tmp}/notes.txt"], "{tmp}/notes.txt: not an image file", 1),
    (["{tmp}/broken.png"], "{tmp}/broken.png: cannot decode image", 1),
    (["{tmp}/labels.npz"], "{tmp}/labels.npz: no image array", 1),
    (["{tmp}/white.png"], "{tmp}/white.png: looks like a black glyph on white", 1),
    (["{tmp}/white.png", "--approach", "objectosphere"], "no trained approach 'objectosphere'", 1),
    (["{tmp}/white.png", "--detector", "nope"], "unknown detector 'nope'", 1),
    (["{tmp}/white.png", "--detector", "background"], "detector 'background' reads a background class", 1),
    (["{tmp}/white.png", "--seed", "3"], "has no seed 3", 1),
    (["{tmp}/white.png", "--out", "{tmp}/rows.txt"], "must end in .csv or .json", 1),
    (["{tmp}/white.png", "--fpr", "0"], "--fpr", 2),
]


@pytest.mark.parametrize("args, names, code", BAD, ids=[b[1].split(": ")[-1][:30] for b in BAD])
def test_bad_predict_input_is_one_line_and_changes_nothing(calibrated, tmp_path, capsys, args, names, code):
    tmp = bad_inputs(tmp_path)
    before = snapshot(calibrated)
    result, _, err = run_main(["predict", calibrated, *(a.format(tmp=tmp) for a in args)], capsys)
    assert result == code and len(err) == 1, err
    assert names.format(tmp=tmp) in err[0] and "Traceback" not in err[0]
    assert snapshot(calibrated) == before


@pytest.mark.parametrize("args, names", [
    (["calibrate", "{run}", "--fpr", "0.1", "--approach", "background"], "no trained approach 'background'"),
    (["calibrate", "{run}", "--fpr", "0.1", "--detector", "background"], "none of the models"),
    (["calibrate", "{run}", "--fpr", "0.1", "--detector", "nope"], "unknown detector 'nope'"),
    (["calibrate", "{tmp}/nowhere", "--fpr", "0.1"], "{tmp}/nowhere does not exist"),
    (["export", "{run}", "--format", "onnx", "--out", "{tmp}/m.onnx", "--approach", "softmax", "--detector", "openmax"],
     "detector 'openmax' is not exported: its Weibull recalibration"),
    (["export", "{run}", "--format", "pt2", "--out", "{tmp}/m.pt2", "--detector", "energy"],
     "has no threshold for approach 'entropic', detector 'energy', seed 0"),
])
def test_bad_calibrate_and_export_input_is_one_line(calibrated, tmp_path, capsys, args, names):
    before = snapshot(calibrated)
    code, _, err = run_main([a.format(run=calibrated, tmp=tmp_path) for a in args], capsys)
    assert code == 1 and len(err) == 1, err
    assert names.format(tmp=tmp_path) in err[0]
    assert snapshot(calibrated) == before and not list(tmp_path.iterdir())


# ------------------------------------------------------------------ export
def fit_data(rng, n, num_columns, dim=3):
    labels = np.arange(n) % 4
    logits = rng.normal(size=(n, num_columns)).astype(np.float32)
    logits[np.arange(n), labels] += 3  # mostly correct, as a trained network's training knowns
    return {"logits": logits, "features": rng.normal(size=(n, dim)).astype(np.float32), "labels": labels}


class FixedOutputs(torch.nn.Module):
    """A stand-in network: the same fp32 (logits, features) whatever the input."""

    def __init__(self, logits, features):
        super().__init__()
        self.logits, self.features = torch.from_numpy(logits), torch.from_numpy(features)

    def forward(self, x):
        return self.logits, self.features


@pytest.mark.parametrize("name", DETECTORS.names())
def test_the_deployed_module_decides_as_its_detector(name, tmp_path):
    """What ``export`` writes, network aside: the detector's own torch score (the logit columns it
    reads: all C+1 for ``background``; the last layer's buffers for ViM, ReAct, ASH, SCALE) and the
    threshold decide as ``top_scores`` and the threshold do on the same outputs; a detector without
    a torch score is refused with the reason it declares (the score itself: tests/detectors/test_detectors.py)."""
    rng = np.random.default_rng(0)
    background = DETECTORS.get(name).reads_background_column
    columns = 4 + int(background)
    save_last_layer(tmp_path / LAST_LAYER, {"weight": rng.normal(size=(columns, 6)), "bias": rng.normal(size=columns)})
    detector = fitted_detector(name, fit_data(rng, 200, columns, dim=6), 4,
                               {"knn": {"k": 5}, "openmax": {"tail_size": 5}}, model_dir=ModelDir.at(tmp_path))
    why = detector.why_not_exportable()
    if why is not None:
        with pytest.raises(AgnostophobiaError, match=f"^export: detector '{name}' is not exported: "
                                                     f"{re.escape(why)}; exportable: ash, background, cac, energy, "):
            check_exportable(name)
        return
    check_exportable(name)
    test = fit_data(rng, 64, columns, dim=6)
    test["features"][0] = 0  # a zero feature vector (k-NN keeps it at the origin)
    predicted, expected = top_scores(detector, test, 4)
    threshold = float(np.median(expected))
    module = DeployedClassifier(FixedOutputs(test["logits"], test["features"]), detector.torch_score(), threshold, 4,
                                all_columns=background)
    labels, scores = module(torch.zeros(64, 1))
    np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(labels.numpy(), np.where(expected >= threshold, predicted, -1))


def load_exported(path, fmt):
    """The exported file, loaded with plain torch / onnxruntime: a function images -> (labels, scores)."""
    if fmt == "torchscript":
        module = torch.jit.load(str(path))
        return lambda x: tuple(t.numpy() for t in module(torch.from_numpy(x)))
    if fmt == "pt2":
        module = torch.export.load(str(path)).module()
        return lambda x: tuple(t.numpy() for t in module(torch.from_numpy(x)))
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: tuple(session.run(["labels", "scores"], {"images": x}))


@pytest.fixture(scope="module")
def exported(calibrated, tmp_path_factory):
    """The calibrated run's default model exported in every format by the command line."""
    folder = tmp_path_factory.mktemp("exported")
    for fmt in FORMATS:
        assert main(["export", str(calibrated), "--format", fmt, "--out", str(folder / f"model.{fmt}")]) == 0
    return folder


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_exported_file_decides_as_predict_on_1000_real_images(calibrated, exported, test_images, fmt):
    run_file = load_exported(exported / f"model.{fmt}", fmt)
    x = test_images.astype(np.float32) / 255  # (N, 1, 28, 28) in [0, 1], as for training
    labels, scores = run_file(x)
    assert labels.dtype == np.int64 and labels.shape == (1000,) and scores.shape == (1000,)
    clf = OpenSetClassifier.from_run(calibrated)  # fp32 network, float64 score, as the file
    expected_labels, expected_scores = clf.decide(torch.from_numpy(x))
    assert 0 < (expected_labels == -1).sum() < 1000  # both decisions occur
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, expected_labels)
    one_label, _ = run_file(x[:1])  # the batch dimension is dynamic
    assert one_label.tolist() == expected_labels[:1].tolist()


@pytest.fixture(scope="module")
def distance_run(real_data_dir, tmp_path_factory):
    """A tiny run of the distance-based approaches, ARPL and CAC (their own logit layers in the network),
    calibrated at FPR 0.1 with each approach's default detector (max-logit, cac)."""
    folder = tmp_path_factory.mktemp("distance")
    config = write_config(folder / "distance.yaml", approaches=["arpl", "cac"])
    result = run_cli(reproduce_args(config, folder / "run", real_data_dir))
    assert result.returncode == 0, result.stderr
    for approach in ("arpl", "cac"):
        assert main(["calibrate", str(folder / "run"), "--approach", approach, "--fpr", str(FPR)]) == 0
    return folder / "run"


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("approach", ["arpl", "cac"])
def test_a_distance_based_network_exported_decides_as_predict(distance_run, test_images, tmp_path, approach, fmt):
    """ARPL's reciprocal points and CAC's anchor distances are the network's logit layer: every format
    writes them, and the file decides as ``OpenSetClassifier`` (predict) on 1,000 real images."""
    out = tmp_path / f"model.{fmt}"
    assert main(["export", str(distance_run), "--approach", approach, "--format", fmt, "--out", str(out)]) == 0
    x = test_images.astype(np.float32) / 255
    labels, scores = load_exported(out, fmt)(x)
    clf = OpenSetClassifier.from_run(distance_run, approach=approach)
    assert clf.detector.name == {"arpl": "max-logit", "cac": "cac"}[approach]
    expected_labels, expected_scores = clf.decide(torch.from_numpy(x))
    assert 0 < (expected_labels == -1).sum() < 1000
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, expected_labels)


def test_export_writes_torch_export_by_default_and_warns_of_nothing(calibrated, tmp_path, capsys):
    """The default format (``pt2``, listed first) draws no deprecation warning; TorchScript, kept
    for existing users, says in one note that PyTorch deprecates it (instead of torch's warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = run_main(["export", calibrated, "--out", tmp_path / "model.pt2"], capsys)
    assert (code, err) == (0, []) and " as pt2: " in out and TORCHSCRIPT_NOTE not in out
    assert [str(w.message) for w in caught] == []
    assert torch.export.load(str(tmp_path / "model.pt2")).module() is not None
    assert FORMATS[0] == "pt2"  # the command's help and choices list it first
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = run_main(["export", calibrated, "--format", "torchscript", "--out", tmp_path / "m.ts"],
                                  capsys)
    assert (code, err) == (0, []) and out.splitlines()[0] == TORCHSCRIPT_NOTE
    assert not [w for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]


def test_onnx_export_without_its_packages_names_the_extra(calibrated, tmp_path, capsys, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "onnxscript" else real_find_spec(name, *rest))
    code, out, err = run_main(["export", calibrated, "--format", "onnx", "--out", tmp_path / "m.onnx"], capsys)
    assert code == 1 and err == ["agnostophobia: error: export --format onnx needs onnxscript, not installed: "
                                 "pip install 'agnostophobia[onnx]'"]
    assert not (tmp_path / "m.onnx").exists()


# Loads every exported file with agnostophobia made unimportable, as on a machine without it.
WITHOUT_AGNOSTOPHOBIA = """
import json, sys
sys.modules["agnostophobia"] = None  # any import of it now fails
import numpy as np, onnxruntime, torch
from PIL import Image
folder, pngs = sys.argv[1], sys.argv[2:]
x = np.stack([np.asarray(Image.open(p).convert("L"), np.float32)[None] / 255 for p in pngs])
out = {"torchscript": torch.jit.load(folder + "/model.torchscript")(torch.from_numpy(x)),
       "pt2": torch.export.load(folder + "/model.pt2").module()(torch.from_numpy(x)),
       "onnx": onnxruntime.InferenceSession(folder + "/model.onnx").run(["labels", "scores"], {"images": x})}
print(json.dumps({k: [np.asarray(v[0]).tolist(), np.asarray(v[1]).tolist()] for k, v in out.items()}))
"""


def test_predict_and_the_exported_files_agree_on_png_images(calibrated, exported, real_data_dir, tmp_path, capsys):
    """The Done-when path: a run calibrated, ``predict`` on a folder of real PNG images, every
    exported file reloaded without agnostophobia: the same decisions."""
    names, _ = write_pngs(tmp_path / "pngs", real_data_dir)
    assert run_main(["predict", calibrated, tmp_path / "pngs", "--out", tmp_path / "rows.json"], capsys)[0] == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    result = subprocess.run([sys.executable, "-c", WITHOUT_AGNOSTOPHOBIA, str(exported),
                             *(str(tmp_path / "pngs" / n) for n in names)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for fmt, (labels, scores) in json.loads(result.stdout).items():
        # predict and the files compute alike (fp32 network, float64 score): the same decisions
        assert [row["label"] for row in rows] == [DIGITS[c] if c >= 0 else "unknown" for c in labels], fmt
        np.testing.assert_allclose(scores, [row["score"] for row in rows], rtol=1e-5, atol=0, err_msg=fmt)


# ------------------------------------------------------------------ one deployment arithmetic (issue 22, item 6)
def train_bf16_run(folder, data_dir):
    """A tiny entropic LeNet++ run trained in bf16 autocast on ``data_dir``, calibrated at FPR 0.1."""
    config = write_config(folder / "bf16.yaml", precision="bf16", approaches=["entropic"])
    result = run_cli(reproduce_args(config, folder / "run", data_dir))
    assert result.returncode == 0, result.stderr
    assert main(["calibrate", str(folder / "run"), "--fpr", str(FPR)]) == 0
    return folder / "run"


@pytest.fixture(scope="module")
def bf16_run(real_data_dir, tmp_path_factory):
    return train_bf16_run(tmp_path_factory.mktemp("bf16"), real_data_dir)


@pytest.fixture(scope="module")
def synthetic_bf16_run(tmp_path_factory):
    """The same on synthetic stand-in data (no real data needed): its data directory and run."""
    from tests.conftest import Synth

    folder = tmp_path_factory.mktemp("synthetic-bf16")
    Synth(folder / "data").lenet_set()
    return folder / "data", train_bf16_run(folder, folder / "data")


def deployed_decisions(run, images, tmp, capsys):
    """``(labels, scores)`` of the run's default model on uint8 ``images`` (N, 1, 28, 28), as
    decided by ``predict`` (an .npz file), :class:`OpenSetClassifier` and every exported file
    (loaded by plain torch / onnxruntime), with the threshold each of them uses."""
    np.savez(tmp / "check.npz", x=images[:, 0])
    code, _, err = run_main(["predict", run, tmp / "check.npz", "--out", tmp / "rows.json"], capsys)
    assert code == 0, err
    rows = json.loads((tmp / "rows.json").read_text())
    decided = {"predict": (np.array([DIGITS.index(r["label"]) if r["label"] != "unknown" else -1 for r in rows]),
                           np.array([r["score"] for r in rows]), rows[0]["threshold"])}
    clf = OpenSetClassifier.from_run(run)
    decided["OpenSetClassifier"] = (*clf.decide(images), clf.threshold)
    x = images.astype(np.float32) / 255
    for fmt in FORMATS:
        assert main(["export", str(run), "--format", fmt, "--out", str(tmp / f"model.{fmt}")]) == 0
        labels, scores = load_exported(tmp / f"model.{fmt}", fmt)(x)
        decided[fmt] = (labels, scores, exported_threshold(tmp / f"model.{fmt}", fmt))
    return decided


def exported_threshold(path, fmt):
    """The threshold an exported file carries in its metadata."""
    if fmt == "onnx":
        import onnx

        props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
        return json.loads(props["agnostophobia.json"])["threshold"]
    files = {"agnostophobia.json": ""}
    if fmt == "torchscript":
        torch.jit.load(str(path), _extra_files=files)
    else:
        torch.export.load(str(path), extra_files=files)
    return json.loads(files["agnostophobia.json"])["threshold"]


def fp32_validation_threshold(run, data_dir):
    """The threshold at FPR 0.1 on validation scores computed here with best.pt in fp32 on the
    run's rebuilt validation split (float64 softmax score)."""
    from agnostophobia.training.trained import load_trained_model

    protocol = build_protocol("lenet++", data_dir, seed=0, **TINY["protocol_limits"])
    logits, features = load_trained_model(run / "seed0" / "entropic", "cpu", "fp32").outputs(protocol.val.images)
    val = {"logits": logits, "features": features, "labels": np.asarray(protocol.val.labels)}
    return calibrate_model(val, ModelScore("entropic", "softmax", 0), FPR)["threshold"]


def check_one_arithmetic(run, data_dir, images, tmp, capsys):
    """Every deployed form of a bf16-trained run decides alike on ``images``: identical
    decisions, scores within 1e-5 relative, each threshold chosen on fp32 validation scores."""
    from agnostophobia.training.checkpoint import load_checkpoint

    assert load_checkpoint(run / "seed0" / "entropic" / "best.pt")["config"]["precision"] == "bf16"
    decided = deployed_decisions(run, images, tmp, capsys)
    threshold = fp32_validation_threshold(run, data_dir)
    labels, scores, _ = decided["predict"]
    assert 0 < (labels == -1).sum() < len(images)  # both decisions occur
    measured = {name: (int((other[0] != labels).sum()), float(np.max(np.abs(other[1] - scores) / np.abs(scores))))
                for name, other in decided.items()}
    print(f"{len(images)} images, against predict: " + "; ".join(
        f"{name} {differ} decisions differ, scores within {relative:.2e} relative, threshold "
        f"{decided[name][2]!r}" for name, (differ, relative) in measured.items()) + f"; fp32 validation {threshold!r}")
    for name, (differ, relative) in measured.items():
        assert differ == 0 and relative <= 1e-5, name
        assert decided[name][2] == threshold, name  # chosen on validation scores in fp32, as it computes
    # the run's own precision is not silently given the fp32 threshold: one chosen on bf16 validation scores
    bf16 = OpenSetClassifier.from_run(run, precision="bf16")
    val = load_outputs(run / "seed0" / "entropic" / VAL_OUTPUTS)["val"]  # stored in the run's precision, bf16
    assert bf16.threshold == calibrate_model(val, ModelScore("entropic", "softmax", 0), FPR)["threshold"]
    assert bf16.calibration["precision"] == "bf16"


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_a_bf16_run_decides_alike_everywhere_on_1000_real_images(bf16_run, real_data_dir, test_images, tmp_path,
                                                                 capsys):
    check_one_arithmetic(bf16_run, real_data_dir, test_images, tmp_path, capsys)


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_a_bf16_run_decides_alike_everywhere_on_synthetic_data(synthetic_bf16_run, tmp_path, capsys):
    data_dir, run = synthetic_bf16_run
    protocol = build_protocol("lenet++", data_dir, seed=0, **{**TINY["protocol_limits"], "max_test_per_set": 200})
    images = np.concatenate([protocol.test_known.images, *(s.images for s in protocol.test_unknowns.values())])
    check_one_arithmetic(run, data_dir, images, tmp_path, capsys)


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_a_threshold_chosen_in_another_arithmetic_is_never_used_as_is(bf16_run, tmp_path, caplog):
    """A calibration.json from before thresholds recorded their arithmetic was chosen on the
    run's stored (bf16) validation outputs: the fp32 classifier chooses its own, and says so."""
    run = tmp_path / "run"
    shutil.copytree(bf16_run, run)
    calibration = json.loads((run / "calibration.json").read_text())
    val = load_outputs(run / "seed0" / "entropic" / VAL_OUTPUTS)["val"]
    old = calibrate_model(val, ModelScore("entropic", "softmax", 0), FPR)  # on the run's bf16 validation outputs
    calibration["entries"] = [{k: v for k, v in old.items() if k not in ("precision", "arithmetic")}]
    (run / "calibration.json").write_text(json.dumps(calibration))
    before = snapshot(run)
    with caplog.at_level("INFO", logger="agnostophobia"):  # the library logs; it prints nothing
        clf = OpenSetClassifier.from_run(run)
    fp32 = calibrate_model(deployed_val(run / "seed0" / "entropic"), ModelScore("entropic", "softmax", 0), FPR)
    assert clf.threshold == fp32["threshold"] and clf.calibration["precision"] == "fp32"
    assert "chosen on bf16 scores" in caplog.text
    assert snapshot(run) == before  # chosen in memory


def test_the_report_says_when_its_test_rates_come_from_another_arithmetic(bf16_run, tmp_path):
    from agnostophobia.deploy.calibration import threshold_results
    from agnostophobia.detectors.stored import read_run_settings

    run = tmp_path / "run"
    shutil.copytree(bf16_run, run)
    rows, notes = threshold_results(run, read_run_settings(run))
    assert rows and notes == ["entropic (seed 0): the thresholds were chosen on validation scores with the network in "
                              "fp32, as deployed; the test rates beside them are read on the run's stored test "
                              "outputs, computed in bf16"]
