"""Keep freed memory in the process instead of returning it to the operating system.

glibc's ``malloc`` serves blocks above its mmap threshold (128 KiB, adapting up to 32 MiB)
with fresh ``mmap`` pages and gives them back on ``free``; it also trims the top of the
heap. A training step frees and re-allocates the same activation and gradient buffers
every time, so each step faults those pages in again: 7,600 minor page faults per
LeNet++ step at batch 128 here, 74 million in one ``cpu`` reproduction, all of it kernel
time. With both thresholds raised, the buffers are reused from the heap (about 400 faults
per step; ``benchmarks/bench_roofline.py`` prints both). The cost is that the process
keeps its peak heap until it exits, which suits a training process.

Called once by the command line; library users may call :func:`keep_freed_memory` at the
start of their own training script.
"""
from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 2**20    # glibc's largest allowed value on 64-bit machines
_TRIM_THRESHOLD = 2**31 - 1


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; returns whether it was applied (Linux/glibc only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or another C library: leave it as it is
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
