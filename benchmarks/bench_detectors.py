"""Benchmark: every registered detector fitted on 100,000 training knowns and scoring 100,000
test samples, side by side with k-NN, in one run.

The data imitate LeNet++ (2-D deep features, 10 classes, a bias-free logit layer): each
class a cluster along its own direction, the knowns at magnitudes 2-10, half the test
set unknowns near the origin. Each detector runs in a fresh process (``spawn``) that
builds the same data from the seed, so its peak resident memory (``VmHWM``, numpy and
torch buffers alike) is its own; "above the inputs" subtracts the resident memory once
the data exist. k-NN's full distance matrix would take 100,000 x 100,000 x 8 bytes =
80 GB; its chunked search holds one block at a time, and 200 of its queries are checked
against a brute-force search, as the earlier ``bench_knn.py`` did.

A detector added after the paper (EVM, PostMax, GHOST) must take at most 1.5 x k-NN's
time (fit + scores); the script exits with 1 when one does not. k-NN runs first and
last, and its time is the mean of the two, since other work on the machine may change
during the run.

    .venv/bin/python benchmarks/bench_detectors.py [--n 100000] [--train 100000] [--dim 2] [--classes 10]
"""
from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np

from agnostophobia.detectors import DETECTORS, build_detector

NEW = ("evm", "postmax", "ghost")
LIMIT = 1.5  # times k-NN's time


def resident_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def make_data(n_test: int, n_train: int, dim: int, classes: int, seed: int = 0):
    """LeNet++-like (logits, features, labels) for training and test; test labels -1 = unknown."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(classes, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    weights = 4.0 * directions  # bias-free logit layer along the class directions

    def split(n, unknown_share):
        labels = rng.integers(0, classes, n)
        features = directions[labels] * rng.uniform(2, 10, (n, 1)) + 0.5 * rng.normal(size=(n, dim))
        unknown = rng.random(n) < unknown_share
        features[unknown] = rng.normal(scale=0.7, size=(int(unknown.sum()), dim))
        labels[unknown] = -1
        return features @ weights.T, features, labels

    return split(n_train, 0.0), split(n_test, 0.5)


def knn_check(detector, scores, test_features, train_features, k: int) -> float:
    """Largest |difference| of 200 k-NN scores from a brute-force search."""
    z = test_features[:200] / np.linalg.norm(test_features[:200], axis=1, keepdims=True)
    ref = train_features / np.linalg.norm(train_features, axis=1, keepdims=True)
    brute = np.sort(np.sqrt(((z[:, None, :] - ref[None]) ** 2).sum(-1)), axis=1)[:, k - 1]
    return float(np.abs(scores[:200].max(1) + brute).max())


def measure(name: str, args) -> dict:
    """Fit and score one detector (in its own process); times in s, memory in MB."""
    (train_logits, train_features, train_labels), (logits, features, labels) = make_data(
        args.n, args.train, args.dim, args.classes)
    base = resident_mb("VmRSS")
    start = time.perf_counter()
    detector = build_detector(name).fit(train_logits, train_features, train_labels)
    fitted = time.perf_counter()
    scores = detector.scores(logits, features)
    done = time.perf_counter()
    result = {"name": name, "fit": fitted - start, "scores": done - fitted, "peak": resident_mb("VmHWM"),
              "above": resident_mb("VmHWM") - base, "settings": detector.settings()}
    if name == "knn":
        result["check"] = knn_check(detector, scores, features, train_features, detector.k)
    if name == "evm":
        result["extreme_vectors"] = len(detector.ev_class_)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="test samples")
    parser.add_argument("--train", type=int, default=100_000, help="training knowns")
    parser.add_argument("--dim", type=int, default=2, help="deep-feature dimension (LeNet++: 2)")
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()

    print(f"detector benchmark: {args.train:,} training knowns, {args.n:,} test samples, {args.dim}-D features, "
          f"{args.classes} classes (a full float64 k-NN distance matrix would be "
          f"{args.n * args.train * 8 / 1e9:,.0f} GB)")
    names = ["knn"] + [name for name in DETECTORS.names() if name != "knn"]
    context = multiprocessing.get_context("spawn")  # a fresh process per detector: its own peak memory
    results = {}
    with context.Pool(1, maxtasksperchild=1) as pool:
        for name in names:
            results[name] = pool.apply(measure, (name, args))
        last = pool.apply(measure, ("knn", args))
    knn = results["knn"]
    knn_time = 0.5 * (knn["fit"] + knn["scores"] + last["fit"] + last["scores"])
    for when, r in (("first", knn), ("last", last)):
        print(f"k-NN ({when}): fit {r['fit']:.2f} s, scores {r['scores']:.1f} s "
              f"({args.n * args.train / r['scores'] / 1e6:,.0f} M distances/s), peak resident memory "
              f"{r['peak']:,.0f} MB, {r['above']:,.0f} MB above the inputs; 200 queries against brute force: "
              f"max |difference| {r['check']:.1e}")
    print(f"k-NN time (mean of both): {knn_time:.1f} s")
    print(f"{'detector':<22}{'fit s':>9}{'scores s':>10}{'total s':>10}{'x k-NN':>8}{'peak MB':>9}"
          f"{'above inputs MB':>17}  settings")
    missed = []
    for name in names:
        r = results[name]
        total = r["fit"] + r["scores"]
        extra = f", {r['extreme_vectors']:,} extreme vectors" if "extreme_vectors" in r else ""
        print(f"{name:<22}{r['fit']:>9.2f}{r['scores']:>10.2f}{total:>10.2f}{total / knn_time:>8.2f}"
              f"{r['peak']:>9,.0f}{r['above']:>17,.0f}  {r['settings']}{extra}")
        if name in NEW and total > LIMIT * knn_time:
            missed.append(name)
    if max(knn["check"], last["check"]) > 1e-8:
        raise SystemExit("chunked k-NN and brute force disagree")
    if missed:
        raise SystemExit(f"{', '.join(missed)} took more than {LIMIT} x k-NN's time")


if __name__ == "__main__":
    main()
