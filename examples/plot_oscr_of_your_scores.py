"""
OSCR and CCR at FPR of your own scores
======================================

The metrics take any per-class scores (numpy or torch) and labels with the one rule: a
negative label is an unknown. The OSCR curve (paper Sec. 4.3, Eq. 3) plots the correct
classification rate of the knowns against the false positive rate of the unknowns while the
threshold falls; CCR at FPR :math:`t` is the highest CCR whose FPR is at most :math:`t` (no
interpolation), and NaN where :math:`t < 1/|D_a|` (too few unknowns to measure that rate).
"""
# %%
# Scores and labels
# -----------------
# Generated here: three known classes, mostly confident and right, and unknowns that score
# lower on average. Yours come from any network: an (N, C) array of per-class scores and
# the labels, ``-1`` (any negative number) for an unknown.
import matplotlib.pyplot as plt
import numpy as np

from agnostophobia.metrics import auroc, ccr_at_fpr, oscr, oscr_area

N_KNOWN, N_UNKNOWN = 3000, 500
rng = np.random.default_rng(0)
labels = np.concatenate([rng.integers(0, 3, N_KNOWN), -np.ones(N_UNKNOWN, int)])
logits = rng.normal(0, 1, (len(labels), 3))
known = labels >= 0
logits[known, labels[known]] += 3.0  # knowns: their class's logit is higher
scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)  # (N, C) softmax
print(scores.shape, labels[:5], labels[-5:])

# %%
# CCR at chosen false positive rates
# ----------------------------------
# With 500 unknowns the smallest FPR that can be measured is 1/500 = 0.002: a target below it
# is NaN, not a number read off an interpolation. ``counts=True`` reads the targets as
# numbers of accepted unknowns instead of rates.
targets = [1e-4, 1e-3, 1e-2, 1e-1]
print(f"{N_KNOWN} knowns, {N_UNKNOWN} unknowns (1/|D_a| = {1 / N_UNKNOWN:.4f})")
print("target FPR   CCR     (NaN: below 1/|D_a|)")
for t, value in zip(targets, ccr_at_fpr(scores, labels, targets)):
    print(f"{t:10.0e}   {value:.3f}")
allowed = ccr_at_fpr(scores, labels, [0, 1, 5], counts=True)
print("false positives allowed -> CCR:", {k: round(float(v), 3) for k, v in zip((0, 1, 5), allowed)})

# %%
# One number per curve
# --------------------
# AUROC reads knowns against unknowns only (is the score higher for a known?); the area
# under OSCR also asks that the known be classified right.
print(f"AUROC of the max score {auroc(scores.max(axis=1), labels):.3f}; "
      f"area under OSCR {oscr_area(scores, labels):.3f} (linear FPR), "
      f"{oscr_area(scores, labels, log_fpr=True):.3f} (log FPR from 1e-4)")

# %%
# The curve
# ---------
# ``oscr`` returns the FPR, the CCR and the threshold at each step; drawn as steps, on a
# logarithmic FPR axis as in the paper's Fig. 3.
fpr, ccr, thresholds = oscr(scores, labels)
fig, ax = plt.subplots(figsize=(5, 3.6))
ax.plot(fpr, ccr, drawstyle="steps-post")
ax.set_xscale("log")
ax.set_xlabel("false positive rate")
ax.set_ylabel("correct classification rate")
ax.set_title("OSCR of generated scores")
fig.tight_layout()
