"""The main job end to end on the real staged data: ``reproduce lenet++ --budget smoke``,
its report and metrics, resumption, and ``evaluate --unknowns`` on a user's own data."""
import json
import shutil

import numpy as np
import pytest
from PIL import Image

from agnostophobia.cli import main
from agnostophobia.experiments.run_metrics import FPR_KEYS
from agnostophobia.training.outputs import load_outputs
from agnostophobia.training.config import load_experiment

APPROACH_ROWS = {"softmax", "background", "entropic", "objectosphere", "objectosphere-scaled"}
UNKNOWN_SETS = {"letters", "devanagari", "notmnist", "cifar10"}
APPROACHES = ("softmax", "background", "entropic", "objectosphere")


@pytest.fixture(scope="module")
def smoke_run(real_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "run"
    code = main(["reproduce", "lenet++", "--budget", "smoke", "--out", str(out), "--no-progress",
                 "--data-dir", str(real_data_dir)])
    assert code == 0
    return out


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_smoke_reproduction_writes_metrics_for_every_approach_and_unknown_set(smoke_run):
    metrics = json.loads((smoke_run / "metrics.json").read_text())
    pairs = {(r["row"], r["unknowns"]) for r in metrics["results"]}
    assert {a for a, _ in pairs} >= APPROACH_ROWS
    assert {u for _, u in pairs} == UNKNOWN_SETS
    assert len(pairs) == len(metrics["results"])
    for result in metrics["results"]:
        assert set(result["ccr_at_fpr"]) == set(FPR_KEYS)
        n_unknown = result["num_unknown"]
        for key, value in result["ccr_at_fpr"].items():
            # null exactly where the unknown set is too small for the FPR (the paper's N/A)
            assert (value is None) == (float(key) < 1 / n_unknown), (result["row"], key)
            if value is not None:
                assert 0.0 <= value <= result["closed_set_accuracy"] + 1e-12
        assert 0.0 <= result["oscr_auc"] <= result["closed_set_accuracy"] + 1e-12
        assert 0.0 <= result["oscr_auc_log"] <= result["closed_set_accuracy"] + 1e-12
    assert metrics["budget"] == "smoke"
    assert {row["split"] for row in metrics["table1"]} == UNKNOWN_SETS | {"known"}


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_every_applicable_detector_is_evaluated_on_every_trained_approach(smoke_run):
    from agnostophobia.detectors import DETECTORS, detector_applies

    metrics = json.loads((smoke_run / "metrics.json").read_text())
    cells = [(r["approach"], r["detector"], r["unknowns"]) for r in metrics["results"]]
    assert len(cells) == len(set(cells))  # a row appears once
    rows = {(r["approach"], r["detector"]): r["row"] for r in metrics["results"]}
    assert len(set(rows.values())) == len(rows)
    # the paper's display names stay
    assert rows[("softmax", "softmax")] == "softmax" and rows[("entropic", "softmax")] == "entropic"
    assert rows[("objectosphere", "objectosphere-scaled")] == "objectosphere-scaled"
    assert rows[("entropic", "max-logit")] == "entropic/max-logit"
    for approach in APPROACHES:  # every model stored its training knowns, so k-NN is fitted on each
        assert (smoke_run / "seed0" / approach / "fit_outputs.npz").exists()
        evaluated = {d for a, d in rows if a == approach}
        skipped = {d for d in DETECTORS.names() if any(n.startswith(f"{d} on the {approach} model")
                                                       for n in metrics["skipped"])}
        applicable = {d for d in DETECTORS.names() if detector_applies(d, approach)}  # e.g. not cac: CAC's networks only
        assert evaluated | skipped == applicable and not evaluated & skipped, approach
        assert approach == "background" or all(not DETECTORS.get(d).reads_background_column for d in applicable)
        assert "knn" in evaluated
    assert {u for a, d, u in cells if (a, d) == ("background", "knn")} == UNKNOWN_SETS


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_smoke_report_has_the_approach_by_detector_matrix(smoke_run):
    report = (smoke_run / "report.md").read_text()
    matrix = report.split("## Every detector on every trained approach", 1)[1]
    notmnist = matrix.split("#### Unknowns: notMNIST", 1)[1].split("####", 1)[0]
    header = next(line for line in notmnist.splitlines() if line.startswith("| approach |"))
    assert "k-NN" in header and "max-logit" in header and "energy" in header and "background (C+1 softmax)" in header
    for approach in APPROACHES:
        assert f"\n| {approach} | " in notmnist
    background_cells = [line for line in notmnist.splitlines() if line.startswith("| softmax |")][0]
    assert "—" in background_cells  # the background score does not apply to the softmax model
    assert report.index("## Table 1") < report.index("## Every detector on every trained approach")


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_smoke_report_is_labelled_not_a_result_and_has_both_tables(smoke_run):
    report = (smoke_run / "report.md").read_text()
    assert "not a result" in report
    assert "## Table 2" in report and "## Table 1" in report
    assert "*paper: entropic*" in report  # the paper's numbers side by side
    assert "NHCD" in report  # data substitutions are stated


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_stored_outputs_recompute_the_reported_numbers(smoke_run):
    from agnostophobia.metrics import ccr_at_fpr
    from agnostophobia.detectors import softmax_scores

    outputs = load_outputs(smoke_run / "seed0" / "entropic" / "outputs.npz")
    known, unknown = outputs["known"], outputs["notmnist"]
    scores = np.concatenate([softmax_scores(known["logits"]), softmax_scores(unknown["logits"])])
    labels = np.concatenate([known["labels"], unknown["labels"]])
    expected = ccr_at_fpr(scores, labels, [1e-1])[0]
    metrics = json.loads((smoke_run / "metrics.json").read_text())
    reported = next(r for r in metrics["results"] if r["row"] == "entropic" and r["unknowns"] == "notmnist")
    assert reported["ccr_at_fpr"]["1e-1"] == pytest.approx(expected)
    assert known["features"].shape[1] == 2 and unknown["labels"].tolist() == [-1] * len(unknown["labels"])


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_reproduce_again_resumes_without_retraining(smoke_run, capsys):
    before = {p: p.stat().st_mtime_ns for p in smoke_run.glob("seed0/*/best.pt")}
    assert main(["reproduce", "lenet++", "--budget", "smoke", "--out", str(smoke_run), "--no-progress",
                 "--no-plots"]) == 0
    assert "finished earlier, kept" in capsys.readouterr().out
    assert before == {p: p.stat().st_mtime_ns for p in smoke_run.glob("seed0/*/best.pt")}


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_evaluate_adds_a_users_own_unknowns(smoke_run, tmp_path, real_data_dir):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run)
    # a user's own unknowns: letters from the NIST vowels substitute, as an .npz and as a folder of PNGs
    vowels = np.load(real_data_dir / "nist_sd19_vowels" / "nist_sd19_vowels.npz")["x_train"][:40]
    np.savez(tmp_path / "vowels.npz", x_test=vowels)
    folder = tmp_path / "vowel_pngs"
    folder.mkdir()
    for i, image in enumerate(vowels[:25]):
        Image.fromarray(image).save(folder / f"{i:03d}.png")
    assert main(["evaluate", str(run), "--unknowns", str(tmp_path / "vowels.npz"), str(folder)]) == 0
    outputs = load_outputs(run / "seed0" / "objectosphere" / "outputs.npz")
    assert outputs["vowels"]["logits"].shape == (40, 10)
    assert outputs["vowel_pngs"]["features"].shape == (25, 2)
    # the PNG round trip is lossless: both copies of an image give the same outputs
    np.testing.assert_allclose(outputs["vowel_pngs"]["logits"], outputs["vowels"]["logits"][:25], rtol=1e-5)
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"vowels", "vowel_pngs"} <= {r["unknowns"] for r in metrics["results"]}


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_evaluate_rejects_bad_unknowns(smoke_run, tmp_path, capsys):
    assert main(["evaluate", str(smoke_run), "--unknowns", "no-such-thing"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-thing" in err[0]
    inverted = 255 - np.zeros((5, 28, 28), np.uint8)  # black glyphs on white: wrong polarity
    np.savez(tmp_path / "inverted.npz", x=inverted)
    assert main(["evaluate", str(smoke_run), "--unknowns", str(tmp_path / "inverted.npz")]) == 1
    assert "white on black" in capsys.readouterr().err


def test_evaluate_needs_a_run(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path)]) == 1
    assert "no trained run" in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["smoke", "cpu", "paper"])
