"""
Choosing a detector on validation data
======================================

A trained network can be thresholded on many scores: the maximum softmax, the maximum
logit, the energy, the distance to the nearest training features, ... Which one to deploy
is a choice, and a choice read off the test set makes the test numbers optimistic. Here the
choice is made on validation data alone (held-out knowns and held-out negatives, the known
unknowns :math:`D_b'`), at the false positive rate the deployment will use, and only then
are the test unknowns (:math:`D_a`) looked at. This is what ``agnostophobia compare RUN``
does for a trained run (and ``--detector best`` deploys), after Bisgin et al. (2024).
"""
# %%
# Train, validation and test data
# -------------------------------
# Four known clusters; negatives between them and far out beyond them, split into training
# and validation; test unknowns in places no training or validation sample comes from.
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from agnostophobia.detectors import build_detector
from agnostophobia.losses import EntropicOpenSetLoss
from agnostophobia.metrics import auroc, ccr_at_fpr

EPOCHS, SEED, TARGET_FPR = 15, 0, 0.05
torch.set_num_threads(1)  # a network this small: one thread is faster than two that wait for each other
DETECTORS = {"softmax": {}, "max-logit": {}, "energy": {}, "entropy": {}, "magnitude": {},
             "knn": {"k": 10}, "mahalanobis": {}}
rng = np.random.default_rng(SEED)
centres = [(2, 0), (0, 2), (-2, 0), (0, -2)]
negatives = [(1.5, 1.5), (-1.5, 1.5), (-1.5, -1.5), (1.5, -1.5), (5, 0), (0, 5), (-5, 0), (0, -5)]


def blobs(places, n, spread):
    return np.concatenate([rng.normal(c, spread, (n, 2)) for c in places]).astype(np.float32)


def split(knowns, unknowns):
    """Inputs and labels: the knowns with their class, the others -1."""
    x = np.concatenate([knowns, unknowns])
    y = np.concatenate([np.repeat(np.arange(4), len(knowns) // 4), -np.ones(len(unknowns), int)])
    return torch.from_numpy(x), y


x_train, y_train = split(blobs(centres, 200, 0.4), blobs(negatives, 50, 0.4))
x_val, y_val = split(blobs(centres, 50, 0.4), blobs(negatives, 25, 0.4))
x_test, y_test = split(blobs(centres, 100, 0.4), blobs([(2.5, 2.5), (-2.5, 2.5), (-2.5, -2.5), (2.5, -2.5), (0, 7)], 80, 0.5))
print(f"validation: {int((y_val >= 0).sum())} knowns, {int((y_val < 0).sum())} negatives -> "
      f"the smallest FPR read on 10 or more false positives: {10 / (y_val < 0).sum():.3f}")

# %%
# A network trained with the Entropic Open-Set loss
# -------------------------------------------------
# The network returns ``(logits, features)``, which is all a detector reads.
torch.manual_seed(SEED)
trunk = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2))
head = nn.Linear(2, 4, bias=False)
loss_fn = EntropicOpenSetLoss(num_classes=4)
optimiser = torch.optim.Adam([*trunk.parameters(), *head.parameters()], lr=0.01)
labels = torch.from_numpy(y_train)
for epoch in range(EPOCHS):
    for batch in torch.randperm(len(x_train)).split(64):
        optimiser.zero_grad()
        loss_fn(head(trunk(x_train[batch])), labels[batch]).backward()
        optimiser.step()


def outputs(x):
    with torch.no_grad():
        features = trunk(x)
        return head(features).numpy(), features.numpy()


train_out, val_out, test_out = outputs(x_train), outputs(x_val), outputs(x_test)

# %%
# Every detector on the validation data
# -------------------------------------
# The fitted detectors (k-NN, Mahalanobis) learn from the training knowns only; each
# detector's per-class scores give the CCR at the target FPR of the validation negatives,
# and the AUROC of knowns against negatives. The ranking is by that CCR.
known = y_train >= 0
val_ccr, test_ccr, val_auroc = {}, {}, {}
for name, settings in DETECTORS.items():
    detector = build_detector(name, **settings)
    if detector.needs_fit:
        detector.fit(train_out[0][known], train_out[1][known], y_train[known])
    val_scores = detector.scores(*val_out)
    val_ccr[name] = float(ccr_at_fpr(val_scores, y_val, [TARGET_FPR])[0])
    val_auroc[name] = auroc(val_scores.max(axis=1), y_val)
    test_ccr[name] = float(ccr_at_fpr(detector.scores(*test_out), y_test, [TARGET_FPR])[0])
ranking = sorted(DETECTORS, key=lambda n: (-val_ccr[n], -val_auroc[n]))
chosen = ranking[0]
print(f"{'detector':12} {'val CCR@' + str(TARGET_FPR):>12} {'val AUROC':>10}")
for name in ranking:
    print(f"{name:12} {val_ccr[name]:12.3f} {val_auroc[name]:10.3f}")
print(f"chosen on validation data: {chosen}")

# %%
# Only now, the test unknowns
# ---------------------------
# The test column is read once, for the report: the chosen detector's CCR on unknowns it has
# never seen. Where validation and test disagree, the negatives were a poor stand-in for the
# unknowns; a choice made on the test column would hide exactly that.
print(f"{chosen}: CCR at FPR {TARGET_FPR} on the test unknowns {test_ccr[chosen]:.3f} "
      f"(validation {val_ccr[chosen]:.3f})")
fig, ax = plt.subplots(figsize=(7, 3.6))
rows = np.arange(len(ranking))
ax.barh(rows - 0.2, [val_ccr[n] for n in ranking], height=0.4, label="validation (negatives): ranks")
ax.barh(rows + 0.2, [test_ccr[n] for n in ranking], height=0.4, label="test (unknowns): reported")
ax.set_yticks(rows, [f"{n}  (chosen)" if n == chosen else n for n in ranking])
ax.invert_yaxis()
ax.set_xlabel(f"CCR at FPR {TARGET_FPR}")
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()
