"""Registered from outside the package (issue 30): a tiny package, installed in the test,
adds a loss and a detector through the ``agnostophobia.plugins`` entry points; ``train``,
``evaluate`` and ``tune``'s parameter list use them by name, with no edit here."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agnostophobia.errors import ConfigError
from agnostophobia.plugins import GROUP
from repo_paths import FIXTURES


PLUGIN = '''
import numpy as np

from agnostophobia.detectors import Detector, Setting, place_in_predicted_column, register
from agnostophobia.losses import LOSSES, OpenSetLoss
from agnostophobia.losses.entropic import entropic_per_sample


@LOSSES.register("plugin-tempered")
class TemperedEntropic(OpenSetLoss):
    """Entropic Open-Set on logits / temperature (a loss from outside the package)."""

    def __init__(self, num_classes: int, temperature: float = 2.0, reduction: str = "mean"):
        super().__init__(num_classes, reduction)
        self.temperature = temperature

    def forward(self, logits, labels, sample_weight=None):
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        return self._reduce(entropic_per_sample(logits / self.temperature, labels), labels, weight)


@register("plugin-margin")
class Margin(Detector):
    """The gap between the two largest logits (a detector from outside the package)."""

    SETTINGS = {"scale": Setting(float, 1.0, low=0, low_open=True)}

    def __init__(self, scale: float = 1.0):
        self._take_settings(scale=scale)

    def _scores(self, logits, features):
        top = np.sort(logits, axis=1)
        return place_in_predicted_column(self.scale * (top[:, -1] - top[:, -2]), logits)
'''


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The plugin package installed into a folder of its own as an installer lays it out: the
    package, and its ``.dist-info`` with the entry point (what ``pip install`` writes; written
    here so that the test needs neither a network nor a build backend)."""
    site = tmp_path_factory.mktemp("plugin") / "site"
    (site / "agnostophobia_plugin_demo").mkdir(parents=True)
    (site / "agnostophobia_plugin_demo" / "__init__.py").write_text(PLUGIN)
    info = site / "agnostophobia_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agnostophobia-plugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ndemo = agnostophobia_plugin_demo\n")
    return site


def run_cli(args, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "agnostophobia", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300)


def synthetic_protocol(where: Path) -> Path:
    """The compatibility fixture's folder protocol of synthetic glyphs, written under ``where``."""
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURES / "compat-7b7e620" /
                                                  "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_protocol(where)


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_a_plugin_loss_and_detector_train_and_evaluate_by_name(plugin_site, tmp_path):
    protocol = synthetic_protocol(tmp_path / "protocol")
    config = tmp_path / "plugin.yaml"
    config.write_text(textwrap.dedent(f"""\
        protocol: {{type: folders, root: {protocol}, known: [circle, cross, square], negative: [bar],
                   unknown: [dots], image_size: 28, channels: 1, kind: glyph}}
        model: resnet18
        model_kwargs: {{width: 2, feature_dim: 8, in_channels: 1}}
        approaches: [plugin-tempered]
        loss: {{temperature: 3.0}}
        detectors: {{plugin-margin: {{scale: 2.0}}}}
        epochs: 1
        batch_size: 16
        tensorboard: false
        """))
    run = tmp_path / "run"
    result = run_cli(["train", config, "--out", run, "--no-progress", "--device", "cpu"], plugin_site)
    assert result.returncode == 0, result.stderr
    assert (run / "seed0" / "plugin-tempered" / "last.pt").exists()
    result = run_cli(["evaluate", run, "--no-progress", "--device", "cpu"], plugin_site)
    assert result.returncode == 0, result.stderr
    rows = {record["row"] for record in json.loads((run / "metrics.json").read_text())["per_seed"]}
    assert "plugin-tempered/plugin-margin" in rows
    # without the plugin on the path the name is unknown, in one line
    result = run_cli(["train", config, "--out", tmp_path / "other", "--device", "cpu"], tmp_path / "nothing")
    assert result.returncode == 1 and "plugin-tempered" in result.stderr and len(result.stderr.splitlines()) == 1


def test_tune_lists_a_plugin_losss_parameter(plugin_site):
    code = "from agnostophobia.experiments.tune import tunable_parameters; print(sorted(tunable_parameters()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "temperature" in result.stdout and "xi" in result.stdout


def test_a_plugin_that_fails_to_load_is_one_error_naming_it(monkeypatch):
    from agnostophobia import plugins

    class Broken:
        name, value = "broken", "no_such_module_here"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_module_here'")

    monkeypatch.setattr(plugins, "entry_points", lambda group: [Broken()] if group == GROUP else [])
    monkeypatch.setitem(plugins._state, "loaded", False)
    with pytest.raises(ConfigError, match="plugin 'broken' .*no_such_module_here.*failed to load"):
        plugins.load_plugins()
    monkeypatch.setitem(plugins._state, "loaded", True)
