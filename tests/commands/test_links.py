"""No write follows a link out of a run: the lock, records, caches and figures of a run are
written only where they are the run's own regular files. A symbolic or hard link planted in
a run (as its ``.lock``, a record, the ``figures`` folder, a model's ``val_outputs.npz``) is
refused in one line naming it, and the file it points to is left byte for byte; every write a
command makes into a run goes through the one writer (``RunDir.write`` / ``RunDir.open_in_place``).
Links a user makes on purpose to the data or to a whole run keep working."""
from __future__ import annotations

import builtins
import os
import shutil
from pathlib import Path

import pytest
from reliability_table import proves
from runs import command_area, run_main, snapshot, write_config

from agnostophobia.rundir import RunDir


@pytest.fixture(scope="module")
def area(calibrated, real_data_dir, tmp_path_factory):
    """A calibrated copy of the tiny run, an unknown set, an image and the tiny config."""
    area = command_area(tmp_path_factory.mktemp("links"), calibrated, real_data_dir)
    write_config(area / "one-epoch.yaml", epochs=1, approaches=["softmax"],
                 protocol_limits={"max_known_train": 32, "max_unknown_train": 8, "max_val": 16, "max_test_per_set": 16})
    return area


@pytest.fixture
def run(area, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(area / "base", copy, symlinks=True)
    return copy


COMMANDS = {  # name -> argv on (run, area, tmp_path); each reads or writes the run under its lock
    "calibrate": lambda run, area, tmp: ["calibrate", run, "--fpr", "0.2"],
    "tune-detectors": lambda run, area, tmp: ["tune-detectors", run, "--fpr", "0.5", "--detector", "gen"],
    "evaluate-unknowns": lambda run, area, tmp: ["evaluate", run, "--unknowns", area / "extra.npz"],
    "plot": lambda run, area, tmp: ["plot", run],
    "predict": lambda run, area, tmp: ["predict", run, area / "digit.png"],
    "export": lambda run, area, tmp: ["export", run, "--format", "torchscript", "--out", tmp / "model.pt"],
}


def plant(link: Path, how: str, outside: Path, run: Path) -> Path:
    """Replace ``link`` by a link of kind ``how``; returns the file the link reaches."""
    link.unlink(missing_ok=True)
    target = {"symlink-outside": outside, "dangling": outside.with_name("created-by-the-link"),
              "hardlink-outside": outside, "symlink-inside": run / "seed0" / "softmax" / "best.pt",
              "hardlink-inside": run / "config.yaml"}[how]
    (os.link if how.startswith("hardlink") else os.symlink)(target, link)
    return target


def without_lock(files: dict) -> dict:
    """A run's snapshot less its lock file (every locking command empties it again)."""
    return {path: content for path, content in files.items() if path.name != ".lock"}


def refused_naming(code, err, name) -> None:
    assert code == 1 and len(err) == 1 and name in err[0], err


# ------------------------------------------------------------------ the lock
@proves("links", "a `.lock` linked (symbolic or hard) to a file outside or inside the run is refused; "
                 "the file it reaches is unchanged, and a dangling one creates nothing")
@pytest.mark.parametrize("how", ["symlink-outside", "dangling", "hardlink-outside", "symlink-inside",
                                 "hardlink-inside"])
def test_a_lock_linked_to_another_file_is_refused_and_the_file_kept(run, area, tmp_path, capsys, how):
    outside = tmp_path / "precious.txt"
    outside.write_text("the user's own file")
    target = plant(run / ".lock", how, outside, run)
    before, kept = snapshot(run), target.read_bytes() if target.exists() else None
    code, _, err = run_main(COMMANDS["calibrate"](run, area, tmp_path), capsys)
    refused_naming(code, err, ".lock")
    assert (target.read_bytes() if target.exists() else None) == kept
    assert snapshot(run) == before


@proves("links", "every command that locks a run (calibrate, tune-detectors, evaluate, plot, predict, export) "
                 "refuses a `.lock` that is a symbolic link, and creates or empties nothing outside the run")
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("how", ["symlink-outside", "dangling"])
def test_every_locking_command_refuses_a_linked_lock(run, area, tmp_path, capsys, command, how):
    outside = tmp_path / "precious.txt"
    outside.write_text("the user's own file")
    target = plant(run / ".lock", how, outside, run)
    code, _, err = run_main(COMMANDS[command](run, area, tmp_path), capsys)
    refused_naming(code, err, ".lock")
    assert outside.read_text() == "the user's own file" and (how != "dangling" or not target.exists())


def test_train_resume_refuses_a_linked_lock(run, area, tiny_config, real_data_dir, tmp_path, capsys):
    outside = tmp_path / "precious.txt"
    outside.write_text("the user's own file")
    plant(run / ".lock", "symlink-outside", outside, run)
    code, _, err = run_main(["train", tiny_config, "--out", run, "--resume", "--no-progress", "--data-dir",
                             real_data_dir], capsys)
    refused_naming(code, err, ".lock")
    assert outside.read_text() == "the user's own file"


# ------------------------------------------------------------------ the undo journal
def undo_new_absolute(run, outside):
    (run / ".undo").mkdir()
    os.symlink(outside, run / ".undo" / "new")


def undo_new_relative(run, outside):
    (run / ".undo").mkdir()
    os.symlink(os.path.relpath(outside, run / ".undo"), run / ".undo" / "new")


def undo_old_folder(run, outside):
    (run / ".undo").mkdir()
    os.symlink(outside, run / ".undo" / "old")


def undo_old_config(run, outside):
    (run / ".undo" / "old").mkdir(parents=True)
    os.symlink(outside / "config.yaml", run / ".undo" / "old" / "config.yaml")


#: Round six's probe on ed12296, each by the command it used: the first two emptied the outside
#: folder and removed the run's config.yaml; the third moved the user's files into the run; the
#: last replaced the run's config by the link. (exit 0 each time)
UNDO_PLANTS = {"new-absolute": (undo_new_absolute, "calibrate"), "new-relative": (undo_new_relative, "tune-detectors"),
               "old-folder": (undo_old_folder, "compare"), "old-config": (undo_old_config, "calibrate")}


@proves("links", "links planted under a run's undo folder (`.undo/new`, `.undo/old`, `.undo/old/config.yaml`) "
                 "are refused in one line by calibrate, tune-detectors and compare; the user's folder they reach and "
                 "the run are unchanged")
@pytest.mark.parametrize("plant", UNDO_PLANTS)
def test_an_undo_folder_with_planted_links_is_refused_and_nothing_moves(run, area, tmp_path, capsys, plant):
    outside = tmp_path / "OUTSIDE" / "dir"
    outside.mkdir(parents=True)
    (outside / "keep.txt").write_text("keep")
    (outside / "config.yaml").write_text("mine")
    how, command = UNDO_PLANTS[plant]
    how(run, outside)
    before, kept = without_lock(snapshot(run)), snapshot(outside)
    argv = WRITING[command][0](run, area, tmp_path)
    code, _, err = run_main(argv, capsys)
    refused_naming(code, err, ".undo")
    assert snapshot(outside) == kept and without_lock(snapshot(run)) == before


# ------------------------------------------------------------------ records, caches, figures
@proves("links", "a record, cache or model file replaced by a symbolic or hard link is refused before the "
                 "command writes it; the file the link reaches is unchanged")
@pytest.mark.parametrize("name, command", [("calibration.json", "calibrate"), ("metrics.json", "evaluate-unknowns"),
                                           ("seed0/softmax/detector_scores.npz", "evaluate-unknowns"),
                                           ("seed0/entropic/fitted_detectors.npz", "evaluate-unknowns"),
                                           ("detector_settings.json", "tune-detectors")])
@pytest.mark.parametrize("how", ["symlink-outside", "hardlink-outside"])
def test_a_linked_record_is_refused_before_it_is_written(run, area, tmp_path, capsys, name, command, how):
    outside = tmp_path / "precious.txt"
    outside.write_text("the user's own file")
    plant(run / name, how, outside, run)
    before = without_lock(snapshot(run))
    code, _, err = run_main(COMMANDS[command](run, area, tmp_path), capsys)
    refused_naming(code, err, Path(name).name)
    assert outside.read_text() == "the user's own file"
    assert without_lock(snapshot(run)) == before  # refused before the first write (evaluate wrote outputs first)


@proves("links", "a FIFO in the place of a run record or model file (calibration.json, metrics.json, "
                 "detector_settings.json, val_outputs.npz, detector_scores.npz) is refused in one line naming it; "
                 "no command blocks on it")
@pytest.mark.parametrize("name, command", [("calibration.json", "calibrate"), ("calibration.json", "predict"),
                                           ("metrics.json", "evaluate-unknowns"),
                                           ("detector_settings.json", "tune-detectors"),
                                           ("seed0/softmax/val_outputs.npz", "calibrate"),
                                           ("seed0/softmax/val_outputs.npz", "predict"),
                                           ("seed0/softmax/detector_scores.npz", "evaluate-unknowns")])
def test_a_fifo_as_a_run_record_is_refused_not_waited_on(run, area, tmp_path, capsys, name, command):
    import signal

    (run / name).unlink(missing_ok=True)
    os.mkfifo(run / name)
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(120)  # a command blocked on the FIFO is interrupted, and fails the test
    try:
        code, _, err = run_main(COMMANDS[command](run, area, tmp_path), capsys)
    finally:
        signal.alarm(0)
    assert code == 1 and len(err) == 1 and name in err[0] and "FIFO" in err[0], err
    assert (run / name).is_fifo()


@proves("links", "a `figures` folder replaced by a link out of the run: `plot` and `evaluate` refuse, "
                 "no figure is written outside the run")
@pytest.mark.parametrize("command", ["plot", "evaluate"])
def test_a_figures_folder_linked_out_of_the_run_gets_no_figure(run, area, tmp_path, capsys, command):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(run / "figures")
    (run / "figures").symlink_to(elsewhere)
    code, _, err = run_main([command, run], capsys)
    refused_naming(code, err, "figures")
    assert list(elsewhere.iterdir()) == []


@proves("links", "one figure file linked out of the run: `plot` refuses before it draws any figure, so the "
                 "run's figures stay as they were")
def test_plot_checks_every_figure_file_before_it_draws_the_first(run, area, tmp_path, capsys):
    figures = sorted((run / "figures").glob("*.png"))
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"the user's")
    figures[-1].unlink()
    figures[-1].symlink_to(outside)
    before = snapshot(run)
    code, _, err = run_main(["plot", run], capsys)
    refused_naming(code, err, figures[-1].name)
    assert snapshot(run) == before and outside.read_bytes() == b"the user's"


