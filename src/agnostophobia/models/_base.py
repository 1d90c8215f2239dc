"""The model registry and factory, below the model modules that register themselves in it
(so that ``models/__init__.py`` imports them without being imported back)."""
from agnostophobia.errors import ConfigError
from agnostophobia.registry import Registry

MODELS: Registry = Registry("model")
# what ``model_kwargs: {freeze: ...}`` may say, for every model with a pretrained trunk:
# ``backbone`` trains only the head (F and the logit layer)
FREEZE = ("none", "backbone")
#: The attribute a model with a ``weights`` option sets to one line saying what it loaded (which
#: file or torchvision weights, how many of its tensors): the trainer prints it when a run starts.
WEIGHTS_LOADED = "weights_loaded"


def loaded_weights(model) -> "str | None":
    """What ``model`` loaded as its starting weights (its ``WEIGHTS_LOADED`` line), or None
    where it started from random weights.

    Args:
        model: a network :func:`build_model` made.

    Returns:
        The line that says which weights it loaded, or None.

    Examples:
        >>> from agnostophobia.models import build_model, loaded_weights
        >>> print(loaded_weights(build_model("lenet++", num_outputs=10)))
        None
    """
    return getattr(model, WEIGHTS_LOADED, None)


def check_freeze(model: str, freeze) -> str:
    """``freeze`` if it is one of :data:`FREEZE`, else a one-line :class:`ConfigError` naming ``model``."""
    if freeze not in FREEZE:
        raise ConfigError(f"{model}: freeze must be one of {', '.join(FREEZE)}, got {freeze!r}")
    return freeze


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

    Examples:
        >>> import torch
        >>> from agnostophobia.models import build_model
        >>> model = build_model("lenet++", num_outputs=10)
        >>> logits, features = model(torch.zeros(4, 1, 28, 28))
        >>> logits.shape, features.shape  # 2-d deep features, as in the paper's Fig. 1
        (torch.Size([4, 10]), torch.Size([4, 2]))
    """
    if not load_weights:
        kwargs.pop("weights", None)
    return MODELS.get(name)(num_outputs=num_outputs, **kwargs)
