"""Write an open-set protocol as files, from the staged MNIST and EMNIST letters.

Needs the staged data ($AGNOSTOPHOBIA_DATA or --data-dir), or --generated for generated images;
plot_folder_to_deployed_model.py needs none.

    python examples/make_folder_protocol.py --out my-protocol [--per-class 200] [--format folders|csv] [--generated]
    agnostophobia train my-protocol/experiment.yaml --out runs/my-protocol
    agnostophobia evaluate runs/my-protocol

The sets of the paper (Sec. 1, Sec. 5): digits 0-5 are the known classes (D_c', D_c),
digits 6-7 the negatives (known unknowns: D_b' in train and val, D_b in test), digits
8-9 and the EMNIST letters the unknowns (D_a, test only). ``--format folders`` writes
``OUT/images/<split>/<class>/<n>.png``; ``--format csv`` writes the same images as
``OUT/images/<split>/<n>.png`` with ``train.csv``, ``val.csv``, ``test.csv`` in the
openset-imagenet convention (``path,label``; -1 negative, -2 unknown; a third column
names a negative's source digit) and ``class_names.txt``. Either way ``OUT/experiment.yaml``
is the experiment config that trains it (LeNet++ on 28x28 grey glyphs).

The images are read with the package's ``load_dataset`` from the data directory
(``--data-dir``, else ``$AGNOSTOPHOBIA_DATA``); nothing is written there. Per class:
``--per-class`` training images, a fifth of that for validation and half of it for
testing (MNIST train for train and val, MNIST test and letters test for test), drawn
with a fixed seed. Offline, without the staged data, ``--generated`` draws the digits and
letters instead (PIL's built-in font, jittered in place, size and brightness).
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

import numpy as np
import yaml
from PIL import Image, ImageDraw, ImageFont

from agnostophobia._atomic import atomic_write
from agnostophobia.data import load_dataset
from agnostophobia.data.paths import data_dir as resolve_data_dir
from agnostophobia.errors import AgnostophobiaError

KNOWN, NEGATIVE, UNKNOWN = (0, 1, 2, 3, 4, 5), (6, 7), (8, 9)
FOLDERS = tuple(str(d) for d in range(10))  # sorted folder names give the known classes' order
NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")  # class_names.txt


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="protocol directory to write (must not exist or be empty)")
    p.add_argument("--per-class", type=int, default=200, help="training images per class (default 200)")
    p.add_argument("--format", choices=("folders", "csv"), default="folders", help="folder tree or CSV files")
    p.add_argument("--data-dir", help="staged data (default: $AGNOSTOPHOBIA_DATA)")
    p.add_argument("--seed", type=int, default=0, help="which images are drawn")
    p.add_argument("--generated", action="store_true", help="draw the glyphs instead of reading the staged "
                                                            "MNIST and letters (offline)")
    args = p.parse_args(argv)
    if args.per_class < 5:
        p.error("--per-class must be at least 5 (a fifth of it is the validation set)")
    return args


def draw(labels: np.ndarray, classes, n: int, rng: np.random.Generator, skip=None) -> dict:
    """``{class: indices}``, ``n`` seeded indices per class (none of ``skip``'s)."""
    out = {}
    for c in classes:
        idx = np.flatnonzero(labels == c)
        if skip is not None:
            idx = np.setdiff1d(idx, skip[c])
        out[c] = np.sort(rng.permutation(idx)[:n])
    return out


def sets(data_dir, per_class: int, seed: int) -> dict:
    """``{split: [(class folder, label, images)]}`` with label >= 0 known, -1 negative, -2 unknown."""
    rng = np.random.default_rng(seed)
    train, test = load_dataset("mnist", "train", data_dir), load_dataset("mnist", "test", data_dir)
    letters = load_dataset("letters", "test", data_dir)
    used = draw(train.labels, KNOWN + NEGATIVE, per_class, rng)
    held = draw(train.labels, KNOWN + NEGATIVE, max(1, per_class // 5), rng, skip=used)
    tested = draw(test.labels, KNOWN + NEGATIVE + UNKNOWN, max(1, per_class // 2), rng)
    label = {**{c: c for c in KNOWN}, **{c: -1 for c in NEGATIVE}, **{c: -2 for c in UNKNOWN}}
    out = {split: [(FOLDERS[c], label[c], train.images[idx[c]]) for c in KNOWN + NEGATIVE]
           for split, idx in (("train", used), ("val", held))}
    out["test"] = [(FOLDERS[c], label[c], test.images[tested[c]]) for c in KNOWN + NEGATIVE + UNKNOWN]
    n_letters = max(1, per_class // 2) * len(UNKNOWN)
    out["test"].append(("letters", -2, letters.images[np.sort(rng.permutation(len(letters))[:n_letters])]))
    return out


def drawn(text: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` 28x28 white-on-black pictures of ``text``, each jittered in place, size and brightness."""
    font = ImageFont.load_default()
    out = np.zeros((n, 28, 28), np.uint8)
    for i in range(n):
        small = Image.new("L", (10, 14))
        ImageDraw.Draw(small).text((2, 1), text, fill=int(rng.integers(170, 256)), font=font)
        side = int(rng.integers(16, 23))
        glyph = small.resize((side * 10 // 14, side), Image.BILINEAR)
        canvas = Image.new("L", (28, 28))
        canvas.paste(glyph, (int(rng.integers(2, 28 - glyph.width - 1)), int(rng.integers(2, 28 - side - 1))))
        out[i] = np.asarray(canvas)
    return out


def generated_sets(per_class: int, seed: int) -> dict:
    """:func:`sets` drawn here instead of read: digits for the classes, letters for the unknowns."""
    rng = np.random.default_rng(seed)
    label = {**{c: c for c in KNOWN}, **{c: -1 for c in NEGATIVE}, **{c: -2 for c in UNKNOWN}}
    counts = {"train": per_class, "val": max(1, per_class // 5), "test": max(1, per_class // 2)}
    out = {split: [(FOLDERS[c], label[c], drawn(str(c), n, rng)) for c in KNOWN + NEGATIVE]
           for split, n in counts.items()}
    out["test"] += [(FOLDERS[c], -2, drawn(str(c), counts["test"], rng)) for c in UNKNOWN]
    letters = np.concatenate([drawn(ch, 1, rng) for ch in rng.choice(list("abcdefghijkmnopqrstuvwxyz"),
                                                                      counts["test"] * len(UNKNOWN))])
    out["test"].append(("letters", -2, letters))
    return out


def write_png(path: Path, image: np.ndarray) -> None:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(buf.getvalue()))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_folders(out: Path, data: dict) -> dict:
    for split, groups in data.items():
        for folder, _, images in groups:
            for i, image in enumerate(images):
                write_png(out / "images" / split / folder / f"{i:05d}.png", image)
    return {"type": "folders", "root": "images", "known": [FOLDERS[c] for c in KNOWN],
            "negative": [FOLDERS[c] for c in NEGATIVE], "unknown": [FOLDERS[c] for c in UNKNOWN] + ["letters"]}


def write_csv(out: Path, data: dict) -> dict:
    for split, groups in data.items():
        rows, n = [], 0
        for folder, label, images in groups:
            for image in images:
                name = f"{split}/{n:05d}.png"
                write_png(out / "images" / name, image)
                rows.append([name, label] + ([NAMES[int(folder)]] if label == -1 else []))
                n += 1
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)  # no header, as openset-imagenet's files
        write_text(out / f"{split}.csv", text.getvalue())
    write_text(out / "class_names.txt", "".join(NAMES[c] + "\n" for c in KNOWN))
    return {"type": "csv", "root": "images", "train": "train.csv", "val": "val.csv", "test": "test.csv",
            "class_names": "class_names.txt"}


def experiment(protocol: dict) -> dict:
    """LeNet++ (28x28 grey, white glyphs on black) with the four approaches of the paper.
    For RGB photographs set ``channels: 3``, ``kind: natural``, ``image_size: 32`` and
    ``model: resnet18``."""
    return {"name": "mnist-folders", "protocol": {**protocol, "image_size": 28, "channels": 1, "kind": "glyph"},
            "model": "lenet++", "model_kwargs": {"activation": "prelu", "feature_dim": 2},
            "approaches": ["softmax", "background", "entropic", "objectosphere"],
            "epochs": 5, "batch_size": 64, "lr": 0.001, "tensorboard": False,
            "budgets": {"smoke": {"epochs": 1, "batch_size": 16,
                                  "openmax": {"tail_size": 3, "alpha": 2, "distance": "eucos"}}}}


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    out = args.out.absolute()
    if out.exists() and any(out.iterdir()):
        sys.exit(f"make_folder_protocol: --out {out} is not empty; choose a new directory")
    if out == data_dir.absolute() or data_dir.absolute() in out.parents:
        sys.exit(f"make_folder_protocol: --out {out} is inside the data directory {data_dir}; write elsewhere")
    try:
        data = generated_sets(args.per_class, args.seed) if args.generated else sets(data_dir, args.per_class,
                                                                                      args.seed)
    except AgnostophobiaError as exc:
        sys.exit(f"make_folder_protocol: needs the staged MNIST and EMNIST letters in {data_dir} "
                 f"(agnostophobia data fetch mnist letters), or --generated to draw them offline "
                 f"({str(exc).splitlines()[0]})")
    protocol = write_folders(out, data) if args.format == "folders" else write_csv(out, data)
    write_text(out / "experiment.yaml", yaml.safe_dump(experiment(protocol), sort_keys=False))
    total = sum(len(images) for groups in data.values() for _, _, images in groups)
    print(f"wrote {total} images and {out / 'experiment.yaml'}; next:\n"
          f"  agnostophobia train {args.out / 'experiment.yaml'} --out runs/{out.name}\n"
          f"  agnostophobia evaluate runs/{out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
