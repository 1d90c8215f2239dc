"""Time ``metrics.ccr_at_fpr`` against a single ``np.argsort`` of the same max scores.

    python benchmarks/bench_ccr_at_fpr.py [--n 4000000] [--classes 10] [--dtype float32]

``ccr_at_fpr`` is timed end to end (input checks, max/arg-max over the (N, C) scores,
sorting, read-out); the baseline is ``np.argsort`` of the N precomputed max scores. Both
are the best of ``--repeats`` runs in the same process. Half of the samples are unknown.
Exits with status 1 if the ratio exceeds ``--target`` (4 by default).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from _timing import best_of  # this folder's timer
from agnostophobia.metrics import ccr_at_fpr


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000_000, help="samples (default 4e6)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=4.0, help="largest acceptable ratio")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    scores = rng.random((args.n, args.classes), dtype=np.dtype(args.dtype))
    labels = rng.integers(0, args.classes, args.n)
    labels[rng.random(args.n) < 0.5] = -1
    max_scores = scores.max(axis=1)

    result = ccr_at_fpr(scores, labels)  # warm-up, and show the numbers
    t_ccr = best_of(args.repeats, lambda: ccr_at_fpr(scores, labels))
    t_sort = best_of(args.repeats, lambda: np.argsort(max_scores))
    ratio = t_ccr / t_sort
    print(f"N={args.n:,} C={args.classes} {args.dtype}, {np.count_nonzero(labels < 0):,} unknown; "
          f"best of {args.repeats}")
    print(f"ccr_at_fpr        {t_ccr * 1e3:9.1f} ms   -> {np.round(result, 4).tolist()}")
    print(f"np.argsort (N,)   {t_sort * 1e3:9.1f} ms")
    print(f"ratio             {ratio:9.2f}   (target <= {args.target:g}: {'OK' if ratio <= args.target else 'FAIL'})")
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
