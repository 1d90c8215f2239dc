"""The user pages speak to the reader, not about the machine the project was developed on (issue
57, item 3): no commit hash, and none of the phrases of a lab notebook ("this machine", "2-core
machine", "niced", "beside it"). Where a published number was measured, on which machine, with
which versions and which commit, is recorded on one page, docs/provenance.md, which the result
pages link to by a short run label; the development notes and the changelog keep the history."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_paths import REPO

DOCS = REPO / "docs"
#: the pages that record where numbers come from and what changed: they may name commits and machines
RECORDS = {"docs/provenance.md", "docs/development.md", "docs/changelog.md"}
#: generated pages, and the GPU check's raw output (an internal record, out of the navigation)
GENERATED = tuple(f"docs/{folder}/" for folder in ("_build", "gallery", "reference/generated", "gpu-runs"))

#: 7 to 40 hex digits with at least one digit and one letter a-f, bounded by non-word characters
#: ("decade", "facade" and "bf16" are not hashes), or any 7 to 40 hex digits named as a commit
COMMIT_HASH = re.compile(r"(?<![\w])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w])"
                         r"|\bcommits?\s+`?[0-9a-f]{7,40}\b")
MACHINE_TALK = re.compile(r"\bthis machine\b|\b2-core (?:CPU )?machine\b|\bniced\b|\bbeside it\b", re.IGNORECASE)


def user_pages() -> list:
    return [page for page in sorted(DOCS.rglob("*.md"))
            if page.relative_to(REPO).as_posix() not in RECORDS
            and not page.relative_to(REPO).as_posix().startswith(GENERATED)]


def findings(text: str) -> list:
    """``line: what`` for every commit hash and every phrase of machine narration in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [f"{number}: {m.group(0)!r}" for pattern in (COMMIT_HASH, MACHINE_TALK) for m in pattern.finditer(line)]
    return found


def test_the_user_pages_are_found():
    names = {page.relative_to(REPO).as_posix() for page in user_pages()}
    assert {f"docs/{name}" for name in ("index", "installing", "own-images", "data", "cifar", "post-processors",
                                         "training-peers", "reliability", "references", "glossary", "guide/results",
                                         "guide/benchmark", "guide/deploying")} <= {name[:-3] for name in names}
    assert not names & RECORDS and not any(name.startswith("docs/gpu-runs/") for name in names)


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_a_user_page_names_no_commit_and_does_not_narrate_the_machine(page: Path):
    """A run's commit, machine and load go to its entry in docs/provenance.md; the page keeps the
    number and links to the entry by the run's label."""
    assert findings(page.read_text(encoding="utf-8")) == []


def test_the_check_finds_hashes_and_machine_talk_and_nothing_else():
    """It can fail, and it does not fail on words or numbers that only look like hashes."""
    text = ("trained at commit ba34d11\n(code of 9081b05)\nsha256 `bf3aabd5…`\ncommit 4515566\n"
            "Measured on this 2-core machine\nniced tests ran beside it\non this machine\n")
    assert [f.split(": ", 1)[0] for f in findings(text)] == ["1", "2", "3", "4", "5", "6", "6", "7"]
    harmless = ("a decade of work on a facade; bf16 and fp32; lr 1e-3; arXiv 1811.04110 and 2404.00498;\n"
                "x86_64 with AVX512-BF16; torch 2.14.1+cu130; the score beside its threshold; 1,832 s;\n"
                "the 2-core CPU; agnostophobia-0.1.0-py3-none-any.whl; a 128-d feature\n")
    assert findings(harmless) == []
