"""
Your own images, as they come, to a deployed model
==================================================

    python examples/own_images.py [--out own-images-demo]

Your images as they come: one folder per class, ``photos/<class>/<image>`` (torchvision's
ImageFolder layout), nothing split by hand. The config names the classes the model must
know, the negatives it trains to reject (known unknowns, D_b') and the unknowns it only
meets at test time (D_a). ``agnostophobia train`` splits every known and negative class
into train, val and test (seeded, class-stratified, the same on every machine) and writes
the split to ``RUN/data_split/`` as CSV files you can read and reuse (``split: RUN/data_split``).

This script generates a small stand-in for your photos (coloured shapes on a noisy
background, of mixed sizes: the protocol resizes and centre-crops them), then runs the
five commands a practitioner runs, in this process:

    agnostophobia train     OUT/experiment.yaml --out OUT/run
    agnostophobia evaluate  OUT/run
    agnostophobia calibrate OUT/run --fpr 0.1
    agnostophobia predict   OUT/run OUT/photos/star
    agnostophobia export    OUT/run --out OUT/model.pt2

About 9 s of CPU time (measured: 8.5 s user, one torch thread; 32 s wall on a 2-core machine
that other jobs held at load 12). Replace ``photos`` with your own folder and the class lists in
``CONFIG`` with your folders' names; for real photographs raise ``image_size`` to 64 or
more and use ``model: resnet18`` with ``epochs: 30`` or so.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml
from PIL import Image, ImageDraw

from agnostophobia.cli import main as agnostophobia

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
    "model": "lenet++",
    "model_kwargs": {"in_channels": 3, "activation": "prelu", "feature_dim": 2},
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


def make_photos(root: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for shape in SHAPES:
        (root / shape).mkdir(parents=True, exist_ok=True)
        for i in range(IMAGES_PER_CLASS):
            draw(shape, rng).save(root / shape / f"{shape}_{i:03d}.png")


def run(*args) -> None:
    print("$ agnostophobia " + " ".join(map(str, args)), flush=True)
    if agnostophobia([str(a) for a in args]) != 0:
        sys.exit(f"own_images: agnostophobia {args[0]} failed (its error is above)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip().splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("own-images-demo"), help="folder to write (must not exist "
                                                                              "or be empty)")
    out = p.parse_args(argv).out
    if out.exists() and any(out.iterdir()):
        sys.exit(f"own_images: --out {out} is not empty; choose a new folder")
    make_photos(out / "photos")
    (out / "experiment.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    run("train", out / "experiment.yaml", "--out", out / "run", "--no-progress")
    run("evaluate", out / "run")
    run("calibrate", out / "run", "--fpr", "0.1")
    run("predict", out / "run", out / "photos" / "star", "--out", out / "star_predictions.csv")
    run("export", out / "run", "--out", out / "model.pt2")
    print(f"deployed: {out / 'model.pt2'} (the split it was trained on: {out / 'run' / 'data_split'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
