"""A config's ``model_kwargs``, checked before anything trains: against the model constructor's
signature and annotations, then by building the network once (on the meta device, no weights), so
that a config whose network cannot be built is refused naming its key path."""
from __future__ import annotations

from typing import Any, Dict

from agnostophobia._validation import check_arguments
from agnostophobia.errors import ConfigError
from agnostophobia.models import MODELS, build_model


def check_model_kwargs(model: str, kwargs: Dict[str, Any], where: str = "model_kwargs") -> None:
    """``kwargs`` checked against the model constructor's signature and annotations, then the
    model built with them once (cheap, no weights loaded): a config whose network cannot be
    built is refused before anything trains, naming the key path."""
    if "num_outputs" in kwargs:
        raise ConfigError(f"config key '{where}.num_outputs': set by the protocol (its classes), not by the config")
    check_arguments(MODELS.get(model), kwargs, where)
    key = (model, repr(sorted(kwargs.items())))
    if key in _BUILT_MODELS:
        return
    try:
        _build(model, kwargs)
    except Exception as exc:  # the constructor's own checks (ranges, names), whatever it raises
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        culprit = next((k for k in kwargs if not _builds(model, {k: kwargs[k]})), None) if len(kwargs) > 1 else \
            next(iter(kwargs), None)
        path = f"{where}.{culprit}" if culprit else where
        raise ConfigError(f"config key {path!r}: model {model!r} cannot be built with it: {message}") from None
    _BUILT_MODELS.add(key)


def _builds(model: str, kwargs: Dict[str, Any]) -> bool:
    try:
        _build(model, kwargs)
    except Exception:
        return False
    return True


def _build(model: str, kwargs: Dict[str, Any]) -> None:
    """Build ``model`` with ``kwargs`` on the meta device (shapes only: no memory, no arithmetic,
    so even a large torchvision network costs little), or on the CPU where a builder needs real
    tensors (RegNet computes widths from them)."""
    import torch

    try:
        with torch.device("meta"):
            build_model(model, num_outputs=2, load_weights=False, **kwargs)
    except (ValueError, TypeError):
        raise
    except Exception:  # not a refusal of the settings: the builder needs real tensors
        build_model(model, num_outputs=2, load_weights=False, **kwargs)


_BUILT_MODELS: set = set()  # (model, kwargs) already built once in this process
