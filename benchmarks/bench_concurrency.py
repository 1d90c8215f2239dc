"""One run with every thread vs several runs at once (``concurrent_runs``), measured in one run.

For each network a reproduction's ``cpu`` budget trains (ResNet-18 width 16 on 3x32x32, the
PReLU LeNet++ and the activation-free LeNet++ on 1x28x28), in the precision ``auto`` picks:

(a) agnostophobia's trainer (``train_one_epoch``) in this process with all threads, one run;
(b) N copies of the same trainer at the same time, each in a child process started by
    ``training.concurrent.run_jobs`` (as ``reproduce`` starts them) with threads/N threads;
    the figure is the sum of their images/s over the same timed epochs (a barrier starts them
    together).

Printed: images/s of (a) and (b), their ratio, and for LeNet++ the achieved GFLOP/s as a
fraction of this machine's roofline in that precision (``bench_roofline.py``'s measurement).

    python benchmarks/bench_concurrency.py [--runs 2] [--samples 3072] [--repeats 3]
"""
import argparse
import multiprocessing
from types import SimpleNamespace

import numpy as np
import torch

from agnostophobia.training.allocator import keep_freed_memory
from agnostophobia.training.concurrent import Job, available_cores, run_jobs, threads_per_run
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.precision import resolve_precision
from agnostophobia.training.trainer import Training, train_one_epoch

NETWORKS = {  # name: (model, model_kwargs, input shape, optimiser settings of its cpu budget)
    "ResNet-18 width 16 (cifar10-split cpu)": ("resnet18", {"feature_dim": 1024, "width": 16}, (3, 32, 32),
                                               {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9,
                                                "weight_decay": 5e-4, "augment": "crop-flip"}),
    "LeNet++ PReLU (lenet++ cpu)": ("lenet++", {"activation": "prelu"}, (1, 28, 28), {"lr": 1e-3}),
    "LeNet++ activation-free (the authors')": ("lenet++", {"activation": "none"}, (1, 28, 28), {"lr": 1e-3}),
}


def make_protocol(n: int, shape, classes: int = 6):
    rng = np.random.default_rng(0)
    labels = np.where(np.arange(n) % 4 == 3, -1, np.arange(n) % classes).astype(np.int64)
    split = SimpleNamespace(images=rng.integers(0, 256, (n, *shape), dtype=np.uint8), labels=labels)
    empty = SimpleNamespace(images=split.images[:0], labels=labels[:0])
    return SimpleNamespace(name="bench", num_classes=classes, train=split, val=empty)


def trainer_rate(network: str, samples: int, repeats: int, barrier=None) -> float:
    """Best images/s of ``repeats`` timed epochs of the trainer (after one warm-up epoch)."""
    model, kwargs, shape, optimiser = NETWORKS[network]
    cfg = TrainConfig(approach="entropic", model=model, model_kwargs=kwargs, epochs=repeats + 1, batch_size=128,
                      device="cpu", precision=resolve_precision("auto", torch.device("cpu")), tensorboard=False,
                      progress=False, **optimiser).validate()
    run = Training(cfg, make_protocol(samples, shape))
    train_one_epoch(run, 0)
    if barrier is not None:
        barrier.wait()  # every process starts timing together
    rates = [train_one_epoch(run, epoch)["train_images_per_s"] for epoch in range(1, repeats + 1)]
    return max(rates)


def concurrent_rate(network: str, runs: int, samples: int, repeats: int) -> float:
    barrier = multiprocessing.get_context("spawn").Barrier(runs)
    rates = []
    run_jobs([Job(f"run{i}", trainer_rate, (network, samples, repeats, barrier)) for i in range(runs)],
             processes=runs, threads=threads_per_run(runs), on_start=lambda job: None,
             on_done=lambda job, rate: rates.append(rate))
    return sum(rates)


def lenet_roofline_share(network: str, rate: float, roofline, flops) -> str:
    if not network.startswith("LeNet++") or roofline is None:
        return ""
    activation = NETWORKS[network][1]["activation"]
    precision = resolve_precision("auto", torch.device("cpu"))
    return f"  {rate * flops[activation] / 1e9 / roofline[precision]:6.1%} of {precision} roofline"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs at the same time in (b)")
    parser.add_argument("--samples", type=int, default=3072, help="training images per epoch")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs (best is reported)")
    parser.add_argument("--no-roofline", action="store_true", help="skip the roofline (peak) measurement")
    args = parser.parse_args()
    keep_freed_memory()  # as the command line does
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {available_cores()} cores, {threads} threads for (a), {args.runs} runs x "
          f"{threads_per_run(args.runs)} thread(s) for (b), precision "
          f"{resolve_precision('auto', torch.device('cpu'))}, batch 128, {args.samples} images/epoch, "
          f"best of {args.repeats}")
    roofline = flops = None
    if not args.no_roofline:
        from bench_roofline import peaks, training_flops_per_image  # the one roofline measurement

        print("\npeak GFLOP/s:")
        roofline = peaks(["fp32", "bf16"] if resolve_precision("auto", torch.device("cpu")) == "bf16" else ["fp32"])
        flops = {a: training_flops_per_image(a) for a in ("none", "prelu")}
    print()
    for network in NETWORKS:
        one = trainer_rate(network, args.samples, args.repeats)
        many = concurrent_rate(network, args.runs, args.samples, args.repeats)
        print(f"{network}")
        print(f"   (a) one run, {threads} threads          {one:7.1f} img/s{lenet_roofline_share(network, one, roofline, flops)}")
        print(f"   (b) {args.runs} runs at once, summed      {many:7.1f} img/s"
              f"{lenet_roofline_share(network, many, roofline, flops)}   x{many / one:.2f} vs (a)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
