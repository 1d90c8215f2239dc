"""``small-cnn``: a small convolutional network for one's own images, with a deep-feature layer of
32 to 128 dimensions instead of LeNet++'s 2.

LeNet++'s 2-D feature layer is the paper's choice for drawing Fig. 1 and 2, not for separating
knowns from unknowns: on a user's ten classes of glyphs it reached AUROC 0.75 where a 32-D
network of the same size reached 0.79-0.81. This one is

    3 stages of [3x3 conv (same) -> BatchNorm -> ReLU] x 2 -> 2x2 max-pool   (width, 2 width, 4 width channels)
    -> global average pool -> deep features F (Linear, ``feature_dim``, with bias)
    -> logits (Linear **without bias**)

so that F = 0 gives equal logits (Theorem 1, Sec. 4.1) and Objectosphere can act on ‖F‖
(Eq. 2); the head is :func:`agnostophobia.models.head.open_set_head`, in fp32. Global average
pooling makes it take any image size of at least 8 x 8 (``image_size`` of the protocol).

``model_kwargs``:

* ``in_channels`` (default 3): 1 for grey images.
* ``feature_dim`` (default 64): size of F.
* ``width`` (default 32): channels of the first stage (then 2x and 4x).
* ``weights``: the path of a local state dict of a ``small-cnn`` of the same ``in_channels`` and
  ``width`` (a ``torch.save(model.state_dict())`` file, or a training script's checkpoint with a
  ``state_dict`` or ``model`` entry): the convolutional trunk and, where its size matches, the
  feature layer start from it; the logit layer (one row per class of that other training) never
  does.
* ``freeze``: ``none`` (default) or ``backbone``: train only the head (F and the logits); the trunk's
  parameters do not require gradients and it stays in eval mode (its BatchNorm statistics fixed).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import torch
from torch import nn

from agnostophobia.errors import ConfigError
from agnostophobia.models._base import MODELS, WEIGHTS_LOADED, check_freeze
from agnostophobia.models.head import open_set_head

NAME = "small-cnn"


def _stage(in_channels: int, out_channels: int) -> nn.Sequential:
    layers = []
    for first in (True, False):
        layers += [nn.Conv2d(in_channels if first else out_channels, out_channels, 3, padding=1, bias=False),
                   nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.MaxPool2d(2))


@MODELS.register(NAME)
class SmallCNN(nn.Module):
    """A small CNN with an open-set head; ``forward`` returns ``(logits, F)`` (see the module docstring).

    Args:
        num_outputs: logits (C, or C+1 for the background-class approach).
        in_channels: image channels.
        feature_dim: the size of the deep features F.
        width: the first stage's channels.
        weights: path of a local ``small-cnn`` state dict to start from.
        freeze: ``none`` or ``backbone``.

    Examples:
        >>> import torch
        >>> from agnostophobia.models import SmallCNN
        >>> _ = torch.manual_seed(0)
        >>> network = SmallCNN(num_outputs=10, width=8, feature_dim=16).eval()
        >>> logits, features = network(torch.rand(2, 3, 32, 32))
        >>> logits.shape, features.shape
        (torch.Size([2, 10]), torch.Size([2, 16]))
    """

    def __init__(self, num_outputs: int = 10, in_channels: int = 3, feature_dim: int = 64, width: int = 32,
                 weights: Optional[str] = None, freeze: str = "none"):
        super().__init__()
        for key, value in (("num_outputs", num_outputs), ("in_channels", in_channels),
                           ("feature_dim", feature_dim), ("width", width)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{NAME}: {key} must be an integer >= 1, got {value!r}")
        check_freeze(NAME, freeze)
        self.backbone = nn.Sequential(_stage(in_channels, width), _stage(width, 2 * width),
                                      _stage(2 * width, 4 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.features = nn.Linear(4 * width, feature_dim)  # deep features F, with bias
        self.logits = nn.Linear(feature_dim, num_outputs, bias=False)
        if weights is not None:
            self.load_pretrained(weights)
        self.freeze = freeze
        if freeze == "backbone":
            self.backbone.requires_grad_(False)
            self.backbone.eval()

    def load_pretrained(self, weights) -> None:
        """Load the trunk (and the feature layer where its shape matches) from the state dict at
        ``weights``.

        Args:
            weights: the path of a state-dict file of a SmallCNN.

        Raises:
            ~agnostophobia.errors.ConfigError: the file cannot be read or does not fit this
                network (one line naming it).
        """
        state = read_state_dict(weights)
        own = self.state_dict()
        taken = {k: v for k, v in state.items() if k.startswith("backbone.")
                 or (k.startswith("features.") and k in own and own[k].shape == v.shape)}
        missing = [k for k in own if k.startswith("backbone.") and k not in taken]
        if missing:
            raise ConfigError(f"{NAME}: weights file {weights} does not fit this network (missing "
                              f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}; is it a {NAME} "
                              f"state dict of the same in_channels and width?)")
        try:
            self.load_state_dict(taken, strict=False)
        except RuntimeError as exc:  # a size mismatch: another width or in_channels
            sizes = [line.strip() for line in str(exc).splitlines() if "size mismatch" in line]
            raise ConfigError(f"{NAME}: weights file {weights} does not fit this network "
                              f"({sizes[0] if sizes else str(exc).splitlines()[0]})") from None
        with_features = any(k.startswith("features.") for k in taken)
        fresh = "the logit layer starts" if with_features else "the feature and logit layers start"
        setattr(self, WEIGHTS_LOADED, f"weights {weights}: {len(taken)} of {len(own)} tensors loaded (the trunk"
                f"{' and the feature layer' if with_features else ''}; {fresh} from random weights)")

    def train(self, mode: bool = True) -> "SmallCNN":
        """As ``nn.Module.train``, except that a frozen trunk stays in eval mode.

        Args:
            mode: True for training mode, False for eval mode.

        Returns:
            The network itself, ``self``.
        """
        super().train(mode)
        if getattr(self, "freeze", "none") == "backbone":
            self.backbone.eval()
        return self

    def forward(self, x: torch.Tensor):
        """The network's outputs on a batch.

        Args:
            x: (N, ``in_channels``, H, W) float images.

        Returns:
            ``(logits, features)``: the (N, ``num_outputs``) float32 logits and the (N, D) float32 deep
            features F (D = ``feature_dim``), computed in fp32 even under bf16 autocast.
        """
        return open_set_head(self.backbone(x), self.features, self.logits)


def read_state_dict(path) -> Dict[str, torch.Tensor]:
    """A state dict (tensors only: ``weights_only``) from ``path``, or the ``state_dict`` / ``model``
    entry of a checkpoint; one line naming the file otherwise."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{NAME}: weights file {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, not a torch file, or objects that need unpickling
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"{NAME}: weights file {path} cannot be read ({type(exc).__name__}: {first_line})") from None
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"{NAME}: weights file {path} is not a state dict (a mapping of names to tensors)")
    return state
