"""Whether seeds trained batched (``batched_seeds: true``) are as good a sample of each approach as
seeds trained separately: the rule under which ``batched_seeds: auto`` may turn on with CUDA.

Reads the ``metrics.json`` of two reproductions of one experiment and budget that differ only in
``batched_seeds`` (e.g. ``reproduce lenet++ --budget cpu --seeds 5 --batched-seeds true`` and
``--batched-seeds false``) and compares, cell by cell (approach/detector row x unknown set x FPR),
the CCR at each ``--fpr`` (default 1e-2 and 1e-1): a cell agrees when the batched seeds' mean CCR
lies within the separate seeds' mean +- max(2 standard deviations, 0.01). Cells where either run
has no value at that FPR (too few unknowns) are left out and counted. Prints every cell that
disagrees, the share that agrees, the two wall times, and ``agree: yes`` when at least
``--needed`` (0.9) of the cells agree, else ``agree: no``.

    python benchmarks/compare_batched_ccr.py BATCHED_RUN SEPARATE_RUN [--fpr 1e-2 --fpr 1e-1] [--needed 0.9]
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

MARGIN = 0.01  # the smallest tolerance: below it a CCR differs by a handful of test samples


def fpr_key(fpr: float) -> str:
    """metrics.json's spelling of an FPR (``1e-2``)."""
    mantissa, exponent = f"{fpr:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def seed_values(run: Path, fprs):
    """``{(row, unknowns, fpr key): [CCR of each seed]}`` from the run's per-seed records (None kept)."""
    path = run / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
        records = metrics["per_seed"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not a run's metrics ({exc})")
    cells = defaultdict(list)
    for record in records:
        for fpr in fprs:
            cells[(record["row"], record["unknowns"], fpr_key(fpr))].append(record["ccr_at_fpr"].get(fpr_key(fpr)))
    return cells, metrics


def compare(batched: dict, separate: dict):
    """``(agreeing, disagreeing, unmeasured)``: the cells both runs have, split by the rule."""
    agree, disagree, unmeasured = [], [], []
    for cell in sorted(set(batched) & set(separate)):
        ours, theirs = batched[cell], separate[cell]
        if any(v is None for v in ours + theirs) or len(theirs) < 2:
            unmeasured.append(cell)
            continue
        mean = statistics.fmean(theirs)
        tolerance = max(2 * statistics.stdev(theirs), MARGIN)
        value = statistics.fmean(ours)
        (agree if abs(value - mean) <= tolerance else disagree).append((cell, value, mean, tolerance))
    return agree, disagree, unmeasured


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batched", type=Path)
    parser.add_argument("separate", type=Path)
    parser.add_argument("--fpr", type=float, action="append", help="FPRs compared (default 1e-2 and 1e-1)")
    parser.add_argument("--needed", type=float, default=0.9, help="share of cells that must agree")
    args = parser.parse_args(argv)
    fprs = args.fpr or [1e-2, 1e-1]
    batched, batched_metrics = seed_values(args.batched, fprs)
    separate, separate_metrics = seed_values(args.separate, fprs)
    agree, disagree, unmeasured = compare(batched, separate)
    compared = len(agree) + len(disagree)
    if not compared:
        print("no cell measured in both runs: nothing to compare")
        return 1
    for (row, unknowns, fpr), value, mean, tolerance in disagree:
        print(f"differs: {row} on {unknowns} at FPR {fpr}: batched {value:.4f}, separate {mean:.4f} +- {tolerance:.4f}")
    share = len(agree) / compared
    print(f"cells: {len(agree)} of {compared} agree ({share:.1%}); {len(unmeasured)} not measured in both runs")
    for name, metrics in (("batched", batched_metrics), ("separate", separate_metrics)):
        print(f"{name}: batched_seeds {metrics.get('batched_seeds')}, {metrics.get('seeds')} seeds, "
              f"wall time {metrics.get('wall_time_s')} s")
    print(f"agree: {'yes' if share >= args.needed else 'no'} (needed {args.needed:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
