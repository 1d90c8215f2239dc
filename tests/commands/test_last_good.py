"""A command that fails, is refused or is killed leaves the last good result byte for byte:
``calibrate``, ``tune-detectors``, ``evaluate``, ``export`` and ``predict --out`` each run once
to a good result, then again in a way that cannot succeed; every file the good run wrote is
compared. A command that can only partly succeed writes nothing unless ``--partial`` is given,
and says what it would have written. (``tune``: tests/experiments/test_tune.py.)"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from reliability_table import proves
from runs import command_area, run_cli, run_main

from agnostophobia.cli import main


@pytest.fixture(scope="module")
def area(tiny_run, real_data_dir, tmp_path_factory):
    area = command_area(tmp_path_factory.mktemp("last-good"), tiny_run, real_data_dir)
    # the same set under a name no file system takes whole in a figure's name
    shutil.copy(area / "extra.npz", area / f"{'u' * 240}.npz")
    return area


@pytest.fixture
def run(area, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(area / "base", copy)
    return copy


#: command -> (the good argv, the argv that cannot succeed, the files the good one wrote); on (run, area, out folder)
CASES = {
    "calibrate": (lambda r, a, o: ["calibrate", r, "--fpr", "0.1"],
                  lambda r, a, o: ["calibrate", r, "--fpr", "1e-5"],
                  lambda r, o: [r / "calibration.json"]),
    "calibrate-one-approach": (lambda r, a, o: ["calibrate", r, "--fpr", "0.1"],
                               lambda r, a, o: ["calibrate", r, "--fpr", "1e-5", "--approach", "entropic"],
                               lambda r, o: [r / "calibration.json"]),
    "tune-detectors": (lambda r, a, o: ["tune-detectors", r, "--fpr", "0.5", "--detector", "gen"],
                       lambda r, a, o: ["tune-detectors", r, "--fpr", "1e-5", "--detector", "gen"],
                       lambda r, o: [r / "detector_settings.json"]),
    "evaluate": (lambda r, a, o: ["evaluate", r, "--unknowns", a / "extra.npz"],
                 lambda r, a, o: ["evaluate", r, "--unknowns", a / f"{'u' * 240}.npz"],
                 lambda r, o: [r / "metrics.json", r / "report.md", r / "seed0" / "softmax" / "outputs.npz",
                               r / "seed0" / "entropic" / "detector_scores.npz"]),
    "export": (lambda r, a, o: ["export", r, "--format", "torchscript", "--fpr", "0.1", "--out", o / "model.pt"],
               lambda r, a, o: ["export", r, "--format", "torchscript", "--fpr", "1e-5", "--out", o / "model.pt"],
               lambda r, o: [o / "model.pt", r / "calibration.json"]),
    "predict": (lambda r, a, o: ["predict", r, a / "digit.png", "--fpr", "0.1", "--out", o / "rows.csv"],
                lambda r, a, o: ["predict", r, a / "digit.png", "--fpr", "1e-5", "--out", o / "rows.csv"],
                lambda r, o: [o / "rows.csv", r / "calibration.json"]),
}


def contents(paths) -> dict:
    return {path: path.read_bytes() for path in paths}


@proves("refused input", "calibrate, tune-detectors, evaluate, export and predict --out refused after a good "
                         "run: every file of the good result is unchanged, byte for byte")
@pytest.mark.parametrize("command", CASES)
def test_a_refused_command_leaves_the_last_good_result(run, area, tmp_path, capsys, command):
    good, bad, written = CASES[command]
    code, _, err = run_main(good(run, area, tmp_path), capsys)
    assert code == 0, err
    before = contents(written(run, tmp_path))
    code, _, err = run_main(bad(run, area, tmp_path), capsys)
    assert code == 1 and len([line for line in err if "error" in line]) == 1, err
    assert contents(written(run, tmp_path)) == before


@proves("refused input", "a refused `calibrate` says what `--partial` would write; with `--partial` the thresholds "
                         "that resolve are written and a model without one keeps its working threshold")
def test_partial_calibration_writes_only_what_resolves_and_keeps_working_thresholds(run, capsys):
    assert main(["calibrate", str(run), "--fpr", "0.1"]) == 0
    good = {(e["approach"], e["detector"]): e for e in json.loads((run / "calibration.json").read_text())["entries"]}
    code, _, err = run_main(["calibrate", run, "--fpr", "1e-5", "--partial"], capsys)
    assert code == 1 and "(0 threshold(s) that resolve written to" in err[-1], err
    kept = {(e["approach"], e["detector"]): e for e in json.loads((run / "calibration.json").read_text())["entries"]}
    assert kept == good  # nothing resolved: every working threshold kept
    code, _, err = run_main(["calibrate", run, "--fpr", "1e-5", "--detector", "max-logit"], capsys)
    assert code == 1 and "nothing written, calibration.json is as it was; --partial would write" in err[-1], err


@proves("refused input", "a refused `tune-detectors` keeps the chosen settings; `--partial` writes those chosen and "
                         "keeps the earlier choice of a detector without one")
def test_partial_tuning_keeps_the_earlier_choice_of_an_untuned_detector(run, capsys):
    assert main(["tune-detectors", str(run), "--fpr", "0.5", "--detector", "gen"]) == 0
    before = json.loads((run / "detector_settings.json").read_text())
    # OpenMax has no grid point that fits every model of the tiny run: without --partial nothing is
    # written; with it, GEN's choice is written again and nothing of OpenMax replaces what was there
    code, _, err = run_main(["tune-detectors", run, "--fpr", "0.5", "--detector", "gen", "openmax"], capsys)
    assert code == 1 and json.loads((run / "detector_settings.json").read_text()) == before, err
    code, _, err = run_main(["tune-detectors", run, "--fpr", "0.5", "--detector", "gen", "openmax", "--partial"],
                            capsys)
    assert code == 0, err
    after = json.loads((run / "detector_settings.json").read_text())
    assert {a: {"gen": chosen["gen"]} for a, chosen in after["chosen"].items()} == before["chosen"]


@proves("kill", "`calibrate` killed as it replaces `calibration.json` leaves the last good file byte for byte")
def test_a_killed_calibration_leaves_the_last_good_one(run):
    assert main(["calibrate", str(run), "--fpr", "0.1"]) == 0
    before = (run / "calibration.json").read_bytes()
    assert run_cli(["calibrate", run, "--fpr", "0.2"], kill_at="write:calibration.json").returncode < 0
    assert (run / "calibration.json").read_bytes() == before


@proves("refused input", "`calibrate --detector best` over several approaches chooses every approach's detector "
                         "first and writes all or nothing: one approach without a threshold leaves `calibration.json` "
                         "byte for byte, the others' included")
@pytest.mark.parametrize("unresolved", ["softmax", "entropic"])
def test_calibrate_best_over_several_approaches_is_all_or_nothing(run, capsys, monkeypatch, unresolved):
    import agnostophobia.deploy.calibration as calibration
    from agnostophobia.rundir import RunDir

    assert main(["calibrate", str(run), "--fpr", "0.5"]) == 0
    before = (run / "calibration.json").read_bytes()
    real, writes = calibration.calibrate_model, []

    def no_threshold_for_one(val, score, *args, **kwargs):
        entry = real(val, score, *args, **kwargs)
        return {**entry, "threshold": None, "reason": "refused here"} if score.approach == unresolved else entry

    real_write = RunDir.write
    monkeypatch.setattr(calibration, "calibrate_model", no_threshold_for_one)
    monkeypatch.setattr(RunDir, "write", lambda self, path, writer: (writes.append(path), real_write(self, path,
                                                                                                    writer))[1])
    code, out, err = run_main(["calibrate", run, "--fpr", "0.5", "--detector", "best", "--approach", "softmax",
                               "--approach", "entropic"], capsys)
    assert code == 1 and "nothing written" in err[-1] and "refused here" in err[-1], err
    assert out.count("--detector best:") == 2  # both choices said, before anything was calibrated
    assert (run / "calibration.json").read_bytes() == before and writes == []
    monkeypatch.setattr(calibration, "calibrate_model", real)
    code, _, err = run_main(["calibrate", run, "--fpr", "0.5", "--detector", "best", "--approach", "softmax",
                             "--approach", "entropic"], capsys)
    assert code == 0, err
    assert [Path(p).name for p in writes] == ["calibration.json"]  # both approaches' thresholds in one write
