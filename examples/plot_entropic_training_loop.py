"""
The Entropic Open-Set loss in your own training loop
====================================================

The losses are ordinary ``nn.Module``\\ s: any network, any optimiser, any loop. One label
rule: a negative label means "unknown" (a known unknown of the training set, :math:`D_b'`).
For those samples the Entropic Open-Set loss (paper Sec. 4.1, Eq. 1) asks for a uniform
softmax; for knowns it is the usual cross-entropy. The same loop with plain softmax (knowns
only) is the baseline, and the OSCR curve (Eq. 3) compares them.
"""
# %%
# Generated 2-D data
# ------------------
# Four known clusters (labels 0..3), negatives around them (label -1, trained on), and at
# test time unknowns elsewhere (label -1, never seen in training).
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from agnostophobia.detectors import build_detector
from agnostophobia.losses import EntropicOpenSetLoss
from agnostophobia.metrics import ccr_at_fpr, oscr

EPOCHS, SEED = 25, 0
torch.set_num_threads(1)  # a network this small: one thread is faster than two that wait for each other
rng = np.random.default_rng(SEED)


def blobs(centres, n, spread):
    return np.concatenate([rng.normal(c, spread, (n, 2)) for c in centres]).astype(np.float32)


centres = [(2, 0), (0, 2), (-2, 0), (0, -2)]
known = blobs(centres, 200, 0.4)
negatives = blobs([(1.5, 1.5), (-1.5, 1.5), (-1.5, -1.5), (1.5, -1.5)], 100, 0.3)
test_known = blobs(centres, 100, 0.4)
test_unknown = blobs([(4, 4), (-4, 4), (-4, -4), (4, -4), (0, 0)], 80, 0.5)
x = torch.from_numpy(np.concatenate([known, negatives]))
y = torch.from_numpy(np.concatenate([np.repeat(np.arange(4), 200), -np.ones(len(negatives), int)]))
x_test = torch.from_numpy(np.concatenate([test_known, test_unknown]))
y_test = np.concatenate([np.repeat(np.arange(4), 100), -np.ones(len(test_unknown), int)])
print(f"train: {int((y >= 0).sum())} knowns + {int((y < 0).sum())} negatives; "
      f"test: {int((y_test >= 0).sum())} knowns + {int((y_test < 0).sum())} unknowns")

# %%
# The loop
# --------
# An ordinary PyTorch loop. The only change for the Entropic Open-Set loss is the loss
# object; plain softmax drops the negatives, as it has no label for them.


def train(entropic: bool) -> nn.Module:
    torch.manual_seed(SEED)
    net = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2), nn.Linear(2, 4, bias=False))
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    loss_fn = EntropicOpenSetLoss(num_classes=4) if entropic else nn.CrossEntropyLoss()
    inputs, labels = (x, y) if entropic else (x[y >= 0], y[y >= 0])
    for epoch in range(EPOCHS):
        for batch in torch.randperm(len(inputs)).split(64):
            optimiser.zero_grad()
            loss = loss_fn(net(inputs[batch]), labels[batch])
            loss.backward()
            optimiser.step()
    return net


networks = {"softmax": train(entropic=False), "entropic": train(entropic=True)}

# %%
# Compare by OSCR
# ---------------
# Both score a test sample by its maximum softmax probability (paper Sec. 3). The Entropic
# Open-Set loss has learnt to give the negatives a flat softmax, and the unknowns inherit it.
fig, ax = plt.subplots(figsize=(5, 3.6))
print(f"{'loss':10} {'CCR@FPR 1e-2':>13} {'CCR@FPR 1e-1':>13}")
for name, net in networks.items():
    with torch.no_grad():
        logits = net(x_test)
    scores = build_detector("softmax").scores(logits, None)  # max-softmax (as its log-odds)
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
