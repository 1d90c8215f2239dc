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

from agnostophobia.cli import main

PER_CLASS = 40  # training images per class
SHAPES = {"hbar": "known", "vbar": "known", "box": "known", "diag": "negative", "dots": "unknown"}
work = Path(tempfile.mkdtemp(prefix="agnostophobia-folders-"))


def draw(shape: str, rng: np.random.Generator) -> np.ndarray:
    """One 28x28 uint8 glyph, white on black, jittered."""
    img = np.zeros((28, 28), np.uint8)
    a, b = rng.integers(5, 9), rng.integers(19, 23)
    if shape == "hbar":
        img[12 + rng.integers(-3, 4):16 + rng.integers(-3, 4), a:b] = 255
    elif shape == "vbar":
        img[a:b, 12 + rng.integers(-3, 4):16 + rng.integers(-3, 4)] = 255
    elif shape == "box":
        img[a:b, a:b] = 255
        img[a + 3:b - 3, a + 3:b - 3] = 0
    elif shape == "diag":
        for i in range(a, b):
            img[i, max(i - 2, 0):i + 2] = 255
    else:  # dots: a pattern none of the others has
        img[rng.integers(0, 2):: 4, rng.integers(0, 2):: 4] = 255
    noise = rng.integers(0, 40, img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


rng = np.random.default_rng(0)
sizes = {"train": PER_CLASS, "val": PER_CLASS // 4, "test": PER_CLASS // 2}
for split, n in sizes.items():
    for shape, role in SHAPES.items():
        if role == "unknown" and split != "test":
            continue  # unknowns are test only (D_a)
        folder = work / "protocol" / "images" / split / shape
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(draw(shape, rng)).save(folder / f"{i:03d}.png")

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
    "protocol": {"type": "folders", "root": "images",
                 "known": [s for s, r in SHAPES.items() if r == "known"],
                 "negative": [s for s, r in SHAPES.items() if r == "negative"],
                 "unknown": [s for s, r in SHAPES.items() if r == "unknown"],
                 "image_size": 28, "channels": 1, "kind": "glyph"},
    "model": "mlp", "model_kwargs": {"hidden": [64, 32]},
    "approaches": ["entropic"], "epochs": 6, "batch_size": 16, "lr": 0.003,
    "tensorboard": False, "progress": False, "cpu_threads": 2,
}
config = work / "protocol" / "experiment.yaml"
config.write_text(yaml.safe_dump(experiment, sort_keys=False))
print(config.read_text())


def agnostophobia(*argv) -> None:
    """``agnostophobia ARGV...`` in this process; a failed command stops the example."""
    if main([str(a) for a in argv]) != 0:
        raise SystemExit(f"agnostophobia {' '.join(map(str, argv))} failed")


# %%
# Train
# -----
# ``agnostophobia train experiment.yaml --out RUN``: the headline reads the test knowns
# against the test negatives and against the unknowns.
run_dir = work / "run"
agnostophobia("train", config, "--out", run_dir, "--no-progress")

# %%
# Calibrate
# ---------
# A threshold for at most 10 % false positives on the validation negatives; never chosen on
# test data.
agnostophobia("calibrate", run_dir, "--fpr", "0.1")

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
    Image.fromarray(draw(shape, rng)).save(new_images / f"{shape}.png")
agnostophobia("predict", run_dir, new_images)
shutil.rmtree(work)  # the temporary folder