@proves("links", "a model's `val_outputs.npz` or `outputs.npz` linked (symbolic or hard) to another "
                 "approach's is refused by `calibrate` and `predict`, not read as this model's")
@pytest.mark.parametrize("name", ["val_outputs.npz", "outputs.npz"])
@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symlink", "hardlink"])
@pytest.mark.parametrize("command", ["calibrate", "predict"])
def test_a_model_file_linked_to_another_models_is_refused(run, area, tmp_path, capsys, name, link, command):
    mine = run / "seed0" / "softmax" / name
    mine.unlink()
    link(run / "seed0" / "entropic" / name, mine)
    before = snapshot(run)
    argv = COMMANDS[command](run, area, tmp_path) + (["--approach", "softmax"] if command == "predict" else [])
    code, _, err = run_main(argv, capsys)
    refused_naming(code, err, name)
    assert snapshot(run) == before


# ------------------------------------------------------------------ one writer
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@pytest.fixture
def traced_writes(monkeypatch):
    """Every file opened for writing and every rename target, with whether the one writer
    (``RunDir.write`` / ``RunDir.open_in_place``, or the run's undo record) was on the stack: ``[(path, through_writer)]``."""
    writes, depth = [], [0]

    def through(function):
        def wrapper(*args, **kwargs):
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
        return wrapper

    monkeypatch.setattr(RunDir, "write", through(RunDir.write))
    monkeypatch.setattr(RunDir, "open_in_place", through(RunDir.open_in_place))
    # the undo record of an all-or-nothing command: written, put back and dropped by the run object alone
    monkeypatch.setattr(RunDir, "undo_unfinished", through(RunDir.undo_unfinished))
    monkeypatch.setattr(RunDir, "_drop_undo", through(RunDir._drop_undo))
    real_open, real_os_open, real_replace = builtins.open, os.open, os.replace

    def traced_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
            writes.append((os.path.abspath(file), depth[0] > 0))
        return real_open(file, mode, *args, **kwargs)

    def traced_os_open(path, flags, *args, **kwargs):
        if flags & WRITE_FLAGS:
            writes.append((os.path.abspath(path), depth[0] > 0))
        return real_os_open(path, flags, *args, **kwargs)

    def traced_replace(src, dst, *args, **kwargs):
        writes.append((os.path.abspath(dst), depth[0] > 0))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", traced_open)
    monkeypatch.setattr(os, "open", traced_os_open)
    monkeypatch.setattr(os, "replace", traced_replace)
    return writes


