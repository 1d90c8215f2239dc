"""The worked examples of docs/architecture.md are true as written: "A detector" (two tuned settings,
exported) and "A loss" (a tuned setting) are two source files and one new test file each, and with
the blocks of those sections copied verbatim into a copy of the tree, the default selection of the
tests that cover the registries passes there with no other edit. The blocks are read from the page,
so the page and this check cannot drift apart; each block's first line names its file (``# PATH``, or
``# PATH: after the last import`` for a line added to a module that exists)."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple

import pytest

from fresh_pytest import assert_reported
from repo_paths import REPO

PAGE = REPO / "docs/architecture.md"
#: The sections that add a registered thing, each with the files it says it touches.
SECTIONS = {"A detector": "(2 source files, 1 new test file)", "A loss": "(2 source files, 1 new test file)"}
#: The default selection (``-m "not slow"``, no ``-k``) of the folders and files whose tests cover every
#: registered loss and detector, or read the docs and the layout a new module must keep: a new thing that
#: fails one of them would need an edit the examples do not make.
SELECTION = ["tests/contracts", "tests/detectors", "tests/losses", "tests/metrics/test_ties.py",
             "tests/test_settings.py", "tests/repository"]
#: What is not copied: version control, environments, caches, and what ``make docs`` generates.
NOT_COPIED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "runs", "build", "dist", ".gl", ".whl"}
GENERATED_DOCS = {"_build", "gallery", "generated", "sg_execution_times.rst"}
APPENDED = ": after the last import"


class Block(NamedTuple):
    path: str  # relative to the tree
    text: str  # the block without its first line
    appended: bool  # a line added to a module that exists (else a new file)


def blocks(page: str) -> Dict[str, List[Block]]:
    """Each section's blocks of files, in the page's order."""
    found: Dict[str, List[Block]] = {}
    for title in SECTIONS:
        start = page.index(f"\n### {title} ")
        section = page[start:page.index("\n### ", start + 1)]
        found[title] = []
        for body in re.findall(r"\n *```python\n(.*?)\n *```\n", section, re.DOTALL):
            first, _, rest = textwrap.dedent(body).partition("\n")
            match = re.fullmatch(r"# ((?:src|tests)/\S+\.py)(: after the last import)?", first)
            if match:
                found[title].append(Block(match.group(1), rest + "\n", bool(match.group(2))))
    return found


def test_each_example_is_two_source_files_and_one_new_test_file():
    """As each section's title says: a new module and the one line that imports it, and a new test file."""
    page = PAGE.read_text(encoding="utf-8")
    for title, files in blocks(page).items():
        assert f"\n### {title} {SECTIONS[title]}\n" in page
        sources = [b for b in files if b.path.startswith("src/")]
        tests = [b for b in files if b.path.startswith("tests/")]
        assert len(sources) == 2 and len(tests) == 1 and len(files) == 3, (title, [b.path for b in files])
        assert [b.appended for b in sources] == [False, True], title  # the new module, then its import
        assert sources[1].path.endswith("/__init__.py") and len(sources[1].text.strip().splitlines()) == 1
        for block in files:
            path = REPO / block.path  # a new file is new (or, in a tree the examples were added to, the block)
            assert path.exists() if block.appended else not path.exists() or path.read_text() == block.text, block.path
            ast.parse(block.text)  # each is Python as written


def test_the_blocks_are_read_as_the_page_writes_them(tmp_path):
    """The reader itself: an indented block in a list item, the marker line dropped, other blocks passed over."""
    page = ("\n### A detector (2 source files, 1 new test file)\n\n1. New:\n\n   ```python\n"
            "   # src/agnostophobia/detectors/knob.py\n   class Knob:\n       depth = 1\n   ```\n\n"
            "```python\nprint('no file named')\n```\n\n   ```python\n   # src/agnostophobia/detectors/__init__.py"
            ": after the last import\n   from . import knob\n   ```\n\n### A loss (x)\n\n### Next\n")
    knob = Block("src/agnostophobia/detectors/knob.py", "class Knob:\n    depth = 1\n", False)
    imported = Block("src/agnostophobia/detectors/__init__.py", "from . import knob\n", True)
    assert blocks(page) == {"A detector": [knob, imported], "A loss": []}


