"""``agnostophobia evaluate RUN [--unknowns NAME_OR_PATH ...] [--replace]``.

Recomputes a run's metrics, figures and report from its stored outputs and, for each
further unknown set, runs every trained model (best-validation weights) on it first.
An unknown set is a registered dataset name, an ``.npz`` in our layout (``x_test``, ``x``
or ``images``: uint8 (N, H, W) grey or (N, H, W, 3) RGB), or a folder of images of any
sizes. It is prepared by :func:`agnostophobia.data.preprocess.prepare_images` with the
input spec of the protocol the run was trained on (read from the run's config), i.e.
exactly as that protocol prepared its own sets (Sec. 5): a registered dataset keeps its
own kind and declared frame, a user's set is taken to be of the protocol's kind (glyphs
for LeNet++, whose polarity is checked; photographs for CIFAR, which have none).

Everything that can be refused is refused before any work: the set names first (never
``known``, never one name twice, never a set the run already holds unless ``replace``),
then every input is read, checked and prepared; only then do the models run and outputs
get written.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from agnostophobia.data import DATASETS, load_dataset
from agnostophobia.data import formats as F
from agnostophobia.data.preprocess import StoredImages, prepare_images
from agnostophobia.data.protocols import protocol_input
from agnostophobia.errors import DataError
from agnostophobia._runlock import run_lock
from agnostophobia.training.outputs import load_outputs, save_outputs
from agnostophobia.models import build_model
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.precision import resolve_precision
from agnostophobia.training.trainer import predict, resolve_device

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
NPZ_IMAGE_KEYS = ("x_test", "x", "images")
KNOWN = "known"  # the run's own known test set (D_c) in outputs.npz


@dataclass
class UnknownSet:
    """An unknown set as stored, before it is prepared for a run's models."""

    name: str                     # its split name in outputs.npz
    source: str                   # what it was read from, for messages
    images: StoredImages
    kind: Optional[str] = None    # a registered dataset's kind; None: the kind the run was trained on
    padding: int = 0              # a blank frame the dataset declares (DHCD: 2); never guessed


def unknown_set_name(spec: str) -> str:
    """The split name ``spec`` will be stored under; a DataError when it names nothing usable."""
    path = Path(spec)
    if path.is_dir():
        return path.name
    if path.is_file():
        if path.suffix.lower() != ".npz":
            raise DataError(f"--unknowns {spec}: not an .npz file nor a folder of images")
        return path.stem
    if spec in DATASETS:
        return spec
    raise DataError(f"--unknowns {spec}: no such file or folder, and not a registered dataset "
                    f"({', '.join(DATASETS.names())})")


def read_unknowns(spec: str, data_dir=None) -> UnknownSet:
    """Read one ``--unknowns`` argument; every problem is a one-line DataError naming it."""
    name = unknown_set_name(spec)
    path = Path(spec)
    if path.is_dir():
        return UnknownSet(name, str(path), read_image_folder(path))
    if path.is_file():
        return UnknownSet(name, str(path), _read_npz(path))
    info = DATASETS.get(spec)
    ds = load_dataset(spec, "test" if "test" in info.splits else info.splits[0], data_dir)
    return UnknownSet(name, f"{spec} ({ds.source})", ds.images, info.kind, ds.meta.get("padding", 0))


def _read_npz(path: Path) -> np.ndarray:
    with F.open_npz(path) as npz:
        key = next((k for k in NPZ_IMAGE_KEYS if k in npz.files), None)
        if key is None:
            raise DataError(f"{path}: no image array; expected one of {', '.join(NPZ_IMAGE_KEYS)} "
                            f"(it has: {', '.join(npz.files) or 'none'})")
        images = F.npz_array(npz, path, key)
    return F.check_images(images, f"{path}: {key}", channels=3 if images.ndim == 4 else 1)


