r"""ViM, virtual-logit matching (Wang, Li, Feng & Zhang, "ViM: Out-Of-Distribution with
Virtual-logit Matching", CVPR 2022).

With :math:`W, b` the last layer (:math:`l = W F + b`, C known classes) the features are centred
at the origin the last layer sees, :math:`u = -W^{+} b` (0 for a bias-free layer), and split into
a principal subspace P of dimension d -- the eigenvectors of the d largest eigenvalues of the
uncentred covariance :math:`\frac{1}{N} \sum_i (F_i - u)(F_i - u)^\top` of the training knowns --
and its orthogonal residual :math:`x^{P^\perp}`. The virtual logit is the residual's norm
scaled to the logits, :math:`\alpha = \overline{\max_c l_c} / \overline{\lVert x^{P^\perp} \rVert}`
(means over the training knowns), and the score (their Eq. 6 up to the softmax, larger = more
known) is

.. math:: s(x) = \ln \sum_{c=1}^{C} e^{l_c(x)} - \alpha \lVert x^{P^\perp}(x) \rVert.

**The principal dimension adapts to the run.** The paper fixes d per backbone (1000 of
D = 2048, 512 of D = 768: about half or more); here ``principal_fraction`` f gives
:math:`d = \mathrm{round}(f D)`, clipped to 1..D-1, default f = 0.5 (their D = 2048 choice,
and OpenOOD's 256 of a ResNet-18's 512), tuned over 0.25, 0.5, 0.75.

**Where it does not apply.** With D <= C (LeNet++'s 2-D features) the logits already span every
direction of F: there is no residual the classifier ignores, and the run's matrix says "not
applicable" (:meth:`ViM.not_applicable`).

Signed features need no convention: ViM reads F through a linear map and a norm. The energy
term reads the network's own logits (those given to :meth:`~ViM.scores`); :math:`\alpha` reads
the training knowns' own logits. Fitted on the training knowns (all of them, not only the
correctly classified ones).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from scipy.special import logsumexp

from ._base import (Detector, Setting, TorchScore, check_columns, check_training_data, place_in_predicted_column,
                    register)

#: Rows whose covariance or residual is computed at a time (8,192 x 512 float64: 32 MB).
ROWS = 8192


def principal_dimension(fraction: float, dimensions: int) -> int:
    """d = round(f D), clipped to 1..D-1 so that both the subspace and its residual exist."""
    return int(min(max(round(fraction * dimensions), 1), dimensions - 1))


def uncentred_covariance(features: np.ndarray, origin: np.ndarray) -> np.ndarray:
    r"""(D, D) :math:`\frac{1}{N} \sum_i (F_i - u)(F_i - u)^\top`, a block of rows at a time."""
    total = np.zeros((features.shape[1], features.shape[1]))
    for r0 in range(0, len(features), ROWS):
        centred = features[r0:r0 + ROWS] - origin
        total += centred.T @ centred
    return total / len(features)


@register("vim")
class ViM(Detector):
    r"""ViM (Wang et al., CVPR 2022): :math:`\ln \sum_c e^{l_c} - \alpha \lVert x^{P^\perp} \rVert`
    (see the module). ``principal_fraction``: d / D of the principal subspace (default 0.5).
    One number per sample, in the predicted class's column.

    Examples:
        >>> from agnostophobia.detectors import ViM, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = ViM().use_last_layer(toy.last_layer_weight)
        >>> detector = detector.fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    needs_features = True
    needs_last_layer = True
    title = "ViM"
    report_note = ("Wang et al. (CVPR 2022): energy minus the scaled norm of F's residual outside the training "
                   "knowns' principal subspace (d = principal_fraction x D); not applicable where D <= C.")
    principal_fraction = Setting(float, 0.5, low=0, high=1, low_open=True, grid=(0.25, 0.5, 0.75),
                                 doc="f: the principal subspace has d = round(f D) dimensions, clipped to "
                                     "1..D-1 (Wang et al., CVPR 2022, fix d per backbone: 1000 of D = 2048)")
    FITTED_STATE = ("origin_", "residual_basis_", "alpha_")

    @classmethod
    def not_applicable(cls, num_classes: int, feature_dim: int) -> Optional[str]:
        """Why ViM does not apply: it needs more feature dimensions than classes.

        Args:
            num_classes: the number of known classes C.
            feature_dim: the width of the network's deep features.

        Returns:
            A one-line reason where ``feature_dim <= num_classes``, else None.
        """
        if feature_dim <= num_classes:
            return (f"ViM needs more feature dimensions than classes (D={feature_dim} <= C={num_classes}): the "
                    "logits then span every direction of F and leave no residual")
        return None

    def fit(self, train_logits, train_features, train_labels) -> "ViM":
        logits, features, _ = check_training_data(train_logits, train_features, train_labels, need_features=True)
        self._check_last_layer(logits, features)
        why = self.not_applicable(logits.shape[1], features.shape[1])
        if why:
            raise ValueError(why)
        origin = -np.linalg.pinv(self.weight_) @ self.bias_
        _, vectors = np.linalg.eigh(uncentred_covariance(features, origin))  # ascending eigenvalues
        d = principal_dimension(self.principal_fraction, features.shape[1])
        basis = np.ascontiguousarray(vectors[:, :features.shape[1] - d])  # the D - d smallest: the residual
        residual = self._residual_norm(features, origin, basis)
        if not residual.mean() > 0:
            raise ValueError("the training knowns' features have no residual outside the principal subspace; "
                             "choose a smaller principal_fraction")
        self.origin_, self.residual_basis_ = origin, basis
        self.alpha_ = np.asarray(logits.max(axis=1).mean() / residual.mean())
        self._fitted = True
        return self

    @staticmethod
    def _residual_norm(features: np.ndarray, origin: np.ndarray, basis: np.ndarray) -> np.ndarray:
        out = np.empty(len(features))
        for r0 in range(0, len(features), ROWS):
            out[r0:r0 + ROWS] = np.linalg.norm((features[r0:r0 + ROWS] - origin) @ basis, axis=1)
        return out

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.weight_.shape[0], self.residual_basis_.shape[0])
        virtual = self.alpha_ * self._residual_norm(features, self.origin_, self.residual_basis_)
        return place_in_predicted_column(logsumexp(logits, axis=1) - virtual, logits)

    def _torch_score(self):
        return TorchScore(_torch_vim, origin=self.origin_, residual_basis=self.residual_basis_, alpha=self.alpha_)


def _torch_vim(logits, features, predicted, origin, residual_basis, alpha):
    residual = torch.linalg.vector_norm((features - origin) @ residual_basis, dim=1)
    return torch.logsumexp(logits, dim=1) - alpha * residual