def test_shipped_lenet_config_defines_every_budget(budget):
    experiment = load_experiment("lenet++").for_budget(budget)
    assert experiment.approaches == ["softmax", "background", "entropic", "objectosphere"]
    if budget == "paper":  # the authors' protocol (docs/references.md)
        cfg = experiment.train
        assert (cfg.optimizer, cfg.lr, cfg.batch_size, cfg.epochs, cfg.loss) == \
            ("adam", 0.01, 128, 70, {"xi": 50, "lambda_": 1e-4})
        assert cfg.model_kwargs["activation"] == "none" and cfg.protocol_limits == {}


def test_train_command_trains_selected_approaches_and_protects_existing_runs(real_data_dir, tmp_path, capsys):
    out = tmp_path / "trained"
    args = ["train", "lenet++", "--budget", "smoke", "--approach", "entropic", "--out", str(out),
            "--no-progress", "--data-dir", str(real_data_dir)]
    assert main(args) == 0
    assert [p.parent.name for p in out.glob("seed0/*/outputs.npz")] == ["entropic"]
    assert main(args) == 1  # an existing run is never overwritten silently
    assert "--resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    assert main(["train", "lenet++", "--budget", "smoke", "--approach", "magic", "--out", str(out)]) == 1
    assert "magic" in capsys.readouterr().err


