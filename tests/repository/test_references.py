"""The repository is self-contained: what its code, tests and documentation cite is in it.

Facts the project relies on (the authors' protocol and code defects, other libraries'
readouts, the provenance of the staged data) live in docs/references.md, docs/data.md and
docs/provenance.md.
Nothing may point at notes that exist only on one machine, at one machine's paths, or
anywhere outside the repository: a file beside a clone (``../shared``) is in no user's clone.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_paths import REPO

ROOT = REPO
# What `make docs` writes into docs/ (git-ignored): the site and the pages it generates.
GENERATED = ("docs/_build/", "docs/gallery/", "docs/reference/generated/", "docs/sg_execution_times.rst")
SCANNED = [ROOT / name for name in ("README.md", "Makefile", "pyproject.toml") if (ROOT / name).is_file()] + [
    p for top in ("src", "tests", "docs", "benchmarks", "examples", ".ci") if (ROOT / top).is_dir()
    for p in sorted((ROOT / top).rglob("*"))
    if p.is_file() and "__pycache__" not in p.parts
    and not any(part.endswith(".egg-info") for part in p.parts)  # build output
    and not p.relative_to(ROOT).as_posix().startswith(GENERATED)]

# Markdown files a run writes into its output folder, not part of the repository.
RUN_OUTPUTS = {"report.md", "tune.md", "ablation.md", "comparison.md", "benchmark.md", "benchmark-splits.md"}
# A name ending in .md; an absolute one only after a space, quote, bracket or "=" (not runs/<budget>/report.md).
MARKDOWN_NAME = re.compile(r"(?<![\w.+/-])((?:(?<![^\s\"'`(\[=])/)?(?:[\w.+-]+/)*[\w.+-]+\.md)\b")
# A relative path that starts by going up (not a variable's folder such as $DIR/../x).
PARENT_PATH = re.compile(r"(?<![\w.+/$}-])((?:\.\./)+[\w.+-]+(?:/[\w.+-]+)*)")
#: Paths that leave the repository on purpose: (citing file, path) -> why.
LEAVES_ON_PURPOSE = {
    (".ci/run", "../shared/data"): "CI stages the data beside its clone and hands it to the tests as "
                                   "AGNOSTOPHOBIA_DATA; without it they skip",
    ("tests/data/file_protocols/test_file_protocols.py", "../tree"): "a protocol's folder relative to its YAML, in a temporary folder",
    ("src/agnostophobia/experiments/report.py", "../data/images"): "an example of a protocol folder shown "
                                                                     "relative to the run, in a docstring",
    ("tests/commands/test_reproduce.py", "../../data/images"): "the report's relative path to a temporary data folder",
    ("tests/repository/test_docs_site.py", "../index.html"): "a link between two pages of a small site built in a temporary folder",
    ("tests/test_journal.py", "../OUTSIDE/dir/keep.txt"): "a planted undo-journal entry that climbs out of the run: "
                                                          "the test proves it is refused",
    ("tests/test_runpath.py", "../outside"): "a name that climbs out of the run: the test proves it is refused",
}
# Notes kept outside the repository were cited by these names, with or without ".md".
OUTSIDE_NOTES = re.compile(r"\b(?:REFERENCES|PROVENANCE)\b")
MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:work|home|root|Users|mnt|scratch)/")


def _texts():
    for path in SCANNED:
        if path == Path(__file__).resolve():  # this file spells out the patterns it looks for
            continue
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # binary files cite nothing
            continue


def _where(path: Path, text: str, start: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, start) + 1}"


def _inside(candidate: Path) -> bool:
    return candidate.resolve().is_relative_to(ROOT)


def _bases(path: Path):
    """Where a path cited in ``path`` is read from: a Markdown link from the citing file's
    folder; a path in code or prose may also be read from the repository root (commands run there)."""
    return (path.parent,) if path.suffix == ".md" else (path.parent, ROOT)


def missing_markdown(path: Path, text: str) -> list:
    """Markdown files ``text`` cites that are not in the repository; one that exists
    outside it (beside a clone, on one machine) is missing from every other clone."""
    missing = []
    for match in MARKDOWN_NAME.finditer(text):
        name = match.group(1)
        leaves = not all(_inside(base / name) for base in _bases(path))
        found = any(_inside(base / name) and (base / name).is_file() for base in (ROOT, path.parent))
        if leaves or not (found or Path(name).name in RUN_OUTPUTS):
            missing.append(f"{_where(path, text, match.start())}: {name}")
    return missing


def paths_leaving_the_repository(path: Path, text: str) -> list:
    """Relative paths in ``text`` that climb out of the repository from where they are read."""
    rel = path.relative_to(ROOT).as_posix() if _inside(path) else str(path)
    return [f"{_where(path, text, match.start())}: {match.group(1)}" for match in PARENT_PATH.finditer(text)
            if (rel, match.group(1)) not in LEAVES_ON_PURPOSE
            and not all(_inside(base / match.group(1)) for base in _bases(path))]


def test_scan_covers_code_tests_and_docs():
    names = {p.relative_to(ROOT).as_posix() for p in SCANNED}
    assert {"README.md", "docs/references.md", "docs/data.md", "src/agnostophobia/training/config.py",
            "src/agnostophobia/configs/lenet++.yaml", "tests/data/test_real_data.py", "Makefile", ".ci/run",
            "examples/make_folder_protocol.py"} <= names


def test_every_cited_markdown_file_is_in_the_repository():
    assert [line for path, text in _texts() for line in missing_markdown(path, text)] == []


def test_no_path_leaves_the_repository():
    assert [line for path, text in _texts() for line in paths_leaving_the_repository(path, text)] == []


@pytest.mark.parametrize("text", ["docs: ../shared/LAYOUT.md", "see ../../LAYOUT.md", "see OUTSIDE/notes.md"])
def test_a_cited_markdown_file_outside_the_repository_is_refused_even_where_it_exists(text, tmp_path):
    """The old check accepted ``../shared/LAYOUT.md`` because a file of that name lay beside
    the clone it ran in (as on CI): a user's clone then failed. Here the cited files exist."""
    (tmp_path / "notes.md").write_text("# notes")
    text = text.replace("OUTSIDE", str(tmp_path))
    for citing in (ROOT / "tests" / "repository" / "test_layers.py", ROOT / "docs" / "data.md", ROOT / "README.md"):
        assert len(missing_markdown(citing, text)) == 1, (citing, text)


