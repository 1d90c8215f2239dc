"""
A folder of images to a deployed model
======================================

Images in folders ``ROOT/<split>/<class>/`` become an open-set protocol with a few lines of
YAML (no code): which class folders are known, which are negatives (trained on as
"unknown") and which are unknowns (test only). Then ``train``, ``calibrate`` (a threshold
chosen on validation data) and ``predict`` (a class or "unknown" for new images) run as on
the command line.
"""
# %%
# The images
# ----------
# Generated here: bars and boxes as the known classes, diagonals as negatives, dots as
# unknowns, 28x28 white on black, written as PNG files in one folder per split and class.
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import yaml
from PIL import Image

from agnostophobia.cli import run_command
from agnostophobia.data import draw_glyph, make_glyph_folders

PER_CLASS = 40  # training images per class
work = Path(tempfile.mkdtemp(prefix="agnostophobia-folders-"))
protocol = make_glyph_folders(work / "protocol" / "images", known=["hbar", "vbar", "box"], negative=["diag"],
                              unknown=["dots"], seed=0,
                              per_split={"train": PER_CLASS, "val": PER_CLASS // 4, "test": PER_CLASS // 2})
SHAPES = {shape: role for role in ("known", "negative", "unknown") for shape in protocol[role]}

fig, axes = plt.subplots(1, len(SHAPES), figsize=(7, 1.9))
for ax, (shape, role) in zip(axes, SHAPES.items()):
    ax.imshow(Image.open(work / "protocol" / "images" / "test" / shape / "000.png"), cmap="gray")
    ax.set_title(f"{shape} ({role})", fontsize=9)
    ax.axis("off")
fig.tight_layout()

# %%
# The protocol, in YAML
# ---------------------
# The folder names are the class names; the lists say what each class is. A small MLP keeps
# this example fast; ``model: lenet++`` is the paper's network for 28x28 glyphs.
experiment = {
    "name": "shapes",
    "protocol": {**protocol, "root": "images"},  # relative to the YAML file
    "model": "mlp", "model_kwargs": {"hidden": [64, 32]},
    "approaches": ["entropic"], "epochs": 6, "batch_size": 16, "lr": 0.003,
    "tensorboard": False, "progress": False, "cpu_threads": 2,
}
config = work / "protocol" / "experiment.yaml"
config.write_text(yaml.safe_dump(experiment, sort_keys=False))
print(config.read_text())


# %%
# Train
# -----
# ``agnostophobia train experiment.yaml --out RUN``: the headline reads the test knowns
# against the test negatives and against the unknowns.
run_dir = work / "run"
run_command("train", config, "--out", run_dir, "--no-progress")

# %%
# Calibrate
# ---------
# A threshold for at most 10 % false positives on the validation negatives; never chosen on
# test data.
run_command("calibrate", run_dir, "--fpr", "0.1")

# %%
# Predict new images
# ------------------
# ``predict`` prints one row per image: the class, or ``unknown`` where the score is below
# the threshold. With a few dozen images and six epochs of a small MLP a novel pattern may
# still score above it: ``agnostophobia evaluate RUN`` measures how often (OSCR, CCR at FPR)
# on the protocol's test unknowns.
new_images = work / "new"
new_images.mkdir()
rng = np.random.default_rng(1)
for shape in ("hbar", "box", "dots"):
    Image.fromarray(draw_glyph(shape, rng)).save(new_images / f"{shape}.png")
run_command("predict", run_dir, new_images)
shutil.rmtree(work)  # the temporary folder
