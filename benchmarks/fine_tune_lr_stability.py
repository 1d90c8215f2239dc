"""Whether each fine-tuning loss trains or diverges at a learning rate, from a trained start network:
the measurement behind the learning rates of the fine-tunes on glyph images (``lenet++``), where
Outlier Exposure's MNIST recipe (lr 10⁻²) is the only published one (docs/training-peers.md).

Loads the best network of a trained model folder (a softmax run: ``RUN/seed0/softmax``), reads its
run's training data, and for each loss and learning rate takes ``--steps`` SGD steps (momentum 0.9,
Nesterov, no weight decay: OE's MNIST recipe) on the same batches from the same start, as the
trainer does (MixOE's batch hook mixes the negatives). Prints the start network's free energies
(the energy loss's margins are -23 and -5) and, per loss and lr, the loss at the first and the last
step, or the step where it became non-finite.

    python benchmarks/fine_tune_lr_stability.py RUN/seed0/softmax [--lr 1e-2 --lr 1e-3] [--steps 200]
"""
import argparse
import copy
import csv
from pathlib import Path

import torch

from agnostophobia.losses import LOSSES
from agnostophobia.training import load_trained_model, protocol_for

LOSS_NAMES = ("outlier-exposure", "energy-regularized", "mixoe")


def start_energies(model, images, labels) -> str:
    """The start network's free energies -logsumexp(logits) of knowns and negatives."""
    with torch.no_grad():
        energy = -torch.logsumexp(model(images)[0], dim=1)
    known = labels >= 0
    parts = [f"{name} mean {e.mean():.1f} (10 % under {e.quantile(0.1):.1f})"
             for name, e in (("knowns", energy[known]), ("negatives", energy[~known])) if len(e)]
    return "start energies: " + ", ".join(parts)


def validation_accuracy(model_dir: Path) -> str:
    """The last epoch's validation accuracy in the model's ``metrics.csv``, as a phrase."""
    try:
        rows = list(csv.DictReader((model_dir / "metrics.csv").open(encoding="utf-8")))
        return f"validation accuracy {float(rows[-1]['val_acc']):.4f} after epoch {rows[-1]['epoch']}"
    except (OSError, LookupError, ValueError):
        return "no metrics.csv"


def fine_tune(start, loss_name: str, lr: float, batches) -> str:
    """The loss at the first and last of ``batches`` SGD steps from ``start``, or the divergence."""
    model = copy.deepcopy(start).train()
    loss_fn = LOSSES.get(loss_name)(num_classes=int(model.logits.out_features)).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    torch.manual_seed(0)  # MixOE's draws: the same at every lr
    first = None
    for step, (images, labels) in enumerate(batches):
        if hasattr(loss_fn, "mix_batch"):
            images = loss_fn.mix_batch(images, labels)
        loss = loss_fn(model(images)[0], labels)
        if not torch.isfinite(loss):
            return f"diverged at step {step} (the loss is {loss.item()})"
        first = loss.item() if first is None else first
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return f"trains: loss {first:.3g} at the first step, {loss.item():.3g} at step {step}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a trained model's folder (its best.pt)")
    parser.add_argument("--lr", type=float, action="append", help="learning rates (default 1e-2 and 1e-3)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    trained = load_trained_model(args.model, device="cpu", precision="fp32")
    start = trained.model.float().to(memory_format=torch.contiguous_format)
    train = protocol_for(trained.config, args.data_dir).train
    order = torch.randperm(len(train.labels), generator=torch.Generator().manual_seed(0))
    images = torch.as_tensor(train.images)[order].float() / 255
    labels = torch.as_tensor(train.labels)[order].long()
    batches = [(images[i:i + args.batch_size], labels[i:i + args.batch_size])
               for i in range(0, min(len(labels), args.steps * args.batch_size), args.batch_size)]
    print(f"{args.model}: {validation_accuracy(args.model)}; {len(batches)} steps of {args.batch_size}")
    print(start_energies(start.eval(), images[:4000], labels[:4000]))
    for loss_name in LOSS_NAMES:
        for lr in args.lr or (1e-2, 1e-3):
            print(f"{loss_name:<20} lr {lr:g}: {fine_tune(start, loss_name, lr, batches)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
