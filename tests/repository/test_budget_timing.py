"""The CIFAR split's training time on one processor (benchmarks/budget_timing.py, docs/result_budget.py):
the script reads one seed's networks from a benchmark's timings.json and names a run that holds
none; the overview's projection is recomputed here from the committed records."""
import json
import sys

import pytest
from repo_paths import REPO, load_module

# the script imports its neighbour as a script would find it (benchmarks/ first on the path)
sys.modules.setdefault("trivial_separability", load_module("trivial_separability", REPO / "benchmarks" / "trivial_separability.py"))
timing = load_module("budget_timing", REPO / "benchmarks" / "budget_timing.py")
RECORD = REPO / "docs" / "results" / "budget-timing-cifar.json"
ROOM = REPO / "docs" / "results" / "bench-cifar-5-room.json"


def _run(tmp_path, timings):
    run = tmp_path / "run"
    run.mkdir()
    (run / "timings.json").write_text(json.dumps(timings))
    (run / "wall_time.json").write_text(json.dumps({"training_s": 10.0, "concurrent_runs": 2}))
    (run / "config.yaml").write_text("approaches: [softmax, entropic, mixoe-ft]\nseeds: 5\n")
    return run


def test_one_seed_is_read_and_written_with_its_meta(tmp_path):
    run = _run(tmp_path, {"seed0/softmax": 3.0, "seed0/entropic": 4.0, "seed1/softmax": 9.0})
    out = tmp_path / "record.json"
    assert timing.main([str(run), str(out), "--seed", "0"]) == 0
    record = json.loads(out.read_text())
    assert record["seconds"] == {"softmax": 3.0, "entropic": 4.0}
    assert record["concurrent_runs"] == 2 and record["config"]["seeds"] == 5
    assert record["meta"]["processor"] and record["meta"]["command"].startswith("python benchmarks/budget_timing.py")


def test_a_seed_without_a_finished_network_is_named(tmp_path):
    run = _run(tmp_path, {"seed1/softmax": 9.0})
    with pytest.raises(SystemExit, match="no network of seed 0 has finished"):
        timing.main([str(run), str(tmp_path / "record.json"), "--seed", "0"])
    assert not (tmp_path / "record.json").exists()


def test_the_projection_by_hand():
    """Every approach the record's benchmark trains from scratch has its seed's seconds; seeds times
    their sum plus every fine-tune's seconds in the room run, shared over the slots, in hours."""
    record, room = json.loads(RECORD.read_text()), json.loads(ROOM.read_text())
    scratch = [a for a in record["config"]["approaches"] if not a.endswith("-ft")]
    tunes = {a for a in record["config"]["approaches"] if a.endswith("-ft")}
    assert set(scratch) <= set(record["seconds"])
    tune_seconds = [s for key, s in room["meta"]["timings_s"].items() if key.split("/")[1] in tunes]
    assert len(tune_seconds) == len(tunes) * record["config"]["seeds"]
    hours = (record["config"]["seeds"] * sum(record["seconds"][a] for a in scratch) + sum(tune_seconds)) \
        / record["concurrent_runs"] / 3600
    facts = load_module("result_facts", REPO / "docs" / "result_facts.py").facts()
    assert facts["cifar_xeon_projected_hours"] == f"{hours:.1f}"
    assert facts["cifar_xeon_approaches"] == str(len(scratch))
