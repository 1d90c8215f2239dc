"""The undo journal (``_journal``): an unfinished command's changes are put back only where the
journal this project wrote records them, each verified first; whatever was planted under
``.undo`` (a link to a user's folder, a link at a kept file, a folder of files, a journal that is
not ours) is refused in one line, and nothing in the run or outside it changes.

Each planted case here reproduces a data loss of ed12296 (round six's probe): there, the next
command that locked the run followed ``.undo/new`` and ``.undo/old`` as it found them."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from reliability_table import proves

from agnostophobia import _journal, rundir
from agnostophobia._runlock import run_lock
from agnostophobia.rundir import RecordError, RunDir


def write_text(text):
    return lambda tmp: Path(tmp).write_text(text)


def tree_of(folder: Path) -> dict:
    """Every entry under ``folder`` (links as links) with its bytes or its target."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        found[key] = ("link", os.readlink(path)) if path.is_symlink() else (
            path.read_bytes() if path.is_file() else "folder")
    return found


@pytest.fixture
def run(tmp_path) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.write(run.config, write_text("config: mine\n"))
    run.write(run.report, write_text("good report"))
    run.write(run.model_dir(0, "softmax") / "outputs.npz", write_text("good outputs"))
    return run


@pytest.fixture
def outside(tmp_path) -> Path:
    """A user's folder beside the run, holding files named like the run's."""
    folder = tmp_path / "OUTSIDE" / "dir"
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("keep")
    (folder / "config.yaml").write_text("mine")
    return folder


def plant_new_link_absolute(run, outside):
    (run.root / ".undo").mkdir()
    os.symlink(outside, run.root / ".undo" / "new")


def plant_new_link_relative(run, outside):
    (run.root / ".undo").mkdir()
    os.symlink(os.path.relpath(outside, run.root / ".undo"), run.root / ".undo" / "new")


def plant_old_link_to_folder(run, outside):
    (run.root / ".undo").mkdir()
    os.symlink(outside, run.root / ".undo" / "old")


def plant_old_config_link(run, outside):
    (run.root / ".undo" / "old").mkdir(parents=True)
    os.symlink(outside / "config.yaml", run.root / ".undo" / "old" / "config.yaml")


def plant_undo_link(run, outside):
    os.symlink(outside, run.root / ".undo")


def plant_folder_of_files(run, outside):
    (run.root / ".undo" / "new").mkdir(parents=True)
    (run.root / ".undo" / "new" / "config.yaml").write_text("")


def plant_foreign_journal(run, outside):
    (run.root / ".undo" / "new").mkdir(parents=True)
    (run.root / ".undo" / "new" / "config.yaml").write_text("")
    (run.root / ".undo" / "journal").write_text('{"project": "someone else"}\n{"new": "config.yaml"}\n')


def plant_journal_naming_outside(run, outside):
    (run.root / ".undo").mkdir()
    header = json.dumps(_journal.HEADER)
    (run.root / ".undo" / "journal").write_text(f'{header}\n{{"new": "../OUTSIDE/dir/keep.txt"}}\n')


def plant_journal_with_link_at_kept(run, outside):
    (run.root / ".undo" / "old").mkdir(parents=True)
    header = json.dumps(_journal.HEADER)
    size = len("good report")
    (run.root / ".undo" / "journal").write_text(
        f'{header}\n{{"keep": "report.md", "size": {size}, "sha256": "0"}}\n')
    os.symlink(outside / "keep.txt", run.root / ".undo" / "old" / "report.md")


def plant_done_link(run, outside):
    os.symlink(outside, run.root / ".undo-done")


def plant_done_folder_of_files(run, outside):
    (run.root / ".undo-done").mkdir()
    (run.root / ".undo-done" / "notes.txt").write_text("a user's notes")


PLANTS = {name[len("plant_"):]: function for name, function in dict(globals()).items() if name.startswith("plant_")}