def copy_tree(destination: Path) -> Path:
    """The repository's files (the working tree, so that uncommitted work is checked too)."""
    def ignored(folder, names):
        in_docs = Path(folder).resolve().relative_to(REPO).parts[:1] == ("docs",)
        return {n for n in names if n in NOT_COPIED or n.endswith(".egg-info") or in_docs and n in GENERATED_DOCS}

    shutil.copytree(REPO, destination, ignore=ignored)
    return destination


def add(tree: Path, block: Block) -> None:
    """A new file written as the block is; a line added after the last import of the module at the top level."""
    path = tree / block.path
    if not block.appended:
        path.write_text(block.text, encoding="utf-8")
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(node.end_lineno for node in ast.parse("".join(lines)).body
               if isinstance(node, (ast.Import, ast.ImportFrom)))
    path.write_text("".join(lines[:last]) + block.text + "".join(lines[last:]), encoding="utf-8")


def with_examples(tmp_path: Path, change=lambda text: text) -> Path:
    """A copy of the tree with both examples added (each block's text passed through ``change``)."""
    tree = copy_tree(tmp_path / "tree")
    for files in blocks(PAGE.read_text(encoding="utf-8")).values():
        for block in files:
            add(tree, block._replace(text=change(block.text)))
    return tree


def run_tests(tree: Path, selection=SELECTION):
    """A fresh pytest in the copy, on the copy's package, with the default selection of ``selection``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "pytest", "-q", "-rA", "-m", "not slow", "-p", "no:cacheprovider", *selection]
    return subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)


def changed_files(tree: Path) -> List[str]:
    """The files of the copy that are not the repository's as they are."""
    changed = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        original = REPO / path.relative_to(tree)
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            changed.append(path.relative_to(tree).as_posix())
    return changed


@pytest.mark.slow  # 3 min on 2 CPU cores: a fresh pytest over the registry-wide tests; CI runs it with the slow tests
def test_the_examples_pass_the_default_selection_with_no_other_edit(tmp_path):
    tree = with_examples(tmp_path)
    assert changed_files(tree) == sorted(b.path for files in blocks(PAGE.read_text(encoding="utf-8")).values()
                                         for b in files)
    result = run_tests(tree)
    # both were checked: against their references, in torch at a grid point, their grids, their echoes
    assert_reported(result, 0, "PASSED", (
        "tests/detectors/test_margin.py::test_the_score_on_a_batch_worked_by_hand",
        "tests/losses/test_squared.py::test_the_loss_on_a_batch_worked_by_hand",
        "test_detector_references.py::test_every_detector_matches_its_reference[margin]",
        "test_loss_references.py::test_every_loss_matches_its_reference[squared-",
        "test_detectors.py::test_every_detector_writes_its_score_in_torch_or_says_why_not[margin-margin=0.0-",
        "test_detectors.py::test_every_tuned_setting_moves_the_scores[margin]",
        "test_peers.py::test_each_peer_declares_its_papers_detector_and_tunable_settings[squared]",
        "test_default_sources.py::test_every_default_of_every_loss_says_where_it_comes_from[squared]",
        "test_setting_echoes.py::test_no_setting_name_is_spelled_outside_the_module_that_declares_it"))


@pytest.mark.slow  # 1 min: a fresh pytest of the contract tests over a copy, as above
def test_an_example_that_breaks_a_contract_fails_there(tmp_path):
    """The check can fail: the torch score off where margin > 0 and the loss off on a known sample are caught."""
    def broken(text):
        return text.replace("margin * top[:, 1]", "margin * top[:, 1] * 1.000001").replace(
            "(logits.softmax(dim=1) - target) ** 2", "(logits.softmax(dim=1) - 0.999999 * target) ** 2")

    tree = with_examples(tmp_path, broken)
    result = run_tests(tree, ["tests/contracts/test_loss_references.py", "tests/detectors/test_detectors.py"])
    assert_reported(result, 1, "FAILED", (
        "test_every_loss_matches_its_reference[squared-",
        "test_every_detector_writes_its_score_in_torch_or_says_why_not[margin-default]"))
