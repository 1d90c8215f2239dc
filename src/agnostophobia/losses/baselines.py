"""Baseline losses of the paper's comparison (Sec. 3): plain softmax and background class."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._base import LOSSES, OpenSetLoss
from .recipes import Provenance


def softmax_per_sample(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy of the knowns, 0 for the negatives (label < 0), for
    already-checked inputs (labels long, same device)."""
    known = labels >= 0
    target = torch.where(known, labels, torch.zeros_like(labels))
    nll = F.cross_entropy(logits, target, reduction="none")
    # where (not multiply by a mask): keeps the graph and never mixes in inf * 0.
    return torch.where(known, nll, torch.zeros_like(nll))


@LOSSES.register("softmax")
class SoftmaxLoss(OpenSetLoss):
    r"""Plain softmax cross-entropy on the known classes, :math:`-\log S_c(x)` (the paper's
    softmax baseline, Sec. 3).

    The paper's softmax baseline is trained on D_c' only, so unknown samples
    (label < 0) are *excluded*: their per-sample loss is 0 (also under
    ``reduction='none'``) and ``'mean'`` divides by the number of known samples in the
    batch (weighted: ``sum_known w_i l_i / N_known``). A batch of only unknowns gives 0,
    attached to the graph, not NaN. This lets one data loader feed every approach.

    Call ``loss(logits, labels, sample_weight=None)``; ``logits`` is (N, C).

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import SoftmaxLoss
        >>> loss = SoftmaxLoss(num_classes=3)
        >>> logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0]], requires_grad=True)
        >>> value = loss(logits, torch.tensor([0, -1]))  # the unknown is not trained on
        >>> round(value.item(), 4)
        0.036
        >>> value.backward()
        >>> bool((logits.grad[1] == 0).all())
        True
    """

    title = "Softmax"  # display name in reports and figures
    provenance = (Provenance("loss", "cross-entropy on the knowns only", "Dhamija et al. 2018, Sec. 3"),)
    uses_features = False
    trains_on_unknowns = False

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        return self._reduce(softmax_per_sample(logits, labels), labels, weight)


@LOSSES.register("background")
class BackgroundClassLoss(OpenSetLoss):
    r"""Softmax cross-entropy with an extra background class (Sec. 3).

    Logits have C+1 columns; unknown samples (label < 0) are trained as class C, the
    last column: :math:`-\log S_{y}(x)` with the softmax over all C+1 outputs and
    :math:`y = c` for knowns, :math:`y = C` for unknowns. At test time use
    :func:`agnostophobia.detectors.background_scores` (drop the last column *after* the
    C+1 softmax).

    Call ``loss(logits, labels, sample_weight=None)``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import BackgroundClassLoss
        >>> loss = BackgroundClassLoss(num_classes=3, reduction="none")
        >>> loss.num_outputs  # C + 1 logit columns, the background class last
        4
        >>> loss(torch.zeros(2, 4), torch.tensor([1, -1])).round(decimals=4)  # an unknown's target is column 3
        tensor([1.3863, 1.3863])
    """

    title = "Background"  # display name in reports and figures
    provenance = (Provenance("loss", "cross-entropy with the negatives as class C+1", "Dhamija et al. 2018, Sec. 3"),)
    uses_features = False
    trains_on_unknowns = True
    background_class = True
    default_detector = "background"  # the C+1 softmax, without its last column

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        target = torch.where(labels >= 0, labels, torch.full_like(labels, self.num_classes))
        return self._reduce(F.cross_entropy(logits, target, reduction="none"), labels, weight)
