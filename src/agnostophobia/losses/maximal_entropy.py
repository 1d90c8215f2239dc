"""Maximal Entropy Loss (Vareto, Günther and Schwartz, "Open-set Face Recognition with Neural
Ensemble, Maximal Entropy Loss and Feature Augmentation", SIBGRAPI 2023; Vareto et al., Image and
Vision Computing 141, 2024)."""
from __future__ import annotations

import torch

from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .entropic import entropic_per_sample


@LOSSES.register("maximal-entropy")
class MaximalEntropyLoss(OpenSetLoss):
    r"""Entropic Open-Set (Eq. 1 of Dhamija et al.) with an additive margin m on the target logit
    of known samples.

    .. math::

        \mathcal{L}(x) = \begin{cases}
            -\log \dfrac{e^{z_y - m}}{e^{z_y - m} + \sum_{c \ne y} e^{z_c}} & x \in D_c' \ (\text{label } y \ge 0)\\
            -\frac{1}{C}\sum_{c=1}^{C} \log S_c(x) & x \in D_b' \ (\text{label} < 0)
        \end{cases}

    The margin makes the known class win by m, so knowns must sit further from the boundary; on
    negatives the loss is Entropic Open-Set's exactly. Default m = 0.35 (the authors' released
    code); the mean is over the whole batch, as for Entropic Open-Set. Thresholded by its softmax.

    Call ``loss(logits, labels, features=None, sample_weight=None)``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import MaximalEntropyLoss
        >>> loss = MaximalEntropyLoss(num_classes=3, reduction="none")
        >>> logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        >>> loss(logits, torch.tensor([0, -1])).round(decimals=4)
        tensor([0.0507, 1.0986])
    """

    title = "Maximal Entropy"
    trains_on_unknowns = True
    default_detector = "softmax"
    margin = Setting(float, 0.35, low=0, grid=(0.1, 0.35, 0.5),
                     doc="m, subtracted from a known sample's target logit",
                     source="rafaelvareto/maximal-entropy-loss, python/openloss/src/mel.py: "
                            "``margin:float=0.35``; its README's example passes ``margin=0.5``; SIBGRAPI 2023 "
                            "paper, Table I and its text: m = 0.3, chosen on their face data; IMAVIS 2024: not "
                            "confirmed; not in pytorch-ood 0.4.0 or OpenOOD v1.5",
                     differs="the paper's experiments used 0.3; 0.35 is the code's default")

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        columns = torch.arange(logits.shape[1], device=logits.device)
        is_target = (columns[None, :] == labels[:, None])  # all False for a negative (label < 0)
        margined = logits - self.margin * is_target.to(logits.dtype)
        return self._reduce(entropic_per_sample(margined, labels), labels, weight)
