r"""Post-hoc detectors: scores computed from one sample's logits and deep features alone.

All work is done in float64 with numerically stable ``scipy.special`` routines; inputs
are torch tensors (any device, any float dtype) or numpy arrays / sequences, outputs
float64 numpy arrays. Notation: :math:`l \in \mathbb{R}^C` the known-class logits,
:math:`S_c = e^{l_c} / \sum_j e^{l_j}` the softmax, :math:`F` the deep feature vector.

============================  ==============================================  ===============================
name                          per-class score (larger = more known)            source
============================  ==============================================  ===============================
``softmax``                   :math:`S_c`                                      Sec. 3 (softmax thresholding);
                                                                               Hendrycks & Gimpel, ICLR 2017
``background``                :math:`S_c` of the C+1 softmax, c < C            Sec. 3 (background class)
``objectosphere-scaled``      :math:`S_c \cdot \lVert F \rVert`                Sec. 4.2, last paragraph
``max-logit``                 :math:`l_c`                                      Vaze et al., ICLR 2022 (MLS)
``entropy``                   :math:`-H(S) = \sum_c S_c \ln S_c`  (*)          Sec. 4.1, Table 1
``magnitude``                 :math:`\lVert F \rVert`  (*)                     Sec. 4.2, Table 1
``energy``                    :math:`T \ln \sum_c e^{l_c / T}`  (*)            Liu et al., NeurIPS 2020
``gen``                       :math:`-\sum_{j \le M} p_{(j)}^\gamma             Liu et al., CVPR 2023
                              (1 - p_{(j)})^\gamma`  (*)
============================  ==============================================  ===============================

(*) one number per sample, placed in the column of the predicted class
(:func:`~agnostophobia.detectors._base.place_in_predicted_column`).

Each detector writes its score twice, side by side: ``_scores`` in numpy/scipy for
evaluation, ``_torch_score`` in torch for ``export`` (the predicted class's value).
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import numpy as np
import torch
from scipy.special import log_softmax, logsumexp, softmax

from ._base import Detector, Setting, TorchScore, as_float64, picked, place_in_predicted_column, register


# ------------------------------------------------------------------ score functions

def softmax_scores(logits) -> np.ndarray:
    """Softmax over the logits' columns, (N, C)."""
    return softmax(as_float64(logits, "logits"), axis=1)


def background_scores(logits) -> np.ndarray:
    """Known-class scores of a background-class network, (N, C).

    ``logits`` has C+1 columns, the last being the background class. The softmax runs
    over all C+1 outputs and only then is the background column dropped, so the rows
    sum to 1 - S_background (they do not sum to 1).
    """
    arr = as_float64(logits, "logits")
    if arr.shape[1] < 2:
        raise ValueError(f"logits must have C+1 >= 2 columns for background scores, got {arr.shape[1]}")
    return softmax(arr, axis=1)[:, :-1]


def feature_magnitude(features) -> np.ndarray:
    """Euclidean norm ||F|| of each deep feature vector, (N,).

    Computed in float64, so squares of float32-range values cannot overflow.
    """
    return np.linalg.norm(as_float64(features, "features"), axis=1)


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
    log_p = log_softmax(as_float64(logits, "logits"), axis=1)
    return -(np.exp(log_p) * log_p).sum(axis=1)


def _torch_negative_entropy(logits, features, predicted):
    """Minus :func:`softmax_entropy` in torch operations, (N,): the ``entropy`` detector's export."""
    log_p = torch.log_softmax(logits, dim=1)
    return (log_p.exp() * log_p).sum(dim=1)


# ------------------------------------------------------------------ detectors

@register("softmax")
class SoftmaxDetector(Detector):
    r"""Maximum softmax probability: :math:`S_c = e^{l_c} / \sum_j e^{l_j}` (Sec. 3,
    "softmax thresholding"; Hendrycks & Gimpel, ICLR 2017)."""

    title = "max-softmax"

    def _scores(self, logits, features):
        return softmax_scores(logits)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: picked(torch.softmax(logits, dim=1), predicted))


@register("background")
class BackgroundDetector(Detector):
    r"""Known-class columns of the C+1 softmax of a background-class network (Sec. 3):
    :math:`S_c = e^{l_c} / \sum_{j=1}^{C+1} e^{l_j}` for the C known classes."""

    reads_background_column = True
    title = "background (C+1 softmax)"

    def _scores(self, logits, features):
        return background_scores(logits)

    def _torch_score(self):  # the C+1 softmax, read at a known column
        return TorchScore(lambda logits, features, predicted: picked(torch.softmax(logits, dim=1), predicted))


@register("objectosphere-scaled")
class ScaledObjectosphereDetector(Detector):
    r"""Softmax times deep-feature magnitude, :math:`S_c \cdot \lVert F \rVert`
    (Scaled Objectosphere, Sec. 4.2, last paragraph). A zero feature vector scores 0 for
    every class."""

    needs_features = True
    title = "softmax·‖F‖"

    def _scores(self, logits, features):
        return scaled_objectosphere_scores(logits, features)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: picked(torch.softmax(logits, dim=1), predicted)
                          * torch.linalg.vector_norm(features, dim=1))


