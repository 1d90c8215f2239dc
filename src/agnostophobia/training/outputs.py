"""Per-sample outputs of a trained run, stored so that every number and figure can be
recomputed without retraining; written once per trained model by :func:`store_outputs`
(each split predicted as the run trained, :func:`split_outputs`, by :func:`predict`, the one
inference loop, which deploy runs too), read by detectors, metrics, plotting, deploy and experiments.

Layout of a run directory::

    RUN/config.yaml                      the resolved configuration (read by run_config)
    RUN/seed<k>/<approach>/outputs.npz   # one file per trained approach and seed
        <split>__logits    float32 (N, C or C+1)
        <split>__features  float32 (N, D)       deep features F that feed the logit layer
        <split>__labels    int64   (N,)         known class, or -1 for unknown samples
    splits: "known" (D_c, the known test set) and one entry per unknown set
    ("letters" = D_b, "devanagari", "notmnist", "cifar10", ... = D_a)
    RUN/seed<k>/<approach>/fit_outputs.npz   # split "train": the training knowns' outputs,
                                             # which fitted detectors (k-NN, OpenMax) learn from
    RUN/seed<k>/<approach>/last_layer.npz    # the logit layer on F: weight (K, D), and bias (K,) where
                                             # the layer has one (LeNet++, ResNet-18, torchvision
                                             # backbones: none; the ensemble's MLP: one), which
                                             # ViM, ReAct, ASH and SCALE read
    RUN/seed<k>/<approach>/val_outputs.npz   # split "val": the validation split's outputs, held-out
                                             # knowns and held-out negatives (label -1), from which
                                             # `calibrate` chooses a threshold (never from test data);
                                             # a run not trained in fp32 adds split "val_fp32", the same
                                             # in fp32, the arithmetic deployed models compute in
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import ModelDir
from agnostophobia.training.records.last_layer import save_last_layer
from agnostophobia.training.records.outputs import SplitOutputs, read_outputs, save_outputs
from agnostophobia.training.records.run_config import read_run_config
from agnostophobia.training.augment import to_input
from agnostophobia.training.precision import autocast


def store_outputs(run, protocol, model: ModelDir) -> None:
    """The per-sample outputs of a trained model on the test sets, on its training knowns (from
    which fitted detectors, k-NN and OpenMax, learn) and on the validation split, in its folder ``model``."""
    save_outputs(model.fit_outputs, {"train": fit_outputs(run, protocol)})
    save_last_layer(model.last_layer, last_layer_arrays(run.model.state_dict()))
    save_outputs(model.val_outputs, val_outputs(run, protocol))  # calibrate reads these
    save_outputs(model.outputs, run_outputs(run, protocol))


def fit_outputs(run, protocol) -> Dict:
    known = protocol.train.labels >= 0
    return split_outputs(run, protocol.train.images[known], protocol.train.labels[known])


def val_outputs(run, protocol) -> Dict:
    """The validation split's outputs, held-out knowns and held-out negatives (label -1) alike:
    ``calibrate`` chooses its thresholds on them, never on test data. Split "val" is in the
    run's precision; a run not in fp32 adds "val_fp32", in the arithmetic deployed models
    compute in (:mod:`agnostophobia.deploy`), so that calibrating it needs no data."""
    splits = {"val": split_outputs(run, protocol.val.images, protocol.val.labels)}
    if run.precision != "fp32":
        splits[val_split("fp32", run.precision)] = split_outputs(run, protocol.val.images, protocol.val.labels, "fp32")
    return splits


def run_outputs(run, protocol) -> Dict[str, Dict]:
    """Per-sample logits, features and labels on D_c and every unknown set."""
    return {name: split_outputs(run, split.images, split.labels)
            for name, split in [("known", protocol.test_known), *protocol.test_unknowns.items()]}


def split_outputs(run, images, labels, precision: Optional[str] = None) -> Dict:
    """Per-sample logits, features and labels of ``images``, predicted as the run trained
    (its memory format, precision unless ``precision`` says otherwise, evaluation batch size)."""
    logits, features = predict(run.model, images, run.cfg.eval_batch_size, run.device,
                               run.channels_last, precision or run.precision)
    return {"logits": logits, "features": features, "labels": labels}


@torch.inference_mode()
def predict(model: torch.nn.Module, images, batch_size: int = 1024,
            device: Optional[torch.device] = None, channels_last: bool = False,
            precision: str = "fp32") -> Tuple[np.ndarray, np.ndarray]:
    """Logits and deep features of images, batch by batch, as a run evaluates them.

    Args:
        model: a network that returns ``(logits, features)`` (every model of
            :mod:`agnostophobia.models`).
        images: (N, C, H, W) uint8 as stored (numpy or torch; divided by 255 here, as in
            training) or a float tensor already in [0, 1].
        batch_size: images per forward pass.
        device: where to compute; default: where the model's parameters are.
        channels_last: the memory format the model was trained in.
        precision: the one the model was trained with (a resolved value, ``fp32`` or ``bf16``):
            the backbone runs in it, the head in fp32 (``models.head.open_set_head``).

    Returns:
        Float32 numpy logits (N, C, or C + 1 with a background class) and features (N, D); an
        empty input gives empty (0, C) and (0, D) arrays.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.models import build_model
        >>> from agnostophobia.training import predict
        >>> model = build_model("lenet++", num_outputs=10)
        >>> logits, features = predict(model, np.zeros((5, 1, 28, 28), dtype=np.uint8), batch_size=2, device="cpu")
        >>> logits.shape, features.shape, logits.dtype
        ((5, 10), (5, 2), dtype('float32'))
    """
    device = device or next(model.parameters()).device
    model.eval()
    logits, features = [], []
    for i in range(0, max(len(images), 1), batch_size):  # one empty batch for an empty input: the widths
        batch = images[i:i + batch_size]
        if not isinstance(batch, torch.Tensor):  # an array, or image files decoded here (streamed)
            batch = torch.from_numpy(np.ascontiguousarray(np.asarray(batch)))
        x = to_input(batch.to(device), channels_last)
        with autocast(device, precision):
            out_logits, out_features = model(x)
        logits.append(out_logits.float().cpu())
        features.append(out_features.float().cpu())
    return torch.cat(logits).numpy(), torch.cat(features).numpy()


def last_layer_arrays(state: Dict[str, torch.Tensor]) -> Optional[Dict[str, np.ndarray]]:
    """The logit layer on F of a network's state dict (every model names it ``logits``) as float64
    ``{"weight": (K, D)}`` plus ``"bias"`` where it has one; None when the state has no such layer.
    A wrapper's prefix (``_orig_mod.`` of a compiled model, ``module.`` of DDP) is looked through."""
    names = [key for key in state if key == "logits.weight" or key.endswith(".logits.weight")]
    weight = state[min(names, key=len)] if names else None
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        return None
    layer = {"weight": weight.detach().double().cpu().numpy()}
    bias = state.get(min(names, key=len)[:-len("weight")] + "bias")
    if isinstance(bias, torch.Tensor):
        layer["bias"] = bias.detach().double().cpu().numpy()
    return layer