@proves("links", "anything planted under a run's undo folder (a link at `.undo`, `.undo/new`, `.undo/old` or a "
                 "kept file, a folder of files, a journal not this project's or naming a file outside) is refused "
                 "in one line by the next command that locks the run: nothing in the run or outside it changes")
@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_planted_undo_record_is_refused_and_nothing_changes(run, outside, plant):
    PLANTS[plant](run, outside)
    before_run, before_outside = tree_of(run.root), tree_of(outside.parent)
    with pytest.raises(RecordError) as error:
        with run_lock(run.root):
            pass
    message = str(error.value)
    assert "\n" not in message and str(run.root) in message
    assert tree_of(outside.parent) == before_outside
    assert {k: v for k, v in tree_of(run.root).items() if k != ".lock"} == \
        {k: v for k, v in before_run.items() if k != ".lock"}


_DEAD: list = []


def kill_inside(run: RunDir, *writes):
    """Start an all-or-nothing command, make ``writes`` ``(path, text)``, then die (no exit runs:
    the open block is kept for the session, as a block collected would run its exit)."""
    block = run.all_or_nothing()
    block.__enter__()
    for path, text in writes:
        run.write(path, write_text(text))
    rundir._UNDO_OPEN.clear()
    _DEAD.append(block)


def test_a_killed_command_is_undone_from_its_journal(run):
    before = tree_of(run.root)
    kill_inside(run, (run.report, "half"), (run.metrics, "new"), (run.figures / "f.png", "figure"))
    journal = (run.root / ".undo" / "journal").read_text().splitlines()
    assert json.loads(journal[0]) == _journal.HEADER and len(journal) == 7  # 3 names: keep/new + wrote each
    with run_lock(run.root):
        pass
    after = tree_of(run.root)
    after.pop(".lock")
    assert after == {**before, "figures": "folder"}  # the folder a figure was made in stays, empty


def test_a_file_changed_since_the_kill_is_not_overwritten(run):
    """The user edited the report after the kill: the journal no longer verifies, nothing is undone."""
    kill_inside(run, (run.report, "half"), (run.metrics, "new"))
    run.report.write_text("the user's own edit")
    with pytest.raises(RecordError, match=r"report\.md has changed since"):
        with run_lock(run.root):
            pass
    assert run.report.read_text() == "the user's own edit" and run.metrics.read_text() == "new"


def test_a_kept_version_altered_is_not_put_back(run):
    kill_inside(run, (run.report, "half"))
    kept = run.root / ".undo" / "old" / "report.md"
    kept.unlink()
    kept.write_text("something else")
    with pytest.raises(RecordError, match="not the version it recorded"):
        with run_lock(run.root):
            pass
    assert run.report.read_text() == "half"


def test_a_journal_cut_in_its_last_line_is_undone_to_its_last_whole_record(run):
    """A kill inside the append of a record: that change was never made, the rest is undone."""
    before = tree_of(run.root)
    kill_inside(run, (run.report, "half"))
    with open(run.root / ".undo" / "journal", "a") as journal:
        journal.write('{"new": "metr')
    with run_lock(run.root):
        pass
    after = tree_of(run.root)
    after.pop(".lock")
    assert after == before


@pytest.mark.parametrize("left", ["empty folder", "empty journal", "half a header"])
def test_a_command_killed_before_its_first_record_leaves_nothing_to_undo(run, left):
    before = tree_of(run.root)
    (run.root / ".undo").mkdir()
    if left != "empty folder":
        (run.root / ".undo" / "journal").write_text("" if left == "empty journal" else '{"project": "agnos')
    with run_lock(run.root):
        pass
    after = tree_of(run.root)
    after.pop(".lock")
    assert after == before


def test_a_finished_commands_leftover_journal_is_removed(run):
    with run.all_or_nothing():
        run.write(run.report, write_text("new"))
    (run.root / ".undo-done").mkdir()
    (run.root / ".undo-done" / "journal").write_text(json.dumps(_journal.HEADER) + "\n")
    with run_lock(run.root):
        pass
    assert not (run.root / ".undo-done").exists() and run.report.read_text() == "new"
