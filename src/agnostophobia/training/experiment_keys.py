"""The experiment-level keys of a config (``approaches``, ``seeds``, ``first_seed``, ``ablation``),
checked as :mod:`agnostophobia.training.config` and a run's recorded ``config.yaml`` read them."""

from __future__ import annotations

from typing import Any, Dict, List

from agnostophobia._validation import INT64_MAX
from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES


def is_int(value) -> bool:
    """An integer that is not a bool: bool is a subclass of int in Python, and `seeds: true` must
    not pass as 1."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_approaches(approaches) -> List[str]:
    if not isinstance(approaches, list) or not approaches:
        raise ConfigError(f"config key 'approaches': must be a non-empty list, got {approaches!r}")
    for name in approaches:
        if not isinstance(name, str) or name not in LOSSES:
            raise ConfigError(f"config key 'approaches': unknown approach {name!r}; "
                              f"known: {tuple(LOSSES.registered())}")
    repeated = next((name for i, name in enumerate(approaches) if name in approaches[:i]), None)
    if repeated is not None:  # two runs would write one model folder
        raise ConfigError(f"config key 'approaches': {repeated!r} is listed twice")
    return list(approaches)


#: The most seeds one run trains: each is a whole training, and every command loops over them
#: (2**63 seeds, each a valid seed number, looped for ever before writing anything).
MAX_SEEDS = 10_000


def check_seeds(seeds, where: str = "config key 'seeds'", first_seed: int = 0) -> int:
    """How many seeds a run trains, from ``first_seed``: at least 1, at most :data:`MAX_SEEDS`, the
    last of them a valid seed."""
    if not is_int(seeds) or seeds < 1:
        raise ConfigError(f"{where}: must be an integer >= 1 (0 seeds would train nothing), got {seeds!r}")
    if seeds > MAX_SEEDS:  # seeds first_seed..first_seed+seeds-1 are trained, each a whole training
        raise ConfigError(f"{where}: at most {MAX_SEEDS:,} seeds (each is a whole training), got {seeds!r}")
    _check_last_seed(first_seed, seeds, where)
    return seeds


def check_first_seed(first_seed, seeds: int, where: str = "config key 'first_seed'") -> int:
    """The first training seed: an integer from 0 such that every seed trained is a valid seed
    (a second run from ``first_seed`` 5 trains networks independent of a first run's seeds 0-4)."""
    if not is_int(first_seed) or first_seed < 0:
        raise ConfigError(f"{where}: must be an integer >= 0, got {first_seed!r}")
    _check_last_seed(first_seed, seeds, where)
    return first_seed


def _check_last_seed(first_seed: int, seeds: int, where: str) -> None:
    # seeds first_seed..first_seed+seeds-1 are trained: the last must still be a valid seed
    if first_seed + seeds - 1 > INT64_MAX:
        raise ConfigError(f"{where}: {seeds} seeds from first_seed {first_seed} pass the largest seed, 2**63-1")


def check_ablation(steps, budgets: Dict[str, Any]) -> List[Dict[str, str]]:
    """The ``ablation:`` list: ``{budget: NAME, adds: TEXT}`` steps, each naming a defined budget once."""
    where = "config key 'ablation'"
    if not isinstance(steps, list):
        raise ConfigError(f"{where}: must be a list of {{budget: NAME, adds: TEXT}}, got {type(steps).__name__}")
    seen = set()
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or set(step) != {"budget", "adds"} or not all(
                isinstance(v, str) and v for v in step.values()):
            raise ConfigError(f"{where}[{i}]: must be {{budget: NAME, adds: TEXT}} (two non-empty strings), "
                              f"got {step!r}")
        if step["budget"] not in budgets:
            raise ConfigError(f"{where}[{i}]: budget {step['budget']!r} is not defined under 'budgets'")
        if step["budget"] in seen:
            raise ConfigError(f"{where}[{i}]: budget {step['budget']!r} is listed twice")
        seen.add(step["budget"])
    return [dict(step) for step in steps]
