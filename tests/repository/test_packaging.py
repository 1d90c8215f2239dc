"""Packaging: the library declares version ranges (a user's torch is never replaced), and the
exact versions the checks run on are locked once, in constraints.txt, for every declared package."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from repo_paths import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = REPO


def declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]


def test_no_dependency_is_pinned_exactly_and_each_has_a_lower_bound():
    for requirement in declared():
        assert "==" not in requirement, requirement
        assert ">=" in requirement, f"{requirement}: no lower bound"


def test_the_lock_pins_every_declared_package_inside_its_range():
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            package, version = line.split("==")
            pins[package.strip().lower()] = version.strip()
    for text in declared():
        requirement = Requirement(text)
        assert requirement.name.lower() in pins, f"{requirement.name}: not in constraints.txt"
        assert requirement.specifier.contains(pins[requirement.name.lower()]), (text, pins[requirement.name.lower()])


def test_features_are_extras_and_the_test_extra_holds_them():
    """tensorboard and ONNX export are optional features (a one-line error names the extra where
    one is asked for and missing); the suite tests both, so its extra installs both."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert {"onnx", "tensorboard", "test"} <= set(extras)
    assert not any(r.startswith(("tensorboard", "onnx")) for r in project["dependencies"])
    assert set(extras["onnx"]) | set(extras["tensorboard"]) <= set(extras["test"])


def test_the_wheel_ships_the_configs_and_py_typed_and_runs_installed_alone(tmp_path):
    """``pip wheel --no-deps .`` (no download: the venv's setuptools builds it), installed without
    dependencies into a folder of its own (never into this venv) and run from outside the source
    tree: the installed package alone answers, its configs found in the wheel."""
    source = tmp_path / "source"  # a copy: a build writes build/ and *.egg-info beside its sources
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]

    def run(command, **extra):
        result = subprocess.run(command, capture_output=True, text=True, env={**env, **extra}, cwd=tmp_path,
                                timeout=120)
        assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"
        return result.stdout

    run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"), str(source)])
    wheel, = (tmp_path / "dist").glob("agnostophobia-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"agnostophobia/configs/{p.name}" for p in (ROOT / "src/agnostophobia/configs").glob("*.yaml")}
    assert configs and configs | {"agnostophobia/py.typed", "agnostophobia/cli.py"} <= shipped

    target = tmp_path / "installed"
    run(pip + ["install", "--no-deps", "--no-index", "--target", str(target), str(wheel)])
    # PYTHONPATH comes before site-packages, where this venv's editable install of the source tree is
    probe = ("import importlib.resources\nimport agnostophobia.losses\nprint(agnostophobia.__file__)\n"
             "print(importlib.resources.files('agnostophobia').joinpath('configs', 'lenet++.yaml'))")
    package, config = run([sys.executable, "-c", probe], PYTHONPATH=str(target)).split()
    assert (package, config) == (str(target / "agnostophobia" / "__init__.py"),
                                 str(target / "agnostophobia" / "configs" / "lenet++.yaml"))
    assert Path(config).is_file()
    script = target / "bin" / "agnostophobia"
    assert run([str(script), "--version"], PYTHONPATH=str(target)).startswith("agnostophobia ")
    assert "mnist" in run([str(script), "data", "list"], PYTHONPATH=str(target))
