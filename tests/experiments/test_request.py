"""One request from the command line down (``experiments/request.py``): every flag of a training
command reaches its ``RunRequest``, the library functions behind the commands take the request
whole, and the budget is checked in one place."""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from request_flags import unread_flags

from agnostophobia.cli import build_parser, main
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.request import RunRequest

TRAINING_COMMANDS = ("train", "reproduce", "tune", "benchmark", "ablate")
#: Flags a handler reads itself, beside the request (what the command does, not how the run trains).
HANDLER_ONLY = {"tune": {"param", "fpr", "detector"}, "benchmark": {"min_accuracy", "accuracy_margin", "ranking_metric", "protocol"},
                "ablate": {"step", "fpr"}, "reproduce": {"experiment"}, "train": {"config"}}
ALIASES = {"no_progress": "progress", "no_plots": "plots", "no_fetch": "fetch", "approach": "approaches",
           "config": "experiment"}


@pytest.mark.parametrize("command", TRAINING_COMMANDS)
def test_every_flag_of_a_training_command_is_a_field_of_the_request_or_read_by_its_handler(command):
    """A new flag that neither reaches the request nor its handler would be parsed and ignored."""
    unread = unread_flags(command, RunRequest, HANDLER_ONLY.get(command, set()), ALIASES)
    assert not unread, f"{command}: flags no request field or handler reads: {sorted(unread)}"


def test_a_command_line_becomes_one_request_with_every_choice(tmp_path):
    args = build_parser().parse_args([
        "train", "mine.yaml", "--out", str(tmp_path / "o"), "--budget", "cpu", "--seeds", "2", "--approach",
        "entropic", "--approach", "softmax", "--resume", "--data-dir", "D", "--device", "cpu", "--no-progress",
        "--preprocessing", "authors", "--concurrent-runs", "1", "--batched-seeds", "false", "--set", "epochs=3"])
    request = RunRequest.from_args(args, args.config)
    assert request == RunRequest("mine.yaml", out=tmp_path / "o", budget="cpu", seeds=2,
                                 approaches=("entropic", "softmax"), resume=True, data_dir="D", device="cpu",
                                 progress=False, preprocessing="authors", concurrent_runs=1, batched_seeds=False,
                                 set_options=(("epochs", 3),))
    assert request.train_overrides() == {"progress": False, "data_dir": "D", "device": "cpu",
                                         "preprocessing": "authors"}
    # the defaults of a bare line are the request's defaults: None where the config decides
    bare = build_parser().parse_args(["reproduce", "lenet++"])
    assert RunRequest.from_args(bare, "lenet++") == RunRequest("lenet++")


def test_a_request_is_frozen_and_but_changes_a_copy():
    request = RunRequest("lenet++", set_options=[["epochs", 1]], approaches=["softmax"])
    assert request.set_options == (("epochs", 1),) and request.approaches == ("softmax",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seeds = 3
    step = request.but(budget="smoke", out="runs/x")
    assert (step.budget, step.out, request.budget, request.out) == ("smoke", Path("runs/x"), None, None)


def test_an_undefined_budget_is_refused_naming_the_defined_ones():
    with pytest.raises(ConfigError, match=r"--budget 'huge' is not defined in the config lenet\+\+; defined "
                                          r"budgets: .*converged, cpu"):
        RunRequest("lenet++", budget="huge").load()
    assert RunRequest("lenet++", budget="smoke").load().train.epochs == RunRequest("lenet++").load(
        "smoke").train.epochs


def test_benchmark_refuses_an_undefined_budget_before_writing(tmp_path, capsys):
    assert main(["benchmark", "lenet++", "--budget", "huge", "--out", str(tmp_path / "b")]) == 1
    assert "--budget 'huge' is not defined" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_the_training_entry_points_take_the_request_and_at_most_six_parameters():
    from agnostophobia.experiments.ablate import ablate
    from agnostophobia.experiments.benchmark import benchmark
    from agnostophobia.experiments.reproduce import reproduce, train_run
    from agnostophobia.experiments.reproduce_ensemble import reproduce_ensemble
    from agnostophobia.experiments.tune import tune

    for function in (reproduce, train_run, tune, reproduce_ensemble, benchmark, ablate):
        parameters = inspect.signature(function).parameters
        assert len(parameters) <= 6, (function.__name__, list(parameters))
        assert "request" in parameters, function.__name__
