"""``agnostophobia compare``: every (approach, detector) of a run ranked on validation data alone,
``--detector best`` deploying its top, and the one rule of which FPRs a set of negatives supports."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from agnostophobia.cli import main
from agnostophobia.detectors.stored import NotFitted, detector_inputs, fitted_detector
from agnostophobia.losses import known_columns
from agnostophobia.metrics import (MIN_FALSE_POSITIVES, default_fpr, reported_fprs, smallest_supported_fpr, supported_fprs,
                                   supports_fpr)
from agnostophobia.rundir import CALIBRATION, COMPARISON, COMPARISON_TABLE, RunDir
from agnostophobia.training.outputs import load_fit_outputs, load_outputs, save_outputs

from runs import snapshot


# ------------------------------------------------------------------ the rule (metrics.resolution)
def test_a_ccr_is_reported_only_where_the_negatives_allow_ten_false_positives():
    assert MIN_FALSE_POSITIVES == 10
    assert supports_fpr(0.1, 100) and not supports_fpr(0.1, 99)  # 0.1 x 100 is 10.000000000000002 in floats
    assert supports_fpr(0.01, 1000) and not supports_fpr(0.01, 999) and not supports_fpr(0.5, 0)
    assert smallest_supported_fpr(76) == pytest.approx(10 / 76) and smallest_supported_fpr(0) == np.inf
    assert supported_fprs(76) == [0.2, 0.5]  # the user's 76 negatives: not 0.01, not even 0.1
    assert reported_fprs(76) == [0.2] and reported_fprs(1000) == [0.01, 0.1] and reported_fprs(19) == []
    assert reported_fprs(300) == [0.05, 0.1] and reported_fprs(10 ** 5) == [1e-4, 1e-3, 1e-2, 0.1]


# ------------------------------------------------------------------ compare on the tiny run
@pytest.fixture
def run(tiny_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def validation_auroc(run, approach: str, detector: str) -> float:
    """AUROC of ``detector``'s per-sample score on seed 0's validation split, computed here with
    scikit-learn (knowns positive)."""
    model_dir = RunDir(run).model(0, approach)
    val = load_outputs(model_dir.val_outputs)["val"]
    num_classes = known_columns(approach, val["logits"].shape[1])
    scorer = fitted_detector(detector, load_fit_outputs(model_dir), num_classes, model_dir=model_dir)
    scores = scorer.scores(detector_inputs(scorer, val["logits"], num_classes), val["features"])
    return roc_auc_score(val["labels"] >= 0, scores.max(axis=1))


def test_compare_ranks_every_pair_at_the_default_fpr_and_writes_the_table(run, capsys):
    """Without --fpr, at the FPR tune-detectors tunes at (32 validation negatives: 0.5, the
    smallest they support); ties on that CCR to the higher AUROC, each such rank marked."""
    assert main(["compare", str(run)]) == 0
    out = capsys.readouterr().out
    stored = json.loads((run / COMPARISON).read_text())
    rows = stored["rows"]
    assert stored["val_negatives"] == 32 and stored["fprs"] == [0.5]
    assert stored["rank_fpr"] == default_fpr(32) == 0.5 and stored["rank_fpr_is_default"] is True
    assert {r["approach"] for r in rows} == {"softmax", "entropic"} and len(rows) > 10
    keys = [(r["val"]["ccr_at_fpr"]["5e-1"] is None, -(r["val"]["ccr_at_fpr"]["5e-1"] or 0), -r["val"]["auroc"])
            for r in rows]
    assert keys == sorted(keys) and [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    for row in rows:
        try:
            expected = validation_auroc(run, row["approach"], row["detector"])
        except NotFitted:
            pytest.fail(f"{row['detector']} is ranked but cannot be fitted")
        assert row["val"]["auroc"] == pytest.approx(expected, abs=1e-12), row["detector"]
        assert set(row["test"]) == {"letters", "devanagari", "notmnist", "cifar10"}
        assert set(row["val"]["ccr_at_fpr"]) == {"5e-1"} and row["val"]["closed_set_accuracy"] is not None
    # fitted detectors that cannot be fitted on the tiny run are named, not dropped silently
    assert any("openmax" in note for note in stored["notes"])
    table = (run / COMPARISON_TABLE).read_text()
    top = f"{rows[0]['approach']}/{rows[0]['detector']}"
    assert f"| 1 | {top} |" in table and "val CCR@5e-1" in table and "letters AUROC" in table
    assert "ranked by validation CCR at FPR 0.5 (the default without --fpr" in table
    ties = sum(1 for a, b in zip(keys, keys[1:]) if a[:2] == b[:2])
    marked = [line for line in table.splitlines() if line.startswith("| ") and line.split("|")[1].strip().endswith("=")]
    assert len(marked) == ties and (not ties or f"{ties} row(s) tie with the row above" in table)
    assert str(run.parent) not in table  # the run by its name, not an absolute path
    assert top in out and "val AUROC" in out


def test_compare_and_detector_best_name_the_same_top_pair(run, capsys):
    """One ranking rule: compare's rank 1 without --fpr is what --detector best deploys at the
    default FPR, and at a given --fpr too."""
    from agnostophobia.deploy.best import best_choice

    assert main(["compare", str(run)]) == 0
    top = json.loads((run / COMPARISON).read_text())["rows"][0]
    choice = best_choice(run, default_fpr(32))
    assert (choice.approach, choice.detector) == (top["approach"], top["detector"])
    assert main(["compare", str(run), "--fpr", "0.5"]) == 0
    stored = json.loads((run / COMPARISON).read_text())
    assert stored["rank_fpr_is_default"] is False and stored["rows"][0]["row"] == top["row"]


def test_rank_falls_back_to_validation_auroc_only_where_no_fpr_is_supported():
    from agnostophobia.deploy.compare import rank

    rows = [{"approach": "softmax", "detector": d, "val": {"auroc": a, "ccr_at_fpr": {"1e-2": c}}}
            for d, a, c in [("softmax", 0.8, 0.5), ("energy", 0.9, 0.5), ("maxlogit", 0.95, 0.4)]]
    assert [r["detector"] for r in rank(rows, 0.01)] == ["energy", "softmax", "maxlogit"]  # the tie to AUROC
    assert [r["detector"] for r in rank(rows, None)] == ["maxlogit", "energy", "softmax"]
    assert default_fpr(19) is None and default_fpr(20) == 0.5 and default_fpr(999) == 0.02


def test_the_ranking_reads_no_test_set(run):
    """Test outputs replaced by noise: every validation number and the order stay."""
    assert main(["compare", str(run)]) == 0
    before = json.loads((run / COMPARISON).read_text())["rows"]
    rng = np.random.default_rng(0)
    for model_dir in (run / "seed0").iterdir():
        test = load_outputs(model_dir / "outputs.npz")
        save_outputs(model_dir / "outputs.npz",
                     {split: {**data, "logits": rng.normal(size=data["logits"].shape).astype(np.float32)}
                      for split, data in test.items()})
    assert main(["compare", str(run)]) == 0
    after = json.loads((run / COMPARISON).read_text())["rows"]
    assert [(r["approach"], r["detector"], r["val"]) for r in after] == \
        [(r["approach"], r["detector"], r["val"]) for r in before]
    assert [r["test"] for r in after] != [r["test"] for r in before]


def test_compare_at_an_unsupported_fpr_is_refused_and_keeps_the_last_table(run, capsys):
    assert main(["compare", str(run), "--fpr", "0.5"]) == 0
    stored = json.loads((run / COMPARISON).read_text())
    ccrs = [r["val"]["ccr_at_fpr"]["5e-1"] for r in stored["rows"]]
    assert stored["rank_fpr"] == 0.5 and ccrs == sorted(ccrs, key=lambda v: -1 if v is None else -v)
    capsys.readouterr()
    before = snapshot(run)
    assert main(["compare", str(run), "--fpr", "0.1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 32 negative(s)" in err[0] and "10/32 = 0.312" in err[0], err
    assert "supported: 0.5" in err[0]
    assert snapshot(run) == before  # comparison.json and comparison.md byte for byte


def top_at(run, fpr: float):
    rows = json.loads((run / COMPARISON).read_text())["rows"]
    key = f"{fpr:.0e}".replace("e-0", "e-")
    best = max(r["val"]["ccr_at_fpr"][key] for r in rows if r["val"]["ccr_at_fpr"][key] is not None)
    tied = [r for r in rows if r["val"]["ccr_at_fpr"][key] == best]
    top = max(tied, key=lambda r: r["val"]["auroc"])
    return top["approach"], top["detector"]


def test_calibrate_detector_best_uses_the_top_and_a_refusal_keeps_the_calibration(run, capsys):
    assert main(["compare", str(run), "--fpr", "0.5"]) == 0
    approach, detector = top_at(run, 0.5)
    capsys.readouterr()
    assert main(["calibrate", str(run), "--fpr", "0.5", "--detector", "best"]) == 0
    out = capsys.readouterr().out
    assert f"--detector best: {approach}/{detector}: the highest validation CCR at FPR 0.5" in out
    entries = json.loads((run / CALIBRATION).read_text())["entries"]
    assert [(e["approach"], e["detector"]) for e in entries if e["target_fpr"] == 0.5] == [(approach, detector)]
    before = (run / CALIBRATION).read_bytes()
    assert main(["calibrate", str(run), "--fpr", "0.01", "--detector", "best"]) == 1
    assert "holds 32 negative(s)" in capsys.readouterr().err
    assert (run / CALIBRATION).read_bytes() == before


def test_predict_detector_best_reads_the_calibrated_choice(run, capsys, tmp_path, real_data_dir):
    assert main(["calibrate", str(run), "--fpr", "0.5", "--detector", "best"]) == 0
    chosen = capsys.readouterr().out.split("--detector best: ", 1)[1].split(":", 1)[0]
    images = tmp_path / "digits.npz"
    np.savez(images, x=np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:8])
    assert main(["predict", str(run), str(images), "--detector", "best", "--out", str(tmp_path / "rows.csv")]) == 0
    out = capsys.readouterr().out
    assert f"--detector best at FPR 0.5: {chosen}:" in out and "8 predictions" in out


def test_a_script_asks_for_best_as_the_command_line_does(run, tmp_path):
    """detector="best" is resolved in the library: calibrate_run, the classifier and compare_run
    take the one ModelRequest the command line builds, and choose as ``--detector best`` does."""
    from agnostophobia.deploy import ModelRequest, OpenSetClassifier, calibrate_run
    from agnostophobia.deploy.compare import compare_run

    said = []
    compare_run(ModelRequest(run, fpr=0.5), log=said.append)
    approach, detector = top_at(run, 0.5)
    calibrate_run(ModelRequest(run, fpr=0.5, detector="best"), log=said.append)
    assert any(line.startswith(f"--detector best: {approach}/{detector}: the highest validation CCR at FPR 0.5")
               for line in said)
    entries = json.loads((run / CALIBRATION).read_text())["entries"]
    assert [(e["approach"], e["detector"]) for e in entries if e["target_fpr"] == 0.5] == [(approach, detector)]
    # without an FPR, the one model is the top at the stored calibration's target FPR, as predict's
    classifier = OpenSetClassifier.from_run(run, detector="best", log=said.append)
    assert (classifier.approach, classifier.detector_name) == (approach, detector)
    with pytest.raises(ValueError, match="compare_run does not read seed"):
        compare_run(ModelRequest(run, seed=1))


def test_the_kept_test_curves_are_the_oscr_of_the_scores_and_are_kept_only_when_asked(run):
    """The benchmark's OSCR figures are drawn from these curves, not from a second scoring."""
    from agnostophobia.deploy.compare import compare_models
    from agnostophobia.detectors.stored import model_scores, run_settings
    from agnostophobia.metrics import oscr
    from agnostophobia.training.records import check_run

    assert compare_models(run).curves == {}
    comparison = compare_models(run, curves=True)
    records = check_run(run, "compare")
    settings = run_settings(records)
    expected = {}
    for seed, approach, model_dir in records.models:
        scores = model_scores(model_dir, approach, settings.for_approach(approach))
        for detector in scores.top:
            for unknown in scores.unknown_sets:
                values, labels = scores.known_vs_unknown(detector, unknown)
                expected[seed, approach, detector, unknown] = (*oscr(values, labels)[:2], int((labels < 0).sum()))
    assert expected and set(comparison.curves) == set(expected)
    for key, (ccr, fpr, unknowns) in comparison.curves.items():
        assert np.array_equal(ccr, expected[key][0]) and np.array_equal(fpr, expected[key][1])
        assert unknowns == expected[key][2]


