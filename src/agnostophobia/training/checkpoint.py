"""Atomic checkpoints: nothing the user has is lost when a run is killed mid-write."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Dict

import numpy as np
import torch

from agnostophobia._atomic import atomic_write


def save_checkpoint(path: Path, state: Dict[str, Any]) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_checkpoint(path: Path, map_location="cpu") -> Dict[str, Any]:
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as exc:  # truncated or foreign file
        raise ValueError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc})") from None


def rng_state() -> Dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
