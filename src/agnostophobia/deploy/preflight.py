"""What a command on a trained run checks before it imports torch or loads a model or an image:
the run folder, the approaches asked for, the inputs named. A typo is refused in well under a
second (``benchmarks/bench_refusals.py``) instead of after the libraries and the model are
loaded; the full checks of the records follow as before. Imports only the standard library,
YAML and the run's paths."""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import List, Optional, Sequence

import yaml

from agnostophobia._atomic import check_replaceable
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import SEED_FOLDER, RunDir


def existing_run(run) -> RunDir:
    """The run folder exists, is a folder, and holds a run's config (one line otherwise)."""
    run = Path(run)
    if not run.exists():
        raise AgnostophobiaError(f"run directory {run} does not exist")
    if not run.is_dir():
        raise AgnostophobiaError(f"{run}: is a file, not a run directory (the folder train or reproduce wrote)")
    found = RunDir(run)
    if not found.config.is_file():
        raise AgnostophobiaError(f"{run}: not a run of this project (it holds no {found.config.name}); give the "
                                 f"folder that train or reproduce wrote")
    return found


def trained_approaches(run: RunDir) -> List[str]:
    """The approaches the run holds a model folder of (any seed), by their folder names."""
    return sorted({model.name for seed in run.root.iterdir() if SEED_FOLDER.fullmatch(seed.name) and seed.is_dir()
                   for model in seed.iterdir() if model.is_dir()})


def configured_approaches(run: RunDir) -> List[str]:
    """The approaches the run's config lists (none where it cannot be read: the full check says why)."""
    try:
        config = yaml.safe_load(run.config.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return []
    listed = config.get("approaches") if isinstance(config, dict) else None
    return [name for name in listed if isinstance(name, str)] if isinstance(listed, list) else []


def check_approaches(run: RunDir, asked: Optional[Sequence[str]]) -> None:
    """Each approach asked for is one the run trained (with the closest names when not)."""
    if not asked:
        return
    known = sorted(set(trained_approaches(run)) | set(configured_approaches(run)))
    for name in [asked] if isinstance(asked, str) else asked:
        if known and name not in known:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise AgnostophobiaError(f"{run.root}: no trained approach {name!r}; trained: {', '.join(known)}{hint}")


def check_inputs(inputs: Sequence) -> None:
    """Each input named on the command line exists (an image, a folder or an .npz)."""
    for spec in inputs:
        if not Path(spec).exists():
            raise AgnostophobiaError(f"{spec}: no such file or folder")


def before_loading(args) -> None:
    """The checks of a command on a run that need no model and no image (``args``: the parsed
    command line of compare, calibrate, predict or export)."""
    run = existing_run(args.run)
    check_approaches(run, getattr(args, "approach", None))
    if getattr(args, "out", None) is not None:  # a FIFO or device named as the output: before the inputs
        check_replaceable(args.out, "--out")
    check_inputs(getattr(args, "inputs", None) or ())
