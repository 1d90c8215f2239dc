"""Tiny synthetic open-set protocols for fast trainer tests (no real data needed).

Each known class is a bright square at its own position; unknowns are noise, so a
network can learn something in one epoch of a few dozen samples. With
``negative_classes=K`` the unknowns of the training and validation splits carry a class
identity (``negative_class``, round robin over K classes ``neg0``..), as the letters of
the LeNet++ protocol do, for cross-class calibration.
"""
from __future__ import annotations

import numpy as np

from agnostophobia.data.protocols import OpenSetProtocol, ProtocolSplit
from agnostophobia.losses import LOSSES, PAPER_APPROACHES

#: What the end-to-end training tests train: the paper's four and one training peer of each kind
#: (Outlier Exposure: trains on negatives, per-term mean; VOS: a loss with parameters and state;
#: MixOE: a batch hook). The loss tests (tests/losses/) cover every registered loss.
END_TO_END_APPROACHES = (*PAPER_APPROACHES, "outlier-exposure", "vos", "mixoe")
#: ... of them, those whose seeds train as one stacked model, and those a CUDA graph captures.
BATCHED_APPROACHES = tuple(name for name in END_TO_END_APPROACHES if LOSSES.get(name).batches_over_seeds)
CAPTURED_APPROACHES = tuple(name for name in END_TO_END_APPROACHES if LOSSES.get(name).replays_in_cuda_graph)


def _images(labels: np.ndarray, rng: np.random.Generator, channels: int, size: int) -> np.ndarray:
    images = rng.integers(0, 60, size=(len(labels), channels, size, size), dtype=np.uint8)
    for i, label in enumerate(labels):
        if label >= 0:
            row, col = divmod(int(label) * 7, size - 8)
            images[i, :, row:row + 8, col:col + 8] = 255
    return images


def _split(name, labels, rng, channels, size, negative_classes: int = 0):
    labels = np.asarray(labels, dtype=np.int64)
    negative_class = None
    if negative_classes:
        negative_class = np.where(labels < 0, np.cumsum(labels < 0) % negative_classes, -1).astype(np.int64)
    return ProtocolSplit(name, _images(labels, rng, channels, size), labels, negative_class)


def synthetic_protocol(num_classes: int = 3, n_known: int = 48, n_unknown: int = 24, seed: int = 0,
                       channels: int = 1, size: int = 28, negative_classes: int = 0) -> OpenSetProtocol:
    rng = np.random.default_rng(seed)

    def labels(n_k, n_u):
        return np.concatenate([np.arange(n_k) % num_classes, -np.ones(n_u, dtype=np.int64)])

    return OpenSetProtocol(
        name="synthetic", num_classes=num_classes, input_shape=(channels, size, size),
        train=_split("train", labels(n_known, n_unknown), rng, channels, size, negative_classes),
        val=_split("val", labels(n_known // 4, n_unknown // 4), rng, channels, size, negative_classes),
        test_known=_split("known", labels(n_known // 2, 0), rng, channels, size),
        test_unknowns={"noise": _split("noise", labels(0, n_unknown), rng, channels, size)},
        notes=["synthetic test data"],
        class_names=[f"class{c}" for c in range(num_classes)],
        negative_class_names=[f"neg{k}" for k in range(negative_classes)],
    )
