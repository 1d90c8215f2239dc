"""Numerical precision of training: ``fp32``, or ``bf16`` autocast where the device computes
bf16 natively.

bf16 autocast runs convolutions and matrix multiplies in bfloat16 (fp32 accumulation)
and keeps weights, optimiser state, the loss and everything numerically delicate (softmax,
log-softmax, norms) in fp32. On this project's Zen 4 CPU (AVX512-BF16) it trains LeNet++
about 1.8x faster than fp32 (``benchmarks/bench_roofline.py``); on a GPU from Ampere on it
is the usual choice. Where bf16 is emulated it is slower than fp32, so ``auto`` picks it
only where it is native.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch

PRECISIONS = ("auto", "fp32", "bf16")


@functools.lru_cache(maxsize=None)
def _cpu_has_native_bf16() -> bool:
    try:  # Linux: the instruction-set flags of the first core (AVX512-BF16 or AMX-BF16)
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def bf16_is_native(device="cpu") -> bool:
    """Whether ``device`` computes bf16 matrix products in hardware."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    return device.type == "cpu" and _cpu_has_native_bf16()


def resolve_precision(precision: str, device) -> str:
    """``auto`` -> ``bf16`` where the device computes it natively, else ``fp32``."""
    return choose_precision(precision, device)[0]


def choose_precision(precision: str, device):
    """``(precision, why)``: what ``precision`` (auto, fp32 or bf16) resolves to on ``device``,
    and the reason in words, for the line ``train`` and ``reproduce`` print and the report keeps."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision, "set in the config"
    processor = {"cuda": "this GPU", "cpu": "this CPU"}.get(torch.device(device).type, f"device {device}")
    if bf16_is_native(device):
        return "bf16", f"auto: {processor} computes bf16 natively"
    return "fp32", f"auto: {processor} has no native bf16"


def describe_precision(precision: str, device) -> str:
    """``fp32 (auto: this CPU has no native bf16)``: the choice and its reason in one phrase."""
    chosen, why = choose_precision(precision, device)
    return f"{chosen} ({why})"


def autocast(device, precision: str, cache: bool = True):
    """The autocast context of a resolved ``precision`` on ``device`` (none for fp32, so that a
    device autocast does not know, e.g. the ``meta`` device tests trace a step on, trains in fp32).
    ``cache``: keep the bf16 copies of weights within the context (off in a step captured in a
    CUDA graph, as PyTorch asks)."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, cache_enabled=cache)
