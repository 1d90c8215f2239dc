"""Benchmark: the k-NN detector (``knn``) on 100,000 queries x 100,000 training features.

The full distance matrix would take 100,000 x 100,000 x 8 bytes = 80 GB; the chunked
search (``agnostophobia.detectors.kth_neighbour_distance``) holds one
``query_chunk x reference_chunk`` block at a time. Prints the fit and scoring time and
the peak resident memory the search added (``ru_maxrss``, which counts numpy and torch
buffers alike), and checks 200 queries against a brute-force search.

    .venv/bin/python benchmarks/bench_knn.py [--n 100000] [--train 100000] [--dim 16] [--k 50]
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from agnostophobia.detectors import build_detector


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="test samples (queries)")
    parser.add_argument("--train", type=int, default=100_000, help="training knowns (references)")
    parser.add_argument("--dim", type=int, default=16, help="deep-feature dimension")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--k", type=int, default=50)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    train_features = rng.normal(size=(args.train, args.dim))
    train_labels = rng.integers(0, args.classes, args.train)
    train_logits = rng.normal(size=(args.train, args.classes))
    features = rng.normal(size=(args.n, args.dim))
    logits = rng.normal(size=(args.n, args.classes))
    full_gb = args.n * args.train * 8 / 1e9
    print(f"k-NN benchmark: {args.n:,} queries x {args.train:,} training features, {args.dim}-D, k={args.k} "
          f"(a full float64 distance matrix would be {full_gb:,.0f} GB)")

    base = rss_mb()
    start = time.perf_counter()
    detector = build_detector("knn", k=args.k).fit(train_logits, train_features, train_labels)
    fitted = time.perf_counter()
    scores = detector.scores(logits, features)
    done = time.perf_counter()
    peak = rss_mb()
    print(f"fit {fitted - start:.2f} s, scores {done - fitted:.1f} s "
          f"({args.n * args.train / (done - fitted) / 1e6:,.0f} M distances/s)")
    print(f"peak resident memory {peak:,.0f} MB, {peak - base:,.0f} MB above the inputs")

    z = features[:200] / np.linalg.norm(features[:200], axis=1, keepdims=True)
    ref = train_features / np.linalg.norm(train_features, axis=1, keepdims=True)
    brute = np.sort(np.sqrt(((z[:, None, :] - ref[None]) ** 2).sum(-1)), axis=1)[:, args.k - 1]
    error = float(np.abs(scores[:200].max(1) + brute).max())
    print(f"200 queries against brute force: max |difference| {error:.1e}")
    if error > 1e-8:
        raise SystemExit("chunked k-NN and brute force disagree")


if __name__ == "__main__":
    main()
