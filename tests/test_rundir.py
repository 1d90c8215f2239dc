"""The run directory as one object (``agnostophobia.rundir``): the on-disk layout old runs have,
the one write every writer of a run uses, and no run path spelled anywhere else."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

import agnostophobia
from agnostophobia import _journal, rundir
from agnostophobia.rundir import ModelDir, RecordError, RunDir, write_run_file
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
    assert [model for _, _, model in run.models()] == [run.model(0, "entropic"), run.model(1, "softmax")]


def test_a_model_folder_is_converted_once_and_names_its_run_and_its_siblings(tmp_path):
    """A folder a user names becomes the ModelDir the layers pass (a ModelDir stays itself); it
    reads as its path in messages, and knows its run, its approach and the same seed's others."""
    model = RunDir(tmp_path).model(2, "entropic-ft")
    assert ModelDir.at(model) is model
    assert ModelDir.at(str(model.path)) == ModelDir.at(model.path) == model
    assert str(model) == os.fspath(model) == str(tmp_path / "seed2" / "entropic-ft")
    assert model.run == RunDir(tmp_path) and model.approach == "entropic-ft"
    assert model.sibling("entropic") == RunDir(tmp_path).model(2, "entropic")


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
    assert message.startswith(f"{run.root / 'seed0'}: is a symbolic link") and "\n" not in message  # the link named
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


def test_a_run_folder_reached_through_a_link_is_written(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    run = RunDir(tmp_path / "alias")  # the run folder itself reached through a link
    run.write(run.model_dir(0, "softmax") / "x.json", write_text("1"))
    assert (real / "seed0" / "softmax" / "x.json").read_text() == "1"


def test_a_link_below_the_run_folder_is_refused_even_when_it_stays_inside(tmp_path):
    real = tmp_path / "real"
    (real / "models").mkdir(parents=True)
    os.symlink(real / "models", real / "seed0")  # a link that stays inside the run: still not the run's own
    run = RunDir(real)
    with pytest.raises(RecordError, match="seed0: is a symbolic link"):
        run.write(run.model_dir(0, "softmax") / "x.json", write_text("1"))
    assert list((real / "models").iterdir()) == []


# ------------------------------------------------------------------ no run path spelled elsewhere
#: The names of the constants that name a model's files (``rundir.BEST``, ...).
MODEL_FILE_CONSTANTS = {key for key, value in vars(rundir).items() if key.isupper() and value in rundir.MODEL_FILES}


def _model_file_name(node) -> bool:
    """Whether ``node`` names a model's file: ``BEST`` or ``rundir.BEST`` (a path ``... / BEST`` composed by hand)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name in MODEL_FILE_CONSTANTS


def run_path_spellings(path: Path):
    """``line: text`` of each string in ``path`` (docstrings aside) that is a run file's name (or a
    path ending in one), of each path composed from a model file's constant (``model_dir / BEST``:
    :class:`~agnostophobia.rundir.ModelDir` names them), and of each f-string that builds a seed
    folder's name."""
    names = {value for key, value in vars(rundir).items() if key.isupper() and isinstance(value, str)}
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value in names or (" " not in node.value and any(node.value.endswith("/" + name) for name in names)):
                yield f"{node.lineno}: {node.value!r}"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _model_file_name(node.right):
            yield f"{node.lineno}: composed {ast.unparse(node)}"
        elif isinstance(node, ast.JoinedStr) and any(
                isinstance(part, ast.Constant) and str(part.value).endswith("seed")
                and isinstance(following, ast.FormattedValue) for part, following in zip(node.values, node.values[1:])):
            yield f"{node.lineno}: f-string {ast.unparse(node)}"


def test_no_run_path_is_spelled_outside_the_run_directory_object():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in NOT_YET_CONVERTED or path in (Path(rundir.__file__), Path(_journal.__file__)):
            continue
        offenders += [f"{module}:{spelling}" for spelling in run_path_spellings(path)]
    assert offenders == []


