"""Atomic checkpoints: nothing the user has is lost when a run is killed mid-write.

Checkpoints hold only tensors, numbers, strings, ``None`` and lists/tuples/dicts of them,
and are read with ``torch.load(weights_only=True)``: a file that needs any other object
unpickled (which could run code from a file downloaded from elsewhere) is refused with one
line naming it. RNG states are stored in these plain types (:func:`rng_state`) and always
loaded on the CPU, where ``torch.set_rng_state`` needs them, whatever device trains.
"""
from __future__ import annotations

import pickle
import random
import re
from pathlib import Path
from typing import Any, Dict

import numpy as np
import torch

from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import write_run_file


def save_checkpoint(path: Path, state: Dict[str, Any]) -> None:
    """Write a model's checkpoint (``RUN/seed<N>/<approach>/best.pt`` or ``last.pt``) whole,
    through the run's one write."""
    write_run_file(path, lambda tmp: torch.save(state, tmp))


def load_checkpoint(path: Path, map_location="cpu") -> Dict[str, Any]:
    """The checkpoint at ``path``, its tensors on ``map_location``.

    Keep the default (the CPU) for a checkpoint with an RNG state: ``load_state_dict``
    moves weights and optimiser state to their parameters' device anyway.

    Raises :class:`AgnostophobiaError` naming ``path`` for a truncated or foreign file and
    for one that would need arbitrary objects unpickled (nothing from it is executed).
    """
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as exc:  # refused by the weights-only unpickler: nothing ran
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        if found:
            raise AgnostophobiaError(
                f"checkpoint {path} holds objects other than tensors, numbers, strings and containers "
                f"({found.group(1)}); refusing to unpickle it, since that could run code from the file") from None
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", str(exc))
        raise AgnostophobiaError(f"checkpoint {path} cannot be read (not a checkpoint of tensors, numbers, strings "
                                 f"and containers: {detail.group(1) if detail else 'unpickling refused'})") from None
    except Exception as exc:  # truncated or not a checkpoint at all
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise AgnostophobiaError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {first_line})") from None


def rng_state() -> Dict[str, Any]:
    """Every RNG's state in types ``weights_only`` loading accepts (no numpy arrays, no objects)."""
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)},
             "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore :func:`rng_state`'s output; its tensors must be on the CPU (see :func:`load_checkpoint`)."""
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["pos"],
                         numpy["has_gauss"], numpy["cached_gaussian"]))
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        # a run resumed on a machine with fewer GPUs restores those it has
        for index, cuda_state in enumerate(state["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's random generators (every CUDA device's too), as a run
    does before it builds its network.

    Args:
        seed: any integer; numpy gets it modulo 2**32.

    Examples:
        >>> import torch
        >>> from agnostophobia.training import seed_everything
        >>> seed_everything(0)
        >>> first = torch.rand(2)
        >>> seed_everything(0)
        >>> bool((torch.rand(2) == first).all())
        True
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
