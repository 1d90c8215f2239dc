"""A trained model of a run, loaded from its best-validation checkpoint (``best.pt``) and run
exactly as the run ran its own test sets: same memory format, same precision, so outputs
computed later (``evaluate --unknowns``, ``calibrate``, ``predict``) are those the run
would have stored."""
from __future__ import annotations

from dataclasses import dataclass
import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch

from agnostophobia.errors import AgnostophobiaError
from agnostophobia.losses import approach_logit_layer
from agnostophobia.models import build_model
from agnostophobia.training.device import resolve_device
from agnostophobia.training.outputs import last_layer_arrays, predict, save_last_layer
from agnostophobia.training.precision import resolve_precision
from agnostophobia.rundir import BEST, LAST_LAYER, ModelDir
from agnostophobia.training.records import read_last_layer, read_trained_checkpoint



@dataclass
class TrainedModel:
    """A network with the settings it is run with; :meth:`~TrainedModel.outputs` gives (logits, features).

    Examples:
        >>> import torch
        >>> from agnostophobia.models import LeNetPlusPlus
        >>> from agnostophobia.training import TrainedModel
        >>> network = LeNetPlusPlus(num_outputs=10).eval()  # load_trained_model loads a run's, as trained
        >>> trained = TrainedModel(network, {"protocol": "lenet++"}, torch.device("cpu"), "fp32", False, 64)
        >>> logits, features = trained.outputs(torch.zeros(3, 1, 28, 28))
        >>> trained.num_outputs, logits.shape, features.shape, logits.dtype
        (10, (3, 10), (3, 2), dtype('float32'))
    """

    model: torch.nn.Module       # the trained network, in eval mode: images -> (logits, features)
    config: Dict[str, Any]       # the training config stored in the checkpoint
    device: torch.device         # where the network is
    precision: str               # resolved: fp32 or bf16
    channels_last: bool          # the network's memory format, as trained (config key channels_last)
    batch_size: int              # images per forward pass (the config's eval_batch_size)

    @property
    def num_outputs(self) -> int:
        """The network's logit columns: C, or C+1 with a background class."""
        return int(self.model.logits.out_features)

    def outputs(self, images) -> Tuple[np.ndarray, np.ndarray]:
        """Float32 logits (N, C or C+1) and deep features (N, D) of uint8 images (N, C, H, W)
        as stored, or of a float tensor in [0, 1].

        Returns:
            ``(logits, features)``: float32 NumPy arrays (N, C or C+1) and (N, D).
        """
        return predict(self.model, images, self.batch_size, self.device, self.channels_last, self.precision)


def load_trained_model(model_dir: Union[str, os.PathLike], device: Optional[str] = None,
                       precision: Optional[str] = None) -> TrainedModel:
    """The best-validation network of a trained model, built and run as its run trained it.

    Args:
        model_dir: the model's folder in a run, ``RUN/seed<N>/<approach>`` (its ``best.pt``): a
            path, or the ``rundir.ModelDir`` of ``RunDir.model(seed, approach)``.
        device: where to load it (``cpu``, ``cuda``, ``cuda:N``, ``auto``); default: the run's.
        precision: ``fp32``, ``bf16`` or ``auto``; default: the run's.

    Returns:
        The :class:`~agnostophobia.training.TrainedModel`.

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: no ``best.pt`` (not trained to the end of an
            epoch), or a checkpoint that holds no trained network of this run: a layer missing,
            unexpected or of another shape (the logit layer: one row per class of the run),
            integer or non-finite weights (``training.records.check_network_state``).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> from agnostophobia.training import TrainConfig, fit, protocol_for
        >>> folder = tempfile.TemporaryDirectory()
        >>> layout = make_glyph_folders(Path(folder.name) / "glyphs", per_split={"train": 6, "val": 2, "test": 2})
        >>> config = TrainConfig(protocol=layout, model="mlp", model_kwargs={"hidden": [16]}, epochs=1,  # a small network
        ...                      batch_size=8, device="cpu", progress=False, tensorboard=False)
        ...
        >>> from agnostophobia.training import load_trained_model
        >>> _ = fit(config, protocol_for(config), Path(folder.name) / "run")
        >>> trained = load_trained_model(Path(folder.name) / "run", device="cpu")
        >>> logits, features = trained.outputs(protocol_for(config).test_known.images)
        >>> logits.shape, trained.num_outputs  # 3 known classes: Entropic Open-Set has no background column
        ((6, 3), 3)
        >>> folder.cleanup()
    """
    folder = ModelDir.at(model_dir)
    path = folder.best
    if not path.is_file():
        raise AgnostophobiaError(f"{path}: no such checkpoint; the model was not trained to the end of an epoch")
    cfg, state = read_trained_checkpoint(folder)  # this run's network, finite: refused in one line otherwise
    # the trained weights replace any pretrained ones: those are neither downloaded nor read again
    model = build_model(cfg["model"], num_outputs=state["logits.weight"].shape[0], load_weights=False,
                        **cfg["model_kwargs"])
    model = approach_logit_layer(model, cfg.get("approach"), cfg.get("loss"))  # ARPL's, CAC's distances
    model.load_state_dict(state)
    target = resolve_device(device or cfg.get("device", "auto"))
    model.to(target).eval()
    channels_last = bool(cfg.get("channels_last", False))
    if channels_last:
        model.to(memory_format=torch.channels_last)
    resolved = resolve_precision(precision or cfg.get("precision", "fp32"), target)
    return TrainedModel(model, cfg, target, resolved, channels_last, int(cfg.get("eval_batch_size", 1024)))


def load_last_layer(model: ModelDir) -> Tuple[Optional[Dict[str, np.ndarray]], str]:
    """The model's last (logit) layer on F as :func:`~agnostophobia.training.records.read_last_layer`
    gives it, and "" -- or None and why not (one line).

    A run stored before ``last_layer.npz`` existed has it recomputed from ``best.pt`` once (the
    checkpoint's ``logits`` layer, read only from a checkpoint :func:`load_trained_model` would
    load) and written beside the outputs (left unwritten in a read-only run); a run without
    either gets None. (A detector checks the layer's width against the
    features it is given.)"""
    path = model.last_layer
    if path.exists():
        return read_last_layer(path), ""
    best = model.best
    if not best.is_file():
        return None, f"no last layer is stored ({LAST_LAYER}) and there is no {BEST} to read it from"
    try:
        state = read_trained_checkpoint(model)[1]
    except (OSError, RuntimeError, ValueError, AgnostophobiaError) as exc:
        return None, f"no last layer is stored ({LAST_LAYER}) and {best} cannot be read ({exc})"
    layer = last_layer_arrays(state)
    if layer is None:
        return None, f"no last layer is stored ({LAST_LAYER}) and {best} holds no logits layer"
    try:
        save_last_layer(path, layer)
    except OSError:  # a read-only run: recomputed next time
        pass
    return layer, ""
