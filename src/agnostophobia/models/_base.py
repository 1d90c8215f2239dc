"""The model registry and factory, below the model modules that register themselves in it
(so that ``models/__init__.py`` imports them without being imported back)."""
from agnostophobia.registry import Registry

MODELS: Registry = Registry("model")


def build_model(name: str, num_outputs: int, load_weights: bool = True, **kwargs):
    """Instantiate a registered model.

    Args:
        name: the model's registered name (``agnostophobia.models.MODELS``: ``lenet++``,
            ``resnet18``, ``torchvision/<name>``, ...).
        num_outputs: its logits: the known classes C, or C + 1 with a background class
            (:attr:`OpenSetLoss.num_outputs <agnostophobia.losses.OpenSetLoss.num_outputs>`).
        load_weights: False leaves out the initial ``weights`` option (a pretrained
            backbone's): for a model whose trained state dict is loaded next, so nothing is
            downloaded or read twice.
        **kwargs: the model's own constructor keywords (a config's ``model_kwargs``).

    Returns:
        The network; it returns ``(logits, features)``.

    Raises:
        ~agnostophobia.errors.ConfigError: an unknown name (the message lists the registered ones).
    """
    if not load_weights:
        kwargs.pop("weights", None)
    return MODELS.get(name)(num_outputs=num_outputs, **kwargs)
