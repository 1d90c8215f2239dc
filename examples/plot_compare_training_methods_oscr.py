"""
Comparing training methods by OSCR
==================================

The paper's question (Sec. 4, Table 2): with the same network and the same data, which
training objective rejects unknowns best? Four objectives of the package on generated 2-D
data, each scored as its paper scores it, compared on the Open-Set Classification Rate
curve (OSCR, Sec. 4.3, Eq. 3) and its area, as ``agnostophobia evaluate`` does for a run:

* ``softmax``: cross-entropy on the knowns only, thresholded on the maximum softmax (Sec. 3);
* ``background``: the negatives as one more class (Sec. 3), scored without its column;
* ``entropic``: the Entropic Open-Set loss, a uniform softmax for negatives (Sec. 4.1, Eq. 1);
* ``objectosphere``: Entropic plus small deep features for negatives and large ones for
  knowns (Sec. 4.2, Eq. 2), thresholded on the softmax as in Table 2.
"""
# %%
# The data
# --------
# Four known clusters (labels 0..3) and negatives (label -1) between them for training; at
# test time new knowns and unknowns elsewhere, never seen in training (:math:`D_a`).
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from agnostophobia.detectors import build_detector
from agnostophobia.losses import LOSSES, build_loss
from agnostophobia.metrics import ccr_at_fpr, oscr, oscr_area

EPOCHS, SEED, APPROACHES = 20, 0, ("softmax", "background", "entropic", "objectosphere")
torch.set_num_threads(1)  # a network this small: one thread is faster than two that wait for each other
rng = np.random.default_rng(SEED)


def blobs(centres, n, spread):
    return np.concatenate([rng.normal(c, spread, (n, 2)) for c in centres]).astype(np.float32)


centres = [(2, 0), (0, 2), (-2, 0), (0, -2)]
x = torch.from_numpy(np.concatenate([blobs(centres, 200, 0.4),
                                     blobs([(1.5, 1.5), (-1.5, 1.5), (-1.5, -1.5), (1.5, -1.5)], 100, 0.3)]))
y = torch.from_numpy(np.concatenate([np.repeat(np.arange(4), 200), -np.ones(400, int)]))
x_test = torch.from_numpy(np.concatenate([blobs(centres, 100, 0.4),
                                          blobs([(4, 4), (-4, 4), (-4, -4), (4, -4), (0, 0)], 80, 0.5)]))
y_test = np.concatenate([np.repeat(np.arange(4), 100), -np.ones(400, int)])

# %%
# One network, one loop, four objectives
# --------------------------------------
# The network returns ``(logits, features)``: a 2-D deep feature layer F, then a bias-free
# logit layer, as LeNet++ in the paper. What differs is the loss object and what it declares:
# how many logits it needs (one more for the background class), whether it trains on the
# negatives, whether it reads the deep features, and the score its paper thresholds.


class Net(nn.Module):
    def __init__(self, outputs: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2))
        self.logits = nn.Linear(2, outputs, bias=False)

    def forward(self, x):
        features = self.trunk(x)
        return self.logits(features), features


def train(approach: str) -> nn.Module:
    torch.manual_seed(SEED)
    loss_fn = build_loss(approach, num_classes=4)
    net = Net(loss_fn.num_outputs)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    inputs, labels = (x, y) if loss_fn.trains_on_unknowns else (x[y >= 0], y[y >= 0])
    for epoch in range(EPOCHS):
        for batch in torch.randperm(len(inputs)).split(64):
            optimiser.zero_grad()
            logits, features = net(inputs[batch])
            extra = {"features": features} if loss_fn.uses_features else {}
            loss_fn(logits, labels[batch], **extra).backward()
            optimiser.step()
    return net.eval()


for approach in APPROACHES:
    loss_class = LOSSES.get(approach)
    print(f"{approach:14} trains on negatives: {loss_class.trains_on_unknowns!s:5}  "
          f"reads features: {loss_class.uses_features!s:5}  score: {loss_class.default_detector}")
networks = {approach: train(approach) for approach in APPROACHES}

# %%
# OSCR of each, on the test unknowns
# ----------------------------------
# A threshold on the score moves along the curve: more knowns accepted (and classified
# right) for more unknowns accepted. A curve above another is better at every threshold; the
# area under it (here on a logarithmic FPR axis from :math:`10^{-2}`) sums it up. With 400
# test unknowns the smallest measurable FPR is 1/400.
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), gridspec_kw={"width_ratios": [3, 2]})
print(f"{'approach':14} {'score':22} {'CCR@1e-2':>9} {'CCR@1e-1':>9} {'area (log FPR)':>15}")
for approach, net in networks.items():
    with torch.no_grad():
        logits, features = net(x_test)
    scores = build_detector(LOSSES.get(approach).default_detector).scores(logits, features)
    fpr, ccr, _ = oscr(scores, y_test)
    ccr1, ccr2 = ccr_at_fpr(scores, y_test, [1e-2, 1e-1])
    area = oscr_area(scores, y_test, log_fpr=True, min_fpr=1e-2)
    print(f"{approach:14} {LOSSES.get(approach).default_detector:22} {ccr1:9.3f} {ccr2:9.3f} {area:15.3f}")
    axes[0].plot(fpr, ccr, label=approach, drawstyle="steps-post")
    axes[1].barh(approach, area)
axes[0].set_xscale("log")
axes[0].set_xlim(1e-2, 1)
axes[0].set_xlabel("false positive rate (unknowns accepted)")
axes[0].set_ylabel("correct classification rate")
axes[0].legend(fontsize=8)
axes[1].set_xlabel("area under OSCR (log FPR)")
axes[1].invert_yaxis()
fig.tight_layout()

# %%
# What to read, and what not
# --------------------------
# One seed on toy data says little: ``agnostophobia benchmark`` trains every approach on
# several seeds and reports means with confidence intervals and paired tests, and
# ``agnostophobia compare RUN`` ranks on validation data before the test set is looked at.
