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

``--post`` measures the post-processors of issue 35 (ViM, Mahalanobis, relative Mahalanobis,
ReAct, ASH, SCALE, GEN) beside k-NN on 512-d features with 100 classes (``--dim 512 --classes
100`` unless given): each must fit and score in at most 30 s; then each is fitted once more on
100,000 training knowns of 1,000 classes, where the fit's memory above its inputs (whose logits
alone take 800 MB) must stay under 2 GB. A detector that reads the last layer gets the data's bias-free logit layer.

``--crossover`` times the CPU's two exact nearest-neighbour searches, brute force and the
k-d tree (``scipy.spatial.cKDTree``), at feature dimensions 2 to 32 (k-NN's k = 50, 100,000
reference rows, 10,000 queries): ``detectors.knn.KDTREE_MAX_DIM`` is the last dimension at
which the tree is faster.
"""
from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np
from scipy.spatial.distance import cdist

from agnostophobia.detectors import DETECTORS, build_detector

NEW = ("evm", "postmax", "ghost")
LIMIT = 1.5  # times k-NN's time
POST = ("vim", "mahalanobis", "relative-mahalanobis", "react", "ash", "scale", "gen")
POST_LIMIT_S = 30.0        # fit + scores of one post-processor at 100,000 x 100,000, 512-d
FIT_LIMIT_MB = 2048.0      # peak resident memory of a fit at 1,000 classes
CROSSOVER_DIMS = (2, 4, 8, 16, 32)


def resident_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def make_data(n_test: int, n_train: int, dim: int, classes: int, seed: int = 0):
    """LeNet++-like (logits, features, labels) for training and test; test labels -1 = unknown;
    and the bias-free logit layer (classes, dim) that made the logits."""
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

    return split(n_train, 0.0), split(n_test, 0.5), weights


def knn_check(detector, scores, test_features, train_features, k: int) -> float:
    """Largest |difference| of 200 k-NN scores from a brute-force search."""
    z = test_features[:200] / np.linalg.norm(test_features[:200], axis=1, keepdims=True)
    ref = train_features / np.linalg.norm(train_features, axis=1, keepdims=True)
    brute = np.sort(cdist(z, ref), axis=1)[:, k - 1]  # exact differences, no (200, N, D) temporary
    return float(np.abs(scores[:200].max(1) + brute).max())


def measure(name: str, args, fit_only: bool = False) -> dict:
    """Fit and score one detector (in its own process); times in s, memory in MB."""
    (train_logits, train_features, train_labels), (logits, features, labels), weights = make_data(
        0 if fit_only else args.n, args.train, args.dim, args.classes)
    base = resident_mb("VmRSS")
    start = time.perf_counter()
    detector = build_detector(name)
    if detector.needs_last_layer:
        detector.use_last_layer(weights)
    detector.fit(train_logits, train_features, train_labels)
    fitted = time.perf_counter()
    scores = None if fit_only else detector.scores(logits, features)
    done = time.perf_counter()
    result = {"name": name, "fit": fitted - start, "scores": done - fitted, "peak": resident_mb("VmHWM"),
              "above": resident_mb("VmHWM") - base, "settings": detector.settings()}
    if name == "knn":
        result["check"] = knn_check(detector, scores, features, train_features, detector.k)
    if name == "evm":
        result["extreme_vectors"] = len(detector.ev_class_)
    return result


def search_time(dim: int, search: str, n_train: int, n_queries: int, k: int = 50) -> float:
    """Seconds of one exact k-nearest search on the CPU (``search``: brute or kdtree)."""
    from agnostophobia.detectors.knn import NeighbourSearch, k_smallest_distances

    rng = np.random.default_rng(dim)
    reference, queries = rng.normal(size=(n_train, dim)), rng.normal(size=(n_queries, dim))
    start = time.perf_counter()
    k_smallest_distances(queries, reference, k, search=NeighbourSearch(search, device="cpu"))
    return time.perf_counter() - start


def crossover(args) -> None:
    """Brute force against the k-d tree per feature dimension; the tree's last winning dimension."""
    from agnostophobia.detectors.knn import KDTREE_MAX_DIM

    queries = min(args.n, 10_000)
    print(f"CPU nearest-neighbour search, k = 50, {args.train:,} reference rows, {queries:,} queries:")
    print(f"{'D':>4}{'brute s':>10}{'k-d tree s':>12}{'tree speed-up':>15}")
    faster = []
    for dim in CROSSOVER_DIMS:
        brute, tree = (search_time(dim, search, args.train, queries) for search in ("brute", "kdtree"))
        print(f"{dim:>4}{brute:>10.2f}{tree:>12.2f}{brute / tree:>14.1f}x")
        if tree < brute:
            faster.append(dim)
    last = max((d for d in faster if all(f in faster for f in CROSSOVER_DIMS if f <= d)), default=0)
    print(f"the k-d tree is faster up to D = {last}; detectors.knn.KDTREE_MAX_DIM = {KDTREE_MAX_DIM}")
    if last != KDTREE_MAX_DIM:
        print("note: the measured crossover differs from KDTREE_MAX_DIM on this machine")


