"""How long a benchmark trains on this machine, read from one seed of every approach it trains from
scratch (issue 55: each published protocol under 6 h of training on a 2-core machine).

A whole CIFAR-split benchmark trains 65 networks: longer than a sitting on this machine, whose
processor changes between sittings, so its time summed over sittings mixes processors. One seed of
every approach trains in under an hour on one processor, and every seed costs the same (the same
data, epochs and network), so that seed's networks are measured alone, two at a time as the
benchmark trains them, and the record gives their seconds. Start the benchmark in a fresh folder,
alone on the machine, and stop it once the seed's networks have finished (it trains seed by seed,
and every fine-tune after every seed's networks from scratch)::

    agnostophobia benchmark cifar10-split --budget converged --seeds 5 \\
        --set "approaches=[softmax, background, ...]" --out runs/budget-timing
    python benchmarks/budget_timing.py runs/budget-timing docs/results/budget-timing-cifar.json --seed 0

The record holds each of the seed's networks' seconds (``timings.json``: one thread each, two at a
time) and how many trained at a time, with the code's commit and the processor;
``docs/result_facts.py`` projects the whole benchmark from it."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List

from agnostophobia.rundir import RunDir
from agnostophobia.training.records import read_run_config, read_timings, read_wall_time
from trivial_separability import write_record


def seed_seconds(run: Path, seed: int) -> Dict[str, float]:
    """Seconds of training of each of ``seed``'s finished networks in benchmark run ``run``, by
    approach (the run's checked ``timings.json``); an error naming the file where the run holds none
    of that seed."""
    prefix = f"seed{seed}/"
    seconds = {key[len(prefix):]: float(value) for key, value in read_timings(run).items()
               if key.startswith(prefix)}
    if not seconds:
        raise SystemExit(f"{RunDir(run).timings}: no network of seed {seed} has finished")
    return seconds


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the benchmark's run folder (its timings.json and wall_time.json)")
    parser.add_argument("out", type=Path, help="the JSON record to write")
    parser.add_argument("--seed", type=int, default=0, help="the seed whose networks are read (default 0)")
    args = parser.parse_args(argv)
    wall = read_wall_time(args.run)
    if wall is None:
        raise SystemExit(f"{RunDir(args.run).wall_time}: missing; the run has trained no network yet")
    record = {"seed": args.seed, "seconds": seed_seconds(args.run, args.seed),
              "concurrent_runs": wall["concurrent_runs"], "config": read_run_config(args.run)}
    write_record(args.out, record, __file__, argv)
    print(json.dumps({key: record[key] for key in ("seconds", "concurrent_runs")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
