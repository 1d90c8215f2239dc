"""Packaging: the library declares version ranges (a user's torch is never replaced), and the
exact versions the checks run on are locked once, in constraints.txt, for every declared package."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


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