def post_processors(args, pool) -> None:
    """The seven post-processors beside k-NN at 512-d, 100 classes; fits at 1,000 classes."""
    print(f"post-processors: {args.train:,} training knowns, {args.n:,} test samples, {args.dim}-D features, "
          f"{args.classes} classes")
    # k-NN's brute force at 512-d is 10^10 distances x 512: it scores --knn-queries of the test samples and
    # its scoring time is scaled to all of them (a search's time is linear in its queries)
    few = argparse.Namespace(**{**vars(args), "n": min(args.n, args.knn_queries)})
    results = {}
    if not args.only:
        results["knn"] = pool.apply(measure, ("knn", few))
        results["knn"]["scores"] *= args.n / few.n
        if few.n < args.n:
            print(f"k-NN scored {few.n:,} of the test samples; its scores time is scaled to {args.n:,}")
    chosen = args.only or POST
    results.update({name: pool.apply(measure, (name, args)) for name in chosen})
    print(f"{'detector':<22}{'fit s':>9}{'scores s':>10}{'total s':>10}{'peak MB':>9}{'above inputs MB':>17}  settings")
    slow = []
    for name, r in results.items():
        total = r["fit"] + r["scores"]
        print(f"{name:<22}{r['fit']:>9.2f}{r['scores']:>10.2f}{total:>10.2f}{r['peak']:>9,.0f}{r['above']:>17,.0f}"
              f"  {r['settings']}")
        if name in POST and total > POST_LIMIT_S:
            slow.append(name)
    wide = argparse.Namespace(**{**vars(args), "classes": 1000})
    print(f"fit at 1,000 classes ({args.train:,} training knowns, {args.dim}-D):")
    print(f"{'detector':<22}{'fit s':>9}{'peak MB':>9}{'above inputs MB':>17}")
    heavy = []
    for name in chosen:
        why = DETECTORS.get(name).not_applicable(wide.classes, wide.dim)
        if why:
            print(f"{name:<22}  not applicable: {why}")
            continue
        r = pool.apply(measure, (name, wide, True))
        print(f"{name:<22}{r['fit']:>9.2f}{r['peak']:>9,.0f}{r['above']:>17,.0f}")
        if r["above"] > FIT_LIMIT_MB:  # the inputs alone (1,000 logit columns) take 1.2 GB
            heavy.append(name)
    if slow or heavy:
        raise SystemExit(f"over {POST_LIMIT_S:.0f} s: {slow}; fit over {FIT_LIMIT_MB:.0f} MB: {heavy}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="test samples")
    parser.add_argument("--train", type=int, default=100_000, help="training knowns")
    parser.add_argument("--dim", type=int, default=None, help="deep-feature dimension (LeNet++: 2, the default; "
                                                                "--post: 512)")
    parser.add_argument("--classes", type=int, default=None, help="classes (10; --post: 100)")
    parser.add_argument("--post", action="store_true", help="the post-processors of issue 35 beside k-NN")
    parser.add_argument("--crossover", action="store_true", help="brute force against the k-d tree per dimension")
    parser.add_argument("--knn-queries", type=int, default=10_000, help="--post: test samples k-NN scores")
    parser.add_argument("--only", nargs="+", choices=POST, help="--post: these post-processors (without k-NN)")
    args = parser.parse_args()
    args.dim = args.dim or (512 if args.post else 2)
    args.classes = args.classes or (100 if args.post else 10)
    if args.crossover:
        crossover(args)
    if args.post:
        with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
            post_processors(args, pool)
    if args.crossover or args.post:
        return

    print(f"detector benchmark: {args.train:,} training knowns, {args.n:,} test samples, {args.dim}-D features, "
          f"{args.classes} classes (a full float64 k-NN distance matrix would be "
          f"{args.n * args.train * 8 / 1e9:,.0f} GB)")
    names = ["knn"] + [name for name in DETECTORS.names() if name != "knn"]
    for name in names[1:]:  # e.g. ViM at LeNet++'s 2-D features: said, not a crash
        why = DETECTORS.get(name).not_applicable(args.classes, args.dim)
        if why:
            print(f"{name}: not applicable at {args.dim}-D features and {args.classes} classes: {why}")
            names.remove(name)
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
