"""Timing, and the processor every timing is labelled with, shared by the benchmarks of this
folder, imported as a sibling module (a benchmark runs as ``python benchmarks/NAME.py``, which
puts this folder on the import path)."""
from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode


def best_of(repeats: int, func: Callable[[], object]) -> float:
    """The shortest of ``repeats`` wall-clock timings of ``func()``, in seconds: the run least
    disturbed by the rest of the machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def training_flops_per_image(model: torch.nn.Module, input_shape: Sequence[int], batch: int = 8) -> float:
    """The FLOPs of one training image through ``model`` (its logits' forward and backward, counted
    by ``torch.utils.flop_counter`` over a batch of ``batch`` random images of ``input_shape``)."""
    with FlopCounterMode(display=False) as counter:
        logits, _ = model(torch.rand(batch, *input_shape))
        logits.sum().backward()
    return counter.get_total_flops() / batch


def cpu_name() -> str:
    """The processor's model name (the first of /proc/cpuinfo), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags() -> str:
    """The instruction sets a timing here depends on that the processor has (AVX2, AVX-512, bf16, AMX)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return ""
    return " ".join(sorted({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"} & set(flags.split())))


def processor_label() -> str:
    """The label every timing of this folder names its processor by: model name and the
    instruction sets it depends on, e.g. ``AMD EPYC [avx2 avx512_bf16 avx512f]``."""
    return f"{cpu_name()} [{cpu_flags()}]"
