"""Any torchvision classification model as an open-set network returning ``(logits, features)``.

Every name of ``torchvision.models.list_models(module=torchvision.models)`` is registered as
``torchvision/<name>`` (``model: torchvision/resnet50`` in an experiment YAML). The network is

    Normalize (the backbone's mean/std; grey repeated to RGB)  ->  torchvision trunk, classifier removed
    ->  deep features F (Linear, ``feature_dim``)  ->  logits (Linear **without bias**)

so that, as for LeNet++ and the CIFAR ResNet-18, F = 0 gives equal logits (Theorem 1, Sec. 4.1)
and Objectosphere can act on ‖F‖ (Eq. 2, Sec. 4.2); the head is
:func:`agnostophobia.models.head.open_set_head`, in fp32. The normalisation is the model's first
layer, so training, evaluation, prediction and an exported model all feed images in [0, 1].

``model_kwargs``:

* ``feature_dim`` (default 512): size of F.
* ``weights``: a torchvision weights name of this architecture (``ResNet18_Weights.IMAGENET1K_V1``,
  or just ``IMAGENET1K_V1`` / ``DEFAULT``; torchvision downloads it once into its cache), or the
  path of a local state-dict file of the torchvision model (its classifier, of any size, is
  dropped). Default: random initialisation.
* ``freeze``: ``none`` (default) or ``backbone``: train only the head (F and the logit layer). The
  trunk's parameters do not require gradients and the trunk stays in eval mode, so its BatchNorm
  statistics do not move either. (``freeze_backbone: true``, the older spelling, is still read, so
  runs trained with it load as they were.)
* ``mean``, ``std``: the normalisation (default: the weights' own, ImageNet's for every torchvision
  classification weight; ImageNet's without weights).
* anything else goes to the torchvision builder (e.g. ``image_size: 32`` for a ViT trained from scratch).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import torch
import torchvision
from torch import nn

from agnostophobia.errors import ConfigError
from agnostophobia.models._base import MODELS, WEIGHTS_LOADED, check_freeze
from agnostophobia.models.head import open_set_head

PREFIX = "torchvision/"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Builders whose auxiliary classifiers would change what the trunk returns in training mode;
# without pretrained weights they also warn unless told how to initialise.
_AUXILIARY = {"googlenet", "inception_v3"}
# How the classifier to remove is recognised: the trunk is built with this many outputs.
_CLASSES = 1000


class Normalize(nn.Module):
    """``(x - mean) / std`` per channel for images in [0, 1]; a 1-channel image is repeated to the
    backbone's 3 channels first. ``mean`` and ``std`` are buffers, saved with the model."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        if len(mean) != len(std) or not len(mean) or any(s <= 0 for s in std):
            raise ConfigError(f"normalisation: mean {list(mean)} and std {list(std)} need one value per channel, "
                              f"std > 0")
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = self.mean.shape[1]
        if x.shape[1] == 1 and channels != 1:
            x = x.expand(-1, channels, -1, -1)  # grey -> RGB without copying
        elif x.shape[1] != channels:
            raise ValueError(f"the backbone takes images with 1 or {channels} channels, got {x.shape[1]}")
        return (x - self.mean) / self.std

    def extra_repr(self) -> str:
        return f"mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()}"


