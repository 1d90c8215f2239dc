"""A tiny LeNet++ run on the real protocol, for tests of whole commands (kills, locks,
records, bad inputs): two approaches (softmax for the OpenMax path, entropic with known
unknowns), two epochs of a few dozen images, one process per command as a user runs it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

TINY = {
    "name": "lenet++", "protocol": "lenet++",
    "protocol_limits": {"max_known_train": 64, "max_unknown_train": 64, "max_val": 32, "max_test_per_set": 48},
    "model": "lenet++", "model_kwargs": {"activation": "prelu", "feature_dim": 2},
    "approaches": ["softmax", "entropic"], "epochs": 2, "batch_size": 32, "lr": 0.001, "tensorboard": False,
    "openmax": {"tail_size": 3, "alpha": 2, "distance": "eucos"},
    "budgets": {"smoke": {}},
}

#: ``--set`` options that cut the lenet++ smoke budget's images to a third (200 + 200 training images,
#: 100 validation, 100 per test set), for the tests of whole ``benchmark`` commands: they check what
#: the command does and keeps, which does not depend on the size, and training and storing the
#: outputs of the full smoke budget was most of their time.
SMALL_SMOKE = [f"--set=protocol_limits.{key}={n}" for key, n in
               {"max_known_train": 200, "max_unknown_train": 200, "max_val": 100, "max_test_per_set": 100}.items()]


def write_config(path: Path, **changes) -> Path:
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def run_cli(args, kill_at=None, cwd=None) -> subprocess.CompletedProcess:
    """``agnostophobia ARGS`` in a fresh process; ``kill_at`` names a kill point (see _killpoints)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("AGNOSTOPHOBIA_KILL_AT", None)
    if kill_at:
        env["AGNOSTOPHOBIA_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "agnostophobia", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)



def run_main(args, capsys):
    """``agnostophobia ARGS`` in this process: (exit code, stdout, stderr lines)."""
    from agnostophobia.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse exits by itself
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def one_error_line(capsys) -> str:
    """What a refused command wrote: one line on stderr, ``agnostophobia: error: ...``, and no
    traceback on stderr or stdout; that line."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agnostophobia: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def refused_config_line(text: str, tmp: Path, capsys) -> str:
    """``train`` on a config file ``bad.yaml`` holding ``text``: refused (exit code 1) in one line
    without a traceback, before anything is written; that line."""
    config, out = tmp / "bad.yaml", tmp / "run"
    config.write_text(text)
    code, _, err = run_main(["train", config, "--out", out, "--no-progress"], capsys)
    assert code == 1 and len(err) == 1 and "Traceback" not in err[0] and not out.exists(), err
    return err[0]

def command_area(area: Path, run: Path, data_dir: Path) -> Path:
    """``area`` holding a copy of ``run`` as ``base`` and what commands on it read: 8 MNIST test digits
    as an unknown set (``extra.npz``) and the first of them as an image (``digit.png``)."""
    import numpy as np
    from PIL import Image

    shutil.copytree(run, area / "base")
    digits = np.load(data_dir / "mnist" / "mnist.npz")["x_test"][:8]
    np.savez(area / "extra.npz", x=digits)
    Image.fromarray(digits[0]).save(area / "digit.png")
    return area


def reproduce_args(config, out, data_dir):
    return ["reproduce", config, "--budget", "smoke", "--out", out, "--no-progress", "--data-dir", data_dir]


def snapshot(run: Path) -> dict:
    """Every file of a run directory with its modification time and bytes: equal snapshots
    mean nothing in the run was written, added or removed."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(Path(run).rglob("*")) if p.is_file()}


def damage_weights(run: Path, damage, approach: str = "entropic") -> tuple:
    """``damage(state)`` applied to the network weights in ``RUN/seed0/<approach>/best.pt``, in place:
    (the checkpoint's path, what ``damage`` returned: the text a refusal must hold)."""
    import torch

    path = Path(run) / "seed0" / approach / "best.pt"
    saved = torch.load(path, weights_only=True)
    said = damage(saved["model"])
    torch.save(saved, path)
    return path, said


def unwritable_folder(tmp: Path) -> Path:
    """A folder in which no file can be created: a read-only one under ``tmp`` (made writable
    again by pytest's clean-up), or for root, who writes anywhere, /sys."""
    import pytest

    folder = tmp / "read-only"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys")):
        try:
            (candidate / ".probe").touch()
        except OSError:
            return candidate
        (candidate / ".probe").unlink()
    pytest.skip("no folder here refuses new files")


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (Linux: a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def write_pid_and_sleep(path):
    """A child process's job for :func:`assert_children_die_with_their_parent`: its pid, then a long wait.
    Here, not in the test, because the parent script that starts it imports it by name."""
    import time

    with open(path, "w") as file:
        file.write(str(os.getpid()))
    time.sleep(120)


def assert_children_die_with_their_parent(script: Path, pid_files) -> None:
    """Start ``python SCRIPT PID_FILE...`` (with tests/ on its path), whose child processes each
    write their pid into one of ``pid_files`` and wait; once all have, SIGKILL the parent (no
    clean-up runs in it) and check that every child ends within 10 s."""
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script), *map(str, pid_files)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text() for p in pid_files):
            assert time.monotonic() < deadline and parent.poll() is None, "the children never started"
            time.sleep(0.1)
        children = [int(p.read_text()) for p in pid_files]
        assert all(map(alive, children))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(map(alive, children)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(alive, children)), "a child outlived its killed parent"
    finally:
        parent.kill()
