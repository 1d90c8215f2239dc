"""What a run's data fingerprint costs a command (issue 31, item 6): the fingerprints of every
file the LeNet++ protocol reads (``data_sources.json``), with an empty digest cache (the first
command on a machine) and with a warm one (every command after it: one ``stat`` per file).

    python benchmarks/bench_fingerprint.py [--data-dir DIR] [--repeats 5] [--target 2.0]

Prints the files, their total size, and the median seconds of each case; exits with status 1
where the warm case exceeds ``--target`` seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this tree's package

from agnostophobia.data.datasets import DATASETS  # noqa: E402
from agnostophobia.data.fingerprint import CACHE_NAME, source_fingerprint  # noqa: E402
from agnostophobia.data.paths import CACHE_ENV, data_dir as resolve_data_dir  # noqa: E402
from agnostophobia.data.protocol_types import PROTOCOLS  # noqa: E402
import agnostophobia.data.paper_protocols  # noqa: E402,F401  (registers the paper's protocols)


def timed(paths, cold: bool) -> float:
    if cold:
        (Path(os.environ[CACHE_ENV]) / CACHE_NAME).unlink(missing_ok=True)
    start = time.perf_counter()
    for path in paths:
        source_fingerprint(path)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="the data folder (default: $AGNOSTOPHOBIA_DATA)")
    parser.add_argument("--protocol", default="lenet++")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=2.0)
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir)
    paths = [DATASETS.get(name).find(root) for name in PROTOCOLS.get(args.protocol).datasets]
    paths = [path for path in paths if path is not None]
    size = sum(path.stat().st_size for path in paths)
    print(f"{args.protocol}: {len(paths)} files, {size / 1e6:.1f} MB: " + ", ".join(p.name for p in paths))
    with tempfile.TemporaryDirectory() as cache:
        os.environ[CACHE_ENV] = cache
        cold = statistics.median(timed(paths, cold=True) for _ in range(args.repeats))
        warm = statistics.median(timed(paths, cold=False) for _ in range(args.repeats))
    print(f"empty digest cache: {cold:.3f} s (median of {args.repeats})")
    print(f"warm digest cache:  {warm:.3f} s (median of {args.repeats}); target <= {args.target:g} s")
    return 0 if warm <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
