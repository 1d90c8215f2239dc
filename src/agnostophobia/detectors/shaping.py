r"""Activation shaping: ReAct, ASH and SCALE change the deep feature vector F before the
network's last layer and score the logits it then gives by their energy.

Notation: :math:`F \in \mathbb{R}^D` the deep features (the input of the logit layer),
:math:`W \in \mathbb{R}^{C \times D}`, :math:`b \in \mathbb{R}^C` the last layer's weight and
bias over the C known classes (:meth:`~agnostophobia.detectors._base.Detector.use_last_layer`;
:math:`b = 0` for LeNet++, ResNet-18 and the torchvision backbones), :math:`h(F)` the shaped
features. Every score here is the negative free energy of the shaped logits (Liu et al., NeurIPS
2020, with temperature 1; larger = more known), one number per sample in the predicted class's
column:

.. math:: s(x) = \ln \sum_{c=1}^{C} \exp\big(W_c\, h(F) + b_c\big).

**Which tensor is shaped, and signed features.** The papers shape the non-negative activations
after a ReLU (ResNet's pooled penultimate layer). Our F is the signed output of a linear layer
(LeNet++'s, ResNet-18's and the torchvision backbones' feature layer), and the Entropic Open-Set
loss drives unknowns towards F = 0. We shape F itself, the tensor the stored last layer reads;
for a torchvision backbone that is F, *not* the trunk's pooled activations (which are not
stored: shaping those, the papers' setting, is not supported). Conventions for negative entries:

* ReAct clips from above only, :math:`\min(F_j, c)`: negative entries pass unchanged;
* ASH ranks the entries by value and keeps the largest ones (negative entries among them are
  kept as they are, pruned ones become 0); SCALE ranks the same way and prunes nothing;
* the sums of ASH-S, ASH-B and SCALE are of the positive parts :math:`F^+ = \max(F, 0)`, which
  on non-negative features are the papers' sums; a sample with no positive entry (F = 0
  included) has ratio 1 (nothing of its positive mass is pruned) and ASH-B fill 0, so every
  score is finite.

On non-negative F all three are the papers' formulas exactly (``tests/detectors/test_against_pytorch_ood.py``
compares them with pytorch-ood 0.4.0).

Computed in float64, in blocks of rows (:data:`ROWS`), so that 100,000 samples of 512-d features
never hold more than one block's shaped copy.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from scipy.special import logsumexp

from ._base import (Detector, Setting, TorchScore, check_training_data, continue_at_tie, place_in_predicted_column,
                    register)

#: Rows shaped at a time (a block of 8,192 x 512 float64 is 32 MB).
ROWS = 8192

SHAPED_NOTE = ("shapes F, the signed input of the logit layer (for a torchvision backbone: F, not the trunk's "
               "pooled activations the paper shapes, which are not stored); sums over positive parts, see "
               "docs/post-processors.md.")


def kept_count(dimensions: int, percentile: float) -> int:
    """How many of ``dimensions`` entries a pruning ``percentile`` (percent of the entries, smallest
    first) leaves: :math:`D - \\mathrm{round}(D p / 100)`, at least 1."""
    return max(1, dimensions - int(np.round(dimensions * percentile / 100.0)))


def kth_largest(features: np.ndarray, k: int) -> np.ndarray:
    """(N, 1) the k-th largest entry of each row."""
    d = features.shape[1]
    return np.partition(features, d - k, axis=1)[:, d - k:d - k + 1]


def shaped_energy(features: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                  shape: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """(N,) :math:`\\ln \\sum_c \\exp(W_c h(F) + b_c)` with ``shape`` = h, a block of rows at a time."""
    out = np.empty(len(features))
    for r0 in range(0, len(features), ROWS):
        shaped = shape(features[r0:r0 + ROWS])
        out[r0:r0 + ROWS] = logsumexp(shaped @ weight.T + bias, axis=1)
    return out


def positive_ratio(total, part):
    """``total / part`` of positive-part sums; 1 where ``part`` is 0 (then ``total`` is 0 too).
    NumPy or torch (the shapes' export), as ``total``."""
    lib = torch if isinstance(total, torch.Tensor) else np
    nonzero = part > 0
    return lib.where(nonzero, total / lib.where(nonzero, part, lib.ones_like(part)), lib.ones_like(total))


class _LastLayerDetector(Detector):
    """A detector that reads the network's last layer and shapes F before it."""

    needs_features = True
    needs_last_layer = True
    report_note = SHAPED_NOTE

    def _scores(self, logits, features):
        return place_in_predicted_column(shaped_energy(features, self.weight_, self.bias_, self.shape), logits)

    def shape(self, features: np.ndarray) -> np.ndarray:
        """The features as the detector shapes them before the last layer (each subclass's
        docstring says how).

        Args:
            features: (N, D) float64 deep features.

        Returns:
            An (N, D) float64 NumPy array.
        """
        raise NotImplementedError


# ------------------------------------------------------------------------------ ReAct
@register("react")
class ReAct(_LastLayerDetector):
    r"""ReAct (Sun, Guo & Li, "ReAct: Out-of-distribution Detection With Rectified Activations",
    NeurIPS 2021): features clipped at c before the last layer, scored by their energy,

    .. math:: h(F)_j = \min(F_j, c), \qquad s(x) = \ln \sum_c \exp(W_c\, h(F) + b_c),

    c the ``percentile``-th percentile (percent, linear interpolation) of every entry of the
    training knowns' features (Sec. 3: the 90th, the default; the grid spans 80 to 99). Negative
    entries pass unchanged (clipped from above only); fitted on the training knowns.

    **Tie-free** (score scale 2): every sample whose entries all reach the clip has
    :math:`h(F) = c \mathbf 1` and one and the same energy :math:`s^* = \ln \sum_c \exp(c\, W_c
    \mathbf 1 + b_c)` (:attr:`corner`), whatever its features (on LeNet++'s 2-D features, a whole
    quadrant). The score continues there with the unclipped energy :math:`\ln \sum_c \exp(W_c F
    + b_c)` as a second key (:func:`~agnostophobia.detectors._base.continue_at_tie`): the clipped
    energy below :math:`s^*`, the clipped energy + :math:`g` above it (:math:`g = 1 + |s^*|`), the
    corner's samples in between, ordered by their unclipped energy. The order of distinct clipped
    energies, and so every OSCR, CCR and AUROC where nothing reached the corner, is the paper's;
    :meth:`clipped_energy` gives the paper's score back.

    Examples:
        >>> from agnostophobia.detectors import ReAct, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = ReAct().use_last_layer(toy.last_layer_weight)
        >>> detector = detector.fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    title = "ReAct"
    SCORE_SCALE = 2  # continued at the corner where every entry is clipped (1: the clipped energy, which ties there)
    report_note = "Sun et al. (NeurIPS 2021): energy of the logits of F clipped at a training percentile; " + SHAPED_NOTE
    percentile = Setting(float, 90.0, low=0, high=100, grid=(80.0, 85.0, 90.0, 95.0, 99.0),
                         doc="p: F is clipped at the p-th percentile (percent) of every entry of the training "
                             "knowns' features (Sun et al., NeurIPS 2021, Sec. 3: 90)")
    FITTED_STATE = ("threshold_",)

    def fit(self, train_logits, train_features, train_labels) -> "ReAct":
        logits, features, _ = check_training_data(train_logits, train_features, train_labels, need_features=True)
        self._check_last_layer(logits, features)  # scored through it: refused now, not at the first score
        # one flat copy of the training features: np.percentile partitions in place of a copy anyway
        self.threshold_ = np.asarray(np.percentile(features.ravel(), self.percentile))
        self._fitted = True
        return self

    def shape(self, features):
        return np.minimum(features, self.threshold_)

    @property
    def corner(self) -> float:
        """:math:`s^*`, the clipped energy of every sample whose entries all reach the clip (fitted,
        with the last layer handed over)."""
        return float(logsumexp(self.threshold_ * self.weight_.sum(axis=1) + self.bias_))

    def _scores(self, logits, features):
        clipped = shaped_energy(features, self.weight_, self.bias_, self.shape)
        tied = np.all(features >= self.threshold_, axis=1)
        beneath = np.zeros(len(features))
        beneath[tied] = shaped_energy(features[tied], self.weight_, self.bias_, lambda f: f)
        return place_in_predicted_column(continue_at_tie(clipped, tied, self.corner, beneath), logits)

    def clipped_energy(self, scores) -> np.ndarray:
        """The paper's score, the clipped energy, of this detector's per-sample scores (the
        predicted class's column of :meth:`scores`): the continuation at the corner undone.

        Args:
            scores: (N,) per-sample scores of this fitted detector.

        Returns:
            The (N,) float64 clipped energies.
        """
        scores, corner = np.asarray(scores, dtype=np.float64), self.corner
        gap = 1.0 + abs(corner)
        return np.where(scores >= corner + gap, scores - gap, np.where(scores > corner, corner, scores))

    def _torch_score(self):
        return TorchScore(_torch_react, threshold=self.threshold_, weight=self.weight_, bias=self.bias_)


def _torch_react(logits, features, predicted, threshold, weight, bias):
    clipped = torch.logsumexp(torch.minimum(features, threshold) @ weight.T + bias, dim=1)
    corner = torch.logsumexp(threshold * weight.sum(dim=1) + bias, dim=0)
    tied = (features >= threshold).all(dim=1)
    return continue_at_tie(clipped, tied, corner, torch.logsumexp(features @ weight.T + bias, dim=1))


# -------------------------------------------------------------------------------- ASH
#: ASH's variants: prune (P), binarise (B), scale (S).
ASH_VARIANTS = ("s", "p", "b")


@register("ash")
class ASH(_LastLayerDetector):
    r"""ASH, activation shaping (Djurisic, Bozanic, Ashok & Liu, "Extremely Simple Activation
    Shaping for Out-of-Distribution Detection", ICLR 2023). Per sample, the entries of F below its
    ``percentile``-th percentile are pruned to 0 and the :math:`k = D - \mathrm{round}(D p/100)`
    largest ones (:math:`K`, at least 1; ties at the k-th value are all kept) are kept, then

    * ``p`` (ASH-P): :math:`h_j = F_j` for :math:`j \in K`, else 0;
    * ``b`` (ASH-B): :math:`h_j = s_1 / |K|` for :math:`j \in K`, else 0;
    * ``s`` (ASH-S, the default): :math:`h_j = F_j \exp(s_1 / s_2)` for :math:`j \in K`, else 0,

    with :math:`s_1 = \sum_j F_j^+` and :math:`s_2 = \sum_{j \in K} F_j^+` (their sums, of positive
    parts here; ratio 1 where :math:`s_2 = 0`), scored by the energy of :math:`W h + b`.
    Defaults: ASH-S at p = 90 (their ImageNet setting); the grid spans their 65 to 95 (four
    values, so that with the three variants it stays at 12 points). Post-hoc: nothing is fitted.

    Examples:
        >>> from agnostophobia.detectors import ASH, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = ASH().use_last_layer(toy.last_layer_weight)
        >>> detector = detector.fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    title = "ASH"
    report_note = "Djurisic et al. (ICLR 2023): energy of the logits of F pruned per sample; " + SHAPED_NOTE
    percentile = Setting(float, 90.0, low=0, high=99, grid=(65.0, 80.0, 90.0, 95.0),
                         doc="p: per sample, the entries of F below its p-th percentile (percent) are pruned "
                             "to 0 and the D - round(D p / 100) largest kept (Djurisic et al., ICLR 2023: 90 "
                             "on ImageNet)")
    variant = Setting(str, "s", choices=ASH_VARIANTS, grid=ASH_VARIANTS,
                      doc="what the kept entries become: 's' (ASH-S) scaled by exp(s1 / s2), 'p' (ASH-P) "
                          "kept as they are, 'b' (ASH-B) each set to s1 / (the number kept); s1 the sum of "
                          "F's positive entries, s2 that of the kept ones (Djurisic et al., ICLR 2023)")

    def ties(self):
        if self.variant == "b":
            return ("ASH-B: every sample without a positive feature has shaped features 0 and the energy of the "
                    "bias alone (its binarised values are the positive sum, 0)")
        return None

    def shape(self, features):
        k = kept_count(features.shape[1], self.percentile)
        kept = features >= kth_largest(features, k)
        positive = np.maximum(features, 0.0)
        total = positive.sum(axis=1)
        if self.variant == "b":
            return np.where(kept, (total / kept.sum(axis=1))[:, None], 0.0)
        pruned = np.where(kept, features, 0.0)
        if self.variant == "p":
            return pruned
        ratio = positive_ratio(total, np.where(kept, positive, 0.0).sum(axis=1))
        return pruned * np.exp(ratio)[:, None]

    def _torch_score(self):
        shape = partial(_torch_ash_shape, percentile=self.percentile, variant=self.variant)
        return TorchScore(partial(_torch_shaped_energy, shape=shape), weight=self.weight_, bias=self.bias_)


def _torch_shaped_energy(logits, features, predicted, weight, bias, *, shape):
    """The energy of the logits of the shaped features, :math:`\\ln \\sum_c \\exp(W_c h(F) + b_c)`, in torch
    operations (:func:`shaped_energy`'s export): ``shape`` is :math:`h`, ASH's or SCALE's."""
    return torch.logsumexp(shape(features) @ weight.T + bias, dim=1)


def _torch_ash_shape(features, *, percentile: float, variant: str):
    """ASH's :math:`h(F)` in torch operations (:meth:`ASH.shape`)."""
    k = kept_count(features.shape[1], percentile)
    kept = features >= torch.topk(features, k, dim=1).values[:, -1:]
    positive = features.clamp_min(0.0)
    total = positive.sum(dim=1)
    zero = torch.zeros_like(features)
    if variant == "b":
        shaped = torch.where(kept, (total / kept.sum(dim=1))[:, None], zero)
    else:
        shaped = torch.where(kept, features, zero)
        if variant == "s":
            ratio = positive_ratio(total, torch.where(kept, positive, zero).sum(dim=1))
            shaped = shaped * torch.exp(ratio)[:, None]
    return shaped


# ------------------------------------------------------------------------------ SCALE
@register("scale")
class SCALE(_LastLayerDetector):
    r"""SCALE (Xu, Lian et al., "Scaling for Training Time and Post-hoc Out-of-distribution
    Detection Enhancement", ICLR 2024): ASH-S's factor applied to the whole, unpruned F,

    .. math:: h(F) = F \exp(s_1 / s_2), \qquad s_1 = \sum_j F_j^+, \quad
              s_2 = \sum_{j \in \text{top-}k} F_j^+,

    :math:`k = D - \mathrm{round}(D p / 100)` (at least 1; ratio 1 where :math:`s_2 = 0`), scored
    by the energy of :math:`W h + b`. Default p = 85 (their ImageNet setting); the grid spans 65
    to 95. Post-hoc: nothing is fitted.

    Examples:
        >>> from agnostophobia.detectors import SCALE, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = SCALE().use_last_layer(toy.last_layer_weight)
        >>> detector = detector.fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    title = "SCALE"
    report_note = "Xu et al. (ICLR 2024): energy of the logits of F scaled per sample; " + SHAPED_NOTE
    percentile = Setting(float, 85.0, low=0, high=99, grid=(65.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0),
                         doc="p: F is multiplied by exp(s1 / s2), s1 the sum of its positive entries and s2 "
                             "that of its D - round(D p / 100) largest; nothing is pruned (Xu et al., ICLR "
                             "2024: 85 on ImageNet)")

    def shape(self, features):
        k = kept_count(features.shape[1], self.percentile)
        positive = np.maximum(features, 0.0)
        d = features.shape[1]
        top = np.partition(positive, d - k, axis=1)[:, d - k:].sum(axis=1)
        return features * np.exp(positive_ratio(positive.sum(axis=1), top))[:, None]

    def _torch_score(self):
        shape = partial(_torch_scale_shape, percentile=self.percentile)
        return TorchScore(partial(_torch_shaped_energy, shape=shape), weight=self.weight_, bias=self.bias_)


def _torch_scale_shape(features, *, percentile: float):
    """SCALE's :math:`h(F)` in torch operations (:meth:`SCALE.shape`)."""
    k = kept_count(features.shape[1], percentile)
    positive = features.clamp_min(0.0)
    top = torch.topk(positive, k, dim=1).values.sum(dim=1)
    return features * torch.exp(positive_ratio(positive.sum(dim=1), top))[:, None]
