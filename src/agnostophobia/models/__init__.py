"""Networks that return ``(logits, features)``: the deep features F feed a bias-free
logit layer, as Theorems 1 and 2 of the paper (Sec. 4.1, 4.2) require.

Models are found by name: ``build_model("lenet++", num_outputs=10)``; every torchvision
classification model is registered as ``torchvision/<name>`` (:mod:`.backbones`).
"""
from agnostophobia.registry import Registry

MODELS: Registry = Registry("model")


def build_model(name: str, num_outputs: int, load_weights: bool = True, **kwargs):
    """Instantiate the registered model ``name`` with ``num_outputs`` logits.

    ``load_weights=False`` leaves out the initial ``weights`` option (a pretrained backbone's):
    for a model whose trained state dict is loaded next, so nothing is downloaded or read twice.
    """
    if not load_weights:
        kwargs.pop("weights", None)
    return MODELS.get(name)(num_outputs=num_outputs, **kwargs)


from agnostophobia.models import backbones, lenetpp, mlp, resnet  # noqa: E402,F401  (register models)
from agnostophobia.models.backbones import TorchvisionBackbone  # noqa: E402
from agnostophobia.models.lenetpp import LeNetPlusPlus  # noqa: E402
from agnostophobia.models.mlp import MLP, build_mlp  # noqa: E402
from agnostophobia.models.resnet import ResNet18  # noqa: E402

__all__ = ["MODELS", "build_model", "LeNetPlusPlus", "MLP", "ResNet18", "TorchvisionBackbone", "build_mlp"]