def load_outputs(path: Path) -> Dict[str, SplitOutputs]:
    """Read a file written by :func:`save_outputs`, checked by the run records' reader
    (:func:`agnostophobia.training.records.read_outputs`)."""
    return read_outputs(path)


def load_fit_outputs(model: ModelDir) -> Optional[SplitOutputs]:
    """The training knowns' outputs stored beside ``outputs.npz`` (for fitted detectors), or None."""
    path = model.fit_outputs
    return load_outputs(path)["train"] if path.exists() else None


def val_split(precision: str, run_precision: str) -> str:
    """The split of ``val_outputs.npz`` holding the validation outputs computed in ``precision``
    by a run that trained (and stored split "val") in ``run_precision``."""
    return "val" if precision == run_precision else f"val_{precision}"


def load_val_outputs(model: ModelDir, split: str = "val") -> Optional[SplitOutputs]:
    """The validation split's outputs stored beside ``outputs.npz`` (for calibration) as
    ``split`` (see :func:`val_split`), or None for a run trained before they were stored."""
    path = model.val_outputs
    return load_outputs(path).get(split) if path.exists() else None


def validation_with_negatives(model: ModelDir, store_hint: str, without_negatives: str) -> SplitOutputs:
    """The model's stored validation split (``val``) for choosing on validation data
    (``compare``, ``tune-detectors``); a one-line :class:`~agnostophobia.errors.AgnostophobiaError`
    where there is none (``store_hint``: how to store it) or where it holds no negatives
    (``without_negatives``: what therefore cannot be done)."""
    val = load_val_outputs(model, "val")
    if val is None:
        raise AgnostophobiaError(f"{model}: no validation outputs ({model.val_outputs.name}, split "
                                 f"val); {store_hint}")
    if not (np.asarray(val["labels"]) < 0).any():
        raise AgnostophobiaError(f"{model.val_outputs}: the validation split holds no negatives "
                                 f"(label -1), so {without_negatives}")
    return val


def run_config(run_dir: Path) -> Dict:
    """The resolved ``config.yaml`` of a run (model, budget, detector settings), checked; {}
    only where there is no such file (outputs stored by hand, without a run's records).

    An empty, unparsable or wrongly typed file is a one-line :class:`RecordError`: a broken
    config is never replaced by the defaults (which would re-score the run otherwise)."""
    return read_run_config(run_dir, required=False)
