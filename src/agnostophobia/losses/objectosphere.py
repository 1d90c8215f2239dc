"""Objectosphere loss J_R (Dhamija et al. 2018, Sec. 4.2, Eq. 2)."""
from __future__ import annotations

import torch

from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .entropic import entropic_per_sample


def objectosphere_penalty(features: torch.Tensor, labels: torch.Tensor, xi: float) -> torch.Tensor:
    """Per-sample feature-magnitude term of Eq. 2 (without lambda).

    ``max(xi - ||F||, 0)^2`` for knowns, ``||F||^2`` for unknowns. The unknown term uses
    the squared norm directly (gradient 2F, zero at F = 0). The known term needs
    ``||F||``, whose gradient F/||F|| is 0/0 at F = 0: sqrt only the positive squared
    norms (the "double where" trick) so that value and gradient stay finite there.
    """
    squared = features.pow(2).sum(dim=1)
    positive = squared > 0
    norm = torch.where(positive, torch.sqrt(torch.where(positive, squared, torch.ones_like(squared))),
                       torch.zeros_like(squared))
    known_term = torch.clamp(xi - norm, min=0).pow(2)
    return torch.where(labels >= 0, known_term, squared)


@LOSSES.register("objectosphere")
class ObjectosphereLoss(OpenSetLoss):
    r"""Objectosphere loss (Sec. 4.2, Eq. 2).

    .. math::

        J_R = J_E + \lambda \begin{cases}
            \max(\xi - \|F(x)\|, 0)^2 & x \in D_c' \ (\text{label} \ge 0)\\
            \|F(x)\|^2 & x \in D_b' \ (\text{label} < 0)
        \end{cases}

    ``J_E`` is the Entropic Open-Set loss (Eq. 1) and ``F`` the deep features feeding
    the (bias-free) logit layer. Known samples are pushed out to magnitude ``xi``,
    unknowns to the origin, where J_R has its only minimum (Theorem 2). The defaults are the
    authors' MNIST values, ``xi=50, lambda_=1e-4``; ``tune`` searches the grids declared in
    ``SETTINGS`` (the Settings table below) by cross-class calibration (Sec. 6). Their Keras code wrote the penalty as
    ``mean((1[known] max(xi-||F||,0) + 1[unknown] ||F||)^2)``, which is the same per
    sample; ``sample_weight`` multiplies the whole per-sample J_R.

    Call ``loss(logits, labels, features=features, sample_weight=None)``; ``features`` is (N, M).
    (The old form ``loss(logits, features, labels)`` still works, with a ``DeprecationWarning``.)
    Reductions and weighting as in :class:`EntropicOpenSetLoss`.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import ObjectosphereLoss
        >>> loss = ObjectosphereLoss(num_classes=3, xi=1.0, lambda_=1.0, reduction="none")
        >>> logits = torch.zeros(2, 3)
        >>> features = torch.tensor([[0.5, 0.0], [0.5, 0.0]])  # ||F|| = 0.5 for a known and for an unknown
        >>> loss(logits, torch.tensor([0, -1]), features=features).round(decimals=4)  # knowns pay (xi - ||F||)^2, unknowns ||F||^2
        tensor([1.3486, 1.3486])
    """

    title = "Objectosphere"  # display name in reports and figures
    uses_features = True
    trains_on_unknowns = True
    # Sec. 5: "we also test the scaled objectosphere approach"; Table 2's row "Scaled Objecto" (CIFAR: shown
    # where better than Objectosphere, which it was not on LeNet++)
    papers_other_detectors = ("objectosphere-scaled",)
    xi = Setting(float, 50.0, low=0, grid=(10.0, 50.0, 100.0),
                 doc="the feature magnitude known samples are pushed beyond (Eq. 2)",
                 source="Vastlab/Reducing-Network-Agnostophobia, MNIST/Mnist_Training.py: "
                        "``--Minimum_Knowns_Magnitude 50.``; pytorch-ood ``ObjectosphereLoss(xi=1.0)``; "
                        "not in OpenOOD v1.5",
                 differs="CIFAR: the paper gives no value and no CIFAR code was released; the ``cifar.yaml`` "
                         "value is ours, reasoned in the comment there")
    lambda_ = Setting(float, 1e-4, low=0, grid=(1e-5, 1e-4, 1e-3),
                      doc="the weight of the magnitude term (Eq. 2); YAML key 'lambda'",
                      source="Vastlab/Reducing-Network-Agnostophobia, MNIST/Mnist_Training.py: "
                             "``--ring_loss_weight 0.0001``; pytorch-ood ``ObjectosphereLoss(alpha=1.0)``",
                      differs="CIFAR: the ``cifar.yaml`` value is ours (the comment there); pytorch-ood's "
                              "defaults (1.0, 1.0) are not the authors'")

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, features: torch.Tensor = None,
                sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        features = self._check_features(features, logits)
        per_sample = entropic_per_sample(logits, labels) + self.lambda_ * objectosphere_penalty(
            features, labels, self.xi
        ).to(logits.dtype)
        return self._reduce(per_sample, labels, weight)
