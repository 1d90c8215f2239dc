"""Input checks shared by scores, metrics and baselines.

Every public function that takes arrays converts them here, so that bad input is
reported as a ``ValueError`` naming the argument and the problem instead of a
traceback from deep inside numpy or torch, or a silently wrong number.
"""
from __future__ import annotations

import math

import numpy as np


def to_numpy(value, name: str) -> np.ndarray:
    """Convert a numpy array, torch tensor or sequence to a numpy array."""
    if value is None:
        raise ValueError(f"{name} is None; expected an array")
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor without importing torch
        if getattr(value, "is_meta", False):
            raise ValueError(f"{name} is on the meta device (a shape without values)")
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} cannot be converted to an array: {exc}") from None
    if arr.dtype == object:
        raise ValueError(f"{name} has an object dtype (ragged or non-numeric input)")
    return arr


def check_scores(scores, name: str = "scores", ndim: int = 2, *, keep_float32: bool = False) -> np.ndarray:
    """Finite float scores of the given dimensionality, at least one sample.

    The result is float64, except that with ``keep_float32=True`` a float32 array is
    returned as it is (no copy): large score matrices then need not be widened.
    """
    arr = to_numpy(scores, name)
    if arr.ndim != ndim:
        shape = "(N, C)" if ndim == 2 else "(N,)"
        raise ValueError(f"{name} must have shape {shape}, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 samples)")
    if ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 columns (classes)")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype}")
    if not (keep_float32 and arr.dtype == np.float32):
        arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():  # fast path; the mask below is built only on failure
        bad = ~np.isfinite(arr)
        kind = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) ({kind})")
    return arr


def check_labels(labels, n: int, num_classes: int | None = None, name: str = "labels") -> np.ndarray:
    """Integer labels of length ``n``; negative = unknown, known labels < num_classes."""
    arr = to_numpy(labels, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape (N,), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but the scores have {n} samples")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be integers, got non-integer values")
    arr = arr.astype(np.int64)
    if num_classes is not None and arr.size and arr.max() >= num_classes:
        raise ValueError(
            f"{name} contains {int(arr.max())}, but the scores have only {num_classes} "
            f"classes (known labels must be 0..{num_classes - 1}; negative = unknown)"
        )
    return arr


def split_known_unknown(labels: np.ndarray, need_known: bool = True, need_unknown: bool = True,
                        name: str = "labels"):
    """Boolean masks of known (label >= 0) and unknown (label < 0) samples."""
    known = labels >= 0
    if need_known and not known.any():
        raise ValueError(f"{name} has no known samples (label >= 0); cannot compute CCR")
    if need_unknown and known.all():
        raise ValueError(f"{name} has no unknown samples (negative label); cannot compute FPR")
    return known, ~known


def check_vector(values, name: str) -> np.ndarray:
    """Finite float64 values as a 1-D array (a scalar becomes one element), not empty.

    For parameters such as target FPRs or thresholds, not for per-sample data.
    """
    arr = to_numpy(values, name)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D sequence, got shape {arr.shape}")
    arr = np.atleast_1d(arr)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) \
            or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains non-finite values: {arr[~np.isfinite(arr)][:3].tolist()}")
    return arr


def check_arguments(target, values, where: str) -> None:
    """Check a config mapping ``values`` against what ``target`` (a class or function) accepts:
    every key a parameter of its signature (unless it takes ``**kwargs``) and every value of
    the type its annotation declares (int, float, bool, str, sequences of them, Optional).

    Raises :class:`~agnostophobia.errors.ConfigError` naming the key path ``where.key``
    (e.g. ``model_kwargs.feature_dim``); values of parameters without a simple annotation
    are left to the consumer, which the caller then runs (constructs) to check them.
    """
    import inspect
    import typing

    from agnostophobia.errors import ConfigError

    if not isinstance(values, dict):
        raise ConfigError(f"config key {where!r}: must be a mapping, got {values!r}")
    init = target.__init__ if inspect.isclass(target) else target
    parameters = inspect.signature(target).parameters
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # an annotation that does not resolve: left to the consumer
        hints = {}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    for key, value in values.items():
        path = f"{where}.{key}"
        if key not in parameters:
            if open_ended:
                continue
            known = [n for n, p in parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            raise ConfigError(f"unknown config key {path!r}; known: {', '.join(known)}")
        expected = hints.get(key)
        if expected is not None and _describe_mismatch(value, expected) is not None:
            raise ConfigError(f"config key {path!r}: must be {_describe_mismatch(value, expected)}, got {value!r}")


_SIMPLE = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_PLURAL = {int: "integers", float: "numbers", bool: "true/false values", str: "strings"}


def _describe_mismatch(value, expected):
    """What ``value`` should be to match the annotation ``expected``, or None when it matches
    (or the annotation is not one of the simple kinds checked here)."""
    import collections.abc
    import typing

    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        if value is None and len(options) < len(args):
            return None
        wrong = [_describe_mismatch(value, a) for a in options]
        return None if any(w is None for w in wrong) else " or ".join(w for w in wrong if w) or None
    if origin in (list, tuple, collections.abc.Sequence) and args and args[0] in _SIMPLE:
        items = f"a list of {_PLURAL[args[0]]}"
        if not isinstance(value, (list, tuple)):
            return items
        return None if all(_describe_mismatch(v, args[0]) is None for v in value) else items
    if expected not in _SIMPLE:
        return None
    if expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    else:
        ok = isinstance(value, str)
    return None if ok else _SIMPLE[expected] + (" (finite)" if expected is float else "")
