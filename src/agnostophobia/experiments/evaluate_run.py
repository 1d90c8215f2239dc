"""``agnostophobia evaluate RUN [--unknowns NAME_OR_PATH ...]``.

Recomputes a run's metrics, figures and report from its stored outputs and, for each
further unknown set, runs every trained model (best-validation weights) on it first.
An unknown set is a registered dataset name, an ``.npz`` in our layout (``x_test`` or
``x``: uint8 (N, H, W) grey or (N, H, W, 3) RGB), or a folder of images; it is
preprocessed exactly like the run's training data.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from agnostophobia.data import DATASETS, check_polarity, load_dataset, to_chw, to_lenet
from agnostophobia.errors import DataError
from agnostophobia._runlock import run_lock
from agnostophobia.experiments.outputs import load_outputs, save_outputs
from agnostophobia.models import build_model
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.trainer import predict, resolve_device

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def read_unknowns(spec: str, data_dir=None) -> tuple[str, np.ndarray]:
    """``(name, images as stored)`` for a dataset name, an .npz file or an image folder."""
    path = Path(spec)
    if spec in DATASETS and not path.exists():
        info = DATASETS.get(spec)
        split = "test" if "test" in info.splits else info.splits[0]
        return spec, load_dataset(spec, split, data_dir).images
    if path.is_file() and path.suffix == ".npz":
        with np.load(path) as data:
            key = next((k for k in ("x_test", "x", "images") if k in data.files), None)
            if key is None:
                raise DataError(f"{path}: no image array; expected one of x_test, x, images (found {data.files})")
            images = data[key]
        if images.dtype != np.uint8 or images.ndim not in (3, 4):
            raise DataError(f"{path}: {key} must be uint8 (N, H, W) or (N, H, W, 3), got {images.dtype} {images.shape}")
        return path.stem, images
    if path.is_dir():
        return path.name, _read_folder(path)
    known = ", ".join(DATASETS.names())
    raise DataError(f"--unknowns {spec!r} is neither a registered dataset ({known}), an .npz file nor a folder")


def _read_folder(folder: Path) -> np.ndarray:
    from PIL import Image

    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise DataError(f"{folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    images = []
    for file in files:
        try:
            with Image.open(file) as img:
                images.append(np.asarray(img.convert("RGB")))
        except Exception as exc:
            raise DataError(f"{file}: cannot be read as an image ({exc})") from None
    shapes = {im.shape for im in images}
    if len(shapes) > 1:  # resize everything to the first image's size; the model-side step resizes again
        size = images[0].shape[1::-1]
        images = [np.asarray(Image.fromarray(im).resize(size, Image.Resampling.BILINEAR)) for im in images]
    return np.stack(images)


def preprocess_for(model_name: str, images: np.ndarray, name: str) -> np.ndarray:
    """The run's model input: LeNet++ grey 28x28 white-on-black, ResNet RGB 32x32."""
    if model_name == "lenet++":
        if images.ndim == 4 and images.shape[-1] == 3 and _is_grey(images):
            images = np.ascontiguousarray(images[..., 0])
        out = to_lenet(images)
        check_polarity(out, name)
        return out
    from PIL import Image

    if images.ndim == 3:
        images = np.repeat(images[..., None], 3, axis=-1)
    if images.shape[1:3] != (32, 32):
        images = np.stack([np.asarray(Image.fromarray(im).resize((32, 32), Image.Resampling.BILINEAR))
                           for im in images])
    return to_chw(images)


def _is_grey(images: np.ndarray) -> bool:
    return bool((images[..., 0] == images[..., 1]).all() and (images[..., 1] == images[..., 2]).all())


def evaluate_run(run_dir, unknowns: Sequence[str] = (), data_dir=None, device: Optional[str] = None,
                 plots: bool = True, log=print) -> Path:
    from agnostophobia.experiments.reproduce import finish_run

    run_dir = Path(run_dir)
    model_dirs = sorted(p.parent for p in run_dir.glob("seed*/*/outputs.npz"))
    if not model_dirs:
        raise DataError(f"{run_dir} holds no trained run (seed*/<approach>/outputs.npz); "
                        f"train one with `agnostophobia reproduce` or `agnostophobia train`")
    with run_lock(run_dir, create=False):
        for spec in unknowns:
            raw_name, raw = read_unknowns(spec, data_dir)
            for model_dir in model_dirs:
                _add_unknown_set(model_dir, raw_name, raw, device, log)
        meta_path = run_dir / "run_meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"experiment": "", "budget": None}
        return finish_run(run_dir, meta, plots=plots, log=log)


def _add_unknown_set(model_dir: Path, name: str, raw: np.ndarray, device, log) -> None:
    best = load_checkpoint(model_dir / "best.pt")
    cfg = best["config"]
    state = best["model"]
    model = build_model(cfg["model"], num_outputs=state["logits.weight"].shape[0], **cfg["model_kwargs"])
    model.load_state_dict(state)
    target = resolve_device(device or cfg.get("device", "auto"))
    model.to(target)
    images = preprocess_for(cfg["model"], raw, name)
    logits, features = predict(model, images, cfg.get("eval_batch_size", 1024), target)
    outputs = load_outputs(model_dir / "outputs.npz")
    if name == "known":
        raise DataError("an unknown set must not be called 'known'")
    outputs[name] = {"logits": logits, "features": features, "labels": np.full(len(logits), -1, np.int64)}
    save_outputs(model_dir / "outputs.npz", outputs)
    log(f"{model_dir}: evaluated {len(logits):,} samples of {name!r}")
