"""LeNet++ (Wen et al. 2016) as the paper's authors built it (Sec. 3, 5).

Three stages of two 5x5 'same' convolutions (32, 64, 128 channels), BatchNorm after
each pair, 2x2 max-pooling; then a 2-unit fully connected deep-feature layer (with
bias) and a logit layer **without bias**, so that F = 0 gives equal logits (Theorem 1).

The authors' Keras model has no activation functions at all (Keras ``Conv2D`` is
linear by default); that is ``activation="none"`` here. Wen et al.'s original uses
PReLU after every convolution: ``activation="prelu"``, which converges several times
faster in the 2-D bottleneck (see docs/guide/results.md, the `cpu` budget).
"""
from __future__ import annotations

import torch
from torch import nn

from agnostophobia.models._base import MODELS
from agnostophobia.models.head import open_set_head

ACTIVATIONS = ("none", "prelu")


class PReLU(nn.PReLU):
    """``torch.nn.PReLU`` (same parameter, initialisation and state dict), computed as
    ``relu(x) - a * relu(-x)``.

    The same function (``x`` for ``x > 0``, ``a x`` otherwise; the gradient at exactly 0 is
    0 here, ``a`` in torch's kernel), but on a CPU torch's own PReLU backward kernel is the
    slowest part of a PReLU LeNet++ step: fused from two ReLUs, a multiply and a subtract,
    forward and backward of the first stage's (128, 32, 28, 28) activation take 7.1 ms
    instead of 15.1 in bf16 channels_last, and the bf16 training step of the ``cpu``
    budget's network about 5 % faster (701 -> 736 images/s, both models side by side in one
    process; issue 14).
    Under bf16 autocast the slope is rounded to bf16 like the activation it multiplies, so
    the output stays bf16 instead of being promoted to fp32.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:  # no channel dimension: torch's kernel
            return super().forward(x)
        # a wrong channel count is torch's broadcasting error, naming both sizes
        slope = self.weight.to(x.dtype).view(1, -1, *([1] * (x.dim() - 2)))
        return torch.relu(x) - slope * torch.relu(-x)


def _conv_pair(in_ch: int, out_ch: int, activation: str) -> nn.Sequential:
    layers = []
    for ch_in in (in_ch, out_ch):
        layers.append(nn.Conv2d(ch_in, out_ch, kernel_size=5, padding=2))
        if activation == "prelu":
            layers.append(PReLU(out_ch))
    layers += [nn.BatchNorm2d(out_ch), nn.MaxPool2d(2)]
    return nn.Sequential(*layers)


@MODELS.register("lenet++")
class LeNetPlusPlus(nn.Module):
    """LeNet++ for (1, 28, 28) inputs; ``forward`` returns ``(logits, features)``.

    Args:
        num_outputs: logits (C, or C+1 for the background-class approach).
        feature_dim: size of the deep-feature layer F (2 in the paper).
        activation: ``"none"`` (the authors' code) or ``"prelu"`` (Wen et al.).
        in_channels: input channels (1 for grey images).

    Examples:
        >>> import torch
        >>> from agnostophobia.models import LeNetPlusPlus
        >>> _ = torch.manual_seed(0)
        >>> network = LeNetPlusPlus(num_outputs=10, feature_dim=2).eval()
        >>> logits, features = network(torch.rand(4, 1, 28, 28))
        >>> logits.shape, features.shape  # (N, C) logits and the (N, 2) deep features of Fig. 2
        (torch.Size([4, 10]), torch.Size([4, 2]))
    """

    def __init__(self, num_outputs: int = 10, feature_dim: int = 2, activation: str = "none",
                 in_channels: int = 1):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        if num_outputs < 1 or feature_dim < 1:
            raise ValueError(f"num_outputs and feature_dim must be >= 1, got {num_outputs}, {feature_dim}")
        self.backbone = nn.Sequential(
            _conv_pair(in_channels, 32, activation),
            _conv_pair(32, 64, activation),
            _conv_pair(64, 128, activation),  # 28 -> 14 -> 7 -> 3
            nn.Flatten(),
        )
        self.features = nn.Linear(128 * 3 * 3, feature_dim)  # deep features F, with bias
        self.logits = nn.Linear(feature_dim, num_outputs, bias=False)

    def forward(self, x: torch.Tensor):
        """The network's outputs on a batch.

        Args:
            x: (N, 1, 28, 28) float images (``in_channels`` channels).

        Returns:
            ``(logits, features)``: the (N, ``num_outputs``) float32 logits and the (N, D) float32 deep
            features F (D = ``feature_dim``, 2 in the paper), computed in fp32 even under bf16 autocast.
        """
        return open_set_head(self.backbone(x), self.features, self.logits)
