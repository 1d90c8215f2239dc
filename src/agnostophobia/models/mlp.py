"""The multi-layer perceptron of the deep-ensemble baseline (Lakshminarayanan, Pritzel &
Blundell, NIPS 2017; the paper's Fig. 3): ``784 -> 200 -> 200 -> 200 -> 10`` with ReLU.

Unlike LeNet++ and ResNet-18 its logit layer has a bias, as in Lakshminarayanan et al.;
the deep features F are the last hidden layer's activations.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

from agnostophobia.models._base import MODELS


def build_mlp(hidden: Sequence[int] = (200, 200, 200), num_classes: int = 10, input_dim: int = 784,
              batch_norm: bool = False) -> nn.Sequential:
    """Flatten, ``Linear -> [BatchNorm1d] -> ReLU`` per hidden layer, linear logits (the last module).

    PyTorch's default initialisation; seed first (:func:`agnostophobia.training.seed_everything`)
    for a seeded one.

    Args:
        hidden: the width of each hidden layer.
        num_classes: the logits.
        input_dim: the flattened input's size (784: 28 x 28 MNIST).
        batch_norm: a BatchNorm1d after each hidden layer's linear map.

    Returns:
        An ``nn.Sequential`` from (N, ...) inputs to (N, ``num_classes``) logits.

    Examples:
        >>> import torch
        >>> from agnostophobia.models import build_mlp
        >>> mlp = build_mlp(hidden=(32,), num_classes=3, input_dim=8)
        >>> mlp(torch.zeros(5, 8)).shape
        torch.Size([5, 3])
    """
    layers: List[nn.Module] = [nn.Flatten()]
    width = input_dim
    for h in hidden:
        layers.append(nn.Linear(width, h))
        if batch_norm:
            layers.append(nn.BatchNorm1d(h))
        layers.append(nn.ReLU())
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


@MODELS.register("mlp")
class MLP(nn.Module):
    """:func:`build_mlp` returning ``(logits, features)``; inputs (N, 1, 28, 28) or (N, 784).

    Args:
        num_outputs: logits (C).
        hidden: hidden layer widths (Lakshminarayanan et al.: three of 200).
        batch_norm: BatchNorm1d after every hidden linear layer.
        input_dim: flattened input size.

    Examples:
        >>> import torch
        >>> from agnostophobia.models import MLP
        >>> _ = torch.manual_seed(0)
        >>> network = MLP(num_outputs=10, hidden=(32, 16)).eval()
        >>> logits, features = network(torch.rand(4, 1, 28, 28))
        >>> logits.shape, features.shape
        (torch.Size([4, 10]), torch.Size([4, 16]))
    """

    def __init__(self, num_outputs: int = 10, hidden: Sequence[int] = (200, 200, 200), batch_norm: bool = False,
                 input_dim: int = 784):
        super().__init__()
        if num_outputs < 1 or not hidden or any(int(h) < 1 for h in hidden):
            raise ValueError(f"num_outputs and every hidden width must be >= 1, got {num_outputs}, {list(hidden)}")
        layers = build_mlp(hidden, num_outputs, input_dim, batch_norm)
        self.body = layers[:-1]
        self.logits = layers[-1]

    def forward(self, x: torch.Tensor):
        """The network's outputs on a batch.

        Args:
            x: (N, ...) float inputs, flattened to (N, ``input_dim``).

        Returns:
            ``(logits, features)``: the (N, ``num_outputs``) float32 logits and the (N, D) float32 deep
            features F (D: the last hidden width), computed in fp32 even under bf16 autocast.
        """
        features = self.body(x)
        return self.logits(features), features
