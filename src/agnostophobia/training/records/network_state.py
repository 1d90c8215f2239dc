"""A trained model's weights, the ``model`` state dict inside its ``best.pt``: read through
:func:`read_trained_checkpoint` by everything that loads a trained network (``check_run``
before every command on a run, :func:`~agnostophobia.training.load_trained_model`, the last
layer read back from a checkpoint), and checked there once (:func:`check_network_state`).

A checkpoint is refused, in one line naming the file and the layer, where its weights are not
those of the network the run's config builds: a layer missing, unexpected or of another shape
(the logit layer one row per output: the run's classes, plus the background class of an
approach that has one), integers where the network holds floating-point numbers (they would be
cast without a word), or NaN or inf values (the network would answer with one same score for
every image). Loaded anyway, each of these gave a traceback or a silently wrong model.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from agnostophobia.losses import LOSSES, approach_logit_layer
from agnostophobia.models import build_model
from agnostophobia.rundir import ModelDir, RecordError
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.records._common import _fail
from agnostophobia.training.records.run_config import checkpoint_config
from agnostophobia.training.records.run_meta import read_run_meta
from agnostophobia.training.records.training_summary import read_classes

#: Layer names listed in one message at most (a checkpoint of another architecture lacks dozens).
NAMES_SHOWN = 5


def read_trained_checkpoint(model: ModelDir) -> Tuple[Dict[str, Any], Dict[str, torch.Tensor]]:
    """``(config, state)`` of the model's ``best.pt`` (``RUN/seed<N>/<approach>``): its training
    config, checked as ``config.yaml`` is, and the network's state dict, checked against the
    network of the run (:func:`check_network_state`). A one-line :class:`RecordError` otherwise."""
    path = model.best
    saved = load_checkpoint(path)
    config = checkpoint_config(saved, path)
    state = saved.get("model")
    check_network_state(path, state, config, run_outputs(model.run.root, config["approach"]))
    return config, state


def run_outputs(run_dir, approach: str) -> Optional[int]:
    """The logit columns a network of ``run_dir`` trained with ``approach`` has: one per known
    class the run recorded (``classes.json``, else ``run_meta.json``), plus the background
    class where the approach has one, as the trainer built it; None where the run recorded no
    class names (a run from before they were) or the approach is not registered here."""
    names = (read_classes(run_dir) or {}).get("class_names") or (read_run_meta(run_dir) or {}).get("class_names")
    if not names or approach not in LOSSES:
        return None
    return len(names) + int(LOSSES.get(approach).background_class)


def check_network_state(path, state, config: Dict[str, Any], num_outputs: Optional[int] = None) -> None:
    """Nothing where ``state`` (the ``model`` of the checkpoint ``path``) holds exactly the layers
    of the network ``config`` builds with ``num_outputs`` logits (default: as many as the
    checkpoint's logit layer has rows), each of its shape, floating-point where the network's is,
    and finite; else a one-line :class:`RecordError` naming ``path`` and the first layer at fault."""
    if not isinstance(state, dict) or not isinstance(state.get("logits.weight"), torch.Tensor) \
            or not all(isinstance(value, torch.Tensor) for value in state.values()):
        _fail(path, "not the state dict of a trained network (no logits.weight)", "model")
    expected = network_layers(config, num_outputs or state["logits.weight"].shape[0])
    _check_names(path, state, expected, config["model"])
    outputs = f" ({num_outputs} outputs: {_outputs_of(config['approach'])})" if num_outputs else ""
    for name, wanted in expected.items():
        _check_layer(path, name, state[name], wanted, outputs if name == "logits.weight" else "")


def network_layers(config: Dict[str, Any], num_outputs: int) -> Dict[str, torch.Tensor]:
    """The state dict of the network ``config`` builds with ``num_outputs`` logits, on the meta
    device: names, shapes and dtypes, nothing allocated (a ResNet is checked as fast as LeNet++)."""
    def build():  # with the approach's logit layer where its loss puts one of its own (ARPL, CAC)
        return approach_logit_layer(build_model(config["model"], num_outputs=num_outputs, load_weights=False,
                                                **config.get("model_kwargs", {})),
                                    config.get("approach"), config.get("loss"))
    try:
        with torch.device("meta"):
            return build().state_dict()
    except (NotImplementedError, RuntimeError):  # a (plugin) network whose constructor computes with values
        return build().state_dict()


def _check_names(path, state: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor], model: str) -> None:
    missing = [name for name in expected if name not in state]
    unexpected = [name for name in state if name not in expected]
    problems = [f"{what} layer(s) {_names(names)}" for what, names in (("missing", missing),
                                                                       ("unexpected", unexpected)) if names]
    if problems:
        raise RecordError(f"{path}: not the weights of this run's network ({model}): {'; '.join(problems)}")


def _outputs_of(approach: str) -> str:
    background = approach in LOSSES and LOSSES.get(approach).background_class
    return "one per class of the run" + (f", and {approach}'s background class" if background else "")


def _check_layer(path, name: str, value: torch.Tensor, wanted: torch.Tensor, why: str = "") -> None:
    """``why``: what decides the layer's shape, said where it differs."""
    if value.shape != wanted.shape:
        raise RecordError(f"{path}: layer {name} has shape {_shape(value)}, the network of this run has "
                          f"{_shape(wanted)}{why}")
    if value.is_floating_point() != wanted.is_floating_point():
        kind = "floating-point" if wanted.is_floating_point() else _dtype(wanted)
        raise RecordError(f"{path}: layer {name} holds {_dtype(value)} values, the network of this run holds "
                          f"{kind} ones there; refusing to cast them")
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        nan = int(torch.isnan(value).sum())
        counts = {"NaN": nan, "infinite": int((~torch.isfinite(value)).sum()) - nan}
        held = " and ".join(f"{count} {kind}" for kind, count in counts.items() if count)
        raise RecordError(f"{path}: layer {name} holds {held} value(s): a network with them computes no "
                          f"meaningful score (the training diverged, or the file was changed)")


def _names(names) -> str:
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _shape(tensor: torch.Tensor) -> str:
    return "(" + ", ".join(map(str, tensor.shape)) + ("," if tensor.dim() == 1 else "") + ")"


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")
