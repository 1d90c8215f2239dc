"""Tiny synthetic open-set protocols for fast trainer tests (no real data needed).

Each known class is a bright square at its own position; unknowns are noise, so a
network can learn something in one epoch of a few dozen samples.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def _images(labels: np.ndarray, rng: np.random.Generator, channels: int, size: int) -> np.ndarray:
    images = rng.integers(0, 60, size=(len(labels), channels, size, size), dtype=np.uint8)
    for i, label in enumerate(labels):
        if label >= 0:
            row, col = divmod(int(label) * 7, size - 8)
            images[i, :, row:row + 8, col:col + 8] = 255
    return images


def _split(name, labels, rng, channels, size):
    labels = np.asarray(labels, dtype=np.int64)
    return SimpleNamespace(name=name, images=_images(labels, rng, channels, size), labels=labels)


def synthetic_protocol(num_classes: int = 3, n_known: int = 48, n_unknown: int = 24, seed: int = 0,
                       channels: int = 1, size: int = 28):
    rng = np.random.default_rng(seed)

    def labels(n_k, n_u):
        return np.concatenate([np.arange(n_k) % num_classes, -np.ones(n_u, dtype=np.int64)])

    return SimpleNamespace(
        name="synthetic", num_classes=num_classes, input_shape=(channels, size, size),
        train=_split("train", labels(n_known, n_unknown), rng, channels, size),
        val=_split("val", labels(n_known // 4, n_unknown // 4), rng, channels, size),
        test_known=_split("known", labels(n_known // 2, 0), rng, channels, size),
        test_unknowns={"noise": _split("noise", labels(0, n_unknown), rng, channels, size)},
        notes=["synthetic test data"],
    )