@pytest.mark.parametrize("with_openmax", [True, False])
def test_report_states_openmax_settings_only_when_it_was_evaluated(tmp_path, with_openmax):
    from agnostophobia.experiments.report import write_report

    def row(detector, label):
        return {"approach": "softmax", "detector": detector, "row": label, "unknowns": "notmnist", "num_known": 10,
                "num_unknown": 20, "ccr_at_fpr": dict.fromkeys(FPR_KEYS), "closed_set_accuracy": 0.9, "auroc": 0.8}

    rows = [row("softmax", "softmax")] + ([row("openmax", "openmax")] if with_openmax else [])
    metrics = {"experiment": "lenet++", "budget": "cpu", "fpr_readout": "x", "results": rows, "table1": [],
               "detectors": {"openmax": {"tail_size": 20, "alpha": 3, "distance": "eucos"}}}
    report = write_report(tmp_path, metrics).read_text()
    assert ("### OpenMax" in report) == with_openmax
    assert ("class-0 score" in report) == with_openmax


def test_the_report_shows_a_protocols_folders_relative_to_the_run(tmp_path):
    """config.yaml keeps a protocol's paths absolute (the run rebuilds its split from anywhere);
    report.md shows them relative to the run, naming no folder of the machine it was written on."""
    from agnostophobia.experiments.report import relative_paths

    run = tmp_path / "runs" / "mine"
    protocol = {"type": "imagefolder", "root": str(tmp_path / "data" / "images"), "known": ["a", "b"],
                "negative": ["c"]}
    shown = relative_paths(protocol, run)
    assert shown["root"] == "../../data/images" and shown["known"] == ["a", "b"]
    assert str(tmp_path) not in str(shown) and relative_paths("lenet++", run) == "lenet++"
