"""
A calibrated classifier that says "unknown"
===========================================

A closed-set classifier gives every image one of its classes, whatever the image shows. An
open-set classifier has a reject option: below a threshold on its score it answers
"unknown". The threshold is chosen on validation data for a false positive rate the
application accepts (here at most 10 % of the validation negatives let through), never on
test data, and the classifier is then used from Python on new images: ``OpenSetClassifier``
of :mod:`agnostophobia.deploy`.
"""
# %%
# A small trained run
# -------------------
# Generated 28x28 glyphs in class folders: bars and boxes are the known classes, the two
# diagonals and scattered pixels are negatives (trained on as "unknown"), and a regular grid
# of dots and a cross are unknowns the network never sees in training. ``agnostophobia train`` trains a small MLP with the
# Entropic Open-Set loss (paper Sec. 4.1) for a few seconds.
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import yaml
from PIL import Image

from agnostophobia.cli import run_command
from agnostophobia.data import draw_glyph, make_glyph_folders
from agnostophobia.deploy import OpenSetClassifier

KNOWN, NEGATIVE, UNKNOWN = ["hbar", "vbar", "box"], ["diag", "antidiag", "speckle"], ["dots", "cross"]
work = Path(tempfile.mkdtemp(prefix="agnostophobia-unknown-"))


protocol = make_glyph_folders(work / "images", known=KNOWN, negative=NEGATIVE, unknown=UNKNOWN,
                              per_split={"train": 60, "val": 30, "test": 30}, seed=0)
(work / "experiment.yaml").write_text(yaml.safe_dump({
    "name": "glyphs",
    "protocol": protocol,
    "model": "mlp", "model_kwargs": {"hidden": [64, 32]}, "approaches": ["entropic"],
    "epochs": 10, "batch_size": 16, "lr": 0.003, "tensorboard": False, "progress": False, "cpu_threads": 2,
}, sort_keys=False))
run_command("train", work / "experiment.yaml", "--out", work / "run", "--no-progress")

# %%
# The classifier, calibrated on validation data
# ---------------------------------------------
# ``fpr=0.1`` chooses the threshold on the run's validation split (held-out knowns and the
# 90 held-out negatives) so that at most 10 % of the negatives score above it, and stores it
# in the run's ``calibration.json``; ``agnostophobia calibrate RUN --fpr 0.1`` does the same.
clf = OpenSetClassifier.from_run(work / "run", fpr=0.1)
print(f"classes {clf.class_names}, threshold {clf.threshold:.4f}")

# %%
# New images: a class, or "unknown"
# ---------------------------------
# Images as they are stored (uint8, white glyphs on black, any size) go through the run's
# own preparation. ``decide`` returns the label (-1 for unknown) and the score the threshold
# acts on; ``label_names`` turns labels into names.
rng = np.random.default_rng(7)
shown = KNOWN + NEGATIVE + UNKNOWN
new = np.stack([draw_glyph(shape, rng) for shape in shown for _ in range(2)])
labels, scores = clf.decide(new)
answers = clf.label_names(labels)
print(f"{'drawn':10} {'answer':10} {'score':>8}")
for shape, answer, score in zip(np.repeat(shown, 2), answers, scores):
    print(f"{shape:10} {answer:10} {score:8.3f}")

fig, axes = plt.subplots(2, len(shown), figsize=(8, 3.2))
for i, ax in enumerate(axes.T.flat):
    ax.imshow(new[i], cmap="gray")
    ax.set_title(answers[i], fontsize=9, color="tab:red" if labels[i] < 0 else "black")
    ax.axis("off")
for ax, shape in zip(axes[1], shown):
    ax.set_xlabel(shape)
fig.suptitle(f"drawn: {', '.join(shown)}; answers above each image (threshold {clf.threshold:.2f})", fontsize=9)
fig.tight_layout()

# %%
# How often it is right, on the test set
# --------------------------------------
# A handful of images shows the mechanism, not the rate: ``agnostophobia evaluate RUN``
# reads the test knowns and unknowns, and with the stored threshold it reports what it gives
# there (CCR and FPR at the calibrated threshold). Here on the test folders directly. An
# unknown that looks more like a known class than like any negative is the hard case (here
# the cross, as wide and as tall as a box): the negatives decide what the network learns to
# reject.
test = {shape: np.stack([np.asarray(Image.open(p)) for p in sorted((work / "images" / "test" / shape).glob("*.png"))])
        for shape in KNOWN + UNKNOWN}
for shape, images in test.items():
    predicted = clf.predict(images)
    if shape in KNOWN:
        print(f"{shape:6} (known):   {np.mean(predicted == clf.class_names.index(shape)):.0%} classified right")
    else:
        print(f"{shape:6} (unknown): {np.mean(predicted == -1):.0%} answered 'unknown'")
shutil.rmtree(work)  # the temporary folder
