"""Training images/s of agnostophobia's trainer against a bare PyTorch loop.

Same model (LeNet++), batch (128), data (synthetic uint8 28x28 images, half of them
unknowns), loss (Entropic Open-Set), optimiser (Adam) and threads, in one run. The bare
loop is the minimum any trainer must do: index a batch, convert to float, forward,
loss, backward, step. Ours also weights samples, counts accuracy, checks inputs, drives
the progress bar, and is measured through ``train_one_epoch``.
Target: ours >= 90 % of the bare loop's images/s.

    python benchmarks/bench_trainer.py [--samples 6144] [--repeats 3]
"""
import argparse
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch

from agnostophobia.losses import EntropicOpenSetLoss
from agnostophobia.models import build_model
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.trainer import Training, epoch_order, to_input, train_one_epoch


def make_protocol(n: int):
    rng = np.random.default_rng(0)
    labels = np.where(np.arange(n) % 2 == 0, np.arange(n) % 10, -1).astype(np.int64)
    split = SimpleNamespace(images=rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8), labels=labels)
    return SimpleNamespace(name="bench", num_classes=10, train=split, val=split)


def bare_epoch(model, images, labels, optimizer, loss_fn, batch, epoch):
    model.train()
    order = epoch_order(len(labels), 0, epoch)
    start = time.perf_counter()
    for i in range(0, len(labels), batch):
        idx = order[i:i + batch]
        x = images[idx].float().div_(255).contiguous(memory_format=torch.channels_last)
        logits, _ = model(x)
        loss = loss_fn(logits, labels[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return len(labels) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6144)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    protocol = make_protocol(args.samples)
    cfg = TrainConfig(approach="entropic", epochs=args.repeats + 1, batch_size=128, lr=1e-3,
                      model_kwargs={"activation": "none"}, tensorboard=False, progress=True,
                      device="cpu").validate()
    run = Training(cfg, protocol)

    torch.manual_seed(0)
    model = build_model("lenet++", num_outputs=10).to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = EntropicOpenSetLoss(10)
    images, labels = torch.from_numpy(protocol.train.images), torch.from_numpy(protocol.train.labels)

    from tqdm.auto import tqdm
    ours, bare = [], []
    with tempfile.TemporaryDirectory():
        bar = tqdm(total=(args.repeats + 1) * -(-args.samples // 128), file=sys.stderr, leave=False)
        for epoch in range(args.repeats + 1):  # epoch 0 warms up both
            b = bare_epoch(model, images, labels, optimizer, loss_fn, 128, epoch)
            o = train_one_epoch(run, epoch, bar)["train_images_per_s"]
            if epoch:
                bare.append(b)
                ours.append(o)
        bar.close()
    best_ours, best_bare = max(ours), max(bare)
    print(f"threads {torch.get_num_threads()}, {args.samples} images/epoch, batch 128, best of {args.repeats}")
    print(f"bare PyTorch loop      {best_bare:8.1f} images/s   (all: {', '.join(f'{v:.0f}' for v in bare)})")
    print(f"agnostophobia trainer  {best_ours:8.1f} images/s   (all: {', '.join(f'{v:.0f}' for v in ours)})")
    ratio = best_ours / best_bare
    print(f"ratio                  {ratio:8.3f}   (target >= 0.90: {'OK' if ratio >= 0.9 else 'MISSED'})")
    return 0 if ratio >= 0.9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
