"""Input checks shared by scores, metrics and baselines.

Every public function that takes arrays converts them here, so that bad input is
reported as a ``ValueError`` naming the argument and the problem instead of a
traceback from deep inside numpy or torch, or a silently wrong number.
"""
from __future__ import annotations

import math
import re

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


#: The range of an int64, the dtype every label and seed is held in.
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def int64_labels(labels, name: str = "labels", *, integral_floats: bool = True) -> np.ndarray:
    """``labels`` (any shape) as int64: the one conversion of labels for every entry point.

    Integer dtypes and, with ``integral_floats``, floats holding whole numbers (0.0, -1.0)
    are accepted; a value that does not fit an int64 (1e20, 10**30, a uint64 above 2**63-1),
    NaN, inf or a fraction is refused naming ``name``, where a plain cast would wrap it
    silently into some other class, or an unknown.
    """
    arr = _label_array(labels, name)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not integral_floats:
            raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be integers, got non-finite values (NaN or inf)")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be integers, got non-integer values")
        outside = (arr < float(INT64_MIN)) | (arr >= 2.0**63)  # 2**63 itself is a float64 but no int64
    elif np.issubdtype(arr.dtype, np.unsignedinteger) and arr.dtype.itemsize == 8:
        outside = arr > np.uint64(INT64_MAX)
    else:
        return arr.astype(np.int64, copy=False)
    if outside.any():
        raise _does_not_fit(name, arr[outside].flat[0].item())
    return arr.astype(np.int64)


def _does_not_fit(name: str, value) -> ValueError:
    return ValueError(f"{name} contains {value!r}, which does not fit an int64 ({INT64_MIN}..{INT64_MAX}); "
                      f"labels are class indices, negative = unknown")


def _label_array(labels, name: str) -> np.ndarray:
    """``to_numpy(labels)``, except that Python integers beyond uint64, which numpy can hold only
    as objects, are named as integers that do not fit, not as "non-numeric input", and that a
    boolean in a list is refused: ``True`` is an int to Python and numpy, so ``[True, -1]``
    would become the labels 1 and -1, where a boolean array is refused by its dtype."""
    if isinstance(labels, (list, tuple)):
        if any(isinstance(value, (bool, np.bool_)) for value in _items(labels)):
            raise ValueError(f"{name} must be integers, got a boolean (True or False is no class index)")
        try:
            arr = np.asarray(labels)
        except (ValueError, OverflowError):
            arr = None
        if arr is not None and arr.dtype == object:
            items = arr.ravel().tolist()
            if items and all(isinstance(v, int) and not isinstance(v, bool) for v in items):
                too_large = [v for v in items if not INT64_MIN <= v <= INT64_MAX]
                if too_large:
                    raise _does_not_fit(name, too_large[0])
    return to_numpy(labels, name)


def _items(values):
    """Every item of nested lists and tuples."""
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _items(value)
        else:
            yield value


def check_seed(seed, name: str = "seed", error: type = ValueError) -> int:
    """A seed as an int: an integer (numpy integers too; not a bool, not a string) in
    0..2**63-1. Wider seeds would be reduced modulo 2**64 by torch, so that 2**64 trained
    the weights of seed 0; ``error`` is the exception raised, naming ``name``."""
    if not is_seed(seed):
        raise error(f"{name} {SEED_RULE}, got {seed!r}")
    return int(seed)


SEED_RULE = "must be an integer in 0..2**63-1"
#: The one rule for a target false positive rate, wherever one enters (a flag or a record).
FPR_RULE = "must be a rate in (0, 1]"
#: The device names a config, a request and a command line take (resolved by ``training.device``).
DEVICE_RULE = "auto, cpu, mps, cuda or cuda:N"


def is_device_name(value) -> bool:
    """Whether ``value`` is written as :data:`DEVICE_RULE` says (not whether this machine has it)."""
    return isinstance(value, str) and re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", value) is not None


def is_rate(value) -> bool:
    """Whether ``value`` is a valid target false positive rate: a real number (not a bool) in
    (0, 1] (NaN is not)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating)) \
        and 0 < value <= 1


def check_fpr(fpr, name: str = "--fpr", error: type = ValueError) -> float:
    """A target false positive rate as a float (:func:`is_rate`); ``error`` names ``name``."""
    if not is_rate(fpr):
        raise error(f"{name} {FPR_RULE} (a target false positive rate), got {fpr!r}")
    return float(fpr)


def is_seed(value) -> bool:
    """Whether ``value`` is a valid seed (:func:`check_seed`)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer)) \
        and 0 <= int(value) <= INT64_MAX


def check_labels(labels, n: int, num_classes: int | None = None, name: str = "labels") -> np.ndarray:
    """Integer labels of length ``n``; negative = unknown, known labels < num_classes."""
    arr = _label_array(labels, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape (N,), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but the scores have {n} samples")
    arr = int64_labels(arr, name)
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


def check_threshold(threshold, name: str = "threshold") -> float:
    """One real number as a float: +inf (accept nothing) and -inf (accept everything) are
    thresholds, NaN is not: every comparison with NaN is false, so it would accept no sample
    and answer FPR 0, CCR 0 without a word."""
    arr = to_numpy(threshold, name)
    if arr.size != 1 or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) \
            or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be one real number, got {threshold!r}")
    value = float(arr.reshape(()))
    if math.isnan(value):
        raise ValueError(f"{name} is NaN: no score is at least NaN, so it would accept no sample; give a number")
    return value


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
