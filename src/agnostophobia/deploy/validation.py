"""The validation outputs a threshold is chosen on (``calibrate``, and the consumers that choose one
again in memory): stored at training time (``val_outputs.npz``), or computed from ``best.pt`` on the
run's rebuilt protocol, in the one deployment arithmetic (:data:`DEPLOY_PRECISION`: the network in
fp32 without TF32, the score in float64; :mod:`.calibration` says why).
"""
from __future__ import annotations

import contextlib
import contextvars
import json
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import VAL_OUTPUTS, ModelDir
from agnostophobia.training import records
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import protocol_for
from agnostophobia.training.device import resolve_device
from agnostophobia.training.outputs import SplitOutputs, load_outputs, load_val_outputs, save_outputs, val_split
from agnostophobia.training.precision import resolve_precision
from agnostophobia.training.trained import TrainedModel, load_trained_model
from agnostophobia._log import log_info

from .request import ModelRequest

#: The network's precision in every deployed decision; the score is computed in float64.
DEPLOY_PRECISION = "fp32"


class Protocols:
    """The run's protocols, built once per (protocol, data seed, limits, split) for all its models, each
    checked against the data the run was built from (``data_sources.json``): a split rebuilt
    from other files would be another split."""

    def __init__(self, run_dir, data_dir=None, log: Callable[[str], None] = log_info):
        self.run_dir, self.data_dir, self.log = run_dir, data_dir, log
        self._built: Dict[str, object] = {}

    def for_config(self, cfg: Dict):
        key = json.dumps([cfg["protocol"], cfg.get("data_seed", 0), cfg.get("protocol_limits") or {},
                          cfg.get("protocol_split")], sort_keys=True)
        if key not in self._built:
            protocol = protocol_for(cfg, self.data_dir)
            records.check_data_sources(self.run_dir, protocol, self.log if not self._built else lambda line: None)
            self._built[key] = protocol
            rebuilt = _REBUILT.get()
            if rebuilt is not None:
                rebuilt.append(key)
        return self._built[key]


#: The protocols rebuilt inside the block of :func:`unused_flags_said` (None outside one).
_REBUILT: contextvars.ContextVar[Optional[List[str]]] = contextvars.ContextVar("rebuilt", default=None)
NOTHING_REBUILT = ("every validation output this needs is stored in the run: no data was read and no network run "
                   "to compute one")


@contextlib.contextmanager
def unused_flags_said(request: ModelRequest, *fields: str):
    """Run the block; where it rebuilt no validation split, warn that the ``fields`` of ``request``
    given (``data_dir``, ``device``: they serve only that rebuild, for a run trained before its
    validation outputs were stored) had no effect. Inside another such block it says nothing: the
    outer one speaks for both."""
    if _REBUILT.get() is not None:
        yield
        return
    token = _REBUILT.set([])
    try:
        yield
        rebuilt = bool(_REBUILT.get())
    finally:
        _REBUILT.reset(token)
    if not rebuilt:  # said where the caller of the function holding this block called it (past contextlib)
        request.warn_unused(NOTHING_REBUILT, *fields, stacklevel=4)


def arithmetic(precision: str) -> str:
    """How a score is computed: the network's precision and the score's dtype."""
    return f"{precision} network, float64 score"


def trained_precision(config: Dict) -> str:
    """The precision a run computed its stored outputs in (resolved when it trained; ``auto``
    in a run's config from before that, resolved on the run's device)."""
    precision = config.get("precision", "fp32")
    if precision != "auto":
        return precision
    try:
        return resolve_precision(precision, resolve_device(config.get("device", "auto")))
    except AgnostophobiaError:  # the run's device (a GPU) is absent here
        return resolve_precision(precision, "cpu")


@contextlib.contextmanager
def exact_fp32():
    """No TF32 in CUDA matrix products and convolutions (cuDNN allows it by default): fp32
    means fp32 here, as on the CPU and in the exported files."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def network_outputs(trained: TrainedModel, images) -> Tuple[np.ndarray, np.ndarray]:
    """``trained``'s (logits, features) of ``images`` in its precision (fp32: without TF32)."""
    if trained.precision != "fp32":
        return trained.outputs(images)
    with exact_fp32():
        return trained.outputs(images)


def validation_outputs(model: ModelDir, protocols: Protocols, device: Optional[str] = None,
                       log: Callable[[str], None] = log_info, precision: str = DEPLOY_PRECISION,
                       store: bool = True) -> SplitOutputs:
    """The model's outputs on the validation split with the network in ``precision``: stored
    at training time, or computed from ``best.pt`` on the run's rebuilt protocol (and stored
    where ``store`` is set, so this happens once)."""
    split = val_split(precision, trained_precision(load_checkpoint(model.best)["config"])) \
        if model.best.is_file() else "val"
    stored = load_val_outputs(model, split)
    if stored is not None:
        return stored
    trained = load_trained_model(model, device, precision)
    val = protocols.for_config(trained.config).val
    logits, features = network_outputs(trained, val.images)
    outputs = {"logits": logits, "features": features, "labels": np.asarray(val.labels, np.int64)}
    where = "kept in memory"
    if store:
        path = model.val_outputs
        save_outputs(path, {**(load_outputs(path) if path.exists() else {}), split: outputs})
        where = f"stored in {VAL_OUTPUTS} (split {split!r})"
    log(f"{model}: validation outputs in {precision} computed from best.pt ({len(logits):,} samples), {where}")
    return outputs
