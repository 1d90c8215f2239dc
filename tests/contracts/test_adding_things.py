"""A loss with a tunable setting and an exportable detector added from outside the package pass the
contract tests with their own test files alone (docs/architecture.md, "Layout"): a package written
here, outside the repository, registers both through the ``agnostophobia.plugins`` entry point, brings
one test file for each that registers its float64 reference, and the repository's contract tests, run
over them in a fresh pytest, pass; with a deliberately wrong reference they fail. (The same inside the
package, as the worked examples of docs/architecture.md write it, with the default selection of the
registry-wide tests: tests/contracts/test_worked_examples.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agnostophobia.plugins import GROUP
from fresh_pytest import assert_reported
from repo_paths import REPO

LOSS = '''
"""Entropic Open-Set on the logits divided by a temperature (a loss from outside the package)."""
from agnostophobia.losses import LOSSES, OpenSetLoss
from agnostophobia.losses.entropic import entropic_per_sample
from agnostophobia.settings import Setting


@LOSSES.register("demo-tempered")
class TemperedEntropic(OpenSetLoss):
    """J_E of z / T: unknowns pushed to equal softmax scores of the tempered logits."""

    demo_temperature = Setting(float, 2.0, low=0, low_open=True, grid=(1.0, 2.0, 4.0), doc="T, the temperature")

    def forward(self, logits, labels, sample_weight=None):
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        return self._reduce(entropic_per_sample(logits / self.demo_temperature, labels), labels, weight)
'''

DETECTOR = '''
"""The gap between the two largest logits, scaled (a detector from outside the package)."""
import numpy as np
import torch

from agnostophobia.detectors import Detector, Setting, TorchScore, place_in_predicted_column, register


@register("demo-margin")
class Margin(Detector):
    """scale * (l_(1) - l_(2)): a confident network leads by much."""

    demo_scale = Setting(float, 1.0, low=0, low_open=True, doc="the factor of the gap")

    def _scores(self, logits, features):
        top = np.sort(logits, axis=1)
        return place_in_predicted_column(self.demo_scale * (top[:, -1] - top[:, -2]), logits)

    def _torch_score(self):
        scale = self.demo_scale
        return TorchScore(lambda logits, features, predicted: scale * (torch.topk(logits, 2, dim=1).values[:, 0]
                                                                      - torch.topk(logits, 2, dim=1).values[:, 1]))
'''

LOSS_TEST = '''
"""The tempered loss's float64 reference: J_E of z / T, one sample at a time."""
import math

from references import loss_reference


@loss_reference("demo-tempered", demo_temperature=3.0)
def tempered_term(loss, z, features, y):
    t = [v / loss.demo_temperature for v in z.tolist()]
    log_sum = math.log(sum(math.exp(v) for v in t))
    if y >= 0:
        return log_sum - t[y] + {wrong}
    return log_sum - sum(t) / len(t)


def test_the_temperature_is_tunable():
    from agnostophobia.losses import loss_settings

    assert loss_settings("demo-tempered")["demo_temperature"].grid == (1.0, 2.0, 4.0)
'''

DETECTOR_TEST = '''
"""The margin detector's float64 reference: scale times the gap of the two largest logits."""
import numpy as np

from references import detector_reference


@detector_reference("demo-margin", demo_scale=2.5)
def margin_reference(detector, logits, features, train):
    return np.array([detector.demo_scale * (sorted(row)[-1] - sorted(row)[-2]) + {wrong} for row in logits.tolist()])
'''

#: the contract tests that take every registered loss and detector, run over the two added here
CONTRACTS = ["tests/contracts/test_loss_references.py", "tests/contracts/test_detector_references.py",
             "tests/detectors/test_detectors.py"]


def write_package(root, wrong: str = "0.0"):
    """The installed package (a folder on the path, as ``pip install`` lays it out, with its entry point)
    and its two test files; ``wrong`` is added to the loss reference's known-sample term and to the
    detector reference's score."""
    package = root / "site" / "demo_additions"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import losses, detectors  # noqa: F401 (they register)\n")
    (package / "losses.py").write_text(LOSS)
    (package / "detectors.py").write_text(DETECTOR)
    info = root / "site" / "demo_additions-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-additions\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ndemo = demo_additions\n")
    tests = root / "demo_tests"
    tests.mkdir()
    (tests / "test_demo_tempered.py").write_text(LOSS_TEST.replace("{wrong}", wrong))
    (tests / "test_demo_margin.py").write_text(DETECTOR_TEST.replace("{wrong}", wrong))
    return root / "site", tests


def run_contracts(site, tests, contracts=CONTRACTS):
    """A fresh pytest in the repository over the package's own tests and the contract tests, the
    latter restricted to the added names (every other registered one is checked by the suite itself)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k", "demo", str(tests), *contracts]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # 30 s: a fresh pytest collects the detector contracts; CI runs it with the slow tests
def test_a_new_loss_and_detector_pass_the_contract_tests_with_their_own_test_files_alone(tmp_path):
    result = run_contracts(*write_package(tmp_path))
    # both were checked: the loss in every reduction, the detector against its reference and in torch
    assert_reported(result, 0, "PASSED", (
        "test_loss_references.py::test_every_loss_matches_its_reference[demo-tempered-",
        "test_loss_references.py::test_a_batch_of_one_kind_gets_the_other_term_alone_never_nan[demo-tempered-",
        "test_detector_references.py::test_every_detector_matches_its_reference[demo-margin]",
        "test_detectors.py::test_every_detector_writes_its_score_in_torch_or_says_why_not[demo-margin-default]",
        "test_demo_tempered.py::test_the_temperature_is_tunable"))


@pytest.mark.slow  # 23 s: a fresh pytest, as above
def test_a_wrong_reference_fails_the_contract_tests(tmp_path):
    """The check can fail: a known sample's loss term, and the detector's score, off by 1e-6 are caught."""
    result = run_contracts(*write_package(tmp_path, wrong="1e-6"), contracts=CONTRACTS[:2])
    assert_reported(result, 1, "FAILED", ("test_every_loss_matches_its_reference[demo-tempered-",
                                          "test_every_detector_matches_its_reference[demo-margin]"))