WRITING = {  # commands that write into the run, and a file each must write
    "calibrate": (lambda run, area, tmp: ["calibrate", run, "--fpr", "0.2"], "calibration.json"),
    "evaluate-unknowns": (lambda run, area, tmp: ["evaluate", run, "--unknowns", area / "extra.npz",
                                                   ], "metrics.json"),
    "plot": (lambda run, area, tmp: ["plot", run], ".png"),
    "tune-detectors": (lambda run, area, tmp: ["tune-detectors", run, "--fpr", "0.5", "--detector", "gen"],
                       "detector_settings.json"),
    "compare": (lambda run, area, tmp: ["compare", run, "--fpr", "0.5"], "comparison.json"),
    "calibrate-best": (lambda run, area, tmp: ["calibrate", run, "--fpr", "0.5", "--detector", "best", "--approach",
                                               "softmax", "--approach", "entropic"], "calibration.json"),
    "export": (lambda run, area, tmp: ["export", run, "--format", "torchscript", "--fpr", "0.5", "--out",
                                       tmp / "model.pt"], "calibration.json"),
    "predict-out": (lambda run, area, tmp: ["predict", run, area / "digit.png", "--fpr", "0.5", "--out",
                                            tmp / "rows.csv"], "calibration.json"),
    "train": (lambda run, area, tmp: ["train", area / "one-epoch.yaml", "--out", tmp / "fresh", "--no-progress"],
              "best.pt"),
}
#: Traced in ``make test-slow`` (each takes seconds more than the others; their writes are the same writer's).
SLOW_TRACES = ("compare", "export")


