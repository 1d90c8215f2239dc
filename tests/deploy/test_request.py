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


# ------------------------------------------------------------------ every field of its kind
WRONG_KINDS = [  # (field, value, what the one line says)
    ("run", 5, "ModelRequest.run must be a path (str or os.PathLike), got int 5"),
    ("approach", 3, "ModelRequest.approach must be a string or None, got int 3"),
    ("approaches", ["a", 1], "ModelRequest.approaches must be a sequence of approach names, got tuple ('a', 1)"),
    ("approaches", 5, "ModelRequest.approaches must be a sequence of approach names, got int 5"),
    ("detector", ["knn"], "ModelRequest.detector must be a string or None"),
    ("detector_of", {"a": 1}, "ModelRequest.detector_of must be a mapping of approach names to detector names"),
    ("seed", True, "ModelRequest.seed must be an integer, got bool True"),
    ("seed", "0", "ModelRequest.seed must be an integer, got str '0'"),
    ("fpr", True, "ModelRequest.fpr must be a number or None, got bool True"),
    ("fpr", "0.1", "ModelRequest.fpr must be a number or None, got str '0.1'"),
    ("data_dir", 5, "ModelRequest.data_dir must be a path (str or os.PathLike) or None, got int 5"),
    ("device", 0, "ModelRequest.device must be a string or None, got int 0"),
    ("precision", 32, "ModelRequest.precision must be a string or None, got int 32"),
    ("partial", "no", "ModelRequest.partial must be true or false (a bool), got str 'no'"),
    ("partial", 1, "ModelRequest.partial must be true or false (a bool), got int 1"),
]


@pytest.mark.parametrize("field, value, message", WRONG_KINDS, ids=[f"{c[0]}-{c[1]!r}" for c in WRONG_KINDS])
def test_a_field_of_the_wrong_kind_is_refused_naming_it(field, value, message):
    with pytest.raises(TypeError) as error:
        ModelRequest(**{"run": "r", field: value})
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("field, value, rule", [
    ("seed", -1, "must be an integer in 0..2**63-1"), ("seed", 2**63, "must be an integer in 0..2**63-1"),
    ("fpr", 0, "must be a rate in (0, 1]"), ("fpr", 1.5, "must be a rate in (0, 1]"),
    ("fpr", float("nan"), "must be a rate in (0, 1]")])
def test_a_field_out_of_its_range_is_refused_naming_it(field, value, rule):
    from agnostophobia.errors import AgnostophobiaError

    with pytest.raises(AgnostophobiaError) as error:
        ModelRequest("r", **{field: value})
    assert str(error.value) == f"ModelRequest.{field} {rule}, got {value!r}"


def test_fields_of_their_kind_are_taken_as_given():
    import os

    import numpy as np

    request = ModelRequest(Path("r"), approaches=iter(["a", "b"]), seed=np.int64(3), fpr=np.float32(0.25),
                           data_dir=Path("d"), device="cuda:1", partial=True, detector_of={"a": "knn", "b": "knn"})
    assert request.approaches == ("a", "b") and request.seed == 3 and isinstance(request.data_dir, os.PathLike)


def test_best_without_an_fpr_to_rank_at_is_refused_in_one_line(tmp_path):
    """Without fpr, detector="best" needs the target FPR of a stored ``calibrate --detector best``."""
    from agnostophobia.deploy import OpenSetClassifier
    from agnostophobia.errors import AgnostophobiaError

    with pytest.raises(AgnostophobiaError) as error:
        OpenSetClassifier.from_run(tmp_path, detector="best")
    assert "holds no threshold of the top detector" in str(error.value) and "pass --fpr T" in str(error.value)
    assert "\n" not in str(error.value)
