"""The GPU benchmark and the prepared GPU check on a machine without CUDA (issue 21, items 5-6):
both say "no CUDA device" and succeed, so a CPU session or CI can run them without harm."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from repo_paths import REPO


pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without CUDA prints")


def test_bench_gpu_says_no_cuda_device():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py")], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no CUDA device"


def test_gpu_check_says_no_cuda_device_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), str(tmp_path), str(out)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no CUDA device"
    assert not out.exists()


def test_gpu_check_names_a_python_without_torch(tmp_path):
    env = {**os.environ, "PYTHON": "/bin/false"}
    result = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), str(tmp_path), str(tmp_path / "o")],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1
    assert "cannot import torch" in result.stderr


def test_compare_batched_seeds_says_no_cuda_device():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare_batched_seeds.py"), "--data-dir", "."],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no CUDA device"


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_compare_batched_seeds_on_the_cpu_prints_both_ways_for_every_seed(real_data_dir, tmp_path):
    """The comparison the GPU check runs, on the CPU with the smoke budget cut further: each
    seed's rows for both ways, and the runs written where --out says."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare_batched_seeds.py"),
                             "--data-dir", str(real_data_dir), "--device", "cpu", "--budget", "smoke",
                             "--seeds", "2", "--epochs", "1", "--limit", "max_known_train=100",
                             "--limit", "max_unknown_train=100", "--out", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "200 training images" in result.stdout
    assert "x" in result.stdout.split("batched:")[1].splitlines()[0]
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("      ")]
    assert [(row[0], row[1]) for row in rows] == [("0", "1"), ("1", "1")]
    for way in ("separate", "batched"):
        assert sorted(p.name for p in (tmp_path / way).iterdir()) == ["seed0", "seed1"]
        assert (tmp_path / way / "seed1" / "last.pt").exists()


def write_metrics(run: Path, per_seed_ccr: dict, batched: bool) -> Path:
    """A run folder whose metrics.json holds per-seed CCR at 1e-2 and 1e-1 for each row."""
    run.mkdir()
    records = [{"row": row, "unknowns": "unknowns", "seed": seed, "ccr_at_fpr": {"1e-2": value, "1e-1": value}}
               for row, values in per_seed_ccr.items() for seed, value in enumerate(values)]
    (run / "metrics.json").write_text(json.dumps({"per_seed": records, "batched_seeds": batched, "seeds": 3,
                                                  "wall_time_s": 1.0}))
    return run


def compare_ccr(batched: Path, separate: Path) -> str:
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare_batched_ccr.py"), str(batched),
                             str(separate)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_compare_batched_ccr_applies_the_two_standard_deviation_rule(tmp_path):
    """Separate seeds 0.50/0.52/0.54 (std 0.02): a batched mean of 0.555 lies within 2 std, 0.60
    does not; a spread below 0.005 still allows 0.01; a cell with an unmeasured seed is left out."""
    separate = write_metrics(tmp_path / "separate", {"a/x": [0.50, 0.52, 0.54], "b/y": [0.8, 0.8, 0.8],
                                                     "c/z": [0.1, None, 0.1]}, False)
    close = write_metrics(tmp_path / "close", {"a/x": [0.555] * 3, "b/y": [0.809] * 3, "c/z": [0.1] * 3}, True)
    out = compare_ccr(close, separate)
    assert "cells: 4 of 4 agree" in out and "2 not measured" in out and "agree: yes" in out
    far = write_metrics(tmp_path / "far", {"a/x": [0.60] * 3, "b/y": [0.82] * 3, "c/z": [0.1] * 3}, True)
    out = compare_ccr(far, separate)
    assert "cells: 0 of 4 agree" in out and "agree: no" in out
    assert "differs: a/x on unknowns at FPR 1e-2: batched 0.6000, separate 0.5200 +- 0.0400" in out
