"""The repository is self-contained: what its code, tests and documentation cite is in it.

Facts the project relies on (the authors' protocol and code defects, other libraries'
readouts, the provenance of the staged data) live in docs/references.md and docs/data.md.
Nothing may point at notes that exist only on one machine, or at one machine's paths.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "README.md"] + [p for top in ("src", "tests", "docs", "benchmarks") if (ROOT / top).is_dir()
                                  for p in sorted((ROOT / top).rglob("*"))
                                  if p.is_file() and "__pycache__" not in p.parts
                                  and not any(part.endswith(".egg-info") for part in p.parts)]  # build output
# Markdown files a run writes into its output folder, not part of the repository.
RUN_OUTPUTS = {"report.md", "tune.md", "ablation.md"}
MARKDOWN_NAME = re.compile(r"(?<![\w.+/-])((?:[\w.+-]+/)*[\w.+-]+\.md)\b")
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


def test_scan_covers_code_tests_and_docs():
    names = {p.relative_to(ROOT).as_posix() for p in SCANNED}
    assert {"README.md", "docs/references.md", "docs/data.md", "src/agnostophobia/training/config.py",
            "src/agnostophobia/configs/lenet++.yaml", "tests/test_data_real.py"} <= names


def test_every_cited_markdown_file_is_in_the_repository():
    missing = []
    for path, text in _texts():
        for match in MARKDOWN_NAME.finditer(text):
            name = match.group(1)
            if Path(name).name in RUN_OUTPUTS or (ROOT / name).is_file() or (path.parent / name).is_file():
                continue
            missing.append(f"{_where(path, text, match.start())}: {name}")
    assert missing == []


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
