"""The logs of a training run's epochs: ``metrics.csv`` and TensorBoard scalars (config key
``tensorboard``), written by rank 0 after every epoch.

``metrics.csv`` is rewritten atomically from the checkpoint's history, so a kill never leaves
duplicate rows. A TensorBoard writer that cannot be made never stops a run.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Dict, List, Optional

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


def open_tensorboard(run_dir: Path, enabled: bool):
    """A TensorBoard writer into ``run_dir/tb``, or None (not ``enabled``, or no tensorboard)."""
    if not enabled:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is a dependency, but a logger must never stop a run
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
