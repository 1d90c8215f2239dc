"""
OSCR and CCR at FPR of your own scores
======================================

The metrics take any per-class scores (numpy or torch) and labels with the one rule: a
negative label is an unknown. The OSCR curve (paper Sec. 4.3, Eq. 3) plots the correct
classification rate of the knowns against the false positive rate of the unknowns while the
threshold falls; CCR at FPR :math:`t` is the highest CCR whose FPR is at most :math:`t` (no
interpolation), and NaN where :math:`t < 1/|D_a|` (too few unknowns to measure that rate).
The scores here are generated: three known classes, mostly confident and right, and unknowns
that score lower on average.
"""
# %%
import argparse

import matplotlib.pyplot as plt
import numpy as np

from agnostophobia.metrics import auroc, ccr_at_fpr, oscr, oscr_area


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="OSCR and CCR@FPR of generated scores")
    p.add_argument("--knowns", type=int, default=3000)
    p.add_argument("--unknowns", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def scores_and_labels(n_known: int, n_unknown: int, seed: int):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([rng.integers(0, 3, n_known), -np.ones(n_unknown, int)])
    logits = rng.normal(0, 1, (len(labels), 3))
    known = labels >= 0
    logits[known, labels[known]] += 3.0  # knowns: their class's logit is higher
    scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)  # (N, C) softmax
    return scores, labels


def run(args) -> None:
    scores, labels = scores_and_labels(args.knowns, args.unknowns, args.seed)
    fpr, ccr, thresholds = oscr(scores, labels)
    targets = [1e-4, 1e-3, 1e-2, 1e-1]
    print(f"{len(labels) - args.unknowns} knowns, {args.unknowns} unknowns (1/|D_a| = {1 / args.unknowns:.4f})")
    print("target FPR   CCR     (NaN: below 1/|D_a|)")
    for t, value in zip(targets, ccr_at_fpr(scores, labels, targets)):
        print(f"{t:10.0e}   {value:.3f}")
    print("false positives allowed -> CCR:", {k: round(float(v), 3) for k, v in zip((0, 1, 5), ccr_at_fpr(scores, labels, [0, 1, 5], counts=True))})
    print(f"AUROC of the max score {auroc(scores.max(axis=1), labels):.3f}; "
          f"area under OSCR {oscr_area(scores, labels):.3f} (linear FPR), "
          f"{oscr_area(scores, labels, log_fpr=True):.3f} (log FPR from 1e-4)")
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(fpr, ccr, drawstyle="steps-post")
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("correct classification rate")
    ax.set_title("OSCR of generated scores")
    fig.tight_layout()


# %%
# The curve and its readouts
# --------------------------
if __name__ == "__main__":
    run(parse_args())
