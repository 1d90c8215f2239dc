"""A command is finished by running it again (issue 31, item 2): killed at a kill point
(``write:<file name>``: the file's temporary copy is complete, not yet renamed) or stopped by a
full disk at the same point, ``evaluate --unknowns``, ``calibrate``, ``export``,
``tune-detectors`` and ``predict --out`` run again complete with the result of a run never
interrupted. One test per command kills it at the first and the last point of each kind of file
it writes, and fills the disk at its first and last point, each stop a rerun of the one before; the
sweeps (every point, each time it is reached; of the figures, which one writer draws, the first and
the last) start each point from a fresh copy. All are marked ``slow`` (make test-slow, CI)."""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from reliability_table import proves
from runs import run_cli

from agnostophobia._atomic import TMP_TAG
from agnostophobia._killpoints import DISK_FULL_ENV, POINTS_LOG_ENV
from agnostophobia.cli import main


@pytest.fixture(scope="module")
def area(calibrated, real_data_dir, tmp_path_factory):
    """A calibrated copy of the tiny run with its figures drawn, an unknown set and a folder of
    images: what each command starts from."""
    area = tmp_path_factory.mktemp("rerun")
    base = area / "base"
    shutil.copytree(calibrated, base)
    assert main(["evaluate", str(base)]) == 0
    digits = np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:16]
    np.savez(area / "extra.npz", x=digits)
    (area / "images").mkdir()
    for i, digit in enumerate(digits[:4]):
        Image.fromarray(digit).save(area / "images" / f"{i}.png")
    return area


COMMANDS = {  # name -> argv for (run, out folder, area)
    "evaluate-unknowns": lambda run, out, area: ["evaluate", run, "--unknowns", area / "extra.npz"],
    "calibrate": lambda run, out, area: ["calibrate", run, "--fpr", "0.5"],  # supported by 32 negatives: no warning
    "export": lambda run, out, area: ["export", run, "--format", "torchscript", "--out", out / "model.pt"],
    "tune-detectors": lambda run, out, area: ["tune-detectors", run, "--fpr", "0.5", "--detector", "knn", "gen"],  # 32 val. negatives
    "predict": lambda run, out, area: ["predict", run, area / "images", "--out", out / "rows.csv"],
}
#: Files whose bytes carry no result a rerun must reproduce bit for bit: figures (a drawing
#: library's metadata) and the exported archive (checked by loading it).
BY_PRESENCE = {".png", ".pdf", ".svg", ".pt"}


def result(folder: Path) -> dict:
    """What a command left in ``folder``: every file's content (an npz's arrays; a figure's presence)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name == ".lock":
            continue
        key = str(path.relative_to(folder))
        if path.suffix == ".npz":
            with np.load(path) as npz:
                found[key] = {name: npz[name].tobytes() for name in npz.files}
        elif path.suffix in BY_PRESENCE:
            found[key] = path.stat().st_size > 0
        else:
            found[key] = path.read_bytes()
    return found


def snapshot(folder: Path) -> dict:
    """Every file's bytes (the lock's aside): what the user had, byte for byte."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def fresh(area: Path, tmp_path: Path) -> tuple:
    run, out = tmp_path / "run", tmp_path / "out"
    shutil.copytree(area / "base", run)
    out.mkdir()
    return run, out


_REFERENCES: dict = {}


def reference(command: str, area: Path, tmp_path_factory) -> tuple:
    """(result of the run, result of the out folder, the kill points reached in order) of the
    command run once, never interrupted."""
    if command not in _REFERENCES:
        folder = tmp_path_factory.mktemp(f"reference-{command}")
        run, out = fresh(area, folder)
        points = folder / "points"
        os.environ[POINTS_LOG_ENV] = str(points)
        try:
            assert main([str(a) for a in COMMANDS[command](run, out, area)]) == 0
        finally:
            del os.environ[POINTS_LOG_ENV]
        reached = points.read_text().split() if points.exists() else []
        _REFERENCES[command] = (result(run), result(out), numbered(reached))
    return _REFERENCES[command]


