"""``RUN/run_meta.json``: what the command that trained a run recorded (written by the run
record, ``experiments.run_record.write_run_record``), and the versions of the libraries a run
is made with."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from agnostophobia.rundir import RunDir
from agnostophobia.training.records._common import _fail, _is_strings, _optional_json
from agnostophobia.training.records.run_marker import check_marker

#: The libraries whose versions a run records; a run re-read under others is named, not refused.
VERSIONED = ("torch", "torchvision", "numpy")


def read_run_meta(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/run_meta.json``, checked, or None where the training never finished a command."""
    path = RunDir(run_dir).run_meta
    meta = _optional_json(path)
    if meta is None:
        return None
    expected = {"experiment": str, "budget": (str, type(None)), "seeds": int, "approaches": list,
                "train_config": dict, "class_names": list, "versions": dict}
    for key, kind in expected.items():
        if key in meta and (not isinstance(meta[key], kind) or isinstance(meta[key], bool)):
            _fail(path, f"wrong type {type(meta[key]).__name__}", key)
    check_marker(meta, path)
    for key in ("class_names", "approaches"):
        if not _is_strings(meta.get(key, [])):
            _fail(path, "must be a list of strings", key)
    for name, version in meta.get("versions", {}).items():
        if not isinstance(version, str):
            _fail(path, "must be a version string", f"versions.{name}")
    return meta


def library_versions() -> Dict[str, str]:
    """The versions of the libraries a run is made with, recorded in ``run_meta.json``."""
    import torch
    import torchvision

    return {"torch": torch.__version__, "torchvision": torchvision.__version__, "numpy": np.__version__}


def code_version(source: Path = Path(__file__)) -> str:
    """The code a run is made with, as its record names it: the package's version, and where the
    package runs from a git checkout that tracks it (``pip install -e``), the commit, with
    ``+changes`` where tracked files differ from it: ``agnostophobia 0.9.0, commit 2718196a1b2c``. An
    installed copy, or a machine without git, gives the version alone (a wheel's code lies in no
    repository, and a venv inside one must not borrow its commit: the file must be tracked there)."""
    from agnostophobia import __version__

    def git(*args: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", "-C", str(source.parent), *args], capture_output=True, text=True,
                                  timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    said = f"agnostophobia {__version__}"
    if git("ls-files", "--error-unmatch", source.name) is None:
        return said
    commit = git("rev-parse", "--short=12", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no")
    return said + (f", commit {commit}{'+changes' if changes else ''}" if commit else "")


def version_mismatch(run_dir, meta: Optional[Dict]) -> Optional[str]:
    """One line naming the libraries whose version differs from the run's, or None. A run
    recorded before versions were (no ``versions``) gets None: nothing is known to differ."""
    recorded = (meta or {}).get("versions") or {}
    now = library_versions()
    differ = [f"{name} {recorded[name]} (now {now[name]})" for name in VERSIONED
              if name in recorded and recorded[name] != now[name]]
    if not differ:
        return None
    return f"{run_dir} was made with {', '.join(differ)}; results may differ slightly from the run's own"
