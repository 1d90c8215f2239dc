"""
Your own images, as they come, to a deployed model
==================================================

Your images as they come: one folder per class, ``photos/<class>/<image>`` (torchvision's
ImageFolder layout), nothing split by hand. The config names the classes the model must
know, the negatives it trains to reject (known unknowns, :math:`D_b'`) and the unknowns it
only meets at test time (:math:`D_a`). ``agnostophobia train`` splits every known and
negative class into train, val and test (seeded, class-stratified, the same on every machine)
and writes the split to ``RUN/data_split/`` as CSV files you can read and reuse.

This example generates a small stand-in for your photos (coloured shapes on a noisy
background, of mixed sizes: the protocol resizes and centre-crops them), then runs the five
commands a practitioner types, here in this process:

.. code-block:: text

    agnostophobia train     OUT/experiment.yaml --out OUT/run
    agnostophobia evaluate  OUT/run
    agnostophobia calibrate OUT/run --fpr 0.1
    agnostophobia predict   OUT/run OUT/photos/star
    agnostophobia export    OUT/run --out OUT/model.pt2

Run as a script it keeps its files: ``python examples/own_images.py --out own-images-demo``
(in the gallery it works in a temporary folder). Replace ``photos`` with your own folder and
the class lists in ``CONFIG`` with your folders' names; for real photographs raise
``image_size`` to 64 or more and use ``model: resnet18`` with ``epochs: 30`` or so.
"""
# %%
# Where the files go
# ------------------
# ``--out`` names a new (or empty) folder; without it the example writes to a temporary
# folder and removes it at the end.
import argparse
import csv
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import yaml
from PIL import Image, ImageDraw

from agnostophobia.cli import run_command

parser = argparse.ArgumentParser(description="generated photos -> trained, calibrated, exported model")
parser.add_argument("--out", type=Path, help="folder to write (new or empty; default: a temporary one)")
parser.add_argument("--epochs", type=int, default=6, help="training epochs (6: about 10 s on one CPU core)")
args = parser.parse_args()
if args.out is not None and args.out.exists() and any(args.out.iterdir()):
    sys.exit(f"own_images: --out {args.out} is not empty; choose a new folder")
OUT = args.out or Path(tempfile.mkdtemp(prefix="agnostophobia-own-images-"))


def run(*command) -> None:
    """``agnostophobia COMMAND...`` in this process, echoed; a failed command stops the example."""
    print("$ agnostophobia " + " ".join(map(str, command)), flush=True)
    run_command(*command)


# %%
# A stand-in for your photos
# --------------------------
# Six shapes, one folder each, 40 pictures per shape in a random colour, size and place.
# Three shapes are the known classes, two are negatives (trained as "unknown") and the star
# is never seen in training.
SHAPES = ("circle", "square", "triangle", "cross", "ring", "star")
IMAGES_PER_CLASS = 40

# The complete experiment config (every key the run needs; the rest are the library's defaults).
CONFIG = {
    "name": "own-images",
    "protocol": {
        "type": "imagefolder",
        "root": "photos",                             # relative to this YAML file
        "known": ["circle", "square", "triangle"],    # class index = position in this list
        "negative": ["cross", "ring"],                # trained as "unknown" (D_b'), tested as D_b
        "unknown": ["star"],                          # test only (D_a): never seen in training
        "val_fraction": 0.15,                         # the defaults, written out
        "test_fraction": 0.15,
        "image_size": 28, "channels": 3, "kind": "natural",
    },
    "model": "small-cnn",                             # ahead of LeNet++ on own images (docs: own-images)
    "model_kwargs": {"in_channels": 3},
    "approaches": ["entropic"],                       # Entropic Open-Set loss (paper Sec. 4.1)
    "epochs": 6, "batch_size": 16, "lr": 0.003,
    "data_seed": 0,                                   # which images go to train, val and test
    "tensorboard": False,
}


