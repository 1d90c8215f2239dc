"""``agnostophobia tune-detectors``: settings chosen on validation data only, stored in the run,
and used by the matrix, calibrate and predict (issue 24, item 2), on the tests' tiny run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agnostophobia.cli import main
from agnostophobia.detectors import setting_grid
from agnostophobia.detectors.stored import NotFitted, detector_inputs, fitted_detector, read_run_settings
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.losses import known_columns
from agnostophobia.metrics import ccr_at_fpr
from agnostophobia.training import outputs as stored_outputs
from agnostophobia.rundir import VAL_OUTPUTS, ModelDir, RunDir
from agnostophobia.training.outputs import load_fit_outputs, load_outputs, save_outputs
from agnostophobia.rundir import TUNED_SETTINGS

FPR = 0.1  # 32 validation negatives: 3 false positives allowed (calibrate resolves it, with a warning)
TUNE_FPR = 0.5  # the smallest of the FPR series that 32 validation negatives support (>= 10 false positives)


@pytest.fixture
def run(tiny_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def validation_ccr(model_dir: ModelDir, approach: str, point: dict):
    """CCR at FPR of k-NN with the settings ``point`` on the model's validation split, computed
    here (None: k above the training knowns' count)."""
    val = load_outputs(model_dir.val_outputs)["val"]
    num_classes = known_columns(approach, val["logits"].shape[1])
    try:
        detector = fitted_detector("knn", load_fit_outputs(model_dir), num_classes, {"knn": point})
    except NotFitted:
        return None
    scores = detector.scores(detector_inputs(detector, val["logits"], num_classes), val["features"])
    return float(ccr_at_fpr(scores, val["labels"], [TUNE_FPR])[0])


def test_the_choice_is_the_best_validation_ccr_and_test_outputs_are_never_read(run, monkeypatch):
    read = []
    load = stored_outputs.load_outputs
    monkeypatch.setattr(stored_outputs, "load_outputs", lambda path: read.append(Path(path).name) or load(path))
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "knn"]) == 0
    assert read and "outputs.npz" not in read  # fit_outputs.npz and val_outputs.npz only
    stored = json.loads((run / TUNED_SETTINGS).read_text())
    assert stored["target_fpr"] == TUNE_FPR and stored["split"] == "val"
    for approach in ("softmax", "entropic"):
        model_dir = RunDir(run).model(0, approach)
        points = setting_grid("knn")
        assert {point["normalize"] for point in points} == {True, False}
        ccrs = {tuple(point.items()): validation_ccr(model_dir, approach, point) for point in points}
        best = max(c for c in ccrs.values() if c is not None)
        chosen = tuple(stored["chosen"][approach]["knn"].items())
        assert ccrs[chosen] == best
        default = (("k", 50), ("normalize", True))
        assert chosen == (default if ccrs[default] == best else next(p for p, c in ccrs.items() if c == best))
        assert [c["val_ccr"] for c in stored["candidates"][approach]["knn"]] == list(ccrs.values())
    assert read_run_settings(run).tuned == stored["chosen"]


def test_approaches_tuned_in_two_processes_choose_what_one_after_another_chooses(run, tmp_path):
    """``processes=2`` (the benchmark's) scores each approach's grids in its own process; the
    choices, the candidates' validation CCRs and the lines said are those of one process."""
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.experiments.tune_detectors import tune_detectors

    other = tmp_path / "other"
    shutil.copytree(run, other)
    said_one, said_two = [], []
    one = tune_detectors(ModelRequest(run, fpr=TUNE_FPR, partial=True), ["knn", "openmax"], log=said_one.append)
    two = tune_detectors(ModelRequest(other, fpr=TUNE_FPR, partial=True), ["knn", "openmax"], processes=2,
                         log=said_two.append)
    assert one["chosen"] == two["chosen"] and one["candidates"] == two["candidates"]
    assert said_one == said_two and len(one["candidates"]) == 2  # softmax and entropic


def test_a_detector_that_does_not_apply_says_why_and_is_not_tuned(run, capsys):
    """The tiny run's LeNet++ has 2-D features and 10 classes: ViM does not apply."""
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "vim"]) == 0
    out = capsys.readouterr().out
    assert "entropic/vim: not applicable (ViM needs more feature dimensions than classes (D=2 <= C=10)" in out
    assert "vim" not in json.loads((run / TUNED_SETTINGS).read_text())["chosen"].get("entropic", {})


