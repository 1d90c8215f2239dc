"""The refusals of a command on a run that need no model and no image come before torch is
imported (``deploy.preflight``): a missing run, a folder that is not a run, an approach the run
does not have (with "did you mean"), a missing input."""
from __future__ import annotations

import pytest
from imports import modules_imported
from reliability_table import proves


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "run"
    (run / "seed0" / "softmax").mkdir(parents=True)
    (run / "seed0" / "entropic").mkdir()
    (run / "config.yaml").write_text("approaches: [softmax, entropic]\n")
    return run


CASES = {  # name -> (argv on (run, tmp_path), what the one line says)
    "no-run": (lambda run, tmp: ["predict", tmp / "nowhere", tmp / "x.png"], "does not exist"),
    "run-is-a-file": (lambda run, tmp: ["calibrate", run / "config.yaml", "--fpr", "0.1"], "is a file"),
    "not-a-run": (lambda run, tmp: ["compare", tmp, "--fpr", "0.1"], "not a run of this project"),
    "approach-typo": (lambda run, tmp: ["calibrate", run, "--fpr", "0.1", "--approach", "entropc"],
                      "did you mean 'entropic'"),
    "approach-typo-export": (lambda run, tmp: ["export", run, "--approach", "sofmax", "--out", tmp / "m.pt2"],
                             "did you mean 'softmax'"),
    "missing-input": (lambda run, tmp: ["predict", run, tmp / "digit.png"], "digit.png: no such file or folder"),
}


@proves("refused input", "a command on a run refuses a missing run, a folder that is not a run, an approach the run "
                         "lacks (with 'did you mean') and a missing input in one line, before torch is imported")
@pytest.mark.parametrize("case", CASES)
def test_a_refusal_that_needs_no_model_comes_before_torch(run, tmp_path, case):
    argv, says = CASES[case]
    code, imported, err = modules_imported(argv(run, tmp_path))
    assert code == 1 and len(err) == 1 and says in err[0], err
    assert imported == []
