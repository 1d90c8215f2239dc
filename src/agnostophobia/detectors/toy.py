"""Toy network outputs for the detectors' examples and tests, in the manner of scikit-learn's
``make_blobs``: :func:`make_toy_outputs` draws the training knowns' deep features around one
class axis each and returns them with the logits of a bias-free last layer on them, the layer
itself and two test samples, one near class 0 and one off every class -- everything a
detector's ``use_last_layer``, ``fit`` and ``scores`` take.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agnostophobia._validation import check_seed


@dataclass(frozen=True)
class ToyOutputs:
    """What :func:`make_toy_outputs` returns: a network's outputs on C known classes, N = C n
    training knowns with D-dimensional deep features F, and a bias-free last layer
    :math:`l = W F` (pass ``last_layer_weight`` to a detector's ``use_last_layer``).

    Examples:
        >>> from agnostophobia.detectors import make_toy_outputs
        >>> toy = make_toy_outputs(samples_per_class=5, num_classes=2, feature_dim=3)
        >>> toy.train_logits.shape, toy.train_features.shape, toy.train_labels.shape
        ((10, 2), (10, 3), (10,))
        >>> toy.test_features
        array([[4. , 0.1, 0.1],
               [0. , 0. , 8. ]])
    """

    train_logits: np.ndarray  # (N, C) float64: the training knowns' logits, train_features @ last_layer_weight.T
    train_features: np.ndarray  # (N, D) float64: the training knowns' deep features
    train_labels: np.ndarray  # (N,) int64: their classes 0..C-1, samples_per_class of each in order
    last_layer_weight: np.ndarray  # (C, D) float64: the last layer, class c along axis c of F (np.eye(C, D))
    test_logits: np.ndarray  # (2, C) float64: the test samples' logits, test_features @ last_layer_weight.T
    test_features: np.ndarray  # (2, D) float64: a sample near class 0, then one off every class


def _count(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def make_toy_outputs(samples_per_class: int = 20, num_classes: int = 3, feature_dim: int = 4,
                     separation: float = 4.0, seed: int = 0) -> ToyOutputs:
    """Toy outputs of a network on C = ``num_classes`` known classes: the last layer
    :math:`W` = ``np.eye(C, D)`` puts class c along axis c of the D = ``feature_dim``
    dimensional deep features; each training known of class c has the features
    ``separation`` times axis c plus standard normal noise, and the logits :math:`W F`. The
    two test samples are ``separation`` along axis 0 with 0.1 on every other axis (near class
    0) and ``2 * separation`` along the last axis, which no class uses (off every class).

    The noise is drawn once, ``np.random.default_rng(seed).normal(size=(C n, D))``: the same
    seed gives the same outputs.

    Args:
        samples_per_class: n, the training knowns of each class (at least 2, so that a class
            has a spread).
        num_classes: C, the known classes (at least 2).
        feature_dim: D, the deep features' dimension; more than ``num_classes``, so that the
            last axis is off every class.
        separation: how far each class mean lies from the origin along its axis, finite and > 0
            (the noise has standard deviation 1).
        seed: the seed of ``np.random.default_rng``.

    Returns:
        A :class:`ToyOutputs`: ``train_logits`` (N, C), ``train_features`` (N, D) and
        ``train_labels`` (N,) of the N = C n training knowns, grouped by class;
        ``last_layer_weight`` (C, D); ``test_logits`` (2, C) and ``test_features`` (2, D).

    Raises:
        ValueError: an argument out of its range, in one line naming it.

    Examples:
        >>> from agnostophobia.detectors import KNNDetector, make_toy_outputs
        >>> toy = make_toy_outputs()  # 3 classes, 20 training knowns each, 4-D deep features
        >>> toy.train_features.shape, toy.last_layer_weight.shape, toy.test_logits.shape
        ((60, 4), (3, 4), (2, 3))
        >>> toy.test_logits  # near class 0; off every class
        array([[4. , 0.1, 0.1],
               [0. , 0. , 0. ]])
        >>> detector = KNNDetector(k=5).fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> detector.scores(toy.test_logits, toy.test_features).shape
        (2, 3)
    """
    samples_per_class = _count(samples_per_class, "samples_per_class", 2)
    num_classes = _count(num_classes, "num_classes", 2)
    feature_dim = _count(feature_dim, "feature_dim", num_classes + 1)
    if isinstance(separation, bool) or not isinstance(separation, (int, float, np.integer, np.floating)) \
            or not math.isfinite(separation) or separation <= 0:
        raise ValueError(f"separation must be a finite number > 0, got {separation!r}")
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    weight = np.eye(num_classes, feature_dim)
    labels = np.repeat(np.arange(num_classes, dtype=np.int64), samples_per_class)
    features = separation * weight[labels] + rng.normal(size=(labels.size, feature_dim))
    test = np.zeros((2, feature_dim))
    test[0] = 0.1
    test[0, 0] = separation
    test[1, -1] = 2 * separation
    return ToyOutputs(train_logits=features @ weight.T, train_features=features, train_labels=labels,
                      last_layer_weight=weight, test_logits=test @ weight.T, test_features=test)
