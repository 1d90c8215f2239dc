"""CAC's distance-based rejection score (Miller, Sünderhauf, Milford and Dayoub, "Class Anchor
Clustering: a Loss for Distance-based Open Set Recognition", WACV 2021, Sec. 3), on the logits of a
network trained with the ``cac`` loss: its logits are the negated distances to the class anchors."""
from __future__ import annotations

import numpy as np
import torch
from scipy.special import logsumexp

from ._base import Detector, TorchScore, as_float64, picked, place_in_predicted_column, register


#: Below :math:`\ln |s| = ` this, :math:`|s|` is continued in log space instead of underflowing.
LOG_CUT = -700.0


def _continued(lib, top, rest):
    r"""The score :math:`s = l_t \sigma(a)` from the top logit :math:`l_t` and :math:`a = \ln \sum_{j \ne t}
    e^{l_j - l_t}` (numpy or torch), tie-free: with :math:`m = \ln |l_t| + \ln \sigma(a)`, :math:`s` itself
    where :math:`m >` :data:`LOG_CUT`; below it, where :math:`s` would round to 0, a CAC sample's
    (:math:`l_t < 0`) continues upwards as :math:`(c - m) - e^{c}` (above every score of the first regime,
    larger for smaller :math:`|s|`), any other's as :math:`e^{c} / (1 + c - m)`."""
    tiny = np.finfo(np.float64).tiny
    if lib is torch:
        log_q = -torch.logaddexp(torch.zeros_like(rest), -rest)
        size = torch.log(torch.clamp(top.abs(), min=tiny))
    else:
        log_q = -np.logaddexp(0.0, -rest)
        size = np.log(np.maximum(np.abs(top), tiny))
    m = size + log_q
    exact = lib.sign(top) * lib.exp(lib.maximum(m, lib.full_like(m, LOG_CUT)))
    cut = float(np.exp(LOG_CUT))
    beyond = lib.where(top < 0, (LOG_CUT - m) - cut, cut / (1 + lib.clamp(LOG_CUT - m, min=0)
                                                             if lib is torch else 1 + np.maximum(LOG_CUT - m, 0)))
    return lib.where(m > LOG_CUT, exact, beyond)


def cac_scores(logits) -> np.ndarray:
    r"""(N,) :math:`-d_t (1 - \mathrm{softmin}(d)_t)` at the predicted class t, with :math:`d = -l`: minus
    CAC's rejection score :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (attained at the nearest anchor t
    where the distances are >= 0). :math:`1 - \mathrm{softmin}(d)_t` is the sigmoid of
    :math:`a = \ln \sum_{j \ne t} e^{l_j - l_t}`, exact where the softmin rounds to 1; where the product
    would round to 0 it is continued in log space (tie-free; on a CAC network's logits, all <= 0, the
    order stays the paper's).

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
    return _continued(np, x[rows, top], logsumexp(shifted, axis=1))


def _torch_cac_score(logits: torch.Tensor, features: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """:func:`cac_scores` in torch operations, for ``export``."""
    top = picked(logits, predicted)
    own = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    shifted = torch.where(own, torch.full_like(logits, -torch.inf), logits - top[:, None])
    rest = torch.logsumexp(shifted, dim=1)
    finite = torch.isfinite(rest)
    return torch.where(finite, _continued(torch, top, torch.where(finite, rest, torch.zeros_like(rest))),
                       torch.zeros_like(top))


@register("cac")
class CACDetector(Detector):
    r"""CAC's distance-based rejection score (Miller et al., WACV 2021, Sec. 3), on the logits of a ``cac``
    network, the negated distances to the class anchors.

    With the distances :math:`d = -l`,

    .. math:: s(x) = -\,d_t(x)\,\bigl(1 - \mathrm{softmin}(d(x))_t\bigr),\qquad t = \arg\min_k d_k(x),

    larger = more known (continued in log space where it would round to 0: :func:`cac_scores`); the paper
    rejects where :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (which is
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