def test_the_choice_does_not_move_when_the_test_outputs_change(run):
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "knn", "--approach", "entropic"]) == 0
    before = json.loads((run / TUNED_SETTINGS).read_text())["chosen"]
    path = run / "seed0" / "entropic" / "outputs.npz"
    test = load_outputs(path)
    rng = np.random.default_rng(0)
    save_outputs(path, {split: {**data, "features": rng.normal(size=data["features"].shape).astype(np.float32)}
                        for split, data in test.items()})
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "knn", "--approach", "entropic"]) == 0
    assert json.loads((run / TUNED_SETTINGS).read_text())["chosen"] == before


def _counting_fits(monkeypatch):
    """The models tune-detectors fits a detector on, in order (one entry per grid point and model)."""
    from agnostophobia.experiments import tune_detectors as module

    fitted = []
    fit = module.fitted_detector
    monkeypatch.setattr(module, "fitted_detector",
                        lambda *args, **kwargs: fitted.append(kwargs["model_dir"].path.parent.name + "/" +
                                                              kwargs["model_dir"].path.name) or fit(*args, **kwargs))
    return fitted


def test_tuned_again_on_the_same_inputs_it_fits_nothing_and_writes_the_same_file(run, monkeypatch, capsys):
    """A benchmark run again after its training (or with another --min-accuracy) tunes again: the
    grids whose inputs' digest is unchanged keep their numbers, nothing is fitted, the file is the same.
    So do the detectors that got no setting: ViM does not apply to 2-D features, and entropic's
    OpenMax fits at no grid point (softmax's is the paper's row, never tuned)."""
    tune = ["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--partial", "--detector", "knn", "gen", "vim",
            "openmax"]
    fitted = _counting_fits(monkeypatch)
    assert main(tune) == 0
    first, said = (run / TUNED_SETTINGS).read_bytes(), capsys.readouterr().out
    assert fitted and "kept from the last tuning" not in said
    fitted.clear()
    assert main(tune) == 0
    again = capsys.readouterr().out
    assert fitted == [] and (run / TUNED_SETTINGS).read_bytes() == first
    assert again.count("kept from the last tuning") == 5  # softmax and entropic: k-NN and GEN; entropic: OpenMax
    assert "entropic/vim: not applicable" in again and "entropic/openmax: no setting of its grid" in again
    chosen = [line for line in said.splitlines() if "validation CCR at FPR" in line]
    assert chosen and all(line in again for line in chosen)  # the same choices, said alike


def test_tuned_again_with_nothing_left_to_fit_computes_no_grid(run, monkeypatch):
    """The paper's rows are never tuned (softmax's OpenMax), so they are no work left: tuned again on
    the same inputs, no approach's grids are computed, and a resumed benchmark (two processes)
    starts no process, which costs seconds each."""
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.experiments import tune_detectors as module

    request = ModelRequest(run, fpr=TUNE_FPR, partial=True)
    first = module.tune_detectors(request, ["knn", "openmax"])
    asked, grids_of = [], module.approach_grids
    monkeypatch.setattr(module, "approach_grids",
                        lambda approach, *args, **kwargs: asked.append(approach) or grids_of(approach, *args, **kwargs))
    assert module.tune_detectors(request, ["knn", "openmax"], processes=2)["chosen"] == first["chosen"]
    assert asked == []


