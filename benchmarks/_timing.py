"""Timing shared by the benchmarks of this folder, imported as a sibling module (a benchmark runs
as ``python benchmarks/NAME.py``, which puts this folder on the import path)."""
from __future__ import annotations

import time
from typing import Callable


def best_of(repeats: int, func: Callable[[], object]) -> float:
    """The shortest of ``repeats`` wall-clock timings of ``func()``, in seconds: the run least
    disturbed by the rest of the machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)