class TorchvisionBackbone(nn.Module):
    """A torchvision classification model with the open-set head; ``forward`` returns ``(logits, F)``.

    Args:
        architecture: a name of ``torchvision.models.list_models(module=torchvision.models)``.
        num_outputs: logits (C, or C+1 for the background-class approach).
        feature_dim: size of the deep-feature layer F.
        weights: torchvision weights name or local state-dict path (see the module docstring).
        freeze: ``none`` or ``backbone`` (train only the head; the trunk stays in eval mode).
        freeze_backbone: the older spelling of ``freeze="backbone"`` (True) and ``"none"`` (False).
        mean, std: the normalisation of the first layer.
        builder_kwargs: passed to the torchvision builder.

    Examples:
        >>> import torch
        >>> from agnostophobia.models import TorchvisionBackbone
        >>> _ = torch.manual_seed(0)
        >>> network = TorchvisionBackbone("resnet18", num_outputs=10, feature_dim=32).eval()  # no weights: random
        >>> logits, features = network(torch.rand(2, 3, 32, 32))
        >>> logits.shape, features.shape
        (torch.Size([2, 10]), torch.Size([2, 32]))
    """

    # Many parameters, on purpose: they are the model_kwargs keys of an experiment YAML (and of the
    # configs of runs already trained), each an independent choice, as an estimator's are.
    def __init__(self, architecture: str, num_outputs: int = 10, feature_dim: int = 512,
                 weights: Optional[str] = None, freeze: str = "none", freeze_backbone: Optional[bool] = None,
                 mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None, **builder_kwargs):
        super().__init__()
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (num_outputs, feature_dim)):
            raise ConfigError(f"{PREFIX}{architecture}: num_outputs and feature_dim must be integers >= 1, "
                              f"got {num_outputs!r}, {feature_dim!r}")
        check_freeze(PREFIX + architecture, freeze)
        if freeze_backbone is not None:  # the older spelling, in configs of runs trained with it
            if not isinstance(freeze_backbone, bool) or freeze != "none":
                raise ConfigError(f"{PREFIX}{architecture}: freeze_backbone (the older spelling of freeze) must be "
                                  f"true or false and given without freeze, got {freeze_backbone!r}")
            freeze = "backbone" if freeze_backbone else "none"
        preset, weights_file = resolve_weights(architecture, weights)
        trunk = build_trunk(architecture, preset, builder_kwargs)
        classifier, width = remove_classifier(trunk, architecture)
        if weights_file is not None:
            load_trunk_file(trunk, weights_file, classifier)
        default_mean, default_std = normalisation_of(preset)
        # registered first: the first layer of the network, and the first module of its state dict
        self.normalize = Normalize(mean or default_mean, std or default_std)
        self.backbone = trunk
        self.features = nn.Linear(width, feature_dim)  # deep features F, with bias
        self.logits = nn.Linear(feature_dim, num_outputs, bias=False)
        self.freeze = freeze
        if freeze == "backbone":
            self.backbone.requires_grad_(False)
            self.backbone.eval()
        if preset is not None or weights_file is not None:
            source = f"{type(preset).__name__}.{preset.name} (torchvision)" if preset is not None else weights_file
            setattr(self, WEIGHTS_LOADED, f"weights {source}: {len(trunk.state_dict())} of {len(self.state_dict())} "
                    f"tensors loaded (the trunk; the feature and logit layers start from random weights)")

    def train(self, mode: bool = True) -> "TorchvisionBackbone":
        """As ``nn.Module.train``, except that a frozen trunk stays in eval mode (BatchNorm
        statistics and dropout as at inference).

        Args:
            mode: True for training mode, False for eval mode.

        Returns:
            The network itself, ``self``.
        """
        super().train(mode)
        if self.freeze == "backbone":
            self.backbone.eval()
        return self

    def forward(self, x: torch.Tensor):
        """The network's outputs on a batch.

        Args:
            x: (N, 3, H, W) float images in [0, 1] (or the backbone's channel count), normalised inside.

        Returns:
            ``(logits, features)``: the (N, ``num_outputs``) float32 logits and the (N, D) float32 deep
            features F (D = ``feature_dim``), computed in fp32 even under bf16 autocast.
        """
        return open_set_head(self.backbone(self.normalize(x)), self.features, self.logits)


def resolve_weights(architecture: str, weights: Optional[str]) -> Tuple[Optional[torchvision.models.WeightsEnum],
                                                                         Optional[Path]]:
    """``(torchvision weights, None)``, ``(None, local file)`` or ``(None, None)`` for ``weights``.

    A name is ``Enum.VALUE`` or ``VALUE`` of this architecture's weights enum; anything else
    is a file path.
    """
    if weights is None:
        return None, None
    if not isinstance(weights, str) or not weights:
        raise ConfigError(f"{PREFIX}{architecture}: weights must be a torchvision weights name or a file path, "
                          f"got {weights!r}")
    name = re.fullmatch(r"(?:(\w+_Weights)\.)?([A-Z][A-Z0-9_]*)", weights)
    if name is None or Path(weights).is_file():
        path = Path(weights).expanduser()
        if not path.is_file():
            raise ConfigError(f"{PREFIX}{architecture}: weights file {weights} does not exist")
        return None, path
    enum = torchvision.models.get_model_weights(architecture)
    available = ", ".join(f"{enum.__name__}.{value}" for value in enum.__members__)
    if (name.group(1) not in (None, enum.__name__)) or name.group(2) not in enum.__members__:
        raise ConfigError(f"{PREFIX}{architecture}: unknown weights {weights!r}; this architecture has: {available}")
    return enum[name.group(2)], None


