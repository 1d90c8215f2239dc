"""Entropic Open-Set loss J_E (Dhamija et al. 2018, Sec. 4.1, Eq. 1)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import LOSSES, OpenSetLoss
from .recipes import Provenance


def entropic_per_sample(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-sample J_E for already-checked inputs (labels long, same device).

    ``log_softmax`` keeps both branches finite even for saturated logits.
    """
    log_p = F.log_softmax(logits, dim=1)
    known = labels >= 0
    # Unknown rows need *some* valid column to gather; their value is discarded below.
    target = torch.where(known, labels, torch.zeros_like(labels))
    known_term = -log_p.gather(1, target.unsqueeze(1)).squeeze(1)
    unknown_term = -log_p.mean(dim=1)
    return torch.where(known, known_term, unknown_term)


@LOSSES.register("entropic")
class EntropicOpenSetLoss(OpenSetLoss):
    r"""Entropic Open-Set loss (Sec. 4.1, Eq. 1).

    .. math::

        J_E(x) = \begin{cases}
            -\log S_c(x) & x \in D_c' \text{ of class } c \ (\text{label} = c \ge 0)\\
            -\frac{1}{C}\sum_{c=1}^{C} \log S_c(x) & x \in D_b' \ (\text{label} < 0)
        \end{cases}

    with :math:`S_c` the softmax over the C known-class logits. For an unknown the loss
    is minimal (= log C) exactly when all logits are equal (Lemmas 1-2); with a
    bias-free logit layer that happens at deep feature F = 0 (Theorem 1).

    Call ``loss(logits, labels, sample_weight=None)``; ``logits`` is (N, C), ``labels``
    (N,) integers. ``sample_weight`` (N,) is None here by default (unweighted), while the
    training pipeline passes the authors' weights by default (``sample_weighting: true``);
    when given, ``'mean'`` is ``sum_i w_i l_i / N`` (Keras-style), see
    :func:`inverse_frequency_class_weights`.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import EntropicOpenSetLoss
        >>> loss = EntropicOpenSetLoss(num_classes=3, reduction="none")
        >>> logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
        >>> loss(logits, torch.tensor([0, -1, -1])).round(decimals=4)  # a confident known; unknowns: log 3 at equal logits
        tensor([0.0360, 1.0986, 2.7026])
    """

    title = "Entropic Open-Set"  # display name in reports and figures
    provenance = (Provenance("loss", "Eq. 1", "Dhamija et al. 2018, Eq. 1"),)
    uses_features = False
    trains_on_unknowns = True

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        return self._reduce(entropic_per_sample(logits, labels), labels, weight)