def test_the_validation_scores_handed_on_are_those_the_rows_numbers_were_read_from(run):
    """The benchmark's bootstrap over the validation samples reads the scores compare scored, once
    each (seed, approach, detector), not a second scoring: its statistics are the row's numbers."""
    from agnostophobia.deploy.compare import RANKING_STATISTICS, compare_models, ranking_statistic

    handed = []
    comparison = compare_models(run, with_tests=False, val_scores=lambda *call: handed.append(call))
    by_model = {(seed, approach, detector): (scores, labels) for seed, approach, detector, scores, labels in handed}
    assert handed and len(by_model) == len(handed)
    for row in comparison.rows:
        for position, seed in enumerate(row["seed_ids"]):
            scores, labels = by_model[seed, row["approach"], row["detector"]]
            lowest = smallest_supported_fpr(int((labels < 0).sum()))
            for name in RANKING_STATISTICS:
                assert ranking_statistic(name, scores, labels, lowest) == row["val"]["per_seed"][name][position]


def test_each_row_has_the_oscr_area_over_the_log_fpr_axis_from_the_smallest_resolved_fpr(run):
    """``oscr_log`` reads the curve from 10/#negatives (32 validation negatives: 10/32) up, on a log
    axis: the area the linear one hardly weighs; checked against the metric called directly, and
    against a sum over the curve's steps written here."""
    from agnostophobia.deploy.compare import compare_models
    from agnostophobia.metrics import oscr, oscr_area

    rows = {(r["approach"], r["detector"]): r for r in compare_models(run, with_tests=False).rows}
    model_dir = RunDir(run).model(0, "entropic")
    val = load_outputs(model_dir.val_outputs)["val"]
    scorer = fitted_detector("softmax", load_fit_outputs(model_dir), 10, model_dir=model_dir)
    scores = scorer.scores(detector_inputs(scorer, val["logits"], 10), val["features"])
    expected = oscr_area(scores, val["labels"], log_fpr=True, min_fpr=10 / 32)
    assert rows["entropic", "softmax"]["val"]["oscr_log"] == pytest.approx(expected, abs=1e-12)
    fpr, ccr = oscr(scores, val["labels"])[:2]  # the curve's points: CCR(f) is the best CCR at FPR <= f
    grid = np.logspace(np.log10(10 / 32), 0, 20001)
    curve = [max([c for c, f in zip(ccr, fpr) if f <= g] or [0.0]) for g in grid]
    assert expected == pytest.approx(np.trapezoid(curve, np.log10(grid)) / -np.log10(10 / 32), abs=2e-3)
    assert all(0 <= r["val"]["oscr_log"] <= 1 for r in rows.values())