def draw(shape: str, rng: np.random.Generator) -> Image.Image:
    """One picture of ``shape``: a random colour, size and place, on a noisy background."""
    width, height = (int(v) for v in rng.integers(36, 64, size=2))
    background = rng.integers(0, 90, size=(height, width, 3), dtype=np.uint8)
    image = Image.fromarray(background)
    pen = ImageDraw.Draw(image)
    colour = tuple(int(v) for v in rng.integers(140, 256, size=3))
    r = min(width, height) * rng.uniform(0.25, 0.4)
    x, y = width / 2 + rng.uniform(-3, 3), height / 2 + rng.uniform(-3, 3)
    if shape == "circle":
        pen.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    elif shape == "square":
        pen.rectangle([x - r, y - r, x + r, y + r], fill=colour)
    elif shape == "triangle":
        pen.polygon([(x, y - r), (x - r, y + r), (x + r, y + r)], fill=colour)
    elif shape == "ring":
        pen.ellipse([x - r, y - r, x + r, y + r], outline=colour, width=max(2, int(r / 3)))
    elif shape == "cross":
        pen.rectangle([x - r, y - r / 4, x + r, y + r / 4], fill=colour)
        pen.rectangle([x - r / 4, y - r, x + r / 4, y + r], fill=colour)
    else:  # a five-pointed star
        angles = np.pi / 2 + np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, r, r / 2.5)
        pen.polygon([(x + q * np.cos(a), y - q * np.sin(a)) for q, a in zip(radii, angles)], fill=colour)
    return image


rng = np.random.default_rng(0)
for shape in SHAPES:
    (OUT / "photos" / shape).mkdir(parents=True, exist_ok=True)
    for i in range(IMAGES_PER_CLASS):
        draw(shape, rng).save(OUT / "photos" / shape / f"{shape}_{i:03d}.png")

role = {**{c: "known" for c in CONFIG["protocol"]["known"]}, **{c: "negative" for c in CONFIG["protocol"]["negative"]},
        **{c: "unknown" for c in CONFIG["protocol"]["unknown"]}}
fig, axes = plt.subplots(2, len(SHAPES), figsize=(7.5, 3.0))
for column, shape in enumerate(SHAPES):
    for row in range(2):
        axes[row, column].imshow(Image.open(OUT / "photos" / shape / f"{shape}_{row:03d}.png"))
        axes[row, column].axis("off")
    axes[0, column].set_title(f"{shape}\n({role[shape]})", fontsize=9)
fig.tight_layout()

# %%
# The experiment config
# ---------------------
# The YAML file is the whole experiment: the protocol's folders and roles, the network and
# the training. ``root`` is relative to the YAML file.
(OUT / "experiment.yaml").write_text(yaml.safe_dump({**CONFIG, "epochs": args.epochs}, sort_keys=False))
print((OUT / "experiment.yaml").read_text())

# %%
# Train
# -----
# The split is drawn, written to ``run/data_split/``, and the network trained with the
# Entropic Open-Set loss (paper Sec. 4.1). The headline table reads the test knowns against
# the test negatives (:math:`D_b`) and against the unknowns (:math:`D_a`, the stars).
run("train", OUT / "experiment.yaml", "--out", OUT / "run", "--no-progress")
print((OUT / "run" / "data_split" / "class_names.txt").read_text())

# %%
# Evaluate
# --------
# Every applicable detector on the test sets: OSCR (paper Sec. 4.3), CCR at FPR and AUROC.
# With 6 stars in the test split, FPRs below 1/6 cannot be measured: those cells say N/A.
run("evaluate", OUT / "run")

# %%
# Calibrate a threshold
# ---------------------
# The threshold is chosen on validation data only (held-out knowns and negatives), for a
# false positive rate of at most 10 % on the validation negatives.
run("calibrate", OUT / "run", "--fpr", "0.1")

# %%
# Predict on new images
# ---------------------
# All 40 stars: a class, or ``unknown`` where the score falls below the threshold. The
# stars were never seen in training; how many the model rejects is its open-set quality
# on this class.
run("predict", OUT / "run", OUT / "photos" / "star", "--out", OUT / "star_predictions.csv")
with open(OUT / "star_predictions.csv", newline="") as file:
    answers = [row["label"] for row in csv.DictReader(file)]
print({name: answers.count(name) for name in sorted(set(answers))})

# %%
# Export
# ------
# One file with the network, the score and the threshold: it runs without this package
# (``torch.export``; ``--format onnx`` or ``torchscript`` for other runtimes).
run("export", OUT / "run", "--out", OUT / "model.pt2")
print(f"deployed: model.pt2, {(OUT / 'model.pt2').stat().st_size / 1e6:.1f} MB; "
      f"the split it was trained on: run/data_split/")
if args.out is None:
    shutil.rmtree(OUT)  # the temporary folder
