"""Training on one CUDA GPU against the GPU's own measured bf16 peak (issue 21, item 5).

Prints, all measured in this run (times with CUDA events):

1. the device's dense bf16 peak: an 8192 x 8192 x 8192 bf16 matrix product, best of several;
2. images/s of one run alone, eager and with its step captured in a CUDA graph (``cuda_graph``):
   the trainer's steps (``train_steps``) with the ``paper`` budget's settings for LeNet++
   (activation-free, Adam lr 0.01, batch 128, bf16, sample weights; objectosphere, the slowest
   approach) on synthetic 28 x 28 images held on the GPU, and the share of the peak it reaches
   with the project's FLOP count per training image (``bench_roofline.training_flops_per_image``:
   forward and backward, 0.484 GFLOP);
3. images/s of N runs at once, summed (child processes started by ``training.concurrent.run_jobs``,
   as ``reproduce`` starts its ``concurrent_runs``; a barrier starts their timed epochs together);
4. images/s of S seeds batched as one model (also with ``cuda_graph``) (``Training(..., seeds=...)``, ``training.seed_batch``),
   summed over the seeds, and S batched runs in each of the N processes of 3. (each unit of
   concurrency a batch of seeds, as ``reproduce`` runs ``batched_seeds`` with ``concurrent_runs``);
5. host synchronisations per training step and per epoch end, counted with
   ``torch.cuda.set_sync_debug_mode("warn")``, with the source line of each kind.

On a machine without CUDA it prints "no CUDA device" and exits 0.

    PYTHONPATH=src python3 benchmarks/bench_gpu.py [--runs 4] [--samples 65536] [--repeats 3]
"""
import argparse
import dataclasses
import multiprocessing
import sys
import warnings
from collections import Counter

import torch

from agnostophobia.training.concurrent import GPU_AUTO_RUNS, Job, run_jobs
from agnostophobia.training.config import load_experiment
from agnostophobia.training.hostsync import read_once
from agnostophobia.training.trainer import Training, train_one_epoch, train_one_epoch_seeds, train_steps

APPROACH = "objectosphere"


def paper_config(epochs: int, graph: bool = False):
    """The ``paper`` budget's objectosphere run of ``lenet++``, on CUDA, without logging; with
    ``graph`` its step captured in a CUDA graph (``cuda_graph``)."""
    cfg = load_experiment("lenet++").for_budget("paper").for_approach(APPROACH, 0)
    return dataclasses.replace(cfg, device="cuda", epochs=epochs, tensorboard=False, progress=False,
                               cuda_graph=graph).validate()