def numbered(reached) -> list:
    """``name:K`` for the K-th time each point was reached, in order."""
    seen: dict = {}
    out = []
    for name in reached:
        seen[name] = seen.get(name, 0) + 1
        out.append(f"{name}:{seen[name]}")
    return out


def kind(point: str) -> str:
    """The kind of file a point writes: its name, or "figure" for every figure."""
    name = point.split(":")[1]
    return "figure" if Path(name).suffix in BY_PRESENCE - {".pt"} else name


def first_and_last_of_each_kind(points) -> list:
    chosen = []
    for k in dict.fromkeys(kind(p) for p in points):
        of_kind = [p for p in points if kind(p) == k]
        chosen += dict.fromkeys([of_kind[0], of_kind[-1]])
    return chosen


def check_finished(command, run, out, area, tmp_path_factory, rerun: bool = True):
    ref_run, ref_out, _ = reference(command, area, tmp_path_factory)
    if rerun:
        assert main([str(a) for a in COMMANDS[command](run, out, area)]) == 0  # the same command, again
    assert result(run) == ref_run and result(out) == ref_out
    assert not [p for p in [*run.rglob("*"), *out.rglob("*")] if TMP_TAG + "-" in p.name]
    if (out / "model.pt").exists():
        import torch
        torch.jit.load(str(out / "model.pt"))


def stopped_then_rerun(command, points, stop, area, tmp_path, tmp_path_factory):
    """Stopped (``stop(run, out, point)``) at each of ``points`` in turn, each stopped run a rerun
    of the one before, then run to the end: the result of a run never interrupted. A rerun may
    finish the command before it reaches the next point (work a killed run left done is not
    redone): the result is checked, and that point is taken from a fresh copy. A command that
    finishes from a fresh copy though stopped at the point (a full disk at a cache's write, which
    the command does without) must have the uninterrupted run's result, and nothing left behind."""
    copies = iter(range(len(points) + 1))
    run, out = fresh(area, tmp_path / str(next(copies)))
    is_fresh = True
    for point in points:
        if stop(run, out, point) == "finished":
            check_finished(command, run, out, area, tmp_path_factory, rerun=False)
            run, out = fresh(area, tmp_path / str(next(copies)))
            if is_fresh:
                continue  # it went on past the stop: its result is the one checked above
            assert stop(run, out, point) == "stopped", f"{point} is not reached from a fresh copy"
        is_fresh = False
    check_finished(command, run, out, area, tmp_path_factory)


def killed_then_rerun(command, points, area, tmp_path, tmp_path_factory):
    def kill(run, out, point):
        killed = run_cli(COMMANDS[command](run, out, area), kill_at=point)
        assert killed.returncode in (0, -signal.SIGKILL), f"{point}: {killed.stderr[-400:]}"
        return "stopped" if killed.returncode else "finished"
    stopped_then_rerun(command, points, kill, area, tmp_path, tmp_path_factory)


def full_disk_then_rerun(command, points, area, tmp_path, tmp_path_factory, monkeypatch):
    def fill(run, out, point):  # in its own process, as a user runs it (no state left from another run)
        before = snapshot(run)
        with monkeypatch.context() as patch:
            patch.setenv(DISK_FULL_ENV, point)
            stopped = run_cli(COMMANDS[command](run, out, area))
        if stopped.returncode == 0:
            return "finished"
        # (a figure process may add Matplotlib's notes about fonts missing on this machine)
        err = [line for line in stopped.stderr.strip().splitlines() if not line.startswith("findfont:")]
        assert stopped.returncode == 1 and len(err) == 1 and "No space left on device" in err[0], (point, err)
        assert "Traceback" not in err[0] and f"{TMP_TAG}-" not in err[0], (point, err)
        assert snapshot(run) == before, f"{point}: a refused command left the run changed"
        return "stopped"
    stopped_then_rerun(command, points, fill, area, tmp_path, tmp_path_factory)


