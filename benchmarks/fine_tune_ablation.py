"""The validation table of one-seed fine-tune ablations (docs/training-peers.md, "What the departures
cost on the CIFAR split"): for each run folder given and each network in it, the closed-set accuracy of
the validation knowns (the benchmark's convergence rule reads it) and, with the detector its paper
uses, the AUROC and the CCR at FPR 10⁻² against the validation negatives. Only the stored validation
outputs (``val_outputs.npz``) are read: ``train`` also writes the test outputs, which an ablation that
decides a recipe leaves unread.

    python benchmarks/fine_tune_ablation.py runs/ablate-start-16 runs/ablate-start-24 runs/ablate-mixoe-beta-1
"""
import argparse
import sys
from pathlib import Path

import numpy as np

from agnostophobia.detectors import build_detector
from agnostophobia.losses import LOSSES
from agnostophobia.metrics import auroc, ccr_at_fpr
from agnostophobia.rundir import RunDir

FPR = 0.01  # the FPR the benchmark tunes its detectors at on 2,000 validation negatives


def networks(run: Path):
    """``(seed folder, approach)`` of each trained network of ``run``, in the folder's order."""
    for seed in sorted(run.glob("seed*")):
        for approach in sorted(path.name for path in seed.iterdir() if (path / "val_outputs.npz").is_file()):
            yield seed, approach


def row(seed: Path, approach: str) -> str:
    """One network's Markdown row: accuracy, and its paper's detector's AUROC and CCR at :data:`FPR`."""
    outputs = np.load(seed / approach / "val_outputs.npz")
    logits, labels = outputs["val__logits"], outputs["val__labels"]
    known = labels >= 0
    accuracy = float((logits[known].argmax(1) == labels[known]).mean())
    detector = LOSSES.get(approach).default_detector
    scores = build_detector(detector).scores(logits)  # a post-hoc score of the logits: nothing is fitted
    ccr = float(ccr_at_fpr(scores, labels, (FPR,))[0])
    return f"| {seed.parent.name} | {seed.name} | {approach} | {accuracy:.4f} | {detector} | {auroc(scores, labels):.4f} | {ccr:.4f} |"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders written by train")
    args = parser.parse_args(argv)
    print(f"| run | seed | approach | val acc. | detector | val AUROC | val CCR@{FPR:g} |")
    print("|---|---|---|---:|---|---:|---:|")
    for run in args.runs:
        RunDir(run)  # a run folder, or a clear error
        for seed, approach in networks(run):
            print(row(seed, approach))
    return 0


if __name__ == "__main__":
    sys.exit(main())
