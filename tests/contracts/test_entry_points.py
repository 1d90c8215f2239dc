"""One request from the command line down: no entry point takes more than six parameters.

An entry point is a function of the package that a command's handler calls (read with
:mod:`ast` from every ``cli.py``: the names a handler imports from ``agnostophobia``), and the
functions a script calls instead of a command (:data:`SCRIPT_ENTRY_POINTS`). A command's flags
travel as one request object (``RunRequest``, ``ModelRequest``, ``PlotRequest``), each flag
read in one place, instead of as loose arguments a caller must order and a callee must pass on.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Callable, Dict, List

import pytest

import agnostophobia

PACKAGE = Path(agnostophobia.__file__).parent
MOST_PARAMETERS = 6

#: Entry points a script calls where a user would run a command: ``(module, qualified name)``.
SCRIPT_ENTRY_POINTS = [("agnostophobia.deploy.classifier", "OpenSetClassifier.from_run"),
                       ("agnostophobia.plotting.run", "plot_run")]


def handler_imports(cli_file: Path) -> List[tuple]:
    """``(module, name)`` of each package name imported inside a function of ``cli_file``."""
    found = []
    for function in ast.walk(ast.parse(cli_file.read_text())):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agnostophobia."):
                found += [(node.module, alias.name) for alias in node.names]
    return found


def resolve(module: str, qualified: str):
    obj = importlib.import_module(module)
    for part in qualified.split("."):
        obj = getattr(obj, part)
    return obj


def parameter_count(function: Callable) -> int:
    """Parameters of ``function``'s signature, ``self``/``cls`` aside; ``*args`` and ``**kwargs``
    count one each."""
    return len([name for name in inspect.signature(function).parameters if name not in ("self", "cls")])


def entry_points() -> Dict[str, Callable]:
    """Every entry point, by ``module:name``."""
    named = list(SCRIPT_ENTRY_POINTS)
    for cli_file in sorted(PACKAGE.rglob("cli.py")):
        named += handler_imports(cli_file)
    found = {}
    for module, name in named:
        obj = resolve(module, name)
        if inspect.isfunction(obj) or inspect.ismethod(obj):  # classes and constants are no entry points
            found[f"{module}:{name}"] = obj
    return found


ENTRY_POINTS = entry_points()


def test_the_commands_entry_points_are_found():
    """The reading above finds the functions it is about (an empty list would pass anything)."""
    for expected in ("agnostophobia.deploy.calibration:calibrate_run", "agnostophobia.deploy.predict:predict_files",
                     "agnostophobia.deploy.export:export_run", "agnostophobia.plotting.run:draw_run",
                     "agnostophobia.experiments.evaluate_unknowns:evaluate_run",
                     "agnostophobia.experiments.tune_detectors:tune_detectors",
                     "agnostophobia.experiments.reproduce:train_run", "agnostophobia.experiments.tune:tune",
                     "agnostophobia.deploy.classifier:OpenSetClassifier.from_run"):
        assert expected in ENTRY_POINTS, sorted(ENTRY_POINTS)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_no_entry_point_takes_more_than_six_parameters(name):
    count = parameter_count(ENTRY_POINTS[name])
    assert count <= MOST_PARAMETERS, (
        f"{name} takes {count} parameters: put the command's choices in its request object "
        f"(experiments/request.py, deploy/request.py, plotting/request.py)")


def test_the_count_sees_every_kind_of_parameter():
    def loose(run, fpr, approach=None, detector=None, *, seed=0, data_dir=None, device=None):
        pass

    def varargs(self, *args, log=None, **kwargs):
        pass

    assert parameter_count(loose) == 7 and parameter_count(varargs) == 3


def test_a_handler_on_a_trained_run_only_maps_flags():
    """``compare``, ``calibrate``, ``predict`` and ``export`` hand one ``ModelRequest`` to the
    library, which resolves ``detector="best"`` itself: no handler imports the choosing of the
    best detector, so a script that builds the request gets the same choice."""
    imported = handler_imports(PACKAGE / "deploy" / "cli.py")
    assert ("agnostophobia.deploy.request", "ModelRequest") in imported
    assert not [name for module, name in imported if module == "agnostophobia.deploy.best"]
    for module, name in imported:
        if module != "agnostophobia.deploy.request" and name.endswith("_run"):
            assert "request" in inspect.signature(resolve(module, name)).parameters, f"{module}.{name}"