def bf16_peak_tflops(size: int = 8192, repeats: int = 5, calls: int = 20) -> float:
    """Dense bf16 TFLOP/s of a large matrix product, timed with CUDA events (best of ``repeats``)."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    a @ b  # warm-up: cuBLAS handle and kernel choice
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            a @ b
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return 2 * size ** 3 / best / 1e12


def timed_epochs(run: Training, repeats: int, barrier=None) -> float:
    """Best images/s over ``repeats`` epochs of ``train_steps`` (after a warm-up epoch), each timed
    with CUDA events from the first launch to the end of the last step's work; summed over the
    seeds of a batched run."""
    train_one_epoch_seeds(run, 0)  # warm-up (one row per seed: a batched run has several)
    if barrier is not None:
        barrier.wait()
    best = 0.0
    for epoch in range(1, repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        sums = train_steps(run, epoch)
        end.record()
        end.synchronize()
        read_once(sums.loss_sum)  # the epoch's one read, outside the timed span
        seeds = len(run.seed_cfgs)
        best = max(best, seeds * len(run.train_data) / (start.elapsed_time(end) / 1e3))
    return best


def run_rate(samples: int, repeats: int, barrier=None, seeds: int = 0, graph: bool = False) -> float:
    """One run's images/s, or with ``seeds`` > 0 that many seeds batched; with ``graph`` the step
    replayed from a CUDA graph (captured in the warm-up epoch). Module-level: a child process of
    ``run_jobs`` calls it."""
    from bench_roofline import make_protocol  # the synthetic LeNet++ data of the CPU benchmarks

    batch = list(range(seeds)) if seeds else None
    run = Training(paper_config(repeats + 1, graph), make_protocol(samples), seeds=batch)
    rate = timed_epochs(run, repeats, barrier)
    if graph and run.captured_step.captures != 1:  # the lr is constant: one capture, in the warm-up epoch
        print(f"   (the step was captured {run.captured_step.captures} times)")
    return rate


def concurrent_rate(runs: int, samples: int, repeats: int, seeds: int = 0) -> float:
    barrier = multiprocessing.get_context("spawn").Barrier(runs)
    rates = []
    run_jobs([Job(f"run{i}", run_rate, (samples, repeats, barrier, seeds)) for i in range(runs)], processes=runs,
             threads=1, on_start=lambda job: None, on_done=lambda job, rate: rates.append(rate))
    return sum(rates)


def count_syncs(samples: int):
    """Host synchronisations of one epoch's steps and of its end, and where each kind came from."""
    from bench_roofline import make_protocol

    run = Training(paper_config(2), make_protocol(samples))
    train_one_epoch(run, 0)
    torch.cuda.synchronize()
    counts = {}
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as during_steps:
            warnings.simplefilter("always")
            sums = train_steps(run, 1)
        with warnings.catch_warnings(record=True) as at_end:
            warnings.simplefilter("always")
            read_once(sums.watch.flags(), sums.loss_sum, sums.correct)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    for name, caught in (("steps", during_steps), ("end", at_end)):
        syncs = [w for w in caught if "synchroniz" in str(w.message)]
        counts[name] = (len(syncs), Counter(f"{w.filename}:{w.lineno}" for w in syncs))
    return run.steps_per_epoch, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=GPU_AUTO_RUNS, help="runs at once in 3. (default: what "
                        "concurrent_runs: auto starts on a GPU)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds batched in 4.")
    parser.add_argument("--samples", type=int, default=65536, help="training images per epoch")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs (the best is reported)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 0
    from bench_roofline import training_flops_per_image  # the project's one FLOP count

    sys.stdout.reconfigure(line_buffering=True)
    flops = training_flops_per_image("none")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, {APPROACH} with the lenet++ paper "
          f"budget's settings, {args.samples} images/epoch, best of {args.repeats} epochs, "
          f"{flops / 1e9:.3f} GFLOP per training image")
    peak = bf16_peak_tflops()
    print(f"1. bf16 peak (8192^3 matrix product, CUDA events): {peak:7.1f} TFLOP/s")

    def line(label, rate):
        achieved = rate * flops / 1e12
        print(f"{label:38s} {rate:10.0f} images/s  {achieved:6.1f} TFLOP/s  {achieved / peak:6.1%} of the bf16 peak")

    one = run_rate(args.samples, args.repeats)
    line("2. one run alone", one)
    graphed = run_rate(args.samples, args.repeats, graph=True)
    line("   one run, step in a CUDA graph", graphed)
    print(f"   x{graphed / one:.2f} the one run (cuda_graph: true)")
    many = concurrent_rate(args.runs, args.samples, args.repeats)
    line(f"3. {args.runs} runs at once, summed", many)
    print(f"   x{many / one:.2f} the one run")
    batched = run_rate(args.samples, args.repeats, seeds=args.seeds)
    line(f"4. {args.seeds} seeds batched, summed", batched)
    print(f"   x{batched / one:.2f} the one run")
    batched_graph = run_rate(args.samples, args.repeats, seeds=args.seeds, graph=True)
    line(f"   {args.seeds} seeds batched, CUDA graph", batched_graph)
    print(f"   x{batched_graph / one:.2f} the one run")
    both = concurrent_rate(args.runs, args.samples, args.repeats, seeds=args.seeds)
    line(f"   {args.runs} x {args.seeds} seeds batched, summed", both)
    print(f"   x{both / one:.2f} the one run")
    steps, counts = count_syncs(args.samples)
    in_steps, where_steps = counts["steps"]
    at_end, where_end = counts["end"]
    print(f"5. host synchronisations: {in_steps / steps:.3f} per training step ({in_steps} in {steps} steps), "
          f"{at_end} at the epoch's end")
    for label, where in (("steps", where_steps), ("end", where_end)):
        for place, count in where.most_common(10):
            print(f"   {label}: {count:6d} at {place}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
