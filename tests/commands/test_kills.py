"""Commands on a trained run killed (SIGKILL) at each point where they write, then run again,
leave the run byte for byte as an uninterrupted run of the same command does: ``compare``,
``calibrate --detector best`` (their all-or-nothing writes, put back by the undo journal), and
the smoke ``benchmark`` (its trainings' epoch ends and its reports).

The points a command reaches are listed by running it once with the points log set
(:data:`agnostophobia._killpoints.POINTS_LOG_ENV`), so a write added later is killed too.
``make test`` kills ``calibrate --detector best`` at its first and last point; ``make test-slow``
kills both commands at every point."""
from __future__ import annotations

import json
import os
import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest
from reliability_table import proves
from runs import SMALL_SMOKE, run_cli

from agnostophobia._killpoints import POINTS_LOG_ENV

COMMANDS = {
    "compare": lambda run: ["compare", run, "--fpr", "0.5"],
    "calibrate-best": lambda run: ["calibrate", run, "--fpr", "0.5", "--detector", "best", "--approach", "softmax",
                                   "--approach", "entropic"],
}
#: What a run's files hold of the process that wrote them, not of the result (a command line
#: names its run folder, which differs between two copies).
PROCESS_KEYS = {"command", "wall_time_s", "timings_s"}


def files_of(run: Path) -> dict:
    """Every file of the run (its lock aside) by its path, with its bytes; JSON records without
    the keys that describe the process."""
    found = {}
    for path in sorted(run.rglob("*")):
        if not path.is_file() or path.name == ".lock":
            continue
        data = path.read_bytes()
        if path.suffix == ".json":
            record = json.loads(data)
            if isinstance(record, dict):
                data = json.dumps({k: v for k, v in record.items() if k not in PROCESS_KEYS}, sort_keys=True)
        found[path.relative_to(run).as_posix()] = data
    return found


def numbered(points) -> list:
    """Each point as ``NAME:K`` for its K-th time reached (the kill-point spelling)."""
    seen: Counter = Counter()
    out = []
    for point in points:
        seen[point] += 1
        out.append(f"{point}:{seen[point]}")
    return out


@pytest.fixture(scope="module")
def uninterrupted(calibrated, tmp_path_factory):
    """Each command run once to its end on a copy of the calibrated tiny run: its files, and the
    points it reached."""
    done = {}
    for name, argv in COMMANDS.items():
        base = tmp_path_factory.mktemp(f"whole-{name}")
        run = base / "run"
        shutil.copytree(calibrated, run)
        log = base / "points.txt"
        os.environ[POINTS_LOG_ENV] = str(log)
        try:
            result = run_cli(argv(run))
        finally:
            del os.environ[POINTS_LOG_ENV]
        assert result.returncode == 0, result.stderr
        points = numbered(line for line in log.read_text().split() if line.startswith("write:"))
        assert points, f"{name} reached no write point"
        done[name] = (files_of(run), points)
    return done


def killed_then_rerun(calibrated, tmp_path, argv, point) -> dict:
    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    result = run_cli(argv(run), kill_at=point)
    assert result.returncode == -signal.SIGKILL, f"{point} was never reached: {result.stderr[-500:]}"
    again = run_cli(argv(run))
    assert again.returncode == 0, again.stderr
    assert not (run / ".undo").exists() and not list(run.rglob(".*.tmp"))
    return files_of(run)


@proves("kill", "`compare` and `calibrate --detector best` killed (SIGKILL) at a write and run again leave the run "
                "byte for byte as an uninterrupted run does (the first and the last write point in `make test`, "
                "every one in `make test-slow`)")
@pytest.mark.parametrize("command, which", [
    ("calibrate-best", "first"), ("calibrate-best", "last"),
    # compare's first and last, and every point between, in make test-slow: 20 s a kill and rerun
    *(pytest.param(command, which, marks=pytest.mark.slow) for command, which in (
        ("compare", "first"), ("compare", "last"), ("compare", "every"), ("calibrate-best", "every")))])