# ------------------------------------------------------------------ issue 55: the benchmark's columns and ranking
def test_each_set_gives_fpr95_aupr_in_and_out_and_the_ccr_at_the_smallest_fpr_it_resolves():
    """The numbers of a set (validation or test) the benchmark reports and chooses its ranking metric
    from: FPR@95%TPR and both AUPRs of the max score, as scikit-learn gives them (knowns positive for
    AUPR-In, unknowns positive and the score negated for AUPR-Out), and CCR at 10/#negatives itself."""
    from sklearn.metrics import average_precision_score, roc_curve

    from agnostophobia.deploy.compare import SEED_STATISTICS, _numbers
    from agnostophobia.metrics import ccr_at_fpr

    rng = np.random.default_rng(3)
    labels = np.r_[rng.integers(0, 4, 400), -np.ones(250, int)]
    scores = np.round(rng.normal(size=(650, 4)) + np.eye(4)[np.maximum(labels, 0)] * (labels >= 0)[:, None], 1)
    numbers = _numbers(scores, labels, [0.1], 250)
    top = scores.max(axis=1)
    fpr, tpr, _ = roc_curve(labels >= 0, top, drop_intermediate=False)
    assert numbers["fpr_at_95tpr"] == fpr[np.argmax(tpr >= 0.95)]
    assert numbers["aupr_in"] == pytest.approx(average_precision_score(labels >= 0, top), abs=1e-12)
    assert numbers["aupr_out"] == pytest.approx(average_precision_score(labels < 0, -top), abs=1e-12)
    assert numbers["ccr_at_lowest_fpr"] == pytest.approx(float(ccr_at_fpr(scores, labels, [10 / 250])[0]))
    assert _numbers(scores[:405], labels[:405], [], 5)["ccr_at_lowest_fpr"] is None  # 5 negatives resolve none
    assert {"fpr_at_95tpr", "aupr_in", "aupr_out", "ccr_at_lowest_fpr"} <= set(SEED_STATISTICS)


