"""Adversarial Reciprocal Points Learning without confusing samples (Chen, Peng, Wang and Tian,
"Adversarial Reciprocal Points Learning for Open Set Recognition", IEEE TPAMI 2021, Sec. 3; the authors'
code: iCGY96/ARPL, ``loss/ARPLoss.py`` and ``loss/Dist.py``)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .recipes import Provenance, from_scratch

#: The margin of the adversarial margin constraint, 1 as the authors' ``nn.MarginRankingLoss(margin=1.0)``.
ARPL_MARGIN = 1.0
#: The reciprocal points' initial scale: ``0.1 * randn``, as the authors' ``Dist(init='random')``.
POINTS_INIT_SCALE = 0.1


class ReciprocalPoints(nn.Module):
    r"""ARPL's logit layer: one reciprocal point :math:`P^k` per class in the space of the deep
    features F (D dimensions), and as logit of class k the distance of F from it,

    .. math::

        l_k(x) = \underbrace{\tfrac1D \|F(x) - P^k\|_2^2}_{d_e} - \underbrace{F(x) \cdot P^k}_{d_d}

    (Sec. 3, the Euclidean and dot-product distances; the authors' ``Dist``, ``metric="l2"`` minus
    ``metric="dot"``, one point per class).
    The points are its ``weight`` (C, D), the shape of the linear layer it replaces, so that a network's
    state dict keeps the name ``logits.weight``; initialised as the authors' ``0.1 * randn(C, D)``.

    Args:
        in_features: D, the width of the deep features.
        out_features: C, the number of known classes.
        generator: where the initial points are drawn from (None: torch's global generator).

    Examples:
        >>> import torch
        >>> from agnostophobia.losses.arpl import ReciprocalPoints
        >>> layer = ReciprocalPoints(2, 3)
        >>> with torch.no_grad():
        ...     _ = layer.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
        >>> layer(torch.tensor([[2.0, 0.0]]))  # class 0: |F-P|^2/2 - F.P = 0.5 - 2
        tensor([[-1.5000,  2.5000,  2.0000]])
    """

    def __init__(self, in_features: int, out_features: int, generator: Optional[torch.Generator] = None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = nn.Parameter(POINTS_INIT_SCALE * torch.randn(self.out_features, self.in_features,
                                                                   generator=generator))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """The (N, C) logits of the (N, D) deep features, computed as the authors' ``Dist`` does."""
        points = self.weight.to(features.dtype)
        dot = features @ points.T
        squared = features.pow(2).sum(1, keepdim=True) - 2 * dot + points.pow(2).sum(1)[None, :]
        return squared / features.shape[1] - dot

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


@LOSSES.register("arpl")
class ARPLoss(OpenSetLoss):
    r"""ARPL without confusing samples (Chen et al., TPAMI 2021, Sec. 3): cross-entropy of the
    distances to the reciprocal points, plus the adversarial margin constraint with a learnable radius R.

    The network's logit layer is ``ReciprocalPoints`` (this module; :meth:`logit_layer`), so its logits are
    :math:`l_k = \frac1D\|F - P^k\|^2 - F\cdot P^k` and

    .. math::

        \mathcal{L}(x, y) = -\log \frac{e^{l_y / T}}{\sum_{k=1}^{C} e^{l_k / T}}
            + \lambda \max\Bigl(0,\ \tfrac1D \|F(x) - P^y\|_2^2 - R + 1\Bigr)

    (Sec. 3: the classification term, and the adversarial margin constraint as ``ARPLoss.py`` writes it:
    ``MarginRankingLoss(margin=1)(R, d_e, 1)``). λ = ``arpl_weight`` = 0.1 and T = ``arpl_temperature``
    = 1 (the code's ``--weight-pl`` and ``--temp``); R starts at 0 and is trained with the network.
    Trained on knowns alone (negatives add 0, ``'mean'`` over the knowns). The "+CS" variant's GAN of
    confusing samples (the paper's "+CS") is left out. Thresholded by the maximum logit, as the authors' test
    code does (``core/test.py``: ``np.max(logits)``); the paper rejects by the largest
    softmax probability of the same logits (``softmax``, also applicable).

    Conventions that differ from the authors' code: the points are the network's logit layer (in
    ``best.pt``; the authors keep them in the criterion), R a 0-dim parameter (theirs shape (1,)), the
    labels of negatives are accepted and add 0. The reciprocal points and R are trained with the network
    and kept in the checkpoints (points: the model's ``logits.weight``; R: the loss's state in
    ``last.pt``). The margin term reads the points of the network the loss was given
    (:meth:`logit_layer`, :meth:`attach`); a loss called on its own, with no network, makes its
    own points of the features' width at its first call, drawn from a generator seeded 0 (two such
    losses agree). Its seeds train one by one
    (``batches_over_seeds``: the margin term reads one network's points).

    Call ``loss(logits, labels, features=features, sample_weight=None)``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import ARPLoss
        >>> from agnostophobia.models import build_model
        >>> _ = torch.manual_seed(0)
        >>> loss = ARPLoss(num_classes=10)
        >>> network = build_model("lenet++", num_outputs=10)
        >>> network.logits = loss.logit_layer(network.logits)  # distances to reciprocal points
        >>> logits, features = network(torch.rand(4, 1, 28, 28))
        >>> loss(logits, torch.tensor([0, 1, 2, -1]), features=features).shape
        torch.Size([])
    """

    title = "ARPL (without CS)"
    uses_features = True
    trains_on_unknowns = False
    linear_logits = False
    default_detector = "max-logit"
    batches_over_seeds = False
    arpl_weight = Setting(float, 0.1, low=0, grid=(0.01, 0.1, 1.0),
                          doc="λ, the weight of the adversarial margin term",
                          source="iCGY96/ARPL, osr.py: ``--weight-pl`` default 0.1 (loss/ARPLoss.py: "
                                 "``weight_pl``)")
    arpl_temperature = Setting(float, 1.0, low=0, low_open=True, grid=(0.5, 1.0, 2.0),
                               doc="T, the temperature of the cross-entropy of the distance logits",
                               source="iCGY96/ARPL, osr.py: ``--temp`` default 1.0 (loss/ARPLoss.py: "
                                      "``F.cross_entropy(logits / self.temp, labels)``)")
    scratch_recipe = from_scratch(
        "iCGY96/ARPL, osr.py: SGD lr 0.1, momentum 0.9, weight decay 1e-4, batch 64, 100 epochs, lr x0.1 at "
        "epochs 30, 60, 90 (``MultiStepLR(milestones=[30,60,90,120])``), the criterion's points and R in the "
        "optimiser; Adam lr 0.001 for Tiny ImageNet",
        "the budget's optimiser, learning rate, epochs and schedule here")
    provenance = (
        Provenance("loss", "ARPL without the confusing-samples GAN (+CS left out); margin 1, points init "
                           "0.1·randn, R init 0",
                   "iCGY96/ARPL, loss/ARPLoss.py and loss/Dist.py (commit 3ede8b3); paper Sec. 3",
                   "the points live in the network's logit layer, not in the criterion"),
        Provenance("score", "max-logit (the authors' code)",
                   "iCGY96/ARPL, core/test.py: ``np.max(logits, axis=1)``; paper: max softmax",
                   "the paper's max softmax is the ``softmax`` detector"),
    )

    def __post_init__(self):
        self.radius = nn.Parameter(torch.zeros(()))  # R, trained with the network (the authors': 0-filled)
        self.__dict__["_head"] = None  # the network's ReciprocalPoints; not a submodule (the model owns it)

    def logit_layer(self, layer: nn.Module) -> nn.Module:
        """Reciprocal points in place of the network's linear logit layer, of its shape (C, D).

        Args:
            layer: the network's logit layer (an ``nn.Linear`` F -> C, or already reciprocal points).

        Returns:
            The ``ReciprocalPoints`` the network computes its logits with, read by the margin term.

        Raises:
            ConfigError: ``layer`` has no ``in_features`` / ``out_features``, or not C outputs.
        """
        if isinstance(layer, ReciprocalPoints):
            head = layer
        else:
            width, outputs = getattr(layer, "in_features", None), getattr(layer, "out_features", None)
            if not isinstance(width, int) or outputs != self.num_classes:
                raise ConfigError(f"arpl: the logit layer {type(layer).__name__} is not a linear layer from the "
                                  f"deep features to the {self.num_classes} classes")
            head = ReciprocalPoints(width, outputs).to(layer.weight.device)
        self.__dict__["_head"] = head
        return head

    def attach(self, model: nn.Module) -> "ARPLoss":
        """Read the reciprocal points of the network it trains (its ``logits``).

        Args:
            model: the network; its logit layer is ``ReciprocalPoints``
                (:func:`~agnostophobia.losses.with_logit_layer`).

        Returns:
            The loss itself, ``self``.

        Raises:
            ConfigError: the model's logit layer is not reciprocal points.
        """
        head = getattr(model, "logits", None)
        if not isinstance(head, ReciprocalPoints):
            raise ConfigError(f"arpl: the model {type(model).__name__} has no reciprocal points as its logit layer; "
                              f"build it with with_logit_layer(model, loss)")
        self.__dict__["_head"] = head
        return self

    @property
    def points(self) -> Optional[torch.Tensor]:
        """The reciprocal points (C, D) the margin term reads, or None before the loss has any."""
        return None if self._head is None else self._head.weight

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, features: torch.Tensor = None,
                sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        features = self._check_features(features, logits)
        if self._head is None or self._head.in_features != features.shape[1]:  # used on its own, no network
            own = ReciprocalPoints(features.shape[1], self.num_classes, generator=torch.Generator().manual_seed(0))
            self.__dict__["_head"] = own.to(features.device)
        points = self._head.weight.to(features.dtype)
        known = labels >= 0
        target = torch.where(known, labels, torch.zeros_like(labels))
        nll = F.cross_entropy(logits / self.arpl_temperature, target, reduction="none")
        distance = (features - points[target]).pow(2).mean(1)  # d_e(F, P^y), the authors' _dis_known
        margin = torch.clamp(distance - self.radius.to(features.dtype) + ARPL_MARGIN, min=0)
        per_sample = nll + self.arpl_weight * margin
        return self._reduce(torch.where(known, per_sample, torch.zeros_like(per_sample)), labels, weight)
