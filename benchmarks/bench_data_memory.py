"""Build the full ``lenet++`` protocol and report the load time and peak resident memory.

    AGNOSTOPHOBIA_DATA=/path/to/data python benchmarks/bench_data_memory.py [--data-dir D] [--limit-mb 1536]

Peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of this process (numpy,
Pillow and the data code; torch is not imported). Exits with status 1 if the peak
exceeds ``--limit-mb`` (1.5 GB by default). Without data it prints SKIPPED and exits 0.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-mb", type=float, default=1536.0)
    args = parser.parse_args(argv)

    from agnostophobia.data import DATASETS, build_protocol, data_dir

    root = data_dir(args.data_dir)
    if DATASETS.get("mnist").find(root) is None:
        print(f"SKIPPED: no data in {root} (set AGNOSTOPHOBIA_DATA or --data-dir)")
        return 0
    base = rss_mb()
    start = time.perf_counter()
    protocol = build_protocol("lenet++", root, seed=args.seed)
    elapsed = time.perf_counter() - start
    peak = rss_mb()
    held = sum(s.images.nbytes + s.labels.nbytes for s in
               [protocol.train, protocol.val, protocol.test_known, *protocol.test_unknowns.values()]) / 2**20
    sizes = ", ".join(f"{k} {v['known'] + v['unknown']:,}" for k, v in protocol.sizes().items())
    print(f"lenet++ protocol from {root}")
    print(f"  samples: {sizes}")
    print(f"  build time {elapsed:.2f} s")
    print(f"  peak RSS {peak:.0f} MiB (after imports {base:.0f} MiB); protocol arrays hold {held:.0f} MiB")
    if peak > args.limit_mb:
        print(f"FAIL: peak RSS {peak:.0f} MiB exceeds {args.limit_mb:.0f} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
