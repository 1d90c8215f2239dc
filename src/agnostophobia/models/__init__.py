"""Networks that return ``(logits, features)``: the deep features F feed a bias-free
logit layer, as Theorems 1 and 2 of the paper (Sec. 4.1, 4.2) require.

Models are found by name: ``build_model("lenet++", num_outputs=10)``.
"""
from agnostophobia.registry import Registry

MODELS: Registry = Registry("model")


def build_model(name: str, num_outputs: int, **kwargs):
    """Instantiate the registered model ``name`` with ``num_outputs`` logits."""
    return MODELS.get(name)(num_outputs=num_outputs, **kwargs)


from agnostophobia.models import lenetpp, mlp, resnet  # noqa: E402,F401  (register models)
from agnostophobia.models.lenetpp import LeNetPlusPlus  # noqa: E402
from agnostophobia.models.mlp import MLP, build_mlp  # noqa: E402
from agnostophobia.models.resnet import ResNet18  # noqa: E402

__all__ = ["MODELS", "build_model", "LeNetPlusPlus", "MLP", "ResNet18", "build_mlp"]
