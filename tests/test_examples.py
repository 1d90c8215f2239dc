"""The gallery's examples (examples/plot_*.py) and the README's library example.

`make docs` runs the examples and shows their output; `make test` checks only that each one
imports without running (no work, nothing registered at import) and parses its arguments,
so a renamed API or a broken flag fails here in seconds. The README's Python block runs as
written.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # __name__ is not "__main__": nothing runs
    return module


def test_there_are_at_least_six_runnable_examples():
    assert len(EXAMPLES) >= 6, [p.name for p in EXAMPLES]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_imports_and_parses_its_arguments(path, capsys):
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    before = (LOSSES.names(), DETECTORS.names())
    module = load(path)
    assert (LOSSES.names(), DETECTORS.names()) == before, "importing an example registered something"
    args = module.parse_args([])
    assert args is not None and callable(module.run)
    with pytest.raises(SystemExit) as stop:
        module.parse_args(["--help"])
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        module.parse_args(["--no-such-flag"])
    assert stop.value.code == 2
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""\n') and re.search(r"^=+$", text, re.MULTILINE), "a gallery title"
    assert 'if __name__ == "__main__":\n    run(parse_args())' in text


def readme_python_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## The library in your own code\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_library_example_runs_as_written(capsys):
    code = readme_python_block()
    assert len(code.strip().splitlines()) <= 12
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert re.search(r"\[\s*(nan|[01]\.\d+)\s+(nan|[01]\.\d+)\s*\]", printed), printed