@pytest.mark.parametrize("change", ["validation outputs", "fpr", "last layer"])
def test_a_grid_is_computed_again_when_what_it_was_computed_from_changed(run, monkeypatch, change):
    tune = ["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "knn"]
    assert main(tune) == 0
    fitted = _counting_fits(monkeypatch)
    if change == "validation outputs":  # one model's validation split: only its approach is tuned again
        path = RunDir(run).model(0, "entropic").val_outputs
        stored = load_outputs(path)
        save_outputs(path, {split: {**data, "features": data["features"] * 1.5} for split, data in stored.items()})
        expected = {"seed0/entropic"}
    elif change == "fpr":
        tune[3] = "1.0"
        expected = {"seed0/softmax", "seed0/entropic"}
    else:  # one model's logit layer (read by the detectors that need it): its approach is tuned again
        path = RunDir(run).model(0, "softmax").last_layer
        with np.load(path) as layer:
            arrays = {name: layer[name] * (2.0 if name == "weight" else 1.0) for name in layer.files}
        np.savez(path, **arrays)
        expected = {"seed0/softmax"}
    assert main(tune) == 0
    assert set(fitted) == expected and len(fitted) == len(expected) * len(setting_grid("knn"))


def test_the_paper_rows_keep_the_configs_settings(run, capsys):
    """The softmax model's OpenMax is Table 2's ``openmax`` row: never tuned (the entropic model's is;
    --partial: on the tiny run no OpenMax grid point fits every model)."""
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "openmax", "knn", "--partial"]) == 0
    stored = json.loads((run / TUNED_SETTINGS).read_text())
    said = capsys.readouterr().out
    assert "openmax" not in stored["candidates"].get("softmax", {}) and "softmax/openmax" not in said
    assert "entropic/openmax" in said