def points_of(command, area, tmp_path_factory, every: bool) -> list:
    """Each point the command reaches (``every``; figures, all drawn by one writer: the first and the
    last), or the first and the last of each kind of file."""
    points = reference(command, area, tmp_path_factory)[2]
    if not every:
        return first_and_last_of_each_kind(points)
    figures = [p for p in points if kind(p) == "figure"]
    return [p for p in points if kind(p) != "figure" or p in (figures[0], figures[-1])]


# The points are known only once a reference has run: each test takes its command's list and
# goes through it (one test per command keeps the parametrisation free of a run at collection).
# The chained tests stop each run where the one before was stopped (a command pays about one full
# rerun); the sweeps start each point from a fresh copy.
@proves("kill", "evaluate --unknowns, calibrate, export, tune-detectors and predict --out, killed while writing, "
                 "are finished by running them again: the same result as an uninterrupted run, no temporary left")
@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("command", COMMANDS)
def test_a_killed_command_is_finished_by_running_it_again(command, area, tmp_path, tmp_path_factory):
    points = points_of(command, area, tmp_path_factory, every=False)
    killed_then_rerun(command, points, area, tmp_path, tmp_path_factory)


@proves("full disk", "the same commands stopped by a full disk leave the run byte for byte as it was (evaluate "
                      "puts back what it had replaced), and are finished by running them again once there is room")
@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_stopped_by_a_full_disk_is_finished_by_running_it_again(command, area, tmp_path, tmp_path_factory,
                                                                          monkeypatch):
    points = points_of(command, area, tmp_path_factory, every=False)
    full_disk_then_rerun(command, list(dict.fromkeys([points[0], points[-1]])), area, tmp_path, tmp_path_factory,
                         monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_kill_point_of_a_command_is_finished_by_running_it_again(command, area, tmp_path, tmp_path_factory):
    for i, point in enumerate(points_of(command, area, tmp_path_factory, every=True)):
        killed_then_rerun(command, [point], area, tmp_path / f"point{i}", tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_at_every_point_is_finished_by_running_it_again(command, area, tmp_path, tmp_path_factory,
                                                                    monkeypatch):
    for i, point in enumerate(points_of(command, area, tmp_path_factory, every=True)):
        full_disk_then_rerun(command, [point], area, tmp_path / f"point{i}", tmp_path_factory, monkeypatch)


@pytest.mark.parametrize("finished", [True, False])
def test_a_held_set_with_other_outputs_is_still_refused(area, tmp_path, capsys, finished):
    run, _ = fresh(area, tmp_path)
    args = ["evaluate", str(run), "--unknowns", str(area / "extra.npz")]
    if finished:
        assert main(args) == 0
    else:  # stopped before its metrics: a rerun of the same command would finish it
        assert run_cli(args, kill_at="write:metrics.json").returncode == -signal.SIGKILL
    other = tmp_path / "extra.npz"  # the same name, other images
    np.savez(other, x=np.load(area / "extra.npz")["x"][::-1].copy())
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert main(["evaluate", str(run), "--unknowns", str(other)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "already holds unknown set(s) 'extra'" in err[-1] and "--replace" in err[-1]
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"} == before


def test_a_set_name_with_a_pipe_keeps_the_reports_tables_whole(area, tmp_path):
    run, _ = fresh(area, tmp_path)
    piped = tmp_path / "odd|name.npz"
    shutil.copy(area / "extra.npz", piped)
    assert main(["evaluate", str(run), "--unknowns", str(piped)]) == 0
    report = (run / "report.md").read_text()
    assert "odd\\|name" in report
    for table in report.split("\n\n"):
        rows = [line for line in table.splitlines() if line.startswith("|")]
        widths = {line.replace("\\|", "").count("|") for line in rows}
        assert len(widths) <= 1, table  # every row of a table has as many cells as its header
