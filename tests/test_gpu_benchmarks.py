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
