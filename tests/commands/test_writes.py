"""Writes stay where the user asked (issue 31, item 1): an output never names a file of the run
a command reads; a command removes only the temporaries it (or a killed run of it) made; an
atomic write reaches the disk (file fsynced before the rename, folder after); a full disk is a
one-line refusal; links a user made on purpose keep working."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from reliability_table import proves
from runs import run_cli, run_main, snapshot

from agnostophobia import _atomic
from agnostophobia._atomic import TMP_TAG, atomic_write
from agnostophobia._runlock import run_lock


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# ------------------------------------------------------------------ --out never names the run's own files
OWN_FILES = [  # (command, the --out inside the run, relative to it)
    ("predict", "calibration.json"), ("predict", "seed0/softmax/metrics.csv"), ("predict", "report.json"),
    ("export", "seed0/softmax/best.pt"), ("export", "metrics.json"), ("export", "config.yaml"),
    ("export", "seed0/entropic/outputs.npz"), ("export", ".lock"), ("export", "figures/fig.pt"),
]


def out_args(command, run, out, tmp_path):
    png = tmp_path / "a.png"
    if not png.exists():
        from PIL import Image
        import numpy as np
        Image.fromarray(np.zeros((28, 28), np.uint8)).save(png)
    if command == "predict":
        return ["predict", run, png, "--out", out]
    return ["export", run, "--format", "torchscript", "--out", out]


@pytest.mark.parametrize("command, name", OWN_FILES, ids=[f"{c}-{n}" for c, n in OWN_FILES])
def test_an_output_naming_a_file_of_the_run_is_refused(calibrated, tmp_path, capsys, command, name):
    if name == "report.json":  # a name the run does not use: written
        pytest.skip("covered by test_an_output_beside_the_runs_files_is_written")
    before = snapshot(calibrated)
    code, _, err = run_main(out_args(command, calibrated, calibrated / name, tmp_path), capsys)
    assert code == 1 and len(err) == 1 and str(calibrated / name) in err[0] and "run" in err[0], err
    assert snapshot(calibrated) == before


@proves("links", "an `--out` reaching a file of the run through a link, a hard link or `..` is refused")
@pytest.mark.parametrize("how", ["symlink", "hardlink", "dotdot"])
def test_an_output_reaching_a_run_file_another_way_is_refused(calibrated, tmp_path, capsys, how):
    target = calibrated / "seed0" / "softmax" / "best.pt"
    out = tmp_path / "model.pt"
    if how == "symlink":
        out.symlink_to(target)
    elif how == "hardlink":
        os.link(target, out)
    else:
        out = calibrated / "seed0" / ".." / "seed0" / "softmax" / "best.pt"
    before = snapshot(calibrated)
    code, _, err = run_main(out_args("export", calibrated, out, tmp_path), capsys)
    assert code == 1 and len(err) == 1 and "best.pt" in err[0], err
    assert snapshot(calibrated) == before


def test_an_output_beside_the_runs_files_is_written(calibrated, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    code, _, err = run_main(out_args("export", run, run / "deployed.pt", tmp_path), capsys)
    assert code == 0 and (run / "deployed.pt").is_file(), err
    code, _, err = run_main(out_args("predict", run, run / "rows.csv", tmp_path), capsys)
    assert code == 0 and (run / "rows.csv").is_file(), err


# ------------------------------------------------------------------ temporaries: only our own, only dead writers'
def test_a_command_removes_only_its_own_stale_temporaries(tmp_path):
    user = [tmp_path / ".notes.tmp", tmp_path / ".draft.k2j4x9.tmp", tmp_path / "sub" / ".data.csv.abcdef.tmp",
            tmp_path / "sub" / ".x.agnostophobia.tmp"]
    live = tmp_path / f".metrics.json.{TMP_TAG}-{os.getpid()}-abc.tmp"
    stale = [tmp_path / f".metrics.json.{TMP_TAG}-{dead_pid()}-k2j4x9.tmp",
             tmp_path / "seed0" / "softmax" / f".best.pt.{TMP_TAG}-{dead_pid()}-zz.tmp"]
    for path in user + [live] + stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
    with run_lock(tmp_path):  # what train --out EXISTING_DIR takes first
        pass
    assert all(p.read_text() == "mine" for p in user + [live])
    assert not any(p.exists() for p in stale)


def test_a_killed_writes_temporary_is_removed_by_the_next_write_of_that_file(tmp_path):
    out = tmp_path / "model.pt"
    leftover = tmp_path / f".model.pt.{TMP_TAG}-{dead_pid()}-q1w2e3.tmp"
    leftover.write_bytes(b"x" * (4 << 20))
    other = tmp_path / f".other.pt.{TMP_TAG}-{dead_pid()}-q1w2e3.tmp"
    other.write_bytes(b"x")
    atomic_write(out, lambda tmp: open(tmp, "wb").write(b"model"))
    assert out.read_bytes() == b"model" and not leftover.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, other.name])


@pytest.mark.slow  # 7-10 s: with the slow tests, keeping make test under its 570 s
def test_a_killed_export_leaves_nothing_the_next_export_does_not_clean(calibrated, tmp_path):
    out = tmp_path / "deployed.pt"
    args = ["export", calibrated, "--format", "torchscript", "--out", out]
    assert run_cli(args, kill_at="write:deployed.pt").returncode < 0
    assert [p.name for p in tmp_path.iterdir() if TMP_TAG in p.name]  # the kill left its temporary
    assert run_cli(args).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deployed.pt"]


# ------------------------------------------------------------------ durability
def test_the_file_is_fsynced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
                        or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", str(b))) or real_replace(a, b))
    out = tmp_path / "file.txt"
    atomic_write(out, lambda tmp: open(tmp, "w").write("x"))
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"], events
    assert TMP_TAG in events[0][1] and events[1][1] == str(out) and events[2][1] == str(tmp_path)


# ------------------------------------------------------------------ a full disk
@proves("full disk", "`export` to a full disk is one line naming `--out`; no temporary is left")
@pytest.mark.parametrize("fmt", ["torchscript", "pt2"])
def test_export_to_a_full_disk_is_one_line_and_leaves_nothing(calibrated, tmp_path, capsys, monkeypatch, fmt):
    monkeypatch.setenv("AGNOSTOPHOBIA_DISK_FULL_AT", f"write:deployed-{fmt}.pt")
    code, _, err = run_main(["export", calibrated, "--format", fmt, "--out", tmp_path / f"deployed-{fmt}.pt"], capsys)
    assert code == 1 and len(err) == 1 and "No space left on device" in err[0] and f"deployed-{fmt}.pt" in err[0], err
    assert f"{TMP_TAG}-" not in err[0] and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ links made on purpose
@proves("links", "a run reached through a link is calibrated and predicted")
def test_a_run_reached_through_a_link_is_calibrated_and_predicted(calibrated, tmp_path, capsys):
    real = tmp_path / "real"
    shutil.copytree(calibrated, real)
    (tmp_path / "linked").symlink_to(real)
    code, _, err = run_main(["calibrate", tmp_path / "linked", "--fpr", "0.2"], capsys)
    assert code == 0, err
    code, _, err = run_main(out_args("predict", tmp_path / "linked", tmp_path / "rows.csv", tmp_path), capsys)
    assert code == 0 and (tmp_path / "rows.csv").is_file(), err


def test_a_data_directory_that_is_a_link_is_read(real_data_dir, tmp_path):
    from agnostophobia.data import build_protocol

    (tmp_path / "data").symlink_to(real_data_dir)
    protocol = build_protocol("lenet++", tmp_path / "data", max_known_train=8, max_unknown_train=8, max_val=8,
                              max_test_per_set=8)
    assert len(protocol.train.labels) > 0


def test_a_dead_writer_that_nobody_reaped_leaves_a_temporary_the_next_owner_removes(tmp_path):
    """A killed command's figure worker stays a zombie where nothing reaps orphans (a container's
    init): it answers signal 0 but will never finish its write, so its temporary is stale."""
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # exited, not yet reaped
            if open(f"/proc/{zombie.pid}/stat").read().rpartition(")")[2].split()[0] == "Z":
                break
            import time
            time.sleep(0.05)
        left = tmp_path / f".figure.png.{TMP_TAG}-{zombie.pid}-abc123.tmp"
        mine = tmp_path / f".figure.png.{TMP_TAG}-{os.getpid()}-def456.tmp"
        left.write_bytes(b"half")
        mine.write_bytes(b"writing")
        _atomic.remove_stale_temporaries(tmp_path)
        assert not left.exists() and mine.exists()  # a live writer's stays
    finally:
        zombie.wait()
