"""The logs of a training run's epochs: ``metrics.csv`` and TensorBoard scalars (config key
``tensorboard``), written by rank 0 after every epoch.

``metrics.csv`` is rewritten atomically from the checkpoint's history, so a kill never leaves
duplicate rows. TensorBoard is the ``[tensorboard]`` extra: ``tensorboard: auto`` (the default)
logs where it is installed.
"""
from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path
from typing import Dict, List, Optional

from agnostophobia.errors import ConfigError
from agnostophobia.rundir import write_run_file


def write_history(path: Path, history: List[Dict]) -> None:
    """``history`` (one row per epoch) as CSV at ``path``, replacing what was there atomically."""
    if not history:
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    write_run_file(path, lambda tmp: Path(tmp).write_text(buffer.getvalue()))


def use_tensorboard(setting) -> bool:
    """Whether the config key ``tensorboard`` (auto, true or false) writes TensorBoard scalars
    here: ``auto`` where the tensorboard package is installed; ``true`` without it is a
    :class:`ConfigError` naming the extra, so that a run asked to log is never silently unlogged."""
    installed = importlib.util.find_spec("tensorboard") is not None
    if setting is True and not installed:
        raise ConfigError("config key 'tensorboard': true needs the tensorboard package: "
                          "pip install 'agnostophobia[tensorboard]' (or set tensorboard: auto or false)")
    return installed if setting == "auto" else bool(setting)


def open_tensorboard(run_dir: Path, setting):
    """A TensorBoard writer into ``run_dir/tb``, or None (``setting`` false, or auto without
    tensorboard installed; see :func:`use_tensorboard`)."""
    if not use_tensorboard(setting):
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # installed but unusable (a version torch cannot load): a logger never stops a run
        return None
    return SummaryWriter(log_dir=str(run_dir / "tb"))


def log_scalars(writer, row: Dict, epoch: int) -> None:
    """Every value of an epoch's ``row`` but the epoch itself, as TensorBoard scalars at step ``epoch``."""
    if writer is None:
        return
    for key, value in row.items():
        if key != "epoch":
            writer.add_scalar(key, value, epoch)
    writer.flush()


def close_tensorboard(writer: Optional[object]) -> None:
    if writer is not None:
        writer.close()
