"""ResNet-18 for 32x32 inputs with a 1024-d deep-feature layer (Sec. 5).

The usual CIFAR variant of He et al.: a 3x3 stem without max-pooling, four stages of
two BasicBlocks (torchvision's), global average pooling, then a fully connected
deep-feature layer F (1024-d in the paper) and a logit layer **without bias**.
``width`` scales every stage (64 is the standard network; a narrower one fits a CPU
budget).
"""
from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock

from agnostophobia.models._base import MODELS
from agnostophobia.models.head import open_set_head


def _stage(in_ch: int, out_ch: int, stride: int) -> nn.Sequential:
    downsample = None
    if stride != 1 or in_ch != out_ch:
        downsample = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch))
    return nn.Sequential(BasicBlock(in_ch, out_ch, stride, downsample), BasicBlock(out_ch, out_ch))


@MODELS.register("resnet18")
class ResNet18(nn.Module):
    """ResNet-18 for (3, 32, 32) inputs; ``forward`` returns ``(logits, features)``.

    Args:
        num_outputs: logits (C, or C+1 for the background-class approach).
        feature_dim: the size of the deep features F that feed the logit layer.
        width: the first stage's channels (64 in He et al.; the four stages have 1, 2, 4 and 8 times it).
        in_channels: image channels.

    Examples:
        >>> import torch
        >>> from agnostophobia.models import ResNet18
        >>> _ = torch.manual_seed(0)
        >>> network = ResNet18(num_outputs=10, feature_dim=64, width=8).eval()
        >>> logits, features = network(torch.rand(2, 3, 32, 32))
        >>> logits.shape, features.shape
        (torch.Size([2, 10]), torch.Size([2, 64]))
    """

    def __init__(self, num_outputs: int = 10, feature_dim: int = 1024, width: int = 64,
                 in_channels: int = 3):
        super().__init__()
        if width < 1 or feature_dim < 1 or num_outputs < 1:
            raise ValueError(
                f"width, feature_dim and num_outputs must be >= 1, got {width}, {feature_dim}, {num_outputs}")
        w = width
        self.backbone = nn.Sequential(
            nn.Conv2d(in_channels, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
            _stage(w, w, 1), _stage(w, 2 * w, 2), _stage(2 * w, 4 * w, 2), _stage(4 * w, 8 * w, 2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.features = nn.Linear(8 * w, feature_dim)
        self.logits = nn.Linear(feature_dim, num_outputs, bias=False)

    def forward(self, x: torch.Tensor):
        """The network's outputs on a batch.

        Args:
            x: (N, 3, H, W) float images (``in_channels`` channels; 32 x 32 for CIFAR).

        Returns:
            ``(logits, features)``: the (N, ``num_outputs``) float32 logits and the (N, D) float32 deep
            features F (D = ``feature_dim``), computed in fp32 even under bf16 autocast.
        """
        return open_set_head(self.backbone(x), self.features, self.logits)
