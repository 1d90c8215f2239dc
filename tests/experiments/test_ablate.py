"""``agnostophobia ablate`` (issue 15): the steps of an experiment's ``ablation:`` list, each a
reproduction, and one table of them; resumable; the shipped LeNet++ ablation adds one factor
per step. Runs on the example folder protocol of real MNIST digits, at smoke size (seconds)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_example
from agnostophobia.cli import main
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.ablate import ablate, ablation_markdown
from agnostophobia.training.config import load_experiment, parse_experiment
from agnostophobia.experiments.request import RunRequest

STEPS = [{"budget": "base", "adds": "1 epoch"}, {"budget": "longer", "adds": "2 epochs"}]


@pytest.fixture(scope="module")
def experiment_file(real_data_dir, tmp_path_factory) -> Path:
    """The example CSV protocol with two approaches and a two-step ablation."""
    config = make_example(tmp_path_factory.mktemp("ablate") / "proto", real_data_dir, "csv", per_class=20)
    data = yaml.safe_load(config.read_text())
    data.update(approaches=["softmax", "entropic"], seeds=1, batch_size=16, ablation=STEPS,
                budgets={"base": {"epochs": 1}, "longer": {"epochs": 2}},
                openmax={"tail_size": 3, "alpha": 2, "distance": "eucos"})
    config.write_text(yaml.safe_dump(data))
    return config


def quiet(*_):
    pass


def test_every_step_is_a_reproduction_and_the_table_holds_their_numbers(experiment_file, tmp_path):
    out = ablate(RunRequest(experiment_file, out=tmp_path / "abl", progress=False), fprs=["1e-1"], log=quiet)
    record = json.loads((out / "ablation.json").read_text())
    assert [s["budget"] for s in record["steps"]] == ["base", "longer"]
    table = (out / "ablation.md").read_text()
    for step in record["steps"]:
        metrics = json.loads((out / step["budget"] / "metrics.json").read_text())
        assert metrics["train_config"]["epochs"] == {"base": 1, "longer": 2}[step["budget"]]
        wanted = {(r["unknowns"], r["row"]): r["ccr_at_fpr"]["1e-1"] for r in metrics["results"]
                  if r["row"] in ("softmax", "entropic")}
        got = {(r["unknowns"], r["approach"]): r["1e-1"]["mean"] for r in step["rows"]}
        assert got == wanted and len(got) == 4  # 2 approaches x (negatives, unknowns)
        assert all(value is not None for value in got.values())  # 20+ unknowns per set: FPR 1e-1 reachable
        for row in step["rows"]:
            assert f"{row['1e-1']['mean']:.3f}" in table
            assert row["closed_set_accuracy"]["mean"] == next(
                r["closed_set_accuracy"] for r in metrics["results"] if r["row"] == row["approach"])
    first = record["steps"][0]["rows"][0]
    assert f"| {first['unknowns']} | {first['approach']} | – |" in table  # no paper numbers for this protocol
    assert "1. `longer`" in table and "2 epochs" in table


def test_finished_steps_are_kept_and_one_step_can_be_run_alone(experiment_file, tmp_path):
    messages = []
    ablate(RunRequest(experiment_file, out=tmp_path / "abl", progress=False), steps=["longer"], log=messages.append)
    assert not (tmp_path / "abl" / "base").exists()
    assert [s["budget"] for s in json.loads((tmp_path / "abl" / "ablation.json").read_text())["steps"]] == ["longer"]
    stamp = (tmp_path / "abl" / "longer" / "metrics.json").stat().st_mtime_ns
    messages.clear()
    ablate(RunRequest(experiment_file, out=tmp_path / "abl", progress=False), steps=["longer"], log=messages.append)
    assert "ablation step longer: finished earlier, kept" in messages
    assert (tmp_path / "abl" / "longer" / "metrics.json").stat().st_mtime_ns == stamp


def test_more_seeds_than_a_finished_step_had_trains_the_missing_ones(experiment_file, tmp_path):
    ablate(RunRequest(experiment_file, out=tmp_path / "abl", progress=False), steps=["base"], log=quiet)
    ablate(RunRequest(experiment_file, out=tmp_path / "abl", seeds=2, progress=False), steps=["base"],
           fprs=["1e-1"], log=quiet)
    assert (tmp_path / "abl" / "base" / "seed1" / "entropic" / "outputs.npz").exists()
    rows = json.loads((tmp_path / "abl" / "ablation.json").read_text())["steps"][0]["rows"]
    assert all(r["1e-1"]["std"] is not None for r in rows)  # two seeds: a spread


@pytest.mark.parametrize("ablation, message", [
    ([{"budget": "missing", "adds": "x"}], "budget 'missing' is not defined"),
    ([{"budget": "base", "adds": "x"}, {"budget": "base", "adds": "y"}], "listed twice"),
    ([{"budget": "base"}], r"must be \{budget: NAME, adds: TEXT\}"),
    ({"budget": "base"}, "must be a list"),
])
def test_a_malformed_ablation_list_is_one_config_error(ablation, message):
    data = {"protocol": "lenet++", "budgets": {"base": {"epochs": 1}}, "ablation": ablation}
    with pytest.raises(ConfigError, match=message):
        parse_experiment(data)


def test_ablate_names_what_is_missing(experiment_file, tmp_path, capsys):
    assert main(["ablate", str(experiment_file), "--step", "nope", "--out", str(tmp_path / "a")]) == 1
    assert "--step nope: not an ablation step" in capsys.readouterr().err
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({k: v for k, v in yaml.safe_load(experiment_file.read_text()).items()
                                     if k != "ablation"}))
    assert main(["ablate", str(plain), "--out", str(tmp_path / "b")]) == 1
    assert "defines no 'ablation:' steps" in capsys.readouterr().err
    assert main(["ablate", str(experiment_file), "--fpr", "0.05", "--out", str(tmp_path / "c")]) == 1
    assert "--fpr 0.05: choose from 1e-4, 1e-3, 1e-2, 1e-1" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in "abc")


def test_the_paper_column_is_table_2():
    record = {"experiment": "lenet++", "fprs": ["1e-3", "1e-2"], "paper": {"devanagari": {"softmax": {
        "1e-4": 0.0, "1e-3": 0.0, "1e-2": 0.0777, "1e-1": 0.9007}}}, "steps": [{
            "budget": "s0", "adds": "base", "seeds": 2, "wall_time_s": 10.0, "rows": [{
                "unknowns": "devanagari", "approach": "softmax", "1e-3": {"mean": 0.5, "std": 0.01},
                "1e-2": {"mean": 0.9081, "std": 0.02}, "closed_set_accuracy": {"mean": 0.97, "std": None}}]}]}
    table = ablation_markdown(record)
    assert "| devanagari | softmax | 0.000 / 0.078 | 0.500 ± 0.010 / 0.908 ± 0.020 |" in table
    assert "| softmax | 0.970 |" in table


def test_each_step_of_the_shipped_lenet_ablation_adds_one_factor():
    """The shipped steps: each differs from the one before in exactly one config key, in the
    issue's order, and the first is our reduced cpu setting (corrected preparation, PReLU)."""
    experiment = load_experiment("lenet++")
    configs = [experiment.for_budget(step["budget"]) for step in experiment.ablation]
    changed = []
    for before, after in zip(configs, configs[1:]):
        a, b = before.train.to_dict(), after.train.to_dict()
        changed.append([key for key in a if a[key] != b[key]])
    assert changed == [["preprocessing"], ["model_kwargs"], ["lr"], ["epochs"], ["protocol_limits"]]
    first, last = configs[0].train, configs[-1].train
    assert (first.preprocessing, first.model_kwargs["activation"], first.lr) == ("ours", "prelu", 1e-3)
    assert (last.preprocessing, last.model_kwargs["activation"], last.lr) == ("authors", "none", 1e-2)
    assert all(c.seeds == 2 and c.approaches == experiment.approaches for c in configs)
