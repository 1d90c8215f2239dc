"""The model registry and factory, below the model modules that register themselves in it
(so that ``models/__init__.py`` imports them without being imported back)."""
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
