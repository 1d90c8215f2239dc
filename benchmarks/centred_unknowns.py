"""Whether the frame accounts for softmax's CCR on LeNet++'s glyph unknowns (review 1205e, M2).

MNIST was made by scaling each digit into a 20-pixel box and centring its centre of mass in the
28x28 field (LeCun et al., the MNIST page), so the known digits leave a 4-pixel frame empty, while
Devanagari and notMNIST reach into it: the frame's ink alone tells them from the knowns
(``trivial_separability.py``). Paper Sec. 5 reports softmax's CCR at FPR 1e-3 on Devanagari as
0.000; ours reads 0.84. This script reads the networks of a LeNet++ benchmark run on each D_a
glyph set twice, as the protocol prepares it and *centred* as MNIST was made (:func:`centre`),
and gives, per approach and set, the CCR at FPR 1e-3 with max-softmax both ways and their paired
difference over the seeds (the same networks read both ways), against the margin of the reading
declared in the provenance entry ``lenet-centred-unknowns``::

    python benchmarks/centred_unknowns.py runs/lenet-centred docs/results/centred-unknowns-lenet.json

Nothing is trained. The test sets are those the run's budget reads (its ``max_test_per_set``), drawn
by the protocol's data seed as the run drew them. The JSON holds the numbers, the code's commit, the
processor and the libraries' versions; ``docs/result_centred.py`` reads it for the pages."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
from PIL import Image
from scipy import ndimage
from scipy.special import softmax

from agnostophobia.experiments.benchmark_comparisons import MARGIN  # the declared reading's margin, in CCR
from agnostophobia.metrics import ccr_at_fpr, seed_interval
from agnostophobia.rundir import RunDir
from agnostophobia.training import load_trained_model, protocol_for
from trivial_separability import oriented_auroc, statistics, write_record

#: MNIST's box for a digit's longer side, and the lowest grey counted as the glyph when its box is found
#: (antialiased edges below it would widen the box by a faint pixel).
BOX, INK = 20, 32
#: The operating point read, the lowest the 10,000-image test sets resolve (Table 2's 1e-3 column).
FPR = 1e-3
GLYPH_SETS = ("devanagari", "notmnist")


def centre(images: np.ndarray, box: int = BOX, ink: int = INK) -> np.ndarray:
    """``uint8 (N, 1, S, S)`` white-on-black glyphs, each scaled so that the box of its pixels of at
    least ``ink`` has a longer side of ``box`` (aspect kept; Pillow bilinear, which antialiases when it
    shrinks) and pasted into a black ``S x S`` field with its intensity centre of mass on the field's
    centre (the shift rounded to whole pixels, kept inside the field). A blank image stays blank."""
    size = images.shape[-1]
    out = np.zeros_like(images)
    for i, image in enumerate(images[:, 0]):
        rows, cols = np.nonzero(image >= ink)
        if not rows.size:
            continue
        crop = image[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        scale = box / max(crop.shape)
        height, width = (max(1, round(side * scale)) for side in crop.shape)
        glyph = np.asarray(Image.fromarray(crop).resize((width, height), Image.Resampling.BILINEAR))
        mass_row, mass_col = ndimage.center_of_mass(glyph.astype(np.float64))
        top = int(np.clip(round((size - 1) / 2 - mass_row), 0, size - height))
        left = int(np.clip(round((size - 1) / 2 - mass_col), 0, size - width))
        out[i, 0, top:top + height, left:left + width] = glyph
    return out


def ccr(known_logits: np.ndarray, known_labels: np.ndarray, unknown_logits: np.ndarray) -> float:
    """CCR at :data:`FPR` with max-softmax: the network's softmax over its logits, knowns against the unknowns."""
    logits = np.concatenate([known_logits, unknown_logits])
    labels = np.r_[known_labels, -np.ones(len(unknown_logits), dtype=known_labels.dtype)]
    return float(ccr_at_fpr(softmax(logits.astype(np.float64), axis=1), labels, [FPR])[0])


def reading(prepared: List[float], centred: List[float]) -> Dict:
    """The declared reading of one approach on one set: both ways' means with 95 % t intervals, the
    paired difference centred - prepared with its 95 % and 90 % intervals, and the verdict."""
    difference = [c - p for c, p in zip(centred, prepared)]
    wide, narrow = seed_interval(difference), seed_interval(difference, confidence=0.90)
    if wide.high < -MARGIN:
        verdict = "centring lowers it by more than the margin"
    elif wide.low > MARGIN:
        verdict = "centring raises it by more than the margin"
    elif -MARGIN < narrow.low and narrow.high < MARGIN:
        verdict = "equivalent within the margin"
    else:
        verdict = "not resolved"
    return {"prepared": list(map(float, prepared)), "centred": list(map(float, centred)),
            "prepared_interval": list(seed_interval(prepared)), "centred_interval": list(seed_interval(centred)),
            "difference": list(wide), "difference_90": list(narrow), "verdict": verdict}


def frame_ink(known: np.ndarray, sets: Dict[str, np.ndarray]) -> Dict[str, float]:
    """The frame's-ink AUROC of each set against the knowns (``trivial_separability.py``'s statistic)."""
    frame = statistics(known)["ink in the border"]
    labels = lambda n: np.r_[np.zeros(len(known)), np.ones(n)]  # noqa: E731
    return {name: oriented_auroc(labels(len(images)), np.r_[frame, statistics(images)["ink in the border"]])
            for name, images in sets.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a LeNet++ benchmark run folder")
    parser.add_argument("out", type=Path, help="the JSON to write")
    parser.add_argument("--data-dir", default=None, help="the datasets' folder (default: AGNOSTOPHOBIA_DATA)")
    args = parser.parse_args(argv)
    run = RunDir(args.run)
    models = sorted((seed, approach) for seed, approach, _ in run.models())
    # the run's own protocol, data seed and caps, as its report drew the test sets
    protocol = protocol_for(load_trained_model(run.model(*models[0]), device="cpu").config, args.data_dir)
    known, known_labels = protocol.test_known.images, protocol.test_known.labels
    prepared = {name: protocol.test_unknowns[name].images for name in GLYPH_SETS}
    centred = {name: centre(images) for name, images in prepared.items()}
    values: Dict = {}
    for seed, approach in models:
        trained = load_trained_model(run.model(seed, approach), device="cpu")
        known_logits = trained.outputs(known)[0]  # once a network: every set and way reads the same knowns
        for name in GLYPH_SETS:
            for way, sets in (("prepared", prepared), ("centred", centred)):
                values.setdefault(approach, {}).setdefault(name, {}).setdefault(way, []).append(
                    ccr(known_logits, known_labels, trained.outputs(sets[name])[0]))
        print(seed, approach, {n: {w: round(v[-1], 4) for w, v in d.items()} for n, d in values[approach].items()})
    record = {"run": str(args.run), "fpr": FPR, "margin": MARGIN, "box": BOX, "ink": INK,
              "seeds": sorted({seed for seed, _ in models}), "known_samples": len(known),
              "samples": {name: len(images) for name, images in prepared.items()},
              "frame_ink_auroc": {"prepared": frame_ink(known, prepared), "centred": frame_ink(known, centred)},
              "readings": {approach: {name: reading(d["prepared"], d["centred"]) for name, d in sets.items()}
                           for approach, sets in values.items()}}
    write_record(args.out, record, __file__, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
