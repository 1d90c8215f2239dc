"""The run options that take ``auto`` -- ``concurrent_runs`` (auto or N) and ``batched_seeds``
(auto, true or false) -- and their checks, for a config's keys and the command line's flags alike.

It imports nothing heavy: the command line checks ``--concurrent-runs`` and ``--batched-seeds``
while it parses, and an argument error must answer without loading torch.
"""
from __future__ import annotations

from agnostophobia.errors import ConfigError

AUTO = "auto"


def check_concurrent_runs(value, where: str = "config key 'concurrent_runs'"):
    """``auto`` or an integer >= 1."""
    if value == AUTO or isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and value.isdigit() and int(value) >= 1:
        return int(value)
    raise ConfigError(f"{where}: must be 'auto' or an integer >= 1, got {value!r}")


def check_batched_seeds(value, where: str = "config key 'batched_seeds'"):
    """``auto``, ``true`` or ``false`` (YAML booleans, or those words from the command line)."""
    if value == AUTO or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{where}: must be auto, true or false, got {value!r}")