def test_a_relative_path_climbing_out_of_the_repository_is_refused():
    script = ROOT / "Makefile"
    assert paths_leaving_the_repository(script, "DATA ?= ../shared/data\nTEST ?= tests/../tests") == [
        "Makefile:1: ../shared/data"]
    assert paths_leaving_the_repository(ROOT / "tests" / "test_x.py", "# data in ../shared/data") != []
    assert paths_leaving_the_repository(ROOT / "docs" / "x.md", "[home](../README.md), ../../data") == [
        "docs/x.md:1: ../../data"]


def test_citations_inside_the_repository_are_accepted():
    assert missing_markdown(ROOT / "docs" / "cifar.md", "[data](data.md), [home](../README.md)") == []
    assert missing_markdown(ROOT / "tests" / "test_x.py", "README.md, docs/data.md, RUN/report.md") == []


def test_no_notes_kept_outside_the_repository_are_cited():
    cited = [f"{_where(path, text, m.start())}: {m.group(0)}" for path, text in _texts()
             for m in OUTSIDE_NOTES.finditer(text)]
    assert cited == []


def test_no_machine_specific_absolute_paths():
    paths = [f"{_where(path, text, m.start())}: {text[m.start():m.start() + 40].splitlines()[0]}"
             for path, text in _texts() for m in MACHINE_PATH.finditer(text)]
    assert paths == []


@pytest.mark.parametrize("anchor", ["Adam", "0.01", "128", "70", "ξ | 50", "λ | 1e-4", "lowest validation loss",
                                    "100/N_c", "no activation functions", "0.107", "0.0875",
                                    "transposes", "BGR", "10,032", "18,724"])
def test_references_page_states_the_facts_the_code_cites(anchor):
    assert anchor in (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
