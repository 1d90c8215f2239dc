"""The GPU benchmark and the prepared GPU check on a machine without CUDA (issue 21, items 5-6):
both say "no CUDA device" and succeed, so a CPU session or CI can run them without harm."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

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
