r"""PostMax (Cruz, Rabinowitz, Günther & Boult, "Operational Open-Set Recognition and PostMax
Refinement", ECCV 2024, the PostMax method): the detector ``postmax``. Its generalized Pareto fit,
which GHOST (:mod:`.ghost`) shares, is in :mod:`._evt`.

The maximum logit grows with the deep-feature magnitude, so PostMax first divides it by
that magnitude, the *normalised maximum logit*

.. math:: v(x) = \frac{\max_c l_c(x)}{\lVert F(x) \rVert_2},

and then maps it through the CDF of a generalized Pareto distribution (GPD)

.. math:: P(x) = G_{\xi, \mu, \sigma}\big(v(x)\big), \qquad
          G(v) = 1 - \Big(1 + \xi \frac{v - \mu}{\sigma}\Big)^{-1/\xi}
          \ (\xi \ne 0), \quad 1 - e^{-(v - \mu)/\sigma}\ (\xi = 0),

whose shape :math:`\xi`, location :math:`\mu` and scale :math:`\sigma` are the maximum-
likelihood fit (``scipy.stats.genpareto.fit``, all three free) to :math:`v` of the
correctly classified training knowns. :math:`P` is the probability that the sample is
known; one GPD serves all classes.

Setting: ``tail_fraction`` :math:`f \in (0, 1]`, the GPD fit threshold: the GPD is fitted
to the largest :math:`\lceil f n \rceil` of the :math:`n` training values (the
peaks over the :math:`(1 - f)` quantile). The default 1 fits all of them, as the
authors' code (Vastlab/PostMax-OOSA, ``PostMax.train``) does.

(N, C) scores: :math:`P(x)` in the column of the predicted class (the arg-max of the
logits, which PostMax keeps) and a smaller value in every other column
(:func:`~agnostophobia.detectors._base.place_in_predicted_column`), so the prediction
stays the network's and a threshold acts on :math:`P`. A zero feature vector (whose
logits a bias-free logit layer makes 0 too) has :math:`v = 0`.

**Tie-free** (score scale 2). The CDF saturates: values above the fitted support's upper end
(:math:`\xi < 0`) all have :math:`P = 1`, values below :math:`\mu` all have :math:`P = 0`, and near
1 float64 keeps few bits of :math:`1 - P`. The score is :math:`P` where it does not saturate and
goes on with the standardised :math:`z = (v - \mu) / \sigma` where it does: :math:`z \le 0` below
the location (so samples there still rank by the normalised logit) and :math:`1 + z` above
(:func:`~agnostophobia.detectors._evt.gpd_score`). A closed form in torch operations as well
(``export``: :func:`~agnostophobia.detectors._evt.torch_gpd_score`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ._base import (Detector, Setting, TorchScore, as_float64, check_columns, check_training_data,
                    place_in_predicted_column, register)
from ._evt import fit_gpd, gpd_cdf, gpd_score, torch_gpd_score


def normalised_max_logit(logits: np.ndarray, features: np.ndarray) -> np.ndarray:
    r""":math:`\max_c l_c / \lVert F \rVert_2` per row; 0 where :math:`F = 0`."""
    norm = np.linalg.norm(features, axis=1)
    top = logits.max(axis=1)
    return np.divide(top, norm, out=np.zeros_like(top), where=norm > 0)


def torch_normalised_max_logit(logits: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """:func:`normalised_max_logit` in torch operations."""
    norm = torch.linalg.vector_norm(features, dim=1)
    top = logits.max(dim=1).values
    return torch.where(norm > 0, top / torch.where(norm > 0, norm, torch.ones_like(norm)), torch.zeros_like(top))


@register("postmax")
class PostMax(Detector):
    r"""GPD CDF of the normalised maximum logit :math:`\max_c l_c / \lVert F \rVert`
    (Cruz et al., ECCV 2024), continued where it saturates (tie-free); formulas in the module
    docstring.

    Parameter: ``tail_fraction`` in (0, 1], the GPD fit threshold (default 1: all correctly
    classified training knowns). Attributes after :meth:`fit`: ``gpd_`` (shape, location,
    scale), ``num_classes_``, ``feature_dim_``.

    Examples:
        >>> from agnostophobia.detectors import PostMax, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = PostMax().fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    needs_features = True
    FITTED_STATE = ("gpd_", "num_classes_", "feature_dim_")
    title = "PostMax"
    SCORE_SCALE = 2  # the CDF continued by z where it saturates (1: the CDF, which ties at 0 and 1)
    report_note = ("Cruz et al. (ECCV 2024): the maximum logit divided by ||F||, through the CDF of a generalized "
                   "Pareto distribution fitted by maximum likelihood on each model's correctly classified "
                   "training knowns.")

    tail_fraction = Setting(float, 1.0, low=0, high=1, low_open=True,
                            grid=(0.1, 0.25, 0.5, 0.75, 1.0),
                            doc="f: the GPD is fitted to the largest ceil(f n) normalised maximum logits of the "
                                "n correctly classified training knowns; 1 fits all, as the authors' code "
                                "(Cruz et al., ECCV 2024)")

    def fit(self, train_logits, train_features, train_labels) -> "PostMax":
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, True)
        correct = logits.argmax(axis=1) == labels
        values = np.sort(normalised_max_logit(logits[correct], features[correct]))
        tail = values[len(values) - math.ceil(self.tail_fraction * len(values)):]
        self.gpd_ = fit_gpd(tail, f"the normalised maximum logits of {len(values)} correctly classified "
                                  f"training knowns (tail_fraction={self.tail_fraction})")
        self.num_classes_, self.feature_dim_ = logits.shape[1], features.shape[1]
        self._fitted = True
        return self

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.num_classes_, self.feature_dim_)
        return place_in_predicted_column(gpd_score(normalised_max_logit(logits, features), *self.gpd_), logits)

    def probabilities(self, logits, features) -> np.ndarray:
        r"""(N,) the GPD CDF :math:`P(x)` itself, in [0, 1] (saturating; the scores do not).

        Returns:
            An (N,) float64 NumPy array in [0, 1].
        """
        return gpd_cdf(normalised_max_logit(as_float64(logits, "logits"), as_float64(features, "features")),
                       *self.gpd_)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted, gpd: torch_gpd_score(
            torch_normalised_max_logit(logits, features), gpd[0], gpd[1], gpd[2]), gpd=self.gpd_)