def read_image_folder(folder: Path) -> List[np.ndarray]:
    """Every image under ``folder`` (sorted, recursively) as RGB, each at its own size."""
    files = F.Archive(folder).iter_files(lambda name: Path(name).suffix.lower() in IMAGE_SUFFIXES)
    images = [F.decode_image(data, str(folder / name), "RGB") for name, data in files]
    if not images:
        raise DataError(f"{folder}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    return images


def model_input(unknown: UnknownSet, cfg: Dict) -> np.ndarray:
    """``unknown`` as input of a model trained with ``cfg`` (a run's config dict): prepared
    with the spec of the run's protocol, as that protocol prepared its own sets."""
    return prepare_images(unknown.images, protocol_input(cfg["protocol"]), name=unknown.source,
                          kind=unknown.kind, padding=unknown.padding)


def check_set_names(specs: Sequence[str], names: Sequence[str], run_dir: Path, model_dirs: Sequence[Path],
                    replace: bool) -> None:
    """Refuse names that would overwrite the known set, each other, or (without ``replace``)
    a set the run already holds."""
    for spec, name in zip(specs, names):
        if name == KNOWN:
            raise DataError(f"--unknowns {spec}: an unknown set must not be called {KNOWN!r} "
                            f"(the run's known test set); rename it")
        if "__" in name:
            raise DataError(f"--unknowns {spec}: a set name must not contain '__'; rename it")
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise DataError(f"--unknowns: more than one set would be called {twice[0]!r}; rename one")
    if replace:
        return
    held = {split for d in model_dirs for split in load_outputs(d / "outputs.npz")}
    clash = [name for name in names if name in held]
    if clash:
        raise DataError(f"{run_dir} already holds unknown set(s) {', '.join(map(repr, clash))}; "
                        f"add --replace to replace them, or rename the input")


def evaluate_run(run_dir, unknowns: Sequence[str] = (), data_dir=None, device: Optional[str] = None,
                 plots: bool = True, replace: bool = False, log=print) -> Path:
    from agnostophobia.experiments.reproduce import finish_run

    run_dir = Path(run_dir)
    if device:
        resolve_device(device)  # a bad --device stops before any work
    model_dirs = sorted(p.parent for p in run_dir.glob("seed*/*/outputs.npz"))
    if not model_dirs:
        raise DataError(f"{run_dir} holds no trained run (seed*/<approach>/outputs.npz); "
                        f"train one with `agnostophobia reproduce` or `agnostophobia train`")
    prepared, names = {}, []
    if unknowns:  # every input is checked, read and prepared before the run is touched
        check_set_names(unknowns, [unknown_set_name(spec) for spec in unknowns], run_dir, model_dirs, replace)
        sets = [read_unknowns(spec, data_dir) for spec in unknowns]
        configs = {d: load_checkpoint(d / "best.pt")["config"] for d in model_dirs}
        for cfg in configs.values():  # one preparation per input spec, shared by the models trained with it
            spec = protocol_input(cfg["protocol"])
            if spec not in prepared:
                prepared[spec] = [model_input(s, cfg) for s in sets]
        names = [s.name for s in sets]
        del sets  # the prepared copies are all that is needed from here on
    with run_lock(run_dir, create=False):
        for model_dir in model_dirs if unknowns else ():
            spec = protocol_input(configs[model_dir]["protocol"])
            _add_unknown_sets(model_dir, names, prepared[spec], device, log)
        meta_path = run_dir / "run_meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"experiment": "", "budget": None}
        return finish_run(run_dir, meta, plots=plots, log=log)


def _add_unknown_sets(model_dir: Path, names: Sequence[str], inputs: Sequence[np.ndarray], device, log) -> None:
    best = load_checkpoint(model_dir / "best.pt")
    cfg = best["config"]
    state = best["model"]
    # the trained weights replace any pretrained ones: those are neither downloaded nor read again
    model = build_model(cfg["model"], num_outputs=state["logits.weight"].shape[0], load_weights=False,
                        **cfg["model_kwargs"])
    model.load_state_dict(state)
    target = resolve_device(device or cfg.get("device", "auto"))
    model.to(target)
    channels_last = cfg.get("channels_last", False)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    precision = resolve_precision(cfg.get("precision", "fp32"), target)
    outputs = load_outputs(model_dir / "outputs.npz")
    for name, images in zip(names, inputs):
        # as the run's own test sets were predicted: same memory format, same precision
        logits, features = predict(model, images, cfg.get("eval_batch_size", 1024), target, channels_last, precision)
        outputs[name] = {"logits": logits, "features": features, "labels": np.full(len(logits), -1, np.int64)}
        log(f"{model_dir}: evaluated {len(logits):,} samples of {name!r}")
    save_outputs(model_dir / "outputs.npz", outputs)
