"""Logit Normalization (Wei, Xie, Cheng, Feng, An and Li, "Mitigating Neural Network
Overconfidence with Logit Normalization", ICML 2022, Sec. 3.2, Eq. 5)."""
from __future__ import annotations

import torch

from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .baselines import softmax_per_sample


@LOSSES.register("logitnorm")
class LogitNormLoss(OpenSetLoss):
    r"""LogitNorm (Wei et al., ICML 2022, Eq. 5): cross-entropy of the logits normalised to unit
    L2 norm and divided by a temperature τ.

    .. math::

        \mathcal{L}(x, y) = -\log \frac{e^{z_y / (\tau \|z\|)}}{\sum_{c=1}^{C} e^{z_c / (\tau \|z\|)}}

    Scaling a logit row by c > 0 leaves it unchanged: training cannot lower the loss by growing
    the logits, which the paper shows is what makes softmax overconfident. Default τ = 0.04 (the
    paper's CIFAR-10 value). Trained on knowns alone (negatives add 0 and ``'mean'`` counts the
    knowns, as for softmax); thresholded by the maximum softmax probability of the plain logits.
    A row of zero logits (norm 0) is divided by the smallest positive float instead of 0.

    Call ``loss(logits, labels, features=None, sample_weight=None)``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import LogitNormLoss
        >>> loss = LogitNormLoss(num_classes=3, temperature=1.0, reduction="none")
        >>> logits = torch.tensor([[4.0, 0.0, 0.0], [40.0, 0.0, 0.0]])
        >>> loss(logits, torch.tensor([0, 0])).round(decimals=4)  # the norm is divided out: scaling the logits changes nothing
        tensor([0.5514, 0.5514])
    """

    title = "LogitNorm"
    trains_on_unknowns = False
    default_detector = "softmax"
    temperature = Setting(float, 0.04, low=0, low_open=True, grid=(0.01, 0.04, 0.1),
                          doc="τ, the temperature of the normalised logits",
                          source="OpenOOD ``train_logitnorm.yml``: ``tau: 0.04``; "
                                 "hongxin001/logitnorm_ood, README.md: the CIFAR-10 command passes "
                                 "``--temp 0.01`` (train.py default 1.0); pytorch-ood "
                                 "``LogitNorm(t=1.0)``; paper's value not confirmed",
                          differs="**differs from the authors' released CIFAR-10 command** (0.01); "
                                  "pytorch-ood's default is 1",
                          formerly=("logitnorm_temperature",))  # its name until settings were checked per family

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        norm = torch.linalg.vector_norm(logits, dim=1, keepdim=True).clamp(min=torch.finfo(logits.dtype).tiny)
        return self._reduce(softmax_per_sample(logits / (self.temperature * norm), labels), labels, weight)