def test_rank_by_a_validation_statistic_keeps_compares_ties():
    """``benchmark`` ranks through compare's ranking, by the validation statistic its rule chose."""
    from agnostophobia.deploy.compare import rank

    def row(approach, detector, auroc, oscr_log):
        return {"approach": approach, "detector": detector, "val": {"auroc": auroc, "oscr_log": oscr_log}}

    rows = [row("softmax", "softmax", 0.9, 0.5), row("entropic", "softmax", 0.8, 0.7),
            row("entropic", "energy", 0.95, 0.7), row("softmax", "energy", 0.99, None)]
    assert [(r["approach"], r["detector"]) for r in rank(rows, None)][0] == ("softmax", "energy")  # by AUROC
    ranked = rank(rows, None, by="oscr_log")
    assert [(r["approach"], r["detector"], r["rank"]) for r in ranked] == [
        ("entropic", "energy", 1), ("entropic", "softmax", 2), ("softmax", "softmax", 3), ("softmax", "energy", 4)]
    with pytest.raises(ValueError, match="fpr_at_95tpr"):  # lower is better: not a ranking statistic
        rank(rows, None, by="fpr_at_95tpr")


def test_ranks_tie_values_that_differ_in_their_last_bits():
    """The same areas summed in another order differ by 1e-16: a tie, broken by the declared keys
    (AUROC, the registry's order, the detector's name) and marked as one, not a rank by rounding."""
    from agnostophobia.deploy.compare import rank, ties_with_row_above

    def row(detector, oscr):
        return {"approach": "entropic", "detector": detector, "val": {"auroc": 0.99, "oscr": oscr}}

    a, b = 0.9448333333333334, 0.9448333333333333
    assert a != b
    ranked = rank([row("softmax", a), row("evm", b)], None, by="oscr")
    assert [r["detector"] for r in ranked] == ["evm", "softmax"]  # the detector's name decided
    assert ties_with_row_above([r["val"]["oscr"] for r in ranked]) == [False, True]
    assert ties_with_row_above([(True, a), (True, b)]) == [False, True]
    assert ties_with_row_above([0.5, 0.5 + 1e-9]) == [False, False]  # a real difference still ranks
