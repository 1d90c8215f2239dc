"""Class Anchor Clustering (Miller, Sünderhauf, Milford and Dayoub, "Class Anchor Clustering: a Loss
for Distance-based Open Set Recognition", WACV 2021, Sec. 3; the authors' code:
dimitymiller/cac-openset, ``train_cacOpenset.py`` and ``networks/openSetClassifier.py``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .recipes import Provenance, from_scratch


def anchor_distances(z: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """(N, K) float64 Euclidean distances of each row of ``z`` (N, C) to each anchor (K, C): the authors'
    ``distance_classifier`` (``torch.norm(x - anchors, 2, 2)``, in float64 as theirs); what
    :class:`AnchorDistances` negates, and what the ``cac`` detector measures to its anchor means."""
    difference = z.double()[:, None, :] - anchors.to(z.device)[None, :, :]
    return difference.pow(2).sum(-1).sqrt()


class AnchorDistances(nn.Module):
    r"""CAC's logit layer: the network's linear layer z = W F (+ b) into a C-dimensional space, then the
    negated Euclidean distance of z to each class anchor :math:`c_k = \alpha e_k` (magnitude α times the
    one-hot vector of class k):

    .. math:: l_k(x) = -d_k(x) = -\|z(x) - c_k\|_2

    (Sec. 3; the authors' ``distance_classifier``, ``torch.norm(x - anchors, 2, 2)``, computed in float64
    as theirs). The sign makes the logits larger = more of class k, as every detector reads them: the
    softmax of the logits is CAC's softmin of the distances. ``weight`` (and ``bias`` where the replaced
    layer has one) are that layer's own, so the network's state dict keeps its names and shapes; the
    anchors are fixed, a buffer rebuilt from α (not in the state dict).

    Args:
        layer: the network's linear logit layer (F -> C), whose parameters it keeps.
        magnitude: α, the anchors' magnitude.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses.cac import AnchorDistances
        >>> linear = torch.nn.Linear(2, 2, bias=False)
        >>> with torch.no_grad():
        ...     _ = linear.weight.copy_(torch.eye(2))
        >>> AnchorDistances(linear, magnitude=10.0)(torch.tensor([[10.0, 0.0]]))  # on anchor 0; 10·√2 from anchor 1
        tensor([[ -0.0000, -14.1421]])
    """

    def __init__(self, layer: nn.Module, magnitude: float):
        super().__init__()
        self.in_features, self.out_features = int(layer.in_features), int(layer.out_features)
        self.weight = layer.weight
        self.bias = getattr(layer, "bias", None)
        self.magnitude = float(magnitude)
        anchors = self.magnitude * torch.eye(self.out_features, dtype=torch.float64, device=layer.weight.device)
        self.register_buffer("anchors", anchors, persistent=False)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """The (N, C) logits, the negated distances to the anchors, of the (N, D) deep features."""
        z = F.linear(features, self.weight.to(features.dtype),
                     None if self.bias is None else self.bias.to(features.dtype))
        return -anchor_distances(z, self.anchors).to(features.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, magnitude={self.magnitude}"


@LOSSES.register("cac")
class CACLoss(OpenSetLoss):
    r"""Class Anchor Clustering (Miller et al., WACV 2021, Sec. 3): the Tuplet loss on the distances to
    fixed class anchors plus λ times the Anchor loss, the distance to the sample's own anchor.

    The network's logit layer is ``AnchorDistances`` (this module; :meth:`logit_layer`), whose logits are the
    negated distances :math:`l_k = -d_k = -\|z - \alpha e_k\|_2`; with :math:`d = -l`

    .. math::

        \mathcal{L}(x, y) = \underbrace{\log\Bigl(1 + \sum_{j \ne y} e^{d_y - d_j}\Bigr)}_{\text{Tuplet}}
            + \lambda\, \underbrace{d_y}_{\text{Anchor}}
          = -\log \frac{e^{l_y}}{\sum_{j=1}^{C} e^{l_j}} - \lambda\, l_y

    (the Tuplet term is the cross-entropy of the logits). α = ``cac_magnitude`` = 10 and λ = ``cac_weight``
    = 0.1, the authors' ``--alpha`` and ``--lbda`` defaults. Trained on knowns alone (negatives add 0,
    ``'mean'`` over the knowns: the authors' ``lbda * mean(anchor) + mean(tuplet)``). Thresholded by the
    paper's distance-based rejection score (``cac`` detector): :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)`,
    larger = more unknown, with the anchors moved to the means of the correctly classified training
    knowns' z, as the authors' ``eval_cacOpenset.py`` evaluates (``find_anchor_means``; the detector's
    ``anchors: fixed`` keeps α·one-hot).

    Conventions that differ from the authors' code: their logit layer has a bias (the package's networks'
    logit layers have none, except the MLP's); their network outputs the distances, this one their
    negation (the loss and score read ``d = -logits``). pytorch-ood 0.4.0's ``CACLoss`` differs from the
    authors' in two places, where this one follows the authors: its ``distance`` is squared, and its Tuplet
    term leaves out the last class instead of the true one (it sums the true class's e^0 = 1 instead).

    Call ``loss(logits, labels, features=None, sample_weight=None)``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import CACLoss
        >>> loss = CACLoss(num_classes=2, cac_weight=0.1, reduction="none")
        >>> distances = torch.tensor([[1.0, 5.0], [3.0, 3.0]])
        >>> loss(-distances, torch.tensor([0, 1])).round(decimals=4)  # log(1 + e^(1-5)) + 0.1·1, log 2 + 0.1·3
        tensor([0.1181, 0.9931])
    """

    title = "CAC"
    trains_on_unknowns = False
    linear_logits = False
    default_detector = "cac"
    cac_magnitude = Setting(float, 10.0, low=0, low_open=True, grid=(5.0, 10.0, 20.0),
                            doc="α, the magnitude of the class anchors α·e_k",
                            source="dimitymiller/cac-openset, train_cacOpenset.py: ``--alpha`` default 10 "
                                   "(``anchors = torch.diag([alpha] * C)``); pytorch-ood ``CACLoss(magnitude=1.0)``",
                            differs="pytorch-ood's default is 1")
    cac_weight = Setting(float, 0.1, low=0, grid=(0.01, 0.1, 1.0), doc="λ, the weight of the Anchor loss",
                         source="dimitymiller/cac-openset, train_cacOpenset.py: ``--lbda`` default 0.1; "
                                "pytorch-ood ``CACLoss(alpha=1.0)``",
                         differs="pytorch-ood's default is 1")
    scratch_recipe = from_scratch(
        "dimitymiller/cac-openset, train_cacOpenset.py and datasets/config.json: SGD momentum 0.9, batch 128; "
        "MNIST: lr 0.01 for 35 epochs, then resumed at lr 0.001 for 35, weight decay 5e-6; the checkpoint of "
        "lowest validation Anchor loss kept",
        "the budget's optimiser, learning rate, epochs and schedule here, and the checkpoint of best validation "
        "accuracy")
    provenance = (
        Provenance("loss", "Tuplet + λ·Anchor on the Euclidean distances to fixed anchors α·e_k",
                   "dimitymiller/cac-openset, train_cacOpenset.py ``CACLoss`` and networks/openSetClassifier.py "
                   "``distance_classifier`` (commit bd9c7f5); paper Sec. 3",
                   "the network outputs the negated distances; its logit layer has no bias"),
        Provenance("score", "min_k d_k (1 - softmin(d)_k), the anchors moved to the mean z of each class's "
                   "correctly classified training knowns",
                   "dimitymiller/cac-openset, eval_cacOpenset.py (utils.py ``find_anchor_means``, ``gather_outputs``) "
                   "and metrics.py ``auroc`` (min over classes)",
                   "the means leave out the authors' horizontally flipped training images; the prediction stays "
                   "the nearest fixed anchor's"),
    )

    def logit_layer(self, layer: nn.Module) -> nn.Module:
        """The negated distances to the anchors in place of the network's linear logit layer.

        Args:
            layer: the network's logit layer, an ``nn.Linear`` F -> C (or already anchor distances).

        Returns:
            The ``AnchorDistances`` the network computes its logits with (α: :attr:`cac_magnitude`).

        Raises:
            ConfigError: ``layer`` is not a linear layer to the C classes.
        """
        if not isinstance(layer, (nn.Linear, AnchorDistances)) or layer.out_features != self.num_classes:
            raise ConfigError(f"cac: the logit layer {type(layer).__name__} is not a linear layer from the deep "
                              f"features to the {self.num_classes} classes")
        return AnchorDistances(layer, self.cac_magnitude)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        known = labels >= 0
        target = torch.where(known, labels, torch.zeros_like(labels))
        tuplet = F.cross_entropy(logits, target, reduction="none")  # log(1 + sum_{j != y} e^(d_y - d_j))
        anchor = -logits.gather(1, target[:, None])[:, 0]            # d_y
        per_sample = tuplet + self.cac_weight * anchor
        return self._reduce(torch.where(known, per_sample, torch.zeros_like(per_sample)), labels, weight)
