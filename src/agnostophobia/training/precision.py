"""Numerical precision of training: ``fp32``, or ``bf16`` autocast where the device computes
bf16 natively.

bf16 autocast runs convolutions and matrix multiplies in bfloat16 (fp32 accumulation)
and keeps weights, optimiser state, the loss and everything numerically delicate (softmax,
log-softmax, norms) in fp32. On this project's Zen 4 CPU (AVX512-BF16) it trains LeNet++
about 1.8x faster than fp32 (``benchmarks/bench_roofline.py``); on a GPU from Ampere on it
is the usual choice. Where bf16 is emulated it is slower than fp32, so ``auto`` picks it
only where it is native.

Native is not always faster: a processor's bf16 units, the oneDNN kernels it gets and the thread
count differ from machine to machine. So on a CPU whose flags say bf16, ``auto`` times one small
convolution forward and backward in both precisions (:func:`probe_cpu_bf16`, a few milliseconds)
and takes bf16 only where it is measurably faster; the result is cached per machine (processor,
flags, torch version, threads) in the cache folder (``$AGNOSTOPHOBIA_CACHE/precision_probe.json``),
so every command on the machine makes the same choice, and the reason is printed and recorded.
"""
from __future__ import annotations

import contextlib
import functools
import json
import time
from pathlib import Path
from typing import Tuple

import torch

from agnostophobia._atomic import atomic_write
from agnostophobia.training.device import cpu_model

PRECISIONS = ("auto", "fp32", "bf16")
PROBE_CACHE = "precision_probe.json"
#: bf16 must be at least this much faster than fp32 in the probe for ``auto`` to take it
PROBE_MIN_SPEEDUP = 1.15


@functools.lru_cache(maxsize=None)
def _cpu_has_native_bf16() -> bool:
    try:  # Linux: the instruction-set flags of the first core (AVX512-BF16 or AMX-BF16)
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def _cpu_identity() -> str:
    """What the probe's result depends on: processor, its bf16 flags, torch, threads."""
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")), "").split()
    except OSError:
        flags = []
    model = cpu_model()
    bf16_flags = ",".join(sorted({"avx512_bf16", "amx_bf16", "amx_tile"} & set(flags)))
    return f"{model}|{bf16_flags}|torch {torch.__version__}|{torch.get_num_threads()} threads"


def _time_step(dtype) -> float:
    """Best-of-5 seconds of a small convolution's forward and backward (channels_last) in ``dtype``."""
    generator = torch.Generator().manual_seed(0)
    conv = torch.nn.Conv2d(32, 32, 3, padding=1).to(memory_format=torch.channels_last)
    x = torch.randn(32, 32, 16, 16, generator=generator).contiguous(memory_format=torch.channels_last)
    best = float("inf")
    for attempt in range(6):  # the first warms up (kernel selection)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = conv(x)
        out.float().sum().backward()
        if attempt:
            best = min(best, time.perf_counter() - start)
    return best


def probe_cpu_bf16(cache_file=None) -> Tuple[bool, float]:
    """``(bf16 is faster here, measured speed-up over fp32)`` on this CPU, timed once per machine
    and kept in ``cache_file`` (default: the cache folder's :data:`PROBE_CACHE`)."""
    if cache_file is None:
        from agnostophobia.data.paths import cache_dir
        cache_file = cache_dir() / PROBE_CACHE
    cache_file, identity = Path(cache_file), _cpu_identity()
    cached = _read_probe_cache(cache_file)
    if identity in cached:
        speedup = float(cached[identity])
    else:
        speedup = _time_step(torch.float32) / _time_step(torch.bfloat16)
        cached[identity] = round(speedup, 3)
        try:
            atomic_write(cache_file, lambda tmp: Path(tmp).write_text(json.dumps(cached, indent=1, sort_keys=True)))
        except OSError:  # a read-only cache: measure again next time
            pass
    return speedup >= PROBE_MIN_SPEEDUP, speedup


def _read_probe_cache(cache_file: Path) -> dict:
    """The cached probe results; an unreadable, non-regular or malformed cache is empty (measured anew)."""
    try:
        if not cache_file.is_file() or cache_file.is_symlink() or cache_file.stat().st_size > 1 << 20:
            return {}
        data = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


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
    if not bf16_is_native(device):
        return "fp32", f"auto: {processor} has no native bf16"
    if torch.device(device).type != "cpu":
        return "bf16", f"auto: {processor} computes bf16 natively"
    faster, speedup = probe_cpu_bf16()
    if faster:
        return "bf16", f"auto: bf16 measured {speedup:.2f}x as fast as fp32 on {processor}"
    return "fp32", (f"auto: {processor} has bf16 instructions, but bf16 measured only {speedup:.2f}x as fast "
                    f"as fp32 (bf16 needs {PROBE_MIN_SPEEDUP}x)")


def autocast(device, precision: str, cache: bool = True):
    """The autocast context of a resolved ``precision`` on ``device`` (none for fp32, so that a
    device autocast does not know, e.g. the ``meta`` device tests trace a step on, trains in fp32).
    ``cache``: keep the bf16 copies of weights within the context (off in a step captured in a
    CUDA graph, as PyTorch asks)."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, cache_enabled=cache)
