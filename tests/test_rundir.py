"""The run directory as one object (``agnostophobia.rundir``): the on-disk layout old runs have,
the one write every writer of a run uses, and no run path spelled anywhere else."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

import agnostophobia
from agnostophobia import rundir
from agnostophobia.rundir import RecordError, RunDir, write_run_file
from agnostophobia.training.outputs import save_outputs

PACKAGE = Path(agnostophobia.__file__).parent
#: Modules that still spell run paths, each until a named change converts them.
NOT_YET_CONVERTED: set = set()  # every module of src/ names run files through rundir


def write_text(text):
    return lambda tmp: Path(tmp).write_text(text)


def outputs():
    return {"known": {"logits": np.zeros((2, 3), np.float32), "features": np.zeros((2, 2), np.float32),
                      "labels": np.array([0, 1])}}


# ------------------------------------------------------------------------------- the layout
def test_the_layout_is_the_one_old_runs_have(tmp_path):
    """The names as runs made before this object have them on disk (a changed name would
    leave every old run unreadable)."""
    run = RunDir(tmp_path)
    assert {name: getattr(run, name).relative_to(tmp_path).as_posix() for name in
            ("config", "run_meta", "calibration", "tuned_settings", "timings", "wall_time", "classes", "data_notes",
             "preprocessing_notes", "data_fetched", "metrics", "report", "figures")} == {
        "config": "config.yaml", "run_meta": "run_meta.json", "calibration": "calibration.json",
        "tuned_settings": "detector_settings.json", "timings": "timings.json", "wall_time": "wall_time.json",
        "classes": "classes.json", "data_notes": "data_notes.json", "preprocessing_notes": "preprocessing_notes.json",
        "data_fetched": "data_fetched.json", "metrics": "metrics.json", "report": "report.md", "figures": "figures"}
    assert run.model_dir(3, "entropic") == tmp_path / "seed3" / "entropic"
    assert run.checkpoint(0, "softmax") == tmp_path / "seed0" / "softmax" / "best.pt"
    assert run.checkpoint(0, "softmax", "last") == tmp_path / "seed0" / "softmax" / "last.pt"
    assert run.outputs(1, "softmax") == tmp_path / "seed1" / "softmax" / "outputs.npz"
    assert RunDir.run_key(2, "objectosphere") == "seed2/objectosphere"
    assert (rundir.FIT_OUTPUTS, rundir.VAL_OUTPUTS, rundir.SCORES_FILE, rundir.CONFIG_SCORES_FILE,
            rundir.FITTED_FILE, rundir.HISTORY) == ("fit_outputs.npz", "val_outputs.npz", "detector_scores.npz",
                                                   "detector_scores_config.npz", "fitted_detectors.npz", "metrics.csv")


def test_models_and_started_trainings_are_found_where_training_leaves_them(tmp_path):
    run = RunDir(tmp_path)
    for seed, approach in ((1, "softmax"), (0, "entropic")):
        save_outputs(run.outputs(seed, approach), outputs())
    run.checkpoint(0, "entropic", "last").write_bytes(b"")
    assert [(s, a) for s, a, _ in run.models()] == [(0, "entropic"), (1, "softmax")]
    assert run.last_checkpoints() == [tmp_path / "seed0" / "entropic" / "last.pt"]


def test_the_run_holding_a_file_is_found_from_its_path(tmp_path):
    assert RunDir.holding(tmp_path / "seed0" / "softmax" / "outputs.npz") == RunDir(tmp_path)
    assert RunDir.holding(tmp_path / "metrics.json") == RunDir(tmp_path)


# ------------------------------------------------------------------------------- the write
def test_a_run_file_is_written_whole(tmp_path):
    run = RunDir(tmp_path)
    run.write(run.metrics, write_text("{}"))
    assert run.metrics.read_text() == "{}"
    assert os.listdir(tmp_path) == ["metrics.json"]  # no temporary left beside it


def test_a_file_outside_the_run_is_not_one_of_its_files(tmp_path):
    with pytest.raises(RecordError, match=r"elsewhere\.json: not a file of the run"):
        RunDir(tmp_path / "run").write(tmp_path / "elsewhere.json", write_text("{}"))
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_seed_folder_linked_out_of_the_run_is_not_written_through(tmp_path):
    outside = tmp_path / "other"
    (outside / "softmax").mkdir(parents=True)
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    os.symlink(outside, run.root / "seed0")
    with pytest.raises(RecordError) as error:
        save_outputs(run.outputs(0, "softmax"), outputs())  # a writer of the run: through RunDir.write
    message = str(error.value)
    assert message.startswith(f"{run.outputs(0, 'softmax')}: refusing to write") and "\n" not in message
    assert str(outside / "softmax" / "outputs.npz") in message
    assert os.listdir(outside / "softmax") == []


def test_a_record_linked_out_of_the_run_is_left_as_it_is(tmp_path):
    outside = tmp_path / "precious.json"
    outside.write_text("keep")
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    os.symlink(outside, run.metrics)
    with pytest.raises(RecordError, match="metrics.json: refusing to write"):
        write_run_file(run.metrics, write_text("{}"))
    assert outside.read_text() == "keep" and run.metrics.is_symlink()


def test_links_inside_the_run_and_a_linked_run_folder_are_written(tmp_path):
    real = tmp_path / "real"
    (real / "models").mkdir(parents=True)
    os.symlink(real, tmp_path / "alias")
    run = RunDir(tmp_path / "alias")  # the run folder itself reached through a link
    os.symlink(real / "models", real / "seed0")  # a link that stays inside the run
    run.write(run.model_dir(0, "softmax") / "x.json", write_text("1"))
    assert (real / "models" / "softmax" / "x.json").read_text() == "1"


# ------------------------------------------------------------------ no run path spelled elsewhere
def run_path_spellings(path: Path):
    """``line: text`` of each string in ``path`` (docstrings aside) that is a run file's name (or a
    path ending in one), and of each f-string that builds a seed folder's name."""
    names = {value for key, value in vars(rundir).items() if key.isupper() and isinstance(value, str)}
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value in names or (" " not in node.value and any(node.value.endswith("/" + name) for name in names)):
                yield f"{node.lineno}: {node.value!r}"
        elif isinstance(node, ast.JoinedStr) and any(
                isinstance(part, ast.Constant) and str(part.value).endswith("seed")
                and isinstance(following, ast.FormattedValue) for part, following in zip(node.values, node.values[1:])):
            yield f"{node.lineno}: f-string {ast.unparse(node)}"


def test_no_run_path_is_spelled_outside_the_run_directory_object():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in NOT_YET_CONVERTED or path == Path(rundir.__file__):
            continue
        offenders += [f"{module}:{spelling}" for spelling in run_path_spellings(path)]
    assert offenders == []


def test_the_spelling_check_finds_names_seed_folders_and_globs(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""metrics.json in a docstring is prose."""\n'
                      'a = "metrics.json"\nb = f"seed{n}/x"\nc = "seed*/*/last.pt"\nd = "report of metrics.json"\n'
                      'e = f"{out}/seed{n}"\n')
    assert list(run_path_spellings(source)) == ["2: 'metrics.json'", "3: f-string f'seed{n}/x'",
                                                "4: 'seed*/*/last.pt'", "6: f-string f'{out}/seed{n}'"]