@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_a_command_killed_at_a_write_and_run_again_equals_an_uninterrupted_one(calibrated, uninterrupted, tmp_path,
                                                                                 command, which):
    whole, points = uninterrupted[command]
    chosen = {"first": points[:1], "last": points[-1:], "every": points[1:-1]}[which]
    for number, point in enumerate(chosen):
        assert killed_then_rerun(calibrated, tmp_path / str(number), COMMANDS[command], point) == whole, point


@proves("concurrent commands", "two commands started at once on one run: one writes, the other is refused in one "
                               "line or waits; the run holds one command's whole result, never a mix")
@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_two_commands_at_once_on_one_run_leave_one_whole_result(calibrated, uninterrupted, tmp_path):
    import subprocess
    import sys

    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = [subprocess.Popen([sys.executable, "-m", "agnostophobia", *map(str, COMMANDS[name](run))], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("compare", "calibrate-best")]
    results = [(process.wait(timeout=300), process.stderr.read()) for process in started]
    finished = [name for name, (code, _) in zip(("compare", "calibrate-best"), results) if code == 0]
    for code, err in results:
        assert code == 0 or (code == 1 and "is in use by" in err and len(err.strip().splitlines()) == 1), err
    assert finished
    files, base = files_of(run), files_of(calibrated)
    for name in finished:  # what each finished command changed is as an uninterrupted run of it leaves it
        whole = uninterrupted[name][0]
        changed = {path for path in whole if whole[path] != base.get(path)}
        assert changed and {path: files.get(path) for path in changed} == {path: whole[path] for path in changed}
    if len(finished) == 1:  # the refused one changed nothing
        assert {path for path in files if files[path] != base.get(path)} == {
            path for path in uninterrupted[finished[0]][0] if uninterrupted[finished[0]][0][path] != base.get(path)}


# ------------------------------------------------------------------ the smoke benchmark
def benchmark_args(out, data_dir):
    return ["benchmark", "lenet++", "--budget", "smoke", "--seeds", "2", "--set", "approaches=[softmax, entropic]",
            *SMALL_SMOKE, "--out", out, "--no-progress", "--data-dir", data_dir]


def benchmark_result(out: Path) -> dict:
    """What a benchmark computed: its rows and tests, and each model's stored outputs."""
    record = json.loads((out / "benchmark.json").read_text())
    return {"rows": record["rows"], "tests": record.get("tests"),
            **{path.relative_to(out).as_posix(): path.read_bytes() for path in sorted(out.glob("seed*/*/outputs.npz"))}}


@pytest.fixture(scope="module")
def whole_benchmark(real_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole-benchmark") / "bench"
    log = out.parent / "points.txt"
    os.environ[POINTS_LOG_ENV] = str(log)
    try:
        result = run_cli(benchmark_args(out, real_data_dir))
    finally:
        del os.environ[POINTS_LOG_ENV]
    assert result.returncode == 0, result.stderr
    points = numbered(line for line in log.read_text().split() if line.startswith(("write:", "epoch-end")))
    return benchmark_result(out), points


@proves("kill", "the smoke `benchmark` killed (SIGKILL) at its first epoch end and at its last write, then run "
                "again, gives the uninterrupted benchmark's rows, tests and stored outputs")
@pytest.mark.slow
@pytest.mark.parametrize("which", ["first-epoch-end", "last-write"])
def test_the_benchmark_killed_and_run_again_equals_an_uninterrupted_one(whole_benchmark, real_data_dir, tmp_path,
                                                                        which):
    whole, points = whole_benchmark
    point = next(p for p in points if p.startswith("epoch-end")) if which == "first-epoch-end" else \
        [p for p in points if p.startswith("write:")][-1]
    out = tmp_path / "bench"
    killed = run_cli(benchmark_args(out, real_data_dir), kill_at=point)
    assert killed.returncode == -signal.SIGKILL, f"{point} was never reached: {killed.stderr[-500:]}"
    again = run_cli(benchmark_args(out, real_data_dir))
    assert again.returncode == 0, again.stderr
    assert benchmark_result(out) == whole
