"""``plot``'s one request (``plotting/request.py``): every flag reaches the ``PlotRequest``, and
its defaults are those of ``plot_run``."""
from __future__ import annotations

import argparse
import dataclasses
import inspect
from pathlib import Path

import pytest

from agnostophobia.cli import build_parser
from agnostophobia.plotting import PlotRequest, plot_run


def plot_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices["plot"]


def test_every_flag_of_plot_is_a_field_of_the_request():
    fields = {f.name for f in dataclasses.fields(PlotRequest)}
    dests = {a.dest for a in plot_parser()._actions if a.dest not in ("help", "func")}
    assert dests <= fields, sorted(dests - fields)


def test_a_command_line_becomes_the_request():
    args = build_parser().parse_args(["plot", "r", "--format", "pdf", "svg", "--out", "o", "--max-points", "7"])
    assert PlotRequest.from_args(args) == PlotRequest(Path("r"), ("pdf", "svg"), Path("o"), 7)
    bare = PlotRequest.from_args(build_parser().parse_args(["plot", "r"]))
    assert bare == PlotRequest("r") and bare.out_dir == Path("r") / "figures"


def test_the_request_defaults_are_plot_runs():
    defaults = {name: p.default for name, p in inspect.signature(plot_run).parameters.items()}
    request = PlotRequest("r")
    assert request.formats == tuple(defaults["formats"]) and request.max_points == defaults["max_points"]


def test_a_string_of_formats_is_refused():
    with pytest.raises(ValueError, match="the string 'png'"):
        PlotRequest("r", formats="png")
