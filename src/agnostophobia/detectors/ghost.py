r"""GHOST, the Gaussian Hypothesis Open-Set Technique (Rabinowitz, Cruz, Günther & Boult, AAAI
2025, arXiv 2502.03359; code: Vastlab/GHOST): the detector ``ghost``.

Fitting, on the correctly classified training knowns: per class :math:`c`, a diagonal
Gaussian of the deep features, the mean :math:`\mu_c \in \mathbb{R}^D` and the standard
deviation :math:`\sigma_c \in \mathbb{R}^D` of each feature dimension (unbiased, ``ddof=1``,
as ``torch.std``; a dimension with :math:`\sigma_{c,d} = 0` is left out, as the authors'
code sets it to infinity).

Scoring a sample with predicted class :math:`\hat c = \arg\max_c l_c` (which GHOST keeps):
the absolute z-scores of its features under that class's Gaussian normalise its logit,

.. math:: v(x) = \frac{l_{\hat c}(x)}{\sum_{d=1}^{D} \big| (F_d(x) - \mu_{\hat c, d}) /
          \sigma_{\hat c, d} \big|},

the *sum* of the absolute z-scores, as in the authors' code (``GHOST.norm``: the logit
divided by ``torch.sum(torch.abs(z), dim=1)``): a sample far from its class's Gaussian
in any dimension gets a small score. As in PostMax (:mod:`.postmax`), whose GPD fit it
shares, :math:`v` is then mapped through the CDF of a generalized Pareto distribution
fitted by maximum likelihood (``scipy.stats.genpareto.fit``), here one per class on
:math:`v` of that class's correctly classified training knowns (the authors'
``GHOST_Base.gpd_mp_fit`` / ``ReScore``): :math:`P(x) = G_{\hat c}(v(x))`.

(N, C) scores: :math:`P(x)` in the predicted class's column, smaller values elsewhere
(:func:`~agnostophobia.detectors._base.place_in_predicted_column`). **Tie-free** (score scale 2),
as PostMax: where the class's CDF saturates (0 below its location, near 1 above) the score goes on
with the standardised :math:`z = (v - \mu_{\hat c}) / \sigma_{\hat c}` of that class's GPD,
:math:`z \le 0` below and :math:`1 + z` above (:func:`~agnostophobia.detectors._evt.gpd_score`).
A sample exactly at its class mean (sum of z-scores 0) has the sum raised to the smallest
positive double, so its :math:`v` is :math:`\pm\infty` with the sign of the logit (score
:math:`\pm 10^{300}`). Everything is closed-form torch-expressible: ``export`` writes
:meth:`GHOST._torch_score`.
"""
from __future__ import annotations

import numpy as np
import torch

from ._base import (Detector, TorchScore, check_columns, check_training_data, picked, place_in_predicted_column,
                    register)
from ._evt import fit_gpd, gpd_score, torch_gpd_score


def ghost_normalised_logit(logits: np.ndarray, features: np.ndarray, classes: np.ndarray, mean: np.ndarray,
                           std: np.ndarray) -> np.ndarray:
    r""":math:`l_c / \sum_d |F_d - \mu_{c,d}| / \sigma_{c,d}` per row, with ``classes`` the
    class :math:`c` of each row (its predicted class); ``std`` may hold ``inf`` (dimension left out)."""
    z_sum = (np.abs(features - mean[classes]) / std[classes]).sum(axis=1)
    with np.errstate(over="ignore"):
        return logits[np.arange(len(classes)), classes] / np.maximum(z_sum, np.finfo(float).tiny)


@register("ghost")
class GHOST(Detector):
    r"""Logit of the predicted class over the sum of its features' absolute z-scores, through a
    per-class GPD CDF (Rabinowitz et al., AAAI 2025); formulas in the module docstring. In short,
    with :math:`\hat y` the predicted class and :math:`\mu_{\hat y}, \sigma_{\hat y}` its Gaussian,
    the score is :math:`G_{\hat y}\big(l_{\hat y} / \sum_d |F_d - \mu_{\hat y,d}| / \sigma_{\hat y,d}\big)`
    with :math:`G_{\hat y}` the class's fitted generalized Pareto CDF.

    No settings. Attributes after :meth:`fit`: ``mean_``, ``std_`` (C, D) per-class Gaussians
    (``inf`` for a constant dimension), ``gpd_`` (C, 3) shape, location, scale per class.

    Examples:
        >>> from agnostophobia.detectors import GHOST, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = GHOST().fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    needs_features = True
    FITTED_STATE = ("mean_", "std_", "gpd_")
    title = "GHOST"
    SCORE_SCALE = 2  # the CDF continued by z where it saturates (1: the CDF, which ties at 0 and 1)
    report_note = ("Rabinowitz et al. (AAAI 2025): per-class diagonal Gaussians of the deep features of each "
                   "model's correctly classified training knowns; the predicted class's logit divided by the sum "
                   "of the features' absolute z-scores, through a per-class generalized Pareto CDF.")

    def fit(self, train_logits, train_features, train_labels) -> "GHOST":
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, True)
        num_classes = logits.shape[1]
        correct = logits.argmax(axis=1) == labels
        logits, features, labels = logits[correct], features[correct], labels[correct]
        counts = np.bincount(labels, minlength=num_classes)
        if counts.min() < 2:
            c = int(np.argmin(counts))
            raise ValueError(f"class {c} has {counts[c]} correctly classified training sample(s); GHOST's "
                             "Gaussians need at least 2 per class")
        mean = np.stack([features[labels == c].mean(axis=0) for c in range(num_classes)])
        std = np.stack([features[labels == c].std(axis=0, ddof=1) for c in range(num_classes)])
        std[std == 0] = np.inf
        values = ghost_normalised_logit(logits, features, labels, mean, std)
        self.gpd_ = np.array([fit_gpd(values[labels == c], f"class {c}: the z-normalised logits of its "
                                                         f"{counts[c]} correctly classified training knowns")
                              for c in range(num_classes)])
        self.mean_, self.std_ = mean, std
        self._fitted = True
        return self

    def _scores(self, logits, features):
        check_columns(self, logits, features, *self.mean_.shape)
        predicted = logits.argmax(axis=1)
        values = ghost_normalised_logit(logits, features, predicted, self.mean_, self.std_)
        shape, loc, scale = self.gpd_[predicted].T
        return place_in_predicted_column(gpd_score(values, shape, loc, scale), logits)

    def _torch_score(self):
        return TorchScore(_torch_ghost_score, mean=self.mean_, std=self.std_, gpd=self.gpd_)


def _torch_ghost_score(logits, features, predicted, mean, std, gpd) -> torch.Tensor:
    """The predicted class's :func:`ghost_normalised_logit` through its GPD score, in torch operations."""
    z_sum = ((features - mean[predicted]).abs() / std[predicted]).sum(dim=1)
    value = picked(logits, predicted) / z_sum.clamp_min(torch.finfo(torch.float64).tiny)
    shape, loc, scale = gpd[predicted].unbind(dim=1)
    return torch_gpd_score(value, shape, loc, scale)
