r"""Mahalanobis distance to class-conditional Gaussians with one shared covariance, and its
relative form.

**Mahalanobis** (Lee, Lee, Lee & Shin, "A Simple Unified Framework for Detecting
Out-of-Distribution Samples and Adversarial Attacks", NeurIPS 2018, Eq. 2): class means
:math:`\mu_c` of the training knowns' features and the tied covariance

.. math:: \Sigma = \frac{1}{N} \sum_{c} \sum_{i: y_i = c} (F_i - \mu_c)(F_i - \mu_c)^\top,
          \qquad s(x) = \max_c -(F - \mu_c)^\top \Sigma^{+} (F - \mu_c).

Only the last feature layer is used (no input pre-processing, no layer ensemble: the stored
outputs hold F alone).

**Relative Mahalanobis** (Ren, Fort, Liu, Roy, Padhy & Lakshminarayanan, "A Simple Fix to
Mahalanobis Distance for Improving Near-OOD Detection", arXiv 2106.09022, 2021, Eq. 4): the
distance relative to one background Gaussian of all training knowns, mean :math:`\mu_0` and
covariance :math:`\Sigma_0 = \frac{1}{N} \sum_i (F_i - \mu_0)(F_i - \mu_0)^\top`,

.. math:: s(x) = -\min_c \big(\mathrm{MD}_c(F) - \mathrm{MD}_0(F)\big),
          \quad \mathrm{MD}_c(F) = (F - \mu_c)^\top \Sigma^{+} (F - \mu_c).

:math:`\Sigma^{+}` is the pseudo-inverse, so a covariance that is singular in some direction
(collapsed features) still gives finite distances. Both store one D x D whitening matrix
:math:`L` with :math:`L L^\top = \Sigma^{+}` and the C whitened means, never a covariance per
class: a fit at 1,000 classes of 512-d features holds about 4 MB of state; the minimum over
classes is a chunked nearest-mean search (``detectors.knn.k_smallest_distances``). Signed
features need no convention. One number per sample, in the predicted class's column (the
network's prediction is kept; the nearest mean's class may differ). Fitted on the training
knowns (all of them).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from ._base import (Detector, TorchScore, check_columns, check_training_data, place_in_predicted_column,
                    register)
from .knn import k_smallest_distances

#: Rows centred at a time when the covariance is summed (8,192 x 512 float64: 32 MB).
ROWS = 8192


def class_means(features: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, D) mean feature of each class; a ``ValueError`` naming the classes without a sample."""
    counts = np.bincount(labels, minlength=num_classes)
    if (counts == 0).any():
        missing = np.flatnonzero(counts == 0)
        raise ValueError(f"class(es) {', '.join(map(str, missing[:5]))} have no training sample; the class-"
                         "conditional Gaussians need one mean per class")
    sums = torch.zeros(num_classes, features.shape[1], dtype=torch.float64)
    sums.index_add_(0, torch.from_numpy(labels), torch.from_numpy(np.ascontiguousarray(features)))
    return sums.numpy() / counts[:, None]


def shared_covariance(features: np.ndarray, means: np.ndarray, labels: Optional[np.ndarray] = None) -> np.ndarray:
    r"""(D, D) :math:`\frac{1}{N} \sum_i (F_i - m_i)(F_i - m_i)^\top` with :math:`m_i` the mean of
    row i's class (``means`` (C, D) and ``labels``) or one mean (``means`` (D,), no labels); a
    block of rows at a time, so no N x D centred copy exists."""
    total = np.zeros((features.shape[1], features.shape[1]))
    for r0 in range(0, len(features), ROWS):
        centre = means if labels is None else means[labels[r0:r0 + ROWS]]
        block = features[r0:r0 + ROWS] - centre
        total += block.T @ block
    return total / len(features)


def whitening(covariance: np.ndarray) -> np.ndarray:
    r"""(D, D) L with :math:`L L^\top = \Sigma^{+}`: the eigenvectors scaled by :math:`\lambda^{-1/2}`
    where the eigenvalue is above numpy's pseudo-inverse cut-off, 0 where it is not."""
    values, vectors = np.linalg.eigh(covariance)
    cutoff = values.max(initial=0.0) * covariance.shape[0] * np.finfo(np.float64).eps
    scale = np.divide(1.0, np.sqrt(np.maximum(values, 0.0)), out=np.zeros_like(values), where=values > cutoff)
    return vectors * scale