def build_trunk(architecture: str, weights, builder_kwargs: Dict) -> nn.Module:
    """The torchvision model with ``weights`` (downloaded by torchvision if not in its cache)."""
    kwargs = dict(builder_kwargs)
    if architecture in _AUXILIARY and weights is None:  # with weights the builder drops them itself
        kwargs = {"aux_logits": False, "init_weights": True, **kwargs}
    try:
        return torchvision.models.get_model(architecture, weights=weights, **kwargs)
    except TypeError as exc:  # an option the builder does not take
        raise ConfigError(f"{PREFIX}{architecture}: {exc}") from None
    except OSError as exc:  # urllib's URLError included: no network, or no space for the cache
        raise ConfigError(f"{PREFIX}{architecture}: could not get weights {weights} ({exc}); on a machine "
                          f"without internet give the path of a local state-dict file instead") from None


def remove_classifier(trunk: nn.Module, architecture: str) -> Tuple[str, int]:
    """Replace the trunk's classification layer by ``nn.Identity``; returns its name and input width.

    The classification layer is the last ``Linear`` or 1x1 ``Conv2d`` (SqueezeNet) with as many
    outputs as the trunk has classes; what came before it (pooling, dropout, the hidden layers
    of VGG's and MobileNetV3's classifiers) stays part of the trunk.
    """
    found = None
    for name, module in trunk.named_modules():
        if isinstance(module, nn.Linear) and module.out_features == _CLASSES:
            found = name, module.in_features
        elif isinstance(module, nn.Conv2d) and module.out_channels == _CLASSES:
            found = name, module.in_channels
    if found is None:
        raise ConfigError(f"{PREFIX}{architecture}: no classification layer with {_CLASSES} outputs found")
    parent_name, _, child = found[0].rpartition(".")
    setattr(trunk.get_submodule(parent_name), child, nn.Identity())
    return found


def load_trunk_file(trunk: nn.Module, path: Path, classifier: str) -> None:
    """Load a local state dict of the torchvision model into ``trunk`` (whose classifier is removed).

    Only tensors are unpickled (``weights_only``). The file's classifier weights, of any size, are
    ignored; every other key must match.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, not a torch file, or objects that need unpickling
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"weights file {path} cannot be read ({type(exc).__name__}: {first_line})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):  # a training script's checkpoint
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"weights file {path} is not a state dict (a mapping of names to tensors)")
    state = {key: value for key, value in state.items() if not key.startswith(f"{classifier}.")}
    try:
        missing, unexpected = trunk.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape
        sizes = [line.strip() for line in str(exc).splitlines() if "size mismatch" in line]
        raise ConfigError(f"weights file {path} does not fit this architecture "
                          f"({sizes[0] if sizes else str(exc).splitlines()[0]})") from None
    if missing or unexpected:
        what = "; ".join(f"{label} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
                         for label, keys in (("missing", missing), ("unexpected", unexpected)) if keys)
        raise ConfigError(f"weights file {path} does not fit this architecture ({what})")


def normalisation_of(weights) -> Tuple[Sequence[float], Sequence[float]]:
    """The mean and std the weights were trained with (ImageNet's without weights)."""
    if weights is None:
        return IMAGENET_MEAN, IMAGENET_STD
    preset = weights.transforms()
    return tuple(preset.mean), tuple(preset.std)


def _register_all() -> None:
    for architecture in torchvision.models.list_models(module=torchvision.models):
        MODELS.register(PREFIX + architecture)(functools.partial(TorchvisionBackbone, architecture))


_register_all()
