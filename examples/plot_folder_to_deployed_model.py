"""
A folder of images to a deployed model
======================================

Images in folders ``ROOT/<split>/<class>/`` become an open-set protocol with a few lines of
YAML (no code): which class folders are known, which are negatives (trained on as
"unknown") and which are unknowns (test only). Then ``train``, ``calibrate`` (a threshold
chosen on validation data) and ``predict`` (a class or "unknown" for new images) run as on
the command line. The images are generated here: bars and boxes as the known classes,
diagonals as negatives, dots as unknowns, 28x28 white on black.
"""
# %%
# Images and the protocol
# -----------------------
import argparse
import tempfile
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from agnostophobia.cli import main


def agnostophobia(argv) -> None:
    """``agnostophobia ARGV...`` in this process; a failed command stops the example."""
    if main([str(a) for a in argv]) != 0:
        raise SystemExit(f"agnostophobia {' '.join(map(str, argv))} failed")

SHAPES = {"hbar": "known", "vbar": "known", "box": "known", "diag": "negative", "dots": "unknown"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="generated images -> protocol -> trained, calibrated model")
    p.add_argument("--per-class", type=int, default=40, help="training images per class")
    p.add_argument("--out", type=Path, help="working folder (default: a temporary one)")
    return p.parse_args(argv)


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


def write_protocol(root: Path, per_class: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    sizes = {"train": per_class, "val": max(per_class // 4, 5), "test": max(per_class // 2, 5)}
    for split, n in sizes.items():
        for shape, role in SHAPES.items():
            if role == "unknown" and split != "test":
                continue  # unknowns are test only (D_a)
            folder = root / "images" / split / shape
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                Image.fromarray(draw(shape, rng)).save(folder / f"{i:03d}.png")
    experiment = {
        "name": "shapes",
        "protocol": {"type": "folders", "root": "images",
                     "known": [s for s, r in SHAPES.items() if r == "known"],
                     "negative": [s for s, r in SHAPES.items() if r == "negative"],
                     "unknown": [s for s, r in SHAPES.items() if r == "unknown"],
                     "image_size": 28, "channels": 1, "kind": "glyph"},
        # a small MLP keeps this example fast; "model: lenet++" is the paper's network for 28x28 glyphs
        "model": "mlp", "model_kwargs": {"hidden": [64, 32]},
        "approaches": ["entropic"], "epochs": 6, "batch_size": 16, "lr": 0.003,
        "tensorboard": False, "progress": False, "cpu_threads": 2,
    }
    config = root / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return config


def run(args) -> None:
    if args.out is not None:
        return run_in(args, args.out)
    with tempfile.TemporaryDirectory(prefix="agnostophobia-folders-") as work:  # removed afterwards
        return run_in(args, Path(work))


def run_in(args, work: Path) -> None:
    config = write_protocol(work / "protocol", args.per_class)
    print(config.read_text())
    run_dir = work / "run"
    # the three commands a user types, here in this process
    agnostophobia(["train", str(config), "--out", str(run_dir), "--no-progress"])
    agnostophobia(["calibrate", str(run_dir), "--fpr", "0.1"])
    new_images = work / "new"
    new_images.mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    for shape in ("hbar", "box", "dots"):
        Image.fromarray(draw(shape, rng)).save(new_images / f"{shape}.png")
    agnostophobia(["predict", str(run_dir), str(new_images)])


# %%
# Train, calibrate, predict
# -------------------------
# ``predict`` prints one row per image: the class, or ``unknown`` where the score is below
# the threshold ``calibrate`` chose for 10 % false positives on the validation negatives.
# With a few dozen images and six epochs of a small MLP a novel pattern may still score
# above it: ``agnostophobia evaluate RUN`` measures how often (OSCR, CCR at FPR) on the
# protocol's test unknowns.
if __name__ == "__main__":
    run(parse_args())
