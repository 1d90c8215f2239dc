"""LeNet++ against small-cnn on class folders, as a practitioner's own images would be: which network
separates unknowns better, over several seeds.

Writes class folders (PNG) from the staged data into OUT/images -- MNIST digits 0-5 known, EMNIST
letters a-d as negatives, Devanagari characters 1-3 as unknowns, PER_CLASS images each -- then, for
each network, trains ``entropic`` with SEEDS seeds on that ``imagefolder`` protocol (the
own-images guide's config otherwise) and prints, per seed and as mean and min-max, the closed-set
accuracy and the AUROC of max-softmax on the unknowns (known test images vs Devanagari) and on the
negatives' test images.

    python benchmarks/compare_own_image_networks.py --data-dir $AGNOSTOPHOBIA_DATA --out /tmp/own-nets
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from agnostophobia.metrics import auroc

NETWORKS = {
    "lenet++": "{in_channels: 1, activation: prelu, feature_dim: 2}",
    "small-cnn": "{in_channels: 1, feature_dim: 64, width: 32}",
}


def write_folders(data_dir: Path, root: Path, per_class: int) -> None:
    rng = np.random.default_rng(0)
    mnist = np.load(data_dir / "mnist" / "mnist.npz")
    letters = np.load(data_dir / "letters" / "letters.npz")
    devanagari = np.load(data_dir / "devanagari" / "devanagari.npz")
    groups = [(f"digit{c}", mnist["x_train"][mnist["y_train"] == c]) for c in range(6)]
    groups += [(f"letter_{'abcd'[c]}", letters["x_train"][letters["y_train"] == c + 1]) for c in range(4)]
    groups += [(f"devanagari{c}", devanagari["x_test"][devanagari["y_test"] == c]) for c in range(3)]
    for name, images in groups:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in rng.choice(len(images), min(per_class, len(images)), replace=False):
            Image.fromarray(images[i]).save(folder / f"{i}.png")


def config(root: Path, model: str, kwargs: str, epochs: int, seeds: int) -> str:
    return f"""name: own-networks
protocol:
  type: imagefolder
  root: {root}
  known: [{', '.join(f'digit{c}' for c in range(6))}]
  negative: [letter_a, letter_b, letter_c, letter_d]
  unknown: [devanagari0, devanagari1, devanagari2]
  image_size: 28
  channels: 1
  kind: glyph
model: {model}
model_kwargs: {kwargs}
approaches: [entropic]
seeds: {seeds}
epochs: {epochs}
batch_size: 64
lr: 0.003
tensorboard: false
"""


def scores(run: Path, seeds: int):
    rows = []
    for seed in range(seeds):
        out = np.load(run / f"seed{seed}" / "entropic" / "outputs.npz")
        known, labels = out["known__logits"], out["known__labels"]
        row = {"accuracy": float((known.argmax(1) == labels).mean())}
        for name in ("unknowns", "negatives"):
            logits = np.concatenate([known, out[f"{name}__logits"]])
            all_labels = np.concatenate([labels, -np.ones(len(out[f"{name}__logits"]), int)])
            row[name] = auroc(softmax(logits), all_labels)
        rows.append(row)
    return rows


def softmax(logits):
    z = np.exp(logits - logits.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-class", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    root = args.out / "images"
    if not root.exists():
        write_folders(args.data_dir, root, args.per_class)
    for model, kwargs in NETWORKS.items():
        yaml = args.out / f"{model}.yaml"
        yaml.write_text(config(root.resolve(), model, kwargs, args.epochs, args.seeds))
        run = args.out / model
        start = time.perf_counter()
        command = [sys.executable, "-m", "agnostophobia", "train", str(yaml), "--out", str(run), "--no-progress"]
        if run.exists():
            command.append("--resume")
        subprocess.run(command, check=True)
        seconds = time.perf_counter() - start
        rows = scores(run, args.seeds)
        for key in ("accuracy", "unknowns", "negatives"):
            values = [r[key] for r in rows]
            print(f"{model:10s} {key:10s} " + " ".join(f"{v:.3f}" for v in values) +
                  f"   mean {np.mean(values):.3f}  range {min(values):.3f}-{max(values):.3f}")
        print(f"{model:10s} trained {args.seeds} seeds in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
