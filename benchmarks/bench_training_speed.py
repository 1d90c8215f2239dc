"""Every shipped network's trainer against its fastest bare loop and this machine's roofline, in one process.

For each network (LeNet++ activation-free and PReLU, the ``converged`` CIFAR recipe's airbench
network, the ``cpu`` budget's width-16 ResNet-18 and the paper's width-64 ResNet-18) and each
precision this CPU computes natively (fp32; bf16 where it has AVX512-BF16 or AMX):

1. the roofline measured in this run: a 2048^2 matrix product and the network's own largest
   convolution (channels_last, batch 128, forward), in that precision;
2. the training FLOPs per image (``torch.utils.flop_counter``, forward and backward);
3. images/s of a bare loop (index, uint8 -> float, forward, loss, backward, SGD step; one batch
   resident, channels_last), eager and compiled (``torch.compile``), and of agnostophobia's
   trainer (``train_one_epoch``) eager and with ``compile: true`` (compiled in the best precision only);
4. the ratios: the trainer against the fastest bare loop of the same network (any precision,
   eager or compiled), against the bare fp32 channels_last loop, and each run's GFLOP/s as a share
   of the matrix product's and the largest convolution's rate.

Compiling costs tens of seconds per variant (inductor, once per process); ``--no-compile`` leaves
the compiled columns out. All figures come from this one process: compare ratios, not absolute
numbers from other runs or machines.

    python benchmarks/bench_training_speed.py [--networks lenet-prelu,airbench] [--repeats 2] [--no-compile]
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Optional

import numpy as np
import torch

from agnostophobia.losses import build_loss
from agnostophobia.models import build_model
from agnostophobia.training.compiled import cpp_compiler
from agnostophobia.training.config import TrainConfig, load_experiment
from agnostophobia.training.precision import autocast, bf16_is_native
from agnostophobia.training.batches import epoch_order
from agnostophobia.training.trainer import Training, train_one_epoch
from _timing import processor_label, training_flops_per_image  # this folder's label and FLOPs
from bench_roofline import best_seconds, matmul_gflops  # the one roofline measurement (this folder)

BATCH = 128


@dataclass
class Network:
    """One shipped network as a config builds it, and the images a benchmark epoch trains on."""

    name: str
    model: str
    kwargs: Dict
    input_shape: tuple
    samples: int
    optimizer: str = "sgd"
    extra: Dict = field(default_factory=dict)


def shipped_networks() -> Dict[str, Network]:
    """The networks of the shipped configs' budgets, declared where they are used (the configs)."""
    cifar = load_experiment("cifar")
    converged, cpu, paper = (cifar.for_budget(b).train for b in ("converged", "cpu", "paper"))
    return {
        "lenet-none": Network("LeNet++ (activation-free, the authors')", "lenet++", {"activation": "none"},
                              (1, 28, 28), 1536, "adam"),
        "lenet-prelu": Network("LeNet++ PReLU (the cpu budget's)", "lenet++", {"activation": "prelu"},
                               (1, 28, 28), 1536, "adam"),
        "airbench": Network("airbench (cifar converged budget)", converged.model, dict(converged.model_kwargs),
                            (3, 32, 32), 1024, extra={"scheduler": "onecycle"}),
        "resnet18-w16": Network("ResNet-18 width 16 (cifar cpu budget)", cpu.model, dict(cpu.model_kwargs),
                                (3, 32, 32), 768),
        "resnet18-w64": Network("ResNet-18 width 64 (the paper's)", paper.model, dict(paper.model_kwargs),
                                (3, 32, 32), 256),
    }


def largest_conv_gflops(net: Network, dtype) -> float:
    """The forward rate of ``net``'s convolution with the most FLOPs, alone, channels_last."""
    model = build_model(net.model, num_outputs=6, **net.kwargs)
    shapes = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out: shapes.__setitem__(mod, (inp[0].shape, out.shape)))
             for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.rand(BATCH, *net.input_shape))
    for hook in hooks:
        hook.remove()

    def flops(conv):
        return 2 * shapes[conv][1].numel() * conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]

    conv = max(shapes, key=flops)
    alone = torch.nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                            bias=False).to(dtype).to(memory_format=torch.channels_last)
    x = torch.randn(shapes[conv][0]).to(dtype).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        return flops(conv) / best_seconds(lambda: alone(x)) / 1e9


def training_flops(net: Network) -> float:
    return training_flops_per_image(build_model(net.model, num_outputs=6, **net.kwargs), net.input_shape, 16)


def protocol(net: Network):
    rng = np.random.default_rng(0)
    n = net.samples
    labels = (np.arange(n) % 6).astype(np.int64)  # knowns only: every approach's bare minimum
    split = SimpleNamespace(images=rng.integers(0, 256, (n, *net.input_shape), dtype=np.uint8), labels=labels)
    return SimpleNamespace(name="bench", num_classes=6, train=split, val=split)