def test_a_run_without_validation_negatives_is_refused_in_one_line(run, capsys):
    for model_dir in (run / "seed0").iterdir():
        val = load_outputs(model_dir / VAL_OUTPUTS)
        knowns = val["val"]["labels"] >= 0
        save_outputs(model_dir / VAL_OUTPUTS, {split: {key: array[knowns] for key, array in data.items()}
                                               for split, data in val.items()})
    assert main(["tune-detectors", str(run), "--fpr", str(FPR)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no negatives" in err[0] and VAL_OUTPUTS in err[0]
    assert not (run / TUNED_SETTINGS).exists()


def test_an_fpr_the_validation_negatives_cannot_support_is_refused_with_the_count(run, capsys):
    """32 validation negatives support FPR >= 10/32: at 0.1 (3 false positives) nothing is tuned,
    the exit is 1, and the line names the count, the smallest supported FPR and the values to use."""
    assert main(["tune-detectors", str(run), "--fpr", "0.1", "--detector", "knn"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "holds 32 negative(s)" in err[0] and "10/32 = 0.312" in err[0] and "supported: 0.5" in err[0], err[0]
    assert not (run / TUNED_SETTINGS).exists()
    assert main(["tune-detectors", str(run), "--fpr", "0.3125", "--detector", "knn"]) == 0  # exactly 10 allowed


def test_without_fpr_the_target_is_the_smallest_the_validation_negatives_support(run, capsys):
    """1 % needs 1,000 validation negatives; 32 support 0.5 at the smallest, and that is the default
    (a small validation split is tuned, not refused), said in the log and stored."""
    assert main(["tune-detectors", str(run), "--detector", "knn"]) == 0
    assert "target FPR 0.5: the default, the smallest the validation negatives support (0.01 needs 1,000)" in \
        capsys.readouterr().out
    assert json.loads((run / TUNED_SETTINGS).read_text())["target_fpr"] == TUNE_FPR


def test_unknown_or_untunable_detector_and_unknown_approach_are_refused(run):
    from agnostophobia.deploy import ModelRequest
    from agnostophobia.experiments.tune_detectors import tune_detectors

    for detectors, approaches, names in ((["softmax"], None, "--detector softmax"), (["knm"], None, "knm"),
                                         (None, ["objectosphere"], "--approach objectosphere")):
        with pytest.raises(AgnostophobiaError, match=names):
            tune_detectors(ModelRequest(run, fpr=FPR, approaches=approaches), detectors)


def choose(run: Path, k: int) -> None:
    """A stored choice of k for the entropic model's k-NN (k outside the grid: used only if read)."""
    (run / TUNED_SETTINGS).write_text(json.dumps({"format": 1, "target_fpr": FPR, "split": "val",
                                                  "chosen": {"entropic": {"knn": {"k": k}}}}))


def test_calibrate_and_predict_use_the_chosen_setting(run):
    from agnostophobia.deploy import OpenSetClassifier

    choose(run, 7)
    assert main(["calibrate", str(run), "--fpr", str(FPR), "--approach", "entropic", "--detector", "knn"]) == 0
    entry = next(e for e in json.loads((run / "calibration.json").read_text())["entries"] if e["detector"] == "knn")
    assert entry["detector_settings"]["k"] == 7
    classifier = OpenSetClassifier.from_run(run, approach="entropic", detector="knn", log=lambda _: None)
    assert classifier.detector.k == 7
    choose(run, 9)  # tuned again after calibrating: the threshold belongs to the old setting
    with pytest.raises(AgnostophobiaError, match="calibrate"):
        OpenSetClassifier.from_run(run, approach="entropic", detector="knn", log=lambda _: None)


def test_the_matrix_uses_the_choice_and_the_report_shows_both(run):
    from agnostophobia.experiments.report import tuned_detectors_markdown, write_metrics

    choose(run, 7)
    metrics = write_metrics(run, {})
    rows = [r for r in metrics["tuned_detectors"]["results"] if r["approach"] == "entropic"]
    assert rows and all("k=50" in r["config_settings"] and "k=7" in r["chosen_settings"] for r in rows)
    # the matrix row entropic/knn is k = 7's: the test CCR of the report's "chosen" column
    matrix = {r["unknowns"]: r for r in metrics["results"] if r["row"] == "entropic/knn"}
    for r in rows:
        assert matrix[r["unknowns"]]["ccr_at_fpr"]["1e-1"] == pytest.approx(r["test_ccr_chosen"], nan_ok=True)
    table = "\n".join(tuned_detectors_markdown(metrics))
    assert "| entropic | k-NN |" in table and "k=7" in table and "test CCR (chosen)" in table


def test_a_setting_whose_scores_tie_is_passed_over_for_one_that_ranks(run, capsys):
    """ASH-B gives every sample without a positive feature the same score (LeNet++'s 2-d features
    have a whole quadrant of them), so its validation CCR is decided by how ties are broken: the
    tuner records each point's tied share and chooses among the points at most TIE_FLAG tied."""
    from agnostophobia.metrics import TIE_FLAG, tied_share

    model_dir = RunDir(run).model(0, "softmax")
    path = model_dir.val_outputs
    stored_val = load_outputs(path)
    val = stored_val["val"]
    features = np.asarray(val["features"]).copy()
    features[::2] = -np.abs(features[::2]) - 0.1  # half the knowns and half the negatives: no positive entry
    save_outputs(path, {**stored_val, "val": {**val, "features": features}})
    assert main(["tune-detectors", str(run), "--fpr", str(TUNE_FPR), "--detector", "ash", "--approach", "softmax"]) == 0
    grid = json.loads((run / TUNED_SETTINGS).read_text())["candidates"]["softmax"]["ash"]
    chosen = json.loads((run / TUNED_SETTINGS).read_text())["chosen"]["softmax"]["ash"]
    val = load_outputs(path)["val"]
    for candidate in grid:  # the recorded share is the one the scores give
        detector = fitted_detector("ash", load_fit_outputs(model_dir), 10, {"ash": candidate["settings"]},
                                   model_dir=model_dir)
        top = detector.scores(detector_inputs(detector, val["logits"], 10), val["features"]).max(axis=1)
        assert candidate["val_tied_share"] == pytest.approx(tied_share(top, val["labels"]))
        assert (candidate["val_tied_share"] > 0.2) == (candidate["settings"]["variant"] == "b")
    untied = [c for c in grid if c["val_tied_share"] <= TIE_FLAG]
    assert chosen["variant"] != "b"
    assert next(c for c in grid if c["settings"] == chosen)["val_ccr"] == max(c["val_ccr"] for c in untied)


def test_the_choice_among_tied_and_untied_points():
    from agnostophobia.experiments.tune_detectors import _best

    tied = {"settings": {"variant": "b"}, "val_ccr": 0.31, "val_tied_share": 0.2}
    ranks = {"settings": {"variant": "p"}, "val_ccr": 0.26, "val_tied_share": 0.0}
    worse = {"settings": {"variant": "s"}, "val_ccr": 0.25, "val_tied_share": 0.01}
    assert _best("ash", [tied, ranks, worse], {}) is ranks
    assert _best("ash", [tied, {**ranks, "val_tied_share": 0.5}], {}) is tied  # every point ties: the best of them
    assert _best("ash", [{**tied, "val_ccr": None}, worse], {}) is worse
