"""Seeds trained separately against the same seeds batched as one model (``batched_seeds``), on
real data: the wall time of each way and what each seed learnt.

Both ways run the trainer's own ``fit`` (one seed at a time, as ``batched_seeds: false`` with
``concurrent_runs: 1`` trains them) and ``fit_seeds`` (every seed in one batched model, as
``batched_seeds: true``), with a config's budget, on the protocol built from ``--data-dir``.
Each epoch validates and writes each seed's checkpoints, as a reproduction does. Printed:

1. wall seconds and training images/s of each way (the whole ``fit``: training, the validation
   of every epoch and the checkpoints; CUDA synchronised before each clock read), and their ratio;
2. each seed's validation loss and accuracy after every epoch, separate beside batched;
3. over the seeds, the mean and spread of the last epoch's validation loss and accuracy each way,
   and the largest difference of one seed's validation accuracy between the two ways.

The two ways are the same function of the data (``tests/training/test_seed_batch.py``: within 4e-15 in
float64); in bf16 or fp32 the batched (grouped) convolutions round differently, so a seed's two
trainings drift apart as two kernel choices would. What the comparison can show is whether the
batched seeds are as good a sample of the approach as the separate ones, and how much faster.

    PYTHONPATH=src python3 benchmarks/compare_batched_seeds.py --data-dir DATA [--experiment lenet++]
        [--budget paper] [--approach objectosphere] [--seeds 5] [--epochs 3] [--device cuda]
        [--limit max_known_train=N ...] [--out DIR]

With ``--device cuda`` (the default) on a machine without CUDA it prints "no CUDA device" and exits 0.
"""
import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from agnostophobia.training.config import load_experiment, protocol_for
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.fitting import fit, fit_seeds


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, train) -> float:
    synchronize(device)
    start = time.perf_counter()
    train()
    synchronize(device)
    return time.perf_counter() - start


def parse_limit(text: str):
    name, _, value = text.partition("=")
    if not name or not value.isdigit():
        raise argparse.ArgumentTypeError(f"--limit wants NAME=N (e.g. max_known_train=2000), got {text!r}")
    return name, int(value)


def spread(values) -> str:
    values = list(values)
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} +- {deviation:.4f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="the datasets (NAME/NAME.npz), as AGNOSTOPHOBIA_DATA")
    parser.add_argument("--experiment", default="lenet++", help="a shipped config or a YAML path")
    parser.add_argument("--budget", default="paper")
    parser.add_argument("--approach", default="objectosphere")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=parse_limit, action="append", default=[], metavar="NAME=N",
                        help="a protocol limit on top of the budget's (e.g. max_known_train=2000)")
    parser.add_argument("--out", type=Path, help="where the runs are written (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device")
        return 0
    sys.stdout.reconfigure(line_buffering=True)
    experiment = load_experiment(args.experiment).for_budget(args.budget)
    limits = {**experiment.train.protocol_limits, **dict(args.limit)}
    seeds = list(range(args.seeds))
    configs = [dataclasses.replace(experiment.for_approach(args.approach, seed), epochs=args.epochs,
                                   device=args.device, data_dir=args.data_dir, protocol_limits=limits,
                                   tensorboard=False, progress=False, cuda_graph=False).validate()
               for seed in seeds]
    protocol = protocol_for(configs[0])
    images = len(protocol.train.labels) * args.epochs * len(seeds)
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        separate_dirs = [out / "separate" / f"seed{seed}" for seed in seeds]
        batched_dirs = [out / "batched" / f"seed{seed}" for seed in seeds]
        device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
        print(f"{args.experiment} budget {args.budget}, {args.approach}, {len(seeds)} seeds x {args.epochs} epochs, "
              f"{len(protocol.train.labels)} training images, precision {configs[0].precision}, on {device_name}, "
              f"torch {torch.__version__}")
        separate = timed(args.device, lambda: [fit(cfg, protocol, run_dir, resume=False)
                                               for cfg, run_dir in zip(configs, separate_dirs)])
        batched = timed(args.device, lambda: fit_seeds(configs[0], protocol, dict(zip(seeds, batched_dirs)), resume=False))
        print(f"1. separate: {separate:8.1f} s  {images / separate:9.0f} training images/s")
        print(f"   batched:  {batched:8.1f} s  {images / batched:9.0f} training images/s  "
              f"x{separate / batched:.2f} the separate runs")
        histories = {way: [load_checkpoint(d / "last.pt")["history"] for d in dirs]
                     for way, dirs in (("separate", separate_dirs), ("batched", batched_dirs))}
    print("2. seed epoch   val_loss separate / batched    val_acc separate / batched")
    for seed, one, other in zip(seeds, histories["separate"], histories["batched"]):
        for row, twin in zip(one, other):
            print(f"   {seed:4d} {row['epoch']:5d}   {row['val_loss']:9.4f} / {twin['val_loss']:9.4f}"
                  f"     {row['val_acc']:7.4f} / {twin['val_acc']:7.4f}")
    last = {way: [rows[-1] for rows in runs] for way, runs in histories.items()}
    print("3. last epoch over the seeds (mean +- standard deviation)")
    for way, rows in last.items():
        print(f"   {way:9s} val_loss {spread(r['val_loss'] for r in rows)}   val_acc {spread(r['val_acc'] for r in rows)}")
    gap = max(abs(a["val_acc"] - b["val_acc"]) for a, b in zip(last["separate"], last["batched"]))
    print(f"   largest difference of one seed's val_acc between the ways: {gap:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
