"""The run lock (``_runlock``, issue 22 item 8): one writer, or any number of readers, on a
run; commands that only read (``plot --out``, ``predict``, ``predict --fpr``) work on a run
the user cannot write and write nothing into it.

Tests run as root here, and root ignores permission bits: the read-only commands then run as
user ``nobody`` (``setpriv``), so that the operating system really refuses every write into
the run, as it does for a user who does not own it. Run as another user, the tests use that
user directly.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from runs import snapshot
from reliability_table import proves

from agnostophobia._runlock import LOCK_NAME, RunInUse, run_lock
from agnostophobia.cli import main

NOBODY = 65534


@pytest.fixture
def shared_tmp():
    """A folder another user can read (pytest's own are private to this one)."""
    base = Path(tempfile.mkdtemp(prefix="agnostophobia-readonly-"))
    base.chmod(0o755)
    yield base
    for path in [base, *base.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)  # writable again, to be removed
    shutil.rmtree(base)


def writable_folder(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o777)
    return path


def read_only_copy(run: Path, where: Path) -> Path:
    """``run`` copied to ``where``, without a lock file, every file and folder readable by all
    and writable by none (r--r--r--, r-xr-xr-x)."""
    shutil.copytree(run, where)
    (where / LOCK_NAME).unlink(missing_ok=True)
    for path in [where, *where.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return where


def as_reader(args, tmp: Path) -> subprocess.CompletedProcess:
    """``agnostophobia ARGS`` by a user who may not write the read-only copy."""
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: no user for whom the permission bits hold")
        prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    home = writable_folder(tmp / f"home{len(list(tmp.glob('home*')))}")
    env = {**os.environ, "HOME": str(home), "MPLCONFIGDIR": str(home), "AGNOSTOPHOBIA_CACHE": str(home),
           "PYTHONUNBUFFERED": "1"}
    return subprocess.run([*prefix, sys.executable, "-m", "agnostophobia", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300)


# ~20 s on two cores (every read-only command in turn): with the tests marked slow (make test-slow, CI)
@pytest.mark.slow
def test_read_only_commands_work_on_a_run_the_user_cannot_write(tiny_run, real_data_dir, shared_tmp, tmp_path,
                                                                capsys):
    writable = tmp_path / "writable"
    shutil.copytree(tiny_run, writable)
    assert main(["calibrate", str(writable), "--fpr", "0.1"]) == 0
    run = read_only_copy(writable, shared_tmp / "run")
    out = writable_folder(shared_tmp / "out")
    np.savez(shared_tmp / "digits.npz", x=np.load(real_data_dir / "mnist" / "mnist.npz")["x_test"][:20])
    before = snapshot(run)

    plotted = as_reader(["plot", run, "--out", out / "figures"], shared_tmp)
    assert plotted.returncode == 0, plotted.stderr
    assert list((out / "figures").glob("*.png"))

    predicted = as_reader(["predict", run, shared_tmp / "digits.npz", "--out", out / "rows.json"], shared_tmp)
    assert predicted.returncode == 0, predicted.stderr

    calibrated = as_reader(["predict", run, shared_tmp / "digits.npz", "--fpr", "0.25", "--out", out / "fpr.json"],
                           shared_tmp)
    assert calibrated.returncode == 0, calibrated.stderr
    said = [line for line in calibrated.stdout.splitlines() if "read-only" in line]
    assert len(said) == 1 and "in memory, not stored in calibration.json" in said[0], calibrated.stdout

    refused = as_reader(["calibrate", run, "--fpr", "0.25"], shared_tmp)  # the user really may not write it
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "may not write it" in refused.stderr and "Traceback" not in refused.stderr
    assert snapshot(run) == before and not (run / LOCK_NAME).exists()  # nothing written, no lock file
    # the same rows as on a run that may be written (where predict --fpr stores the threshold)
    assert main(["predict", str(writable), str(shared_tmp / "digits.npz"), "--out", str(tmp_path / "rows.json")]) == 0
    assert json.loads((out / "rows.json").read_text()) == json.loads((tmp_path / "rows.json").read_text())
    assert main(["predict", str(writable), str(shared_tmp / "digits.npz"), "--fpr", "0.25",
                 "--out", str(tmp_path / "fpr.json")]) == 0
    assert json.loads((out / "fpr.json").read_text()) == json.loads((tmp_path / "fpr.json").read_text())


@proves("concurrent commands", "plot, predict and export never read a run while a writer holds it")
def test_readers_never_work_while_a_writer_holds_the_run(tiny_run, tmp_path, capsys):
    from agnostophobia._runlock import run_read_lock

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert main(["calibrate", str(run), "--fpr", "0.1"]) == 0
    np.savez(tmp_path / "images.npz", x=np.zeros((2, 28, 28), np.uint8))
    capsys.readouterr()
    with run_lock(run, command="agnostophobia reproduce (test writer)"):
        with pytest.raises(RunInUse, match=r"in use by process \d+ \(agnostophobia reproduce \(test writer\)\)"):
            with run_read_lock(run):
                pass
        for args in (["plot", run, "--out", tmp_path / "figures"], ["predict", run, tmp_path / "images.npz"]):
            assert main([str(a) for a in args]) == 1
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "test writer" in err[0], err
    assert not (tmp_path / "figures").exists()
    with run_read_lock(run):
        with run_read_lock(run):  # readers share the run
            pass
        with pytest.raises(RunInUse, match="in use by another process \\(a command reading it\\)"):
            with run_lock(run):  # a writer waits for the readers; the last writer's line is gone
                pass
    with run_lock(run, command="agnostophobia evaluate (test)"):
        pass
    assert (run / LOCK_NAME).read_text() == ""
