"""The gallery's examples (examples/*.py but the make_folder_protocol.py tool) and the README's
library example.

`make docs` runs every example top to bottom (sphinx-gallery) and fails on an error; `make test`
does not run them (tens of seconds each) but checks in milliseconds, without running them, what
would make the gallery wrong: an example the gallery leaves out, a name the package no longer
has, an example shown as one block of code or without a figure (its thumbnail would be
sphinx-gallery's placeholder). own_images.py runs in tests/data/file_protocols/test_imagefolder.py. The README's
Python block and the first example of the site's landing page (docs/index.md) run as written.
"""
from __future__ import annotations

import ast
import importlib
import re
import sys

import pytest
from repo_paths import REPO

ROOT = REPO
TOOLS = {"make_folder_protocol.py"}  # a script that needs the staged data: not in the gallery
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name not in TOOLS)


def gallery_conf() -> dict:
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
        conf = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(conf)
    finally:
        sys.path.remove(str(ROOT / "docs"))
    return conf.sphinx_gallery_conf


def test_there_are_at_least_nine_examples():
    assert len(EXAMPLES) >= 9, [p.name for p in EXAMPLES]


def test_the_gallery_runs_every_example_and_no_tool():
    conf = gallery_conf()
    for path in EXAMPLES:
        shown = "/" + path.name
        assert re.search(conf["filename_pattern"], shown) and not re.search(conf["ignore_pattern"], shown), \
            f"{path.name} is not run by the gallery"
    for name in TOOLS:
        assert re.search(conf["ignore_pattern"], "/" + name), f"{name} would be run by the gallery"


def package_names(tree: ast.Module):
    """(module, name) of every ``from agnostophobia... import name`` and ``import agnostophobia...``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agnostophobia":
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "agnostophobia":
                    yield alias.name, None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_uses_public_names_the_package_has(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = list(package_names(tree))
    assert names, f"{path.name} uses nothing of the package"
    for module, name in names:
        assert not any(part.startswith("_") for part in module.split(".")), f"{path.name}: private module {module}"
        imported = importlib.import_module(module)
        if name is not None:
            assert not name.startswith("_"), f"{path.name}: private name {module}.{name}"
            assert hasattr(imported, name), f"{path.name}: {module} has no {name}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_is_narrated_in_cells_and_draws_a_figure(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""\n') and re.search(r"^=+$", text, re.MULTILINE), "a gallery title"
    # a cell: "# %%", then a section title underlined with dashes, then its text
    cells = re.findall(r"^# %%\n# (.+)\n# -+\n((?:#.*\n)+)", text, re.MULTILINE)
    assert len(cells) >= 3, f"{path.name}: {len(cells)} titled cells with text, at least 3 wanted"
    assert re.search(r"plt\.(subplots|figure)\(", text), f"{path.name} draws no figure: a placeholder thumbnail"
    assert 'if __name__ == "__main__"' not in text, f"{path.name}: the gallery runs its cells top to bottom"


def readme_python_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## The library in your own code\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_library_example_runs_as_written(capsys):
    code = readme_python_block()
    assert len(code.strip().splitlines()) <= 12
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    # two rates its ~180 unknowns resolve: a number each, not the NaN of a rate below 1/#unknowns
    assert re.search(r"\[\s*[01]\.\d+\s+[01]\.\d+\s*\]", printed), printed


def landing_python_block() -> str:
    index = (ROOT / "docs/index.md").read_text(encoding="utf-8")
    section = index.split("\n## A first example\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_landing_page_example_runs_as_written(capsys):
    """The first example a reader meets is complete: it defines its data (it used x, y, x_test and
    y_test without defining them), trains and prints CCR at two FPRs, in a few seconds."""
    import torch

    code = landing_python_block()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a network this small trains fastest on one thread (seconds, not a minute, on a busy CPU)
    try:
        exec(compile(code, "docs/index.md", "exec"), {})
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    values = re.search(r"\[\s*(nan|[01]\.\d+)\s+(nan|[01]\.\d+)\s*\]", printed)
    assert values, printed
    assert float(values.group(2)) > 0.5, printed  # it learnt: most knowns accepted at 10 % false positives
