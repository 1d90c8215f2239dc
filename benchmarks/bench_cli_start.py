"""Time ``agnostophobia --help`` against ``python -c "import torch"``: the command line must
answer before torch could even be imported (issue 33).

    python benchmarks/bench_cli_start.py [--repeats 5] [--target 0.25]

Both run as fresh processes of this interpreter (``python -m agnostophobia --help``: what the
``agnostophobia`` script runs), ``--repeats`` times each, interleaved so that a change of the
machine's load falls on both alike; the medians and their ratio are printed. Exits with
status 1 if the ratio exceeds ``--target``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"  # this tree's package, not an installed one


def seconds(command) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.25, help="largest acceptable ratio")
    args = parser.parse_args(argv)

    cli = [sys.executable, "-m", "agnostophobia", "--help"]
    torch_import = [sys.executable, "-c", "import torch"]
    seconds(torch_import)  # warm the file cache: the first import of torch reads ~1 GB from disk
    times = {"cli": [], "torch": []}
    for _ in range(args.repeats):
        times["cli"].append(seconds(cli))
        times["torch"].append(seconds(torch_import))
    cli_s, torch_s = statistics.median(times["cli"]), statistics.median(times["torch"])
    ratio = cli_s / torch_s
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median of {args.repeats}: agnostophobia --help {cli_s:.3f} s, python -c 'import torch' {torch_s:.3f} s; "
          f"ratio {ratio:.3f} (target <= {args.target}); load average {load:.2f} on {os.cpu_count()} CPUs")
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    raise SystemExit(main())
