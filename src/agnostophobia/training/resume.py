"""The resume policy of a training run: what its directory keeps after every epoch, and when a
run may continue from it.

* After every epoch an atomic ``last.pt`` holds model, optimiser, scheduler, the loss's state, epoch, config, RNG
  state and history; ``best.pt`` holds the weights with the lowest validation loss (the authors
  kept the best validation loss, docs/references.md) (:func:`save_epoch`).
* A run continues from ``last.pt`` only with ``resume`` and only under the config it was trained
  with, up to the keys that cannot change its result (``records.RESUME_FREE_KEYS``); otherwise a
  one-line :class:`ConfigError` (:func:`saved_run`, :func:`check_resumable`).
* Seeds trained together continue from one epoch (:func:`check_same_epoch`).

The data order and augmentation of an epoch depend only on ``(seed, epoch)`` (the trainer), so
with the RNG state restored a resumed run sees exactly the batches an uninterrupted one would.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from agnostophobia._atomic import remove_stale_temporaries
from agnostophobia.errors import ConfigError
from agnostophobia.training.checkpoint import load_checkpoint, rng_state, save_checkpoint
from agnostophobia.training.config import TrainConfig
from agnostophobia.rundir import BEST, HISTORY, LAST, ModelDir
from agnostophobia.training.records import trained_differently


def check_saved_config(saved: Dict, cfg: TrainConfig, path: Path) -> None:
    """Raise :class:`ConfigError` if the config ``saved`` in checkpoint ``path`` differs from ``cfg``
    in a key that changes the result (the rule the run records' agreement check applies too,
    :func:`~agnostophobia.training.records.trained_differently`; ``deterministic`` is not free:
    on CUDA it changes which algorithms compute the result)."""
    difference = trained_differently(saved, cfg.to_dict())
    if difference:
        key, value, other = difference
        raise ConfigError(f"{path} was trained with {key}={value!r} but the config now says {other!r}; "
                          f"use another output directory, or the original config to resume")


def check_resumable(model: ModelDir, cfg: TrainConfig) -> None:
    """Raise :class:`ConfigError` if ``model`` holds a checkpoint trained with another config."""
    last = model.last
    if last.exists():
        check_saved_config(load_checkpoint(last)["config"], cfg, last)


def is_finished(model: ModelDir, cfg: TrainConfig) -> bool:
    last = model.last
    if not last.exists():
        return False
    state = load_checkpoint(last)
    check_saved_config(state["config"], cfg, last)
    return bool(state.get("finished"))


def saved_run(model: ModelDir, cfg: TrainConfig, resume: bool) -> Optional[Dict]:
    """The checkpoint of the run in the folder ``model`` to continue, or None for a new run (the folder is created)."""
    model.path.mkdir(parents=True, exist_ok=True)
    last_path = model.last
    if not last_path.exists():
        return None
    if not resume:
        raise ConfigError(f"{model} already holds a run; pass --resume to continue it or choose another --out")
    # on the CPU: torch.set_rng_state takes CPU tensors only; load_state_dict moves the rest
    saved = load_checkpoint(last_path)
    check_saved_config(saved["config"], cfg, last_path)
    return saved


def check_same_epoch(saved: List[Optional[Dict]], models: List[ModelDir]) -> None:
    """Seeds batched together continue from one epoch (``reproduce`` groups them so)."""
    epochs = [None if one is None else one["epoch"] for one in saved]
    if len(set(epochs)) > 1:
        raise ConfigError("seeds batched together must continue from the same epoch: "
                          + ", ".join(f"{model} at {'no checkpoint' if epoch is None else f'epoch {epoch}'}"
                                      for model, epoch in zip(models, epochs)))


def remove_killed_writes(model: ModelDir) -> None:
    """Delete the temporary files a run killed while writing its checkpoints or logs left behind."""
    remove_stale_temporaries(model.path, (LAST, BEST, HISTORY))


def save_epoch(model: ModelDir, cfg: TrainConfig, state: Dict, held: Dict, val_loss: float, improved: bool) -> None:
    """The checkpoints of the epoch just trained: ``best.pt`` if it ``improved``, then ``last.pt``.
    ``state``: epoch, history and best epoch so far; ``held``: one network's model, optimiser and
    scheduler state dicts, as a separate run holds them, and the loss's (its parameters and state)."""
    epoch = state["epoch"]
    if improved:
        save_checkpoint(model.best, {"model": held["model"], "epoch": epoch,
                                     "val_loss": val_loss, "config": cfg.to_dict()})
    save_checkpoint(model.last, {
        **state, "model": held["model"], "optimizer": held["optimizer"],
        "scheduler": held["scheduler"], "loss": held.get("loss", {}), "config": cfg.to_dict(), "rng": rng_state(),
        "finished": epoch == cfg.epochs})