@proves("links", "every file a command writes into a run goes through the one writer, which refuses links "
                 "(traced: `open`, `os.open`, `os.replace` during train, calibrate, calibrate --detector best, "
                 "compare, evaluate, export, plot, predict --out, tune-detectors)")
@pytest.mark.parametrize("command", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_TRACES else name
                                     for name in WRITING])
@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_every_write_into_a_run_goes_through_the_one_writer(run, area, tmp_path, capsys, traced_writes, command,
                                                            monkeypatch):
    import agnostophobia.plotting.run as plotting

    monkeypatch.setattr(plotting, "available_cores", lambda: 1)  # figures drawn here, where the trace sees them
    argv, expected = WRITING[command]
    if command == "plot":
        shutil.rmtree(run / "figures")
    code, _, err = run_main(argv(run, area, tmp_path), capsys)
    assert code == 0, err
    root = os.path.realpath(tmp_path / "fresh" if command == "train" else run)
    inside = [(path, ok) for path, ok in traced_writes if os.path.realpath(path).startswith(root + os.sep)]
    assert any(path.endswith(expected) for path, _ in inside), inside  # the trace saw the command's writes
    assert [path for path, ok in inside if not ok] == []


# ------------------------------------------------------------------ links made on purpose
@proves("links", "links a user made on purpose keep working: a run folder reached through a link is "
                 "calibrated and evaluated on a further unknown set")
def test_a_whole_run_reached_through_a_link_is_written(run, area, tmp_path, capsys):
    (tmp_path / "linked").symlink_to(run)
    for argv in (["calibrate", tmp_path / "linked", "--fpr", "0.2"],
                 ["evaluate", tmp_path / "linked", "--unknowns", area / "extra.npz"]):
        code, _, err = run_main(argv, capsys)
        assert code == 0, (argv, err)