def test_the_spelling_check_finds_names_seed_folders_and_globs(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""metrics.json in a docstring is prose."""\n'
                      'a = "metrics.json"\nb = f"seed{n}/x"\nc = "seed*/*/last.pt"\nd = "report of metrics.json"\n'
                      'e = f"{out}/seed{n}"\nf = model_dir / BEST\ng = Path(d) / rundir.VAL_OUTPUTS\n')
    assert list(run_path_spellings(source)) == ["2: 'metrics.json'", "3: f-string f'seed{n}/x'",
                                                "4: 'seed*/*/last.pt'", "6: f-string f'{out}/seed{n}'",
                                                "7: composed model_dir / BEST", "8: composed Path(d) / rundir.VAL_OUTPUTS"]


# ------------------------------------------------------------------------ all or nothing
def a_run_with_results(tmp_path):
    """A run holding a report and one model's outputs: the last good result."""
    run = RunDir(tmp_path / "run")
    run.write(run.report, write_text("good report"))
    run.write(run.model_dir(0, "softmax") / "outputs.npz", write_text("good outputs"))
    return run


def contents(run):
    """Every file of the run (the lock aside) by its path, with its bytes."""
    return {p.relative_to(run.root).as_posix(): p.read_bytes() for p in sorted(run.root.rglob("*"))
            if p.is_file() and p.name != rundir.LOCK}


def test_a_command_stopped_part_way_leaves_the_last_good_result_byte_for_byte(tmp_path):
    run = a_run_with_results(tmp_path)
    before = contents(run)
    with pytest.raises(OSError, match="No space"):
        with run.all_or_nothing():
            run.write(run.model_dir(0, "softmax") / "outputs.npz", write_text("new outputs"))
            run.write(run.figures / "new.png", write_text("a new figure"))
            run.write(run.metrics, write_text("new metrics"))
            raise OSError(28, "No space left on device", str(run.report))
    assert contents(run) == before  # replaced files back, new ones gone, no undo record left
    assert not (run.root / rundir.UNDO).exists()


def test_a_finished_command_keeps_what_it_wrote_and_no_undo_record(tmp_path):
    run = a_run_with_results(tmp_path)
    with run.all_or_nothing():
        run.write(run.report, write_text("new report"))
        run.write(run.report, write_text("newer report"))  # a second write of one file in one command
        run.write(run.metrics, write_text("metrics"))
    assert contents(run) == {"report.md": b"newer report", "metrics.json": b"metrics",
                             "seed0/softmax/outputs.npz": b"good outputs"}
    assert {p.name for p in run.root.iterdir()} == {"report.md", "metrics.json", "seed0"}


def test_a_killed_commands_changes_are_undone_by_the_next_command_that_locks_the_run(tmp_path):
    from agnostophobia._runlock import run_lock
    run = a_run_with_results(tmp_path)
    before = contents(run)
    block = run.all_or_nothing()
    block.__enter__()
    run.write(run.report, write_text("half of a new result"))
    run.write(run.metrics, write_text("new metrics"))
    rundir._UNDO_OPEN.clear()  # the process dies here: no exit from the block runs
    assert contents(run)["report.md"] == b"half of a new result"
    with run_lock(run.root):
        pass
    assert contents(run) == before and not (run.root / rundir.UNDO).exists()


def test_a_write_that_fails_inside_leaves_the_file_its_own(tmp_path):
    """A cache's write that a command does without (a full disk): the old file keeps no second
    name, so the command may write it again."""
    run = a_run_with_results(tmp_path)
    with run.all_or_nothing():
        def full(tmp):
            raise OSError(28, "No space left on device", tmp)
        with pytest.raises(OSError):
            run.write(run.report, full)
        assert os.stat(run.report).st_nlink == 1
        run.write(run.report, write_text("written after all"))
    assert run.report.read_text() == "written after all"


def test_what_a_forked_process_writes_is_undone_too(tmp_path):
    """Figures are drawn in forked processes: their writes belong to the command's."""
    run = a_run_with_results(tmp_path)
    before = contents(run)
    with pytest.raises(RuntimeError):
        with run.all_or_nothing():
            pid = os.fork()
            if pid == 0:  # the child writes a new figure and replaces the report, then leaves at once
                try:
                    run.write(run.figures / "f.png", write_text("figure"))
                    run.write(run.report, write_text("child's report"))
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            assert (run.figures / "f.png").exists()
            raise RuntimeError("a later step fails")
    assert contents(run) == before


def test_an_undo_folder_planted_as_a_link_is_never_written_through(tmp_path):
    run = a_run_with_results(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run.root / rundir.UNDO).symlink_to(outside)
    with pytest.raises(RecordError, match="undo folder"):
        with run.all_or_nothing():
            run.write(run.report, write_text("new"))
    assert list(outside.iterdir()) == [] and run.report.read_text() == "good report"


def test_a_model_folder_names_every_file_a_model_holds(tmp_path):
    run = RunDir(tmp_path)
    model = run.model(2, "entropic")
    assert model.path == tmp_path / "seed2" / "entropic"
    named = [model.best, model.last, model.history, model.outputs, model.fit_outputs, model.val_outputs, model.scores,
             model.config_scores, model.fitted, model.last_layer, model.fine_tune_start]
    assert sorted(p.name for p in named) == sorted(rundir.MODEL_FILES)
    assert all(model.file(p.name) == p for p in named)
    assert run.checkpoint(2, "entropic", "last") == model.last and run.outputs(2, "entropic") == model.outputs
    with pytest.raises(ValueError, match="not a model file"):
        model.file("metrics.json")  # a record of the run, not of a model
