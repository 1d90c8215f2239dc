"""``plot``'s one request (``plotting/request.py``): every flag reaches the ``PlotRequest``, and
its defaults are those of ``plot_run``."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from request_flags import unread_flags

from agnostophobia.cli import build_parser
from agnostophobia.plotting import PlotRequest, plot_run


def test_every_flag_of_plot_is_a_field_of_the_request():
    assert unread_flags("plot", PlotRequest) == set()


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
