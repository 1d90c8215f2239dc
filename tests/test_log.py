"""A library that logs like one (issue 33, item 5): the public functions report progress on
``logging.getLogger("agnostophobia")`` and warn with ``warnings.warn``; with no logging
configured they print nothing, and the command line still prints its plain lines."""
from __future__ import annotations

import importlib
import inspect
import json
import logging
import pkgutil

import numpy as np
import pytest
import yaml

import agnostophobia
from agnostophobia._log import log_info
from agnostophobia.cli import main
from agnostophobia.deploy import ModelRequest, OpenSetClassifier, calibrate_run
from agnostophobia.errors import AgnostophobiaWarning
from agnostophobia.experiments.evaluate_unknowns import evaluate_run
from agnostophobia.experiments.reproduce import train_run
from agnostophobia.experiments.request import RunRequest

from tests.data.file_protocols.test_imagefolder import make_tree, mapping


def test_no_public_function_prints_by_default():
    """Every ``log`` parameter of the package defaults to the logger, never to print."""
    printing = []
    for module in pkgutil.walk_packages(agnostophobia.__path__, "agnostophobia."):
        if module.name.endswith(".cli") or module.name == "agnostophobia.__main__":
            continue
        loaded = importlib.import_module(module.name)
        for name, thing in vars(loaded).items():
            methods = [m for m in vars(thing).values() if callable(m)] if inspect.isclass(thing) else []
            for function in [thing] + methods:
                try:
                    parameter = inspect.signature(function).parameters.get("log")
                except (TypeError, ValueError):
                    continue
                if parameter is not None and parameter.default is print:
                    printing.append(f"{module.name}.{name}")
    assert printing == []


def test_the_library_api_prints_nothing_and_the_cli_prints_its_lines(tmp_path, capsys, caplog):
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": mapping(tmp_path / "photos"), "approaches": ["entropic"],
                                      "epochs": 1, "batch_size": 16, "tensorboard": False}))
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="agnostophobia"):
        train_run(RunRequest(config, out=run, progress=False))
        evaluate_run(ModelRequest(run), plots=False)
        with pytest.warns(AgnostophobiaWarning, match="fewer than 10"):  # a warning, not a printed line
            calibrate_run(ModelRequest(run, fpr=1.0))
        clf = OpenSetClassifier.from_run(run)
        clf.predict(np.zeros((2, 1, 28, 28), np.uint8))
    assert capsys.readouterr().out == ""  # logging configured by no one here: nothing on stdout
    lines = [r.getMessage() for r in caplog.records if r.name == "agnostophobia"]
    assert any(line.startswith("trained entropic into") for line in lines)
    assert any(line.startswith("calibration:") for line in lines)
    assert main(["calibrate", str(run), "--fpr", "1"]) == 0  # the CLI prints the same lines, plainly
    out = capsys.readouterr().out
    assert "[seed 0] entropic / softmax at FPR <= 1: threshold" in out and "\ncalibration: " in out
    assert logging.getLogger("agnostophobia").handlers[-1].__class__ is logging.NullHandler  # the CLI's is gone


def test_a_library_version_mismatch_is_a_warning(tmp_path):
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": mapping(tmp_path / "photos"), "approaches": ["softmax"],
                                      "epochs": 1, "batch_size": 16, "tensorboard": False}))
    run = train_run(RunRequest(config, out=tmp_path / "run", progress=False))
    meta = json.loads((run / "run_meta.json").read_text())
    meta["versions"]["torch"] = "1.0.0"
    (run / "run_meta.json").write_text(json.dumps(meta))
    with pytest.warns(AgnostophobiaWarning, match=r"was made with torch 1.0.0 \(now "):
        evaluate_run(ModelRequest(run), plots=False)


def test_log_info_is_silent_without_configuration(capsys):
    log_info("a line nobody asked for")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
