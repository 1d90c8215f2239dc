"""Nothing the README said at commit 7b7e620 (before it became a short entry into the
documentation site) was lost: every ``agnostophobia …`` command line, configuration key and
table of that README is found in the documentation sources (docs/**/*.md and the README), and
the generated references cover them too: each command's subcommand and flags are in the
argparse parser the command-line reference is generated from, and each configuration key of
an experiment YAML is a row of the generated configuration reference (docs/_ext).

The list is a committed fixture, tests/fixtures/readme-7b7e620.json, made by :func:`extract` from
``git show 7b7e620:README.md``; where the history is at hand a test re-extracts it.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from repo_paths import FIXTURES, REPO

ROOT = REPO
FIXTURE = FIXTURES / "readme-7b7e620.json"
COMMIT = "7b7e620"


def _config_fields():
    import dataclasses

    from agnostophobia.training.config import ExperimentConfig, TrainConfig

    return [f.name for f in dataclasses.fields(TrainConfig)] + [
        f.name for f in dataclasses.fields(ExperimentConfig) if f.name != "train"]


def extract(text: str, fields) -> dict:
    """The command lines (in code blocks and inline code), configuration keys (keys of YAML
    blocks, and inline code naming a configuration field) and tables (every row) of a README."""
    lines = text.split("\n")
    commands, keys, fence = [], [], None
    for line in lines:
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is not None:
            command = line.split("  #")[0].strip()
            if re.match(r"^(\.venv/bin/)?agnostophobia |^torchrun .*-m agnostophobia", command):
                commands.append(" ".join(command.split()))
            key = re.match(r"^\s*(\w+):", line)
            if fence == "yaml" and key:
                keys.append(key.group(1))
            continue
        commands += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", line)
                     if re.match(r"^agnostophobia [a-z]", span)]
    for span in re.findall(r"`([^`\n]+)`", text):
        named = re.match(r"^(\w+)(:|$)", span.strip())
        if named and named.group(1) in fields:
            keys.append(named.group(1))
    tables, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[i + 1].strip()):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            tables.append([row.rstrip() for row in lines[i:j]])
            i = j
        else:
            i += 1
    return {"commands": list(dict.fromkeys(commands)), "config_keys": list(dict.fromkeys(keys)), "tables": tables}


def normalized(text: str) -> str:
    """Whitespace collapsed, Markdown links reduced to their text (a moved page's links point
    elsewhere; what they say is the same) and bold marks dropped (a cell set in bold on test numbers
    lost its bold when the docs stopped marking choices made on test data; its number is the same)."""
    return " ".join(re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", text).replace("**", "").split())


def doc_sources():
    generated = ("docs/_build/", "docs/gallery/", "docs/reference/generated/")
    pages = [p for p in sorted((ROOT / "docs").rglob("*.md"))
             if not p.relative_to(ROOT).as_posix().startswith(generated)]
    return pages + [ROOT / "README.md"]


@pytest.fixture(scope="module")
def old():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sources():
    texts = [p.read_text(encoding="utf-8") for p in doc_sources()]
    return normalized("\n".join(texts)), {normalized(line) for text in texts for line in text.split("\n")}


def test_the_fixture_holds_what_the_old_readme_had(old):
    assert len(old["commands"]) >= 30 and len(old["config_keys"]) >= 30 and len(old["tables"]) >= 19
    assert "agnostophobia reproduce lenet++ --budget cpu [--seeds 2]" in old["commands"]
    assert {"concurrent_runs", "batched_seeds", "data_loading", "protocol"} <= set(old["config_keys"])


def test_the_fixture_is_what_the_old_readme_gives(old):
    try:
        text = subprocess.run(["git", "show", f"{COMMIT}:README.md"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"commit {COMMIT} is not in this clone's history")
    assert extract(text, _config_fields()) == old


def test_every_command_line_is_in_the_documentation(old, sources):
    text, _ = sources
    assert [c for c in old["commands"] if normalized(c) not in text] == []


def test_every_command_and_flag_is_in_the_parser_the_cli_reference_is_generated_from(old):
    from agnostophobia.cli import build_parser

    commands = {}
    for action in build_parser()._subparsers._group_actions:
        commands.update(action.choices)
    missing = []
    for line in old["commands"]:
        words = line.split()  # agnostophobia ..., .venv/bin/agnostophobia ..., torchrun ... -m agnostophobia ...
        start = next(i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] == "agnostophobia") + 1
        name, rest = words[start], words[start + 1:]
        parser = commands.get(name)
        if parser is None:
            missing.append(f"{line}: no command {name!r}")
            continue
        if parser._subparsers is not None and rest and not rest[0].startswith("-"):  # data fetch, data list
            for action in parser._subparsers._group_actions:
                parser = action.choices.get(rest[0], parser)
        options = {o for action in parser._actions for o in action.option_strings}
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(rest)):
            if flag not in options:
                missing.append(f"{line}: {flag}")
    assert missing == []


def test_every_configuration_key_is_documented_and_in_the_generated_reference(old, sources):
    text, _ = sources
    assert [k for k in old["config_keys"] if k not in text] == []
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from agnostophobia_refs import config_rows
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    from agnostophobia.training.config import ExperimentConfig, TrainConfig

    generated = {row[0] for row in config_rows(TrainConfig)} | {row[0] for row in config_rows(ExperimentConfig)}
    fields = set(_config_fields())
    assert [k for k in old["config_keys"] if k in fields and k not in generated] == []
    # the generated rows are the declared fields, each with a meaning
    assert generated >= fields
    assert [row[0] for row in config_rows(TrainConfig) if not row[5]] == []


# Rows of the old README reworded on purpose since (a path as link text became the page's name,
# an internal reference left the user guide): each old row with the row that now says the same,
# links written as their text (normalized() compares text only).
REWORDED = {
    "| the same on the authors' data preparation (inversions, CIFAR transpose/BGR, bicubic; [docs/data.md]"
    "(docs/data.md#the-authors-preparation-preprocessing-authors)) |":
    "| the same on the authors' data preparation (inversions, CIFAR transpose/BGR, bicubic; Data) |",  # a link
    "| eager `OpenSetClassifier` (the run's bf16; fp32 by default since issue 22) |":
    "| eager `OpenSetClassifier` (the run's bf16; fp32 is the default now) |",
    # the commit went to the run's entry in docs/provenance.md (a user page names no commit)
    "| Tables 1, 2 (LeNet++ half), Figs. 1, 2, Fig. 1d OpenMax | `agnostophobia reproduce lenet++ --budget paper` | "
    "GPU, the authors' 70 epochs: 497 s wall for one seed on one H100, 4 runs at once (measured, commit 45e9cf7; "
    "[labels](#the-paper-budget-on-a-gpu)) |":
    "| Tables 1, 2 (LeNet++ half), Figs. 1, 2, Fig. 1d OpenMax | `agnostophobia reproduce lenet++ --budget paper` | "
    "GPU, the authors' 70 epochs: 497 s wall for one seed on one H100, 4 runs at once (measured; run "
    "`paper-h100`) |",  # a link to the run's entry
}


def reworded(row: str) -> str:
    for before, after in REWORDED.items():
        if row.startswith(before):
            return after + row[len(before):]
    return row


@pytest.mark.parametrize("index", range(19))
def test_every_table_row_is_in_the_documentation(old, sources, index):
    _, lines = sources
    table = old["tables"][index]
    assert [row for row in table if normalized(reworded(row)) not in lines] == [], table[0]
