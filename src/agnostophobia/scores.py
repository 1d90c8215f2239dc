"""Test-time scores of the known classes, from logits and deep features.

Inputs are torch tensors (any device, any float dtype) or numpy arrays / sequences;
outputs are float64 numpy arrays. All work is done in float64 with numerically stable
``scipy.special`` routines. Scores are per known class, shape (N, C); an open-set
evaluation thresholds the score of the predicted (arg-max) class.
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_softmax, softmax

from ._validation import check_scores
from .registry import Registry

#: Score functions by name; each is ``(logits, features) -> (N, C)`` float64 scores.
SCORES: Registry = Registry("score")


def _array(value, name: str, ndim: int = 2) -> np.ndarray:
    """Finite float64 array; torch tensors are upcast first (numpy has no bfloat16)."""
    if hasattr(value, "detach") and hasattr(value, "double"):
        value = value.detach().double()
    return check_scores(value, name, ndim=ndim)


def softmax_scores(logits) -> np.ndarray:
    """Softmax over the logits' columns, (N, C)."""
    return softmax(_array(logits, "logits"), axis=1)


def background_scores(logits) -> np.ndarray:
    """Known-class scores of a background-class network, (N, C).

    ``logits`` has C+1 columns, the last being the background class. The softmax runs
    over all C+1 outputs and only then is the background column dropped, so the rows
    sum to 1 - S_background (they do not sum to 1).
    """
    arr = _array(logits, "logits")
    if arr.shape[1] < 2:
        raise ValueError(f"logits must have C+1 >= 2 columns for background scores, got {arr.shape[1]}")
    return softmax(arr, axis=1)[:, :-1]


def feature_magnitude(features) -> np.ndarray:
    """Euclidean norm ||F|| of each deep feature vector, (N,).

    Computed in float64, so squares of float32-range values cannot overflow.
    """
    return np.linalg.norm(_array(features, "features"), axis=1)


def scaled_objectosphere_scores(logits, features) -> np.ndarray:
    """Softmax times deep feature magnitude, S_c(x) * ||F(x)|| (Sec. 4.2, last paragraph), (N, C)."""
    probs = softmax_scores(logits)
    magnitude = feature_magnitude(features)
    if magnitude.shape[0] != probs.shape[0]:
        raise ValueError(f"features has {magnitude.shape[0]} rows but logits has {probs.shape[0]}")
    return probs * magnitude[:, None]


def softmax_entropy(logits) -> np.ndarray:
    """Entropy of the softmax in nats (natural log), (N,); at most ln C.

    Uses log_softmax, so a probability that underflows to 0 contributes 0 * finite = 0.
    """
    log_p = log_softmax(_array(logits, "logits"), axis=1)
    return -(np.exp(log_p) * log_p).sum(axis=1)


@SCORES.register("softmax")
def _softmax_score(logits, features=None) -> np.ndarray:
    """Softmax scores; ``features`` is ignored."""
    return softmax_scores(logits)


@SCORES.register("background")
def _background_score(logits, features=None) -> np.ndarray:
    """Background-class scores (C+1 softmax, last column dropped); ``features`` is ignored."""
    return background_scores(logits)


@SCORES.register("objectosphere-scaled")
def _scaled_objectosphere_score(logits, features) -> np.ndarray:
    """Softmax times feature magnitude; needs ``features``."""
    return scaled_objectosphere_scores(logits, features)


def compute_scores(name: str, logits, features=None) -> np.ndarray:
    """Scores of the registered kind ``name`` (see ``SCORES.names()``), (N, C) float64."""
    return SCORES.get(name)(logits, features)
