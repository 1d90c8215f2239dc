"""
The Entropic Open-Set loss in your own training loop
====================================================

The losses are ordinary ``nn.Module``\\ s: any network, any optimiser, any loop. One label
rule: a negative label means "unknown" (a known unknown of the training set, :math:`D_b'`).
For those samples the Entropic Open-Set loss (paper Sec. 4.1, Eq. 1) asks for a uniform
softmax; for knowns it is the usual cross-entropy. Here a small MLP on generated 2-D data:
four known clusters, negatives around them, and unknowns elsewhere at test time; the same
loop with plain softmax (knowns only) is the baseline. The OSCR curve (Eq. 3) compares them.
"""
# %%
import argparse

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from agnostophobia.detectors import build_detector
from agnostophobia.losses import EntropicOpenSetLoss
from agnostophobia.metrics import ccr_at_fpr, oscr


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Entropic Open-Set loss vs softmax on generated 2-D data")
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", help="also write the figure to this file (PNG)")
    return p.parse_args(argv)


def blobs(rng, centres, n, spread):
    return np.concatenate([rng.normal(c, spread, (n, 2)) for c in centres]).astype(np.float32)


def data(seed):
    """Knowns: 4 clusters (labels 0..3); negatives (label -1) around them; test unknowns elsewhere."""
    rng = np.random.default_rng(seed)
    centres = [(2, 0), (0, 2), (-2, 0), (0, -2)]
    known = blobs(rng, centres, 200, 0.4)
    y_known = np.repeat(np.arange(4), 200)
    negatives = blobs(rng, [(1.5, 1.5), (-1.5, 1.5), (-1.5, -1.5), (1.5, -1.5)], 100, 0.3)
    test_known = blobs(rng, centres, 100, 0.4)
    test_unknown = blobs(rng, [(4, 4), (-4, 4), (-4, -4), (4, -4), (0, 0)], 80, 0.5)
    x = torch.from_numpy(np.concatenate([known, negatives]))
    y = torch.from_numpy(np.concatenate([y_known, -np.ones(len(negatives), int)]))
    x_test = torch.from_numpy(np.concatenate([test_known, test_unknown]))
    y_test = np.concatenate([np.repeat(np.arange(4), 100), -np.ones(len(test_unknown), int)])
    return x, y, x_test, y_test


def train(x, y, entropic: bool, epochs: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2), nn.Linear(2, 4, bias=False))
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    loss_fn = EntropicOpenSetLoss(num_classes=4) if entropic else nn.CrossEntropyLoss()
    if not entropic:
        x, y = x[y >= 0], y[y >= 0]  # plain softmax trains on the knowns only
    for epoch in range(epochs):
        for batch in torch.randperm(len(x)).split(64):
            optimiser.zero_grad()
            loss = loss_fn(net(x[batch]), y[batch])
            loss.backward()
            optimiser.step()
    return net


def run(args) -> None:
    x, y, x_test, y_test = data(args.seed)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    print(f"{'loss':10} {'CCR@FPR 1e-2':>13} {'CCR@FPR 1e-1':>13}")
    for name, entropic in (("softmax", False), ("entropic", True)):
        net = train(x, y, entropic, args.epochs, args.seed)
        with torch.no_grad():
            logits = net(x_test)
        scores = build_detector("softmax").scores(logits, None)  # max-softmax (as its log-odds), Sec. 3
        fpr, ccr, _ = oscr(scores, y_test)
        ccr1, ccr2 = ccr_at_fpr(scores, y_test, [1e-2, 1e-1])
        print(f"{name:10} {ccr1:13.3f} {ccr2:13.3f}")
        ax.plot(fpr, ccr, label=name, drawstyle="steps-post")
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate (unknowns accepted)")
    ax.set_ylabel("correct classification rate")
    ax.set_title("OSCR on generated 2-D data")
    ax.legend()
    fig.tight_layout()
    if args.save:
        fig.savefig(args.save, dpi=100)


# %%
# Train both, compare
# -------------------
if __name__ == "__main__":
    run(parse_args())
