"""One request from the command line down (``deploy/request.py``): every flag of a command on a
trained run reaches its ``ModelRequest`` or its handler, a request is never half followed, and
the library functions behind the commands take it whole."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from request_flags import unread_flags

from agnostophobia.cli import build_parser
from agnostophobia.deploy.request import ModelRequest

RUN_COMMANDS = ("compare", "calibrate", "predict", "export", "evaluate", "tune-detectors")
#: Flags a handler reads itself, beside the request (what the command does with the models).
HANDLER_ONLY = {"predict": {"inputs", "out"}, "export": {"out", "format"},
                # --no-progress comes with the training commands' shared flags; evaluate shows no bar
                "evaluate": {"unknowns", "replace", "no_progress"}, "tune-detectors": {"detectors"}}


@pytest.mark.parametrize("command", RUN_COMMANDS)
def test_every_flag_of_a_command_on_a_run_is_a_field_of_the_request_or_read_by_its_handler(command):
    """A new flag that neither reaches the request nor its handler would be parsed and ignored."""
    unread = unread_flags(command, ModelRequest, HANDLER_ONLY.get(command, set()))
    assert not unread, f"{command}: flags no request field or handler reads: {sorted(unread)}"


def test_a_command_line_becomes_one_request_with_every_choice():
    args = build_parser().parse_args(["predict", "r", "x.png", "--approach", "entropic", "--detector", "knn",
                                      "--seed", "2", "--fpr", "0.1", "--data-dir", "D", "--device", "cpu"])
    assert ModelRequest.from_args(args) == ModelRequest(Path("r"), approach="entropic", detector="knn", seed=2,
                                                        fpr=0.1, data_dir="D", device="cpu")
    # a repeated --approach is the several approaches of calibrate
    args = build_parser().parse_args(["calibrate", "r", "--fpr", "0.01", "--approach", "a", "--approach", "b",
                                      "--partial"])
    request = ModelRequest.from_args(args)
    assert request == ModelRequest("r", approaches=("a", "b"), fpr=0.01, partial=True)
    assert request.chosen_approaches() == ("a", "b")
    bare = build_parser().parse_args(["compare", "r"])
    assert ModelRequest.from_args(bare) == ModelRequest("r") and ModelRequest("r").chosen_approaches() is None


def test_a_request_is_frozen_and_but_changes_a_copy():
    request = ModelRequest("r", approaches=["softmax"], detector_of={"softmax": "knn"})
    assert request.approaches == ("softmax",) and request.run == Path("r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.fpr = 0.5
    changed = request.but(fpr=0.5)
    assert changed.fpr == 0.5 and request.fpr is None


@pytest.mark.parametrize("fields, message", [
    ({"approach": "a", "approaches": ["b"]}, "approach .* or approaches"),
    ({"detector": "knn", "detector_of": {"a": "knn"}}, "detector or detector_of"),
    ({"approaches": "entropic"}, "the string 'entropic'"),
])
def test_contradictory_choices_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelRequest("r", **fields)


def test_a_field_the_command_does_not_read_is_refused_not_ignored(tmp_path):
    from agnostophobia.deploy.calibration import calibrate_run
    from agnostophobia.experiments.evaluate_unknowns import evaluate_run

    with pytest.raises(ValueError, match="calibrate_run does not read seed"):
        calibrate_run(ModelRequest(tmp_path, fpr=0.1, seed=1))
    with pytest.raises(ValueError, match="evaluate_run does not read approach, fpr"):
        evaluate_run(ModelRequest(tmp_path, approach="softmax", fpr=0.1))
    ModelRequest(tmp_path).check_reads("anything")  # defaults are no choice
    ModelRequest(tmp_path, seed=1, fpr=0.1).check_reads("anything", "seed", "fpr")  # what a command reads may be set
