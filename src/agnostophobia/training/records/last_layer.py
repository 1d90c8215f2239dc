"""A model's last (logit) layer on F, ``last_layer.npz`` (read by ViM, ReAct, ASH and SCALE): its
writer (:func:`save_last_layer`, of the arrays ``training.outputs.last_layer_arrays`` takes from
a network) and its checked reader (:func:`read_last_layer`)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import numpy as np

from agnostophobia.rundir import write_run_file
from agnostophobia.training.records._common import _array, _fail, _open_npz


def save_last_layer(path: Path, layer: Optional[Dict[str, np.ndarray]]) -> None:
    """Write :func:`~agnostophobia.training.outputs.last_layer_arrays`' arrays atomically (nothing for a network without one)."""
    if layer is None:
        return

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **layer)

    write_run_file(path, write)


def read_last_layer(path, feature_dim: Optional[int] = None) -> Dict[str, np.ndarray]:
    """``last_layer.npz``, checked: the logit layer on F as float64 ``{"weight": (K, D)}`` plus
    ``"bias": (K,)`` where the layer has one, finite; ``feature_dim``: the D the model's stored
    features have (a layer of another width belongs to another model)."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    for key in arrays:
        if key not in ("weight", "bias"):
            _fail(path, "unexpected array (expected weight and, where the layer has one, bias)", key)
    weight = arrays.get("weight")
    if weight is None:
        _fail(path, "missing", "weight")
    if weight.ndim != 2 or not np.issubdtype(weight.dtype, np.floating) or 0 in weight.shape:
        _fail(path, f"must be a float array (classes, D), got {weight.dtype} {weight.shape}", "weight")
    if feature_dim is not None and weight.shape[1] != feature_dim:
        _fail(path, f"{weight.shape[1]} columns, but the model's features have {feature_dim} dimensions", "weight")
    layer = {"weight": weight.astype(np.float64)}
    if "bias" in arrays:
        bias = arrays["bias"]
        if bias.shape != (weight.shape[0],) or not np.issubdtype(bias.dtype, np.floating):
            _fail(path, f"must be a float array ({weight.shape[0]},), got {bias.dtype} {bias.shape}", "bias")
        layer["bias"] = bias.astype(np.float64)
    for key, value in layer.items():
        if not np.isfinite(value).all():
            _fail(path, f"{int((~np.isfinite(value)).sum())} non-finite value(s)", key)
    return layer
