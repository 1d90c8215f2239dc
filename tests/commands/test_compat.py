"""Runs written by older code still load, evaluate to the same numbers, resume, calibrate, export
and predict (issue 30, "Compatibility"): the record formats, config keys and checkpoints of that
day keep their meaning. Two fixtures, each made by the script beside it: a run of commit 7b7e620
(tests/fixtures/compat-7b7e620) and one of commit ed12296 (tests/fixtures/compat-ed12296), the
last before a run carried a marker (issue 54): both are known as runs by their records agreeing."""
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from runs import run_cli, run_main, snapshot
from repo_paths import FIXTURES

FIXTURE = FIXTURES / "compat-7b7e620"
#: Every run made by older code that is kept as a fixture, by the commit that made it.
OLD_RUNS = {"7b7e620": FIXTURE, "ed12296": FIXTURES / "compat-ed12296"}


def fixture_module(fixture: Path = FIXTURE):
    spec = importlib.util.spec_from_file_location(f"make_fixture_{fixture.name}", fixture / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def protocol() -> Path:
    """The protocol of the fixture runs, rebuilt where they were made (their configs record that
    absolute path); written beside and moved into place, so that two test sessions never see half
    of it."""
    module = fixture_module()
    protocol = module.PROTOCOL_DIR
    if not protocol.exists():
        protocol.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=protocol.parent))
        module.write_protocol(staging)
        _stamp(staging)
        try:
            os.rename(staging, protocol)
        except OSError:  # made meanwhile by another session: the same bytes
            shutil.rmtree(staging)
    _stamp(protocol)  # one left by an older session: its images carry the time they were written
    return protocol


#: The modification time every image of the rebuilt protocol carries (the ed12296 fixture's commit,
#: 2026-11-29 06:33:24 UTC). A run records its images' sizes and mtimes (``data_sources.json``), and
#: ``train --resume`` refuses images that changed: the protocol is rebuilt on each machine, so
#: its times are set to the ones the fixture's record was made for (see its make_fixture.py).
FIXTURE_MTIME_NS = 1_795_934_004_000_000_000


def _stamp(root: Path) -> None:
    for path in sorted(root.rglob("*.png")):
        if path.stat().st_mtime_ns != FIXTURE_MTIME_NS:
            os.utime(path, ns=(FIXTURE_MTIME_NS, FIXTURE_MTIME_NS))


@pytest.fixture(scope="module")
def old_run(tmp_path_factory, protocol):
    """A copy of the 7b7e620 fixture run, shared by this module's tests."""
    run = tmp_path_factory.mktemp("compat") / "run"
    shutil.copytree(FIXTURE / "run", run)
    return run


@pytest.fixture(params=OLD_RUNS.values(), ids=OLD_RUNS.keys())
def fixture_run(request, tmp_path, protocol):
    """(the script that made it, a copy of its run) for each fixture run, a copy per test."""
    run = tmp_path / "run"
    shutil.copytree(request.param / "run", run)
    return fixture_module(request.param), run


#: Keys of a metrics.json row recorded since the fixture was made.
LATER_KEYS = ("tied_share", "tied_share_std")


def metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def same_numbers(rows, recorded) -> bool:
    """The same rows with the same keys, each float within 1e-9 of its recorded value: a
    standard deviation summed in another order on another processor moves the 12th digit
    (9.709665176272448e-06 against ...259906e-06 on an AVX2-only Zen 3)."""
    if len(rows) != len(recorded):
        return False
    return all(row.keys() == old.keys() and all(
        row[k] == pytest.approx(old[k], rel=1e-9, abs=1e-15) if isinstance(old[k], float) else row[k] == old[k]
        for k in old) for row, old in zip(rows, recorded))


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_an_old_run_evaluates_to_the_numbers_it_recorded(old_run):
    before = metrics(old_run)
    result = run_cli(["evaluate", old_run, "--no-progress", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    after = metrics(old_run)
    assert same_numbers(after["table1"], before["table1"])
    old = {row["detector"] for row in before["results"]}
    for key in ("results", "per_seed"):  # the detectors of that day: their numbers unchanged
        # (tie-free scores, score scale 2: no score of this small run saturated, so no number moved);
        # tied_share is recorded since, and none of them ties
        assert all(row["tied_share"] == 0 for row in after[key])
        kept = [{k: v for k, v in row.items() if k not in LATER_KEYS} for row in after[key] if row["detector"] in old]
        assert same_numbers(kept, before[key]), key
    # the detectors that read the last layer: it is recomputed from each best.pt once and kept
    for model in sorted(old_run.glob("seed*/*/outputs.npz")):
        assert (model.parent / "last_layer.npz").is_file()
    new = {row["detector"] for row in after["results"]} - old
    assert {"react", "ash", "scale", "gen", "mahalanobis", "relative-mahalanobis"} <= new


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_an_old_run_calibrates_exports_and_predicts(old_run, tmp_path):
    result = run_cli(["calibrate", old_run, "--fpr", "0.25", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    calibration = json.loads((old_run / "calibration.json").read_text())
    assert calibration  # one entry per approach and seed at least
    model = tmp_path / "model.pt"
    result = run_cli(["export", old_run, "--format", "torchscript", "--out", model, "--approach", "entropic",
                      "--fpr", "0.25"])
    assert result.returncode == 0, result.stderr
    assert model.stat().st_size > 0
    images = fixture_module().PROTOCOL_DIR / "test" / "dots"
    result = run_cli(["predict", old_run, images, "--approach", "entropic", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(".png") == len(list(images.iterdir()))


MARKER_KEYS = ("project", "run_format", "run_id")


def marker(record: dict) -> tuple:
    return tuple(record.get(key) for key in MARKER_KEYS)


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_an_old_run_resumes_with_another_seed(fixture_run, tmp_path):
    """``train --resume`` with the old config (7b7e620: top-level ``xi`` and ``lambda``) adds seed 1
    beside the old seed 0, whose files stay; the run, known by its records agreeing, is marked from then on."""
    module, old_run = fixture_run
    config = tmp_path / "compat.yaml"
    config.write_text(module.CONFIG.format(root=module.PROTOCOL_DIR))
    checkpoint = old_run / "seed0" / "entropic" / "last.pt"
    before = checkpoint.read_bytes()
    assert marker(yaml.safe_load((old_run / "config.yaml").read_text())) == (None, None, None)
    result = run_cli(["train", config, "--out", old_run, "--resume", "--seeds", "2",
                      "--approach", "entropic", "--no-progress", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    assert checkpoint.read_bytes() == before
    assert (old_run / "seed1" / "entropic" / "last.pt").exists()
    config_marker = marker(yaml.safe_load((old_run / "config.yaml").read_text()))
    assert config_marker[:2] == ("agnostophobia", 1)
    assert marker(json.loads((old_run / "run_meta.json").read_text())) == config_marker


def test_an_old_run_is_known_by_its_records_agreeing_not_by_its_lock(fixture_run, tmp_path, capsys):
    """Without its ``.lock`` an old run is a run (its run_meta.json and config.yaml agree); with
    records that disagree it is none, and ``train --out`` into it is refused, changing nothing."""
    from agnostophobia.training.records import is_run

    module, old_run = fixture_run
    (old_run / ".lock").unlink()
    assert is_run(old_run)
    meta = json.loads((old_run / "run_meta.json").read_text())
    (old_run / "run_meta.json").write_text(json.dumps({**meta, "experiment": "another"}))
    assert not is_run(old_run)
    config = tmp_path / "compat.yaml"
    config.write_text(module.CONFIG.format(root=module.PROTOCOL_DIR))
    before = snapshot(old_run)
    code, _, err = run_main(["train", config, "--out", old_run, "--resume", "--no-progress", "--device", "cpu"],
                            capsys)
    errors = [line for line in err if not line.startswith("agnostophobia: warning:")]  # 7b7e620's key names
    assert code == 1 and len(errors) == 1 and "not a run of this project" in errors[0], err
    assert snapshot(old_run) == before


@pytest.mark.slow  # three commands on the fixture (~35 s): make test-slow, which CI runs
def test_an_old_runs_threshold_on_the_old_score_scale_is_chosen_again(old_run, tmp_path):
    """A ``calibration.json`` written before the scores were tie-free (no ``score_scale``: its
    max-softmax threshold a probability) is not compared with today's log-odds: ``predict``,
    ``export`` and ``evaluate`` choose the threshold again by the same rule, at the entry's target
    FPR, on the stored validation outputs, and say so once; the file is left as it was."""
    import torch

    from agnostophobia.deploy import ModelRequest
    from agnostophobia.deploy.calibration import calibrate_in_memory
    from agnostophobia.detectors.stored import read_run_settings

    run = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", run)  # a copy the other tests do not touch (old_run built the protocol)
    now = calibrate_in_memory(ModelRequest(run, approach="entropic", detector="softmax", seed=0, fpr=0.25,
                                           precision="fp32"), read_run_settings(run))
    assert now["score_scale"] == 2
    old = {key: value for key, value in now.items() if key not in ("score_scale", "class_names")}
    old["threshold"] = 0.5  # a max-softmax of 1/2: on today's log-odds scale, 0 would be that
    (run / "calibration.json").write_text(json.dumps({"format": 1, "rule": now["rule"],
                                                      "class_names": now["class_names"], "entries": [old]}))
    stored = (run / "calibration.json").read_bytes()
    said = "chosen on an older score scale"

    rows = tmp_path / "rows.json"
    images = fixture_module().PROTOCOL_DIR / "test" / "dots"
    result = run_cli(["predict", run, images, "--approach", "entropic", "--detector", "softmax", "--device", "cpu",
                      "--out", rows])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(said) == 1, result.stdout
    assert {row["threshold"] for row in json.loads(rows.read_text())} == {now["threshold"]}

    model = tmp_path / "model.pt"
    result = run_cli(["export", run, "--format", "torchscript", "--out", model, "--approach", "entropic",
                      "--detector", "softmax"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(said) == 1, result.stdout
    extra = {"agnostophobia.json": ""}
    torch.jit.load(str(model), _extra_files=extra)
    assert json.loads(extra["agnostophobia.json"])["threshold"] == now["threshold"]

    result = run_cli(["evaluate", run, "--no-progress", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(said) == 1, result.stdout
    section = metrics(run)["at_validation_threshold"]
    assert {r["threshold"] for r in section["results"]} == {now["threshold"]}
    assert any(said in note for note in section["notes"])
    assert said in (run / "report.md").read_text()
    assert (run / "calibration.json").read_bytes() == stored  # chosen again in memory; `calibrate` stores it