@register("max-logit")
class MaxLogitDetector(Detector):
    r"""The logits themselves, :math:`l_c`: thresholding the largest one is the maximum
    logit score (MLS) of Vaze, Han, Vedaldi & Zisserman, "Open-Set Recognition: a Good
    Closed-Set Classifier is All You Need", ICLR 2022 (also Hendrycks et al., ICML 2022)."""

    def _scores(self, logits, features):
        return logits.copy()

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: picked(logits, predicted))


@register("entropy")
class EntropyDetector(Detector):
    r"""Negative softmax entropy :math:`-H(S) = \sum_c S_c \ln S_c` in nats, in [-ln C, 0].

    The Entropic Open-Set loss (Sec. 4.1, Eq. 1) drives unknowns to maximal entropy ln C;
    Table 1 reports H. One number per sample, in the predicted class's column.
    """

    def _scores(self, logits, features):
        return place_in_predicted_column(-softmax_entropy(logits), logits)

    def _torch_score(self):
        return TorchScore(_torch_negative_entropy)


@register("magnitude")
class MagnitudeDetector(Detector):
    r"""Deep-feature magnitude :math:`\lVert F \rVert` (Sec. 4.2: Objectosphere pushes
    unknowns' features towards 0; Table 1). One number per sample, in the predicted
    class's column."""

    needs_features = True
    title = "‖F‖"

    def _scores(self, logits, features):
        return place_in_predicted_column(feature_magnitude(features), logits)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: torch.linalg.vector_norm(features, dim=1))


@register("energy")
class EnergyDetector(Detector):
    r"""Negative free energy :math:`-E(x; T) = T \ln \sum_c e^{l_c / T}` (Liu, Wang, Owens &
    Li, "Energy-based Out-of-distribution Detection", NeurIPS 2020, Eq. 5 with the sign
    flipped so that larger = more known). ``temperature`` T > 0, default 1 as in their
    evaluation. One number per sample, in the predicted class's column.
    """

    SETTINGS = {"temperature": Setting(float, 1.0, low=0, low_open=True)}

    def __init__(self, temperature: float = 1.0):
        self._take_settings(temperature=temperature)

    def _scores(self, logits, features: Optional[np.ndarray]):
        t = self.temperature
        return place_in_predicted_column(t * logsumexp(logits / t, axis=1), logits)

    def _torch_score(self):
        t = self.temperature
        return TorchScore(lambda logits, features, predicted: t * torch.logsumexp(logits / t, dim=1))


def generalized_entropy(logits: np.ndarray, gamma: float, top: int) -> np.ndarray:
    r"""(N,) :math:`G_\gamma = \sum_{j=1}^{M} p_{(j)}^\gamma (1 - p_{(j)})^\gamma` over the M = ``top``
    largest softmax probabilities; from log-probabilities, so a probability of exactly 0 or 1
    contributes 0 (finite for every input), never a clamp."""
    log_p = log_softmax(logits, axis=1)
    log_p = -np.partition(-log_p, top - 1, axis=1)[:, :top]  # the M largest, in any order
    with np.errstate(divide="ignore"):  # log(1 - p) = -inf where p rounds to 1: its term is 0
        log_rest = np.log(-np.expm1(log_p))
    return np.exp(gamma * (log_p + log_rest)).sum(axis=1)


@register("gen")
class GENDetector(Detector):
    r"""GEN, the generalized entropy score (Liu, Lochman & Zach, "GEN: Pushing the Limits of
    Softmax-Based Out-of-Distribution Detection", CVPR 2023, Eq. 6):

    .. math:: s(x) = -G_\gamma(p) = -\sum_{j=1}^{M} p_{(j)}^\gamma \, (1 - p_{(j)})^\gamma,

    :math:`p_{(1)} \ge p_{(2)} \ge \dots` the sorted softmax probabilities; a confident sample has
    a small :math:`G_\gamma`. Their defaults: :math:`\gamma = 0.1`, M = 100 (ImageNet-1k);
    here M is clipped to the number of known classes C (a run with fewer classes sums all C, the
    report says so), and the grid spans :math:`\gamma` 0.01 to 1 and M 2, 5 and 100 (all C). Logits only.
    One number per sample, in the predicted class's column.
    """

    title = "GEN"
    report_note = ("Liu et al. (CVPR 2023): minus the generalized entropy of the M largest softmax probabilities; "
                   "M is clipped to the number of known classes C.")
    SETTINGS = {"gamma": Setting(float, 0.1, low=0, low_open=True, grid=(0.01, 0.1, 0.5, 1.0)),
                "top": Setting(int, 100, low=1, grid=(2, 5, 100))}

    def __init__(self, gamma: float = 0.1, top: int = 100):
        self._take_settings(gamma=gamma, top=top)

    def _scores(self, logits, features: Optional[np.ndarray]):
        return place_in_predicted_column(-generalized_entropy(logits, self.gamma, min(self.top, logits.shape[1])),
                                         logits)

    def _torch_score(self):
        return TorchScore(partial(_torch_gen, gamma=self.gamma, top=self.top))


def _torch_gen(logits, features, predicted, *, gamma: float, top: int):
    log_p = torch.topk(torch.log_softmax(logits, dim=1), min(top, logits.shape[1]), dim=1).values
    return -torch.exp(gamma * (log_p + torch.log(-torch.expm1(log_p)))).sum(dim=1)
