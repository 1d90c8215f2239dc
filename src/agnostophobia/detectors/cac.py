"""CAC's distance-based rejection score (Miller, Sünderhauf, Milford and Dayoub, "Class Anchor
Clustering: a Loss for Distance-based Open Set Recognition", WACV 2021, Sec. 3), on the logits of a
network trained with the ``cac`` loss: its logits are the negated distances to the class anchors."""
from __future__ import annotations

import numpy as np
import torch
from scipy.special import expit, logsumexp

from ._base import Detector, TorchScore, as_float64, picked, place_in_predicted_column, register


def cac_scores(logits) -> np.ndarray:
    r"""(N,) :math:`-d_t (1 - \mathrm{softmin}(d)_t)` at the predicted class t, with :math:`d = -l`: minus
    CAC's rejection score :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (attained at the nearest anchor t
    where the distances are >= 0). :math:`1 - \mathrm{softmin}(d)_t` is computed as the sigmoid of
    :math:`a = \ln \sum_{j \ne t} e^{l_j - l_t}`, exact where the softmin rounds to 1.

    Args:
        logits: the (N, C) logits of a CAC network (the negated distances), a NumPy array or tensor.

    Returns:
        The (N,) float64 scores, larger = more known.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors.cac import cac_scores
        >>> distances = np.array([[1.0, 5.0], [3.0, 3.0]])
        >>> cac_scores(-distances).round(4)  # -1·(1 - 1/(1 + e^-4)), -3·(1 - 1/2)
        array([-0.018, -1.5  ])
    """
    x = as_float64(logits, "logits")
    rows = np.arange(len(x))
    top = x.argmax(axis=1)
    if x.shape[1] == 1:  # one class: softmin 1, nothing to reject against
        return np.zeros(len(x))
    shifted = x - x[rows, top][:, None]
    shifted[rows, top] = -np.inf
    return x[rows, top] * expit(logsumexp(shifted, axis=1))


def _torch_cac_score(logits: torch.Tensor, features: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """:func:`cac_scores` in torch operations, for ``export``."""
    top = picked(logits, predicted)
    own = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    shifted = torch.where(own, torch.full_like(logits, -torch.inf), logits - top[:, None])
    rest = torch.logsumexp(shifted, dim=1)
    return torch.where(torch.isfinite(rest), top * torch.sigmoid(rest), torch.zeros_like(top))


@register("cac")
class CACDetector(Detector):
    r"""CAC's distance-based rejection score (Miller et al., WACV 2021, Sec. 3), on the logits of a ``cac``
    network, the negated distances to the class anchors.

    With the distances :math:`d = -l`,

    .. math:: s(x) = -\,d_t(x)\,\bigl(1 - \mathrm{softmin}(d(x))_t\bigr),\qquad t = \arg\min_k d_k(x),

    larger = more known; the paper rejects where :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (which is
    attained at t) is large. One number per sample, in the predicted class's column. Applies to ``cac``
    networks alone (:attr:`approaches`): on other logits the product has no meaning.

    Conventions that differ: the authors' ``gather_outputs`` / ``metrics.auroc`` (dimitymiller/cac-openset)
    take the minimum of the score over every class, here the predicted class's (the same where the
    distances are >= 0, as a CAC network's are); pytorch-ood 0.4.0's ``CACLoss.score`` is
    :math:`-\max_k d_k (1 - \mathrm{softmin}(d)_k)`, the largest class's product instead of the smallest.
    The authors evaluate with the anchors moved to the training classes' mean logits; here the network's
    fixed anchors.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> distances = np.array([[1.0, 5.0, 5.0], [3.0, 3.0, 3.0]])  # near anchor 0; equally far from all
        >>> build_detector("cac").scores(-distances).max(axis=1).round(4)
        array([-0.0353, -2.    ])
    """

    title = "CAC rejection score"
    approaches = ("cac",)

    def _scores(self, logits, features):
        return place_in_predicted_column(cac_scores(logits), logits)

    def _torch_score(self):
        return TorchScore(_torch_cac_score)