def bare_images_per_s(net: Network, data, precision: str, compiled: bool, repeats: int) -> float:
    """The least any trainer does per step, in ``precision``, eager or compiled."""
    torch.manual_seed(0)
    model = build_model(net.model, num_outputs=6, **net.kwargs).to(memory_format=torch.channels_last)
    forward = torch.compile(model) if compiled else model
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(parameters, lr=1e-3, momentum=0.9) if net.optimizer == "sgd" else \
        torch.optim.Adam(parameters, lr=1e-3)
    loss_fn = build_loss("softmax", 6)
    images, labels = torch.from_numpy(data.train.images), torch.from_numpy(data.train.labels)
    rates = []
    for epoch in range(repeats + 1):  # epoch 0 warms up (and compiles)
        order = epoch_order(len(labels), 0, epoch)
        start = time.perf_counter()
        for i in range(0, len(labels) - BATCH + 1, BATCH):  # full batches only: one compiled shape
            idx = order[i:i + BATCH]
            x = images[idx].float().div_(255).contiguous(memory_format=torch.channels_last)
            with autocast("cpu", precision):
                logits, _ = forward(x)
            loss = loss_fn(logits.float(), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch:
            rates.append((len(labels) // BATCH) * BATCH / (time.perf_counter() - start))
    return max(rates)


def trainer_images_per_s(net: Network, data, precision: str, compiled: bool, repeats: int) -> float:
    cfg = TrainConfig(approach="softmax", model=net.model, model_kwargs=net.kwargs, epochs=repeats + 1,
                      batch_size=BATCH, optimizer=net.optimizer, lr=1e-3, device="cpu", precision=precision,
                      tensorboard=False, progress=False, compile=compiled, **net.extra).validate()
    run = Training(cfg, data)
    train_one_epoch(run, 0)  # warm-up (and compile)
    return max(train_one_epoch(run, epoch)["train_images_per_s"] for epoch in range(1, repeats + 1))


def measure_network(key: str, net: Network, precisions, compile_too: bool, repeats: int, matmul) -> Dict:
    data, flops = protocol(net), training_flops(net)
    print(f"\n{key}: {net.name}, {flops / 1e9:.3f} GFLOP per training image, {net.samples} images/epoch")
    conv = {p: largest_conv_gflops(net, torch.float32 if p == "fp32" else torch.bfloat16) for p in precisions}
    bare, ours = {}, {}
    for precision in precisions:
        # compiled in the best precision only: each compile costs tens of seconds
        for compiled in (False, True) if compile_too and precision == precisions[-1] else (False,):
            tag = f"{precision}{' compiled' if compiled else ''}"
            bare[tag] = bare_images_per_s(net, data, precision, compiled, repeats)
            ours[tag] = trainer_images_per_s(net, data, precision, compiled, repeats)
            for label, rate in (("bare loop", bare[tag]), ("trainer  ", ours[tag])):
                gflops = rate * flops / 1e9
                print(f"   {label} {tag:14s} {rate:8.1f} img/s {gflops:7.1f} GFLOP/s = {gflops / matmul[precision]:6.1%} "
                      f"of the {precision} matmul, {gflops / conv[precision]:6.1%} of its largest conv "
                      f"({conv[precision]:.0f} GFLOP/s)")
    fastest_bare = max(bare, key=bare.get)
    best = max(ours, key=ours.get)
    result = {"best": best, "trainer": ours[best], "fastest_bare": (fastest_bare, bare[fastest_bare]),
              "vs_fastest_bare": ours[best] / bare[fastest_bare], "vs_bare_fp32": ours[best] / bare["fp32"],
              "vs_eager_trainer": ours[best] / ours[precisions[-1]],
              "matmul_share": ours[best] * flops / 1e9 / matmul[best.split()[0]]}
    print(f"   => trainer ({best}) x{result['vs_fastest_bare']:.2f} the fastest bare loop ({fastest_bare}), "
          f"x{result['vs_bare_fp32']:.2f} the bare fp32 channels_last loop, x{result['vs_eager_trainer']:.2f} "
          f"the eager {precisions[-1]} trainer; {result['matmul_share']:.1%} of the matmul rate")
    return result


def main(argv: Optional[list] = None) -> int:
    networks = shipped_networks()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default=",".join(networks), help=f"comma-separated, of {', '.join(networks)}")
    parser.add_argument("--repeats", type=int, default=2, help="timed epochs after the warm-up (best is reported)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the compiled variants")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.networks.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in networks]
    if unknown:
        parser.error(f"--networks: unknown {unknown}; choose from {', '.join(networks)}")
    precisions = ["fp32"] + (["bf16"] if bf16_is_native() else [])
    compile_too = not args.no_compile and bool(cpp_compiler())
    print(f"{processor_label()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"precisions {precisions}, compile: {'yes (' + cpp_compiler() + ')' if compile_too else 'no'}, "
          f"batch {BATCH}, best of {args.repeats} epochs, {time.strftime('%Y-%m-%d')}")
    matmul = {p: matmul_gflops(torch.float32 if p == "fp32" else torch.bfloat16) for p in precisions}
    print("matrix product 2048^2: " + ", ".join(f"{p} {g:.0f} GFLOP/s" for p, g in matmul.items()))
    results = {key: measure_network(key, networks[key], precisions, compile_too, args.repeats, matmul)
               for key in chosen}
    again = {p: matmul_gflops(torch.float32 if p == "fp32" else torch.bfloat16) for p in precisions}
    print("matrix product again, at the end: " + ", ".join(f"{p} {g:.0f} GFLOP/s" for p, g in again.items())
          + " (a first reading disturbed by the process's start is lower; the shares above use the first)")
    print("\nsummary (trainer's best variant):")
    for key, r in results.items():
        print(f"   {key:13s} {r['best']:14s} {r['trainer']:8.1f} img/s  x{r['vs_fastest_bare']:.2f} fastest bare  "
              f"x{r['vs_bare_fp32']:.2f} bare fp32  {r['matmul_share']:6.1%} of matmul")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
