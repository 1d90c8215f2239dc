"""Networks that return ``(logits, features)``: the deep features F feed a bias-free
logit layer, as Theorems 1 and 2 of the paper (Sec. 4.1, 4.2) require.

Models are found by name: ``build_model("lenet++", num_outputs=10)``; every torchvision
classification model is registered as ``torchvision/<name>`` (:mod:`.backbones`).
"""
from agnostophobia.models._base import MODELS, build_model, loaded_weights
from agnostophobia.models import airbench, backbones, lenetpp, mlp, resnet, smallcnn  # noqa: F401  (register models)
from agnostophobia.models.airbench import AirbenchNet
from agnostophobia.models.backbones import TorchvisionBackbone
from agnostophobia.models.lenetpp import LeNetPlusPlus
from agnostophobia.models.mlp import MLP, build_mlp
from agnostophobia.models.resnet import ResNet18
from agnostophobia.models.smallcnn import SmallCNN

__all__ = ["MODELS", "build_model", "loaded_weights", "AirbenchNet", "LeNetPlusPlus", "MLP", "ResNet18", "SmallCNN",
           "TorchvisionBackbone", "build_mlp"]

