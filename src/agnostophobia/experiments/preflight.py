"""What a training command (``train``, ``reproduce``) checks before it imports
torch or reads an image: the experiment file, and the folders a protocol from files names (its
root and every class folder, with "did you mean"). A typo is refused in well under a second
(``benchmarks/bench_refusals.py``); the full checks of the config follow as before. Imports
YAML and the protocol mapping's declarations only."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import yaml

from agnostophobia._reading import check_regular_file
from agnostophobia.data.file_protocols.roots import folder_problems
from agnostophobia.data.file_protocols.spec import is_file_protocol, parse_file_protocol, resolve_paths
from agnostophobia.errors import AgnostophobiaError, ConfigError


def experiment_file(name) -> Optional[Path]:
    """The experiment YAML that ``name`` names, where it is a file path (a shipped config's name:
    None, checked by the full parse)."""
    if not name:
        return None
    path = Path(name)
    if path.suffix.lower() not in (".yaml", ".yml") and not path.exists():
        return None
    if not os.path.lexists(path):
        raise AgnostophobiaError(f"{path}: no such experiment file")
    check_regular_file(path, error=ConfigError)  # a folder, FIFO or device: named, never opened
    return path


def check_protocol_folders(path: Path) -> None:
    """The root and class folders of a ``protocol:`` mapping in the experiment file ``path``."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # the full parse names what is wrong
    protocol = config.get("protocol") if isinstance(config, dict) else None
    if not is_file_protocol(protocol):
        return
    spec = parse_file_protocol(resolve_paths(protocol, path.parent))
    problems = folder_problems(spec)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigError(f"{path}: {problems[0]}{more}")


def before_loading(args) -> None:
    """The checks of a training command that need no library and no image."""
    path = experiment_file(getattr(args, "config", None) or getattr(args, "experiment", None) or "")
    if path is not None:
        check_protocol_folders(path)
