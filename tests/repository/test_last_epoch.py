"""The last-epoch copy of a run (benchmarks/last_epoch.py): the copy's models of the named approaches
hold their last epoch as their result, their outputs are computed again from it by the same command,
and the run itself is left as it was."""
import importlib.util
import json
import shutil

import numpy as np
import pytest
import torch
from repo_paths import REPO


def _script():
    spec = importlib.util.spec_from_file_location("last_epoch", REPO / "benchmarks" / "last_epoch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


last_epoch = _script()


def _outputs(model):
    with np.load(model / "outputs.npz") as stored:
        return {name: stored[name] for name in stored.files}


def _same(a, b) -> bool:
    return sorted(a) == sorted(b) and all(np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


def test_the_copy_keeps_the_last_epoch_and_its_outputs_come_again_from_it(tiny_run, tiny_config, real_data_dir,
                                                                         tmp_path, capsys):
    """The copy's outputs come from the last epoch: equal to the run's where the run kept its last
    epoch anyway, different where it kept an earlier one, and a copy of the copy (whose models keep
    their last epoch already) computes the same outputs again."""
    from runs import reproduce_args, run_cli, snapshot

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = snapshot(run)
    copies = [tmp_path / "copy", tmp_path / "copy-of-copy"]
    outputs = []
    for source, copy in zip([run, copies[0]], copies):
        assert last_epoch.main([str(source), str(copy), "--approaches", "entropic"]) == 0
        model = copy / "seed0" / "entropic"
        best, last = (torch.load(model / name, weights_only=True) for name in ("best.pt", "last.pt"))
        assert best["epoch"] == last["epoch"] == 2 and set(best) == {"model", "epoch", "val_loss", "config"}
        assert all(torch.equal(best["model"][k], last["model"][k]) for k in last["model"])
        assert not (model / "outputs.npz").exists() and not (copy / "comparison.json").exists()
        assert (copy / "seed0" / "softmax" / "outputs.npz").exists()  # the other approaches' are the run's
        result = run_cli(reproduce_args(tiny_config, copy, real_data_dir))
        assert result.returncode == 0, result.stderr
        outputs.append(_outputs(model))
    assert snapshot(run) == before  # the run is read, never written
    kept = torch.load(run / "seed0" / "entropic" / "best.pt", weights_only=True)["epoch"]
    assert f"kept epoch {kept} " in capsys.readouterr().out
    assert _same(outputs[0], outputs[1])
    assert _same(outputs[0], _outputs(run / "seed0" / "entropic")) == (kept == 2)


def test_the_copy_is_refused_over_an_existing_folder_and_without_the_approach(tiny_run, tmp_path):
    (tmp_path / "copy").mkdir()
    with pytest.raises(SystemExit, match="exists"):
        last_epoch.main([str(tiny_run), str(tmp_path / "copy"), "--approaches", "entropic"])
    with pytest.raises(SystemExit, match="no model of vos"):
        last_epoch.main([str(tiny_run), str(tmp_path / "other"), "--approaches", "vos"])


def _benchmark_json(run, oscr_by_approach):
    """A run folder holding a ``benchmark.json`` with one row per approach, its paper's detector,
    of the given per-seed mean D_a OSCR (and one row of another detector that must not be read)."""
    from agnostophobia.experiments.benchmark_rows import papers_detector
    from agnostophobia.rundir import RunDir

    rows = []
    for approach, oscr in oscr_by_approach.items():
        seeds = list(range(len(oscr)))
        row = {"approach": approach, "seeds": seeds, "mean_da_per_seed": {"oscr": oscr, "oscr_log": oscr},
               "accuracy_per_seed": {"val": [0.99] * len(oscr)}}
        rows += [{**row, "detector": "not-the-papers", "mean_da_per_seed": {"oscr": [0.0] * len(oscr), "oscr_log": [0.0] * len(oscr)}},
                 {**row, "detector": papers_detector(approach)}]
    run.mkdir()
    RunDir(run).benchmark.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    return run


def test_compare_reads_each_approachs_paper_row_and_decides_by_the_benchmarks_rule(tmp_path):
    """A fine-tune whose last epoch reads 0.02 higher on every seed is better; one whose networks are
    the same is equivalent; the other detector's row is never read."""
    kept = [0.90, 0.91, 0.93, 0.92, 0.95]
    best = _benchmark_json(tmp_path / "best", {"mixoe-ft": kept, "outlier-exposure-ft": kept})
    last = _benchmark_json(tmp_path / "last", {"mixoe-ft": [k + 0.02 + 0.001 * (i % 2) for i, k in enumerate(kept)],
                                                "outlier-exposure-ft": kept})
    table = last_epoch.compare(best, last, ["mixoe-ft", "outlier-exposure-ft"])
    lines = [line for line in table.splitlines() if line.startswith("| mixoe") or line.startswith("| outlier")]
    assert len(lines) == 4 and "| OSCR, log FPR |" in lines[2]  # each approach for each area
    mixoe, oe = lines[:2]
    assert "| 5 |" in mixoe and "0.9220 / 0.9424" in mixoe and "+0.0204" in mixoe and mixoe.endswith("| better |")
    assert "+0.0000 [+0.0000, +0.0000]" in oe and oe.endswith("| equivalent |")


def test_compare_refuses_a_run_without_its_benchmark(tmp_path):
    best = _benchmark_json(tmp_path / "best", {"mixoe-ft": [0.9, 0.91]})
    (tmp_path / "last").mkdir()
    with pytest.raises(SystemExit, match="no benchmark.json"):
        last_epoch.compare(best, tmp_path / "last", ["mixoe-ft"])
    with pytest.raises(SystemExit, match="no row of vos"):
        last_epoch.compare(best, best, ["vos"])
    (tmp_path / "last" / "benchmark.json").symlink_to(best / "benchmark.json")  # a link planted in the run
    with pytest.raises(SystemExit, match="symbolic link"):
        last_epoch.compare(best, tmp_path / "last", ["mixoe-ft"])