class _GaussianDetector(Detector):
    needs_fit = True
    needs_features = True
    FITTED_STATE: Tuple[str, ...] = ("whitening_", "whitened_means_")

    def _fit_classes(self, train_logits, train_features, train_labels):
        """Class means and the shared covariance (kept whitened); returns what the relative form
        adds to: the features' mean, the shared covariance and the class means and counts."""
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, need_features=True)
        means = class_means(features, labels, logits.shape[1])
        covariance = shared_covariance(features, means, labels)
        self.whitening_ = whitening(covariance)
        self.whitened_means_ = means @ self.whitening_
        return covariance, means, np.bincount(labels, minlength=len(means))

    def nearest_class_distance(self, features: np.ndarray) -> np.ndarray:
        """(N,) :math:`\\min_c \\mathrm{MD}_c(F)`."""
        nearest = k_smallest_distances(features @ self.whitening_, self.whitened_means_, 1)[:, 0]
        return nearest ** 2


@register("mahalanobis")
class Mahalanobis(_GaussianDetector):
    r"""Mahalanobis (Lee et al., NeurIPS 2018): :math:`\max_c -(F - \mu_c)^\top \Sigma^{+} (F - \mu_c)`
    with class means and one shared covariance of the training knowns (see the module).

    Examples:
        >>> from agnostophobia.detectors import Mahalanobis, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = Mahalanobis().fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    title = "Mahalanobis"
    report_note = ("Lee et al. (NeurIPS 2018): minus the squared Mahalanobis distance of F to the nearest class "
                   "mean, shared covariance of the training knowns; last layer only, no input pre-processing.")

    def fit(self, train_logits, train_features, train_labels) -> "Mahalanobis":
        self._fit_classes(train_logits, train_features, train_labels)
        self._fitted = True
        return self

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.whitened_means_.shape[0], self.whitening_.shape[0])
        return place_in_predicted_column(-self.nearest_class_distance(features), logits)

    def _torch_score(self):
        return TorchScore(_torch_mahalanobis, whitening=self.whitening_, whitened_means=self.whitened_means_)


@register("relative-mahalanobis")
class RelativeMahalanobis(_GaussianDetector):
    r"""Relative Mahalanobis (Ren et al., 2021): :math:`-\min_c (\mathrm{MD}_c - \mathrm{MD}_0)`, the
    class distance less the distance to one Gaussian of all training knowns (see the module).

    Examples:
        >>> from agnostophobia.detectors import RelativeMahalanobis, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = RelativeMahalanobis().fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    title = "relative Mahalanobis"
    report_note = ("Ren et al. (2021): the Mahalanobis distance to the nearest class mean less that to one "
                   "Gaussian of all training knowns, negated; last layer only.")
    FITTED_STATE = _GaussianDetector.FITTED_STATE + ("background_whitening_", "background_mean_")

    def fit(self, train_logits, train_features, train_labels) -> "RelativeMahalanobis":
        covariance, means, counts = self._fit_classes(train_logits, train_features, train_labels)
        # the law of total covariance, Σ_0 = Σ + Σ_c (n_c / N)(μ_c - μ_0)(μ_c - μ_0)ᵀ: no second pass over F
        weights = counts / counts.sum()
        self.background_mean_ = weights @ means
        between = (means - self.background_mean_) * np.sqrt(weights)[:, None]
        self.background_whitening_ = whitening(covariance + between.T @ between)
        self._fitted = True
        return self

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.whitened_means_.shape[0], self.whitening_.shape[0])
        background = np.empty(len(features))
        for r0 in range(0, len(features), ROWS):
            whitened = (features[r0:r0 + ROWS] - self.background_mean_) @ self.background_whitening_
            background[r0:r0 + ROWS] = (whitened * whitened).sum(axis=1)
        return place_in_predicted_column(background - self.nearest_class_distance(features), logits)

    def _torch_score(self):
        return TorchScore(_torch_relative_mahalanobis, whitening=self.whitening_,
                          whitened_means=self.whitened_means_, background_whitening=self.background_whitening_,
                          background_mean=self.background_mean_)


def _torch_nearest(features, whitening, whitened_means):
    whitened = features @ whitening
    squared = ((whitened * whitened).sum(dim=1, keepdim=True) + (whitened_means * whitened_means).sum(dim=1)[None]
               - 2.0 * whitened @ whitened_means.T)
    return squared.min(dim=1).values.clamp_min(0.0)


def _torch_mahalanobis(logits, features, predicted, whitening, whitened_means):
    return -_torch_nearest(features, whitening, whitened_means)


# Seven parameters, as TorchScore calls a formula: the three inputs of every exported score, then each
# fitted array by the name of its buffer in the exported file (the class Gaussians' two, the
# background Gaussian's two); grouping them would rename the buffers the written files hold.
def _torch_relative_mahalanobis(logits, features, predicted, whitening, whitened_means, background_whitening,
                                background_mean):
    background = (features - background_mean) @ background_whitening
    return (background * background).sum(dim=1) - _torch_nearest(features, whitening, whitened_means)
