"""The public part of ``agnostophobia.training`` (its API page): the names of its ``__all__``
resolve to the objects of its modules, and importing the package loads no torch (the command
line imports ``training.auto_options`` while it parses)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import agnostophobia.training as training
from repo_paths import REPO

ROOT = REPO


def test_every_public_name_resolves_to_its_module_object():
    from agnostophobia.training import config, fitting, outputs, trained

    assert training.fit is fitting.fit
    assert training.load_experiment is config.load_experiment
    assert training.TrainedModel is trained.TrainedModel and training.predict is outputs.predict
    for name in training.__all__:
        assert getattr(training, name).__module__.startswith("agnostophobia.training."), name
    assert sorted(dir(training)) == sorted(set(dir(training)) | set(training.__all__))


def test_the_loop_internals_stay_private():
    private = {"train_one_epoch", "evaluate", "Training", "training_step", "CapturedStep", "check_run"}
    assert private.isdisjoint(training.__all__)


def test_importing_the_package_loads_no_torch():
    code = ("import sys, agnostophobia.training, agnostophobia.training.auto_options; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}).stdout
    assert out.strip() == "False"
