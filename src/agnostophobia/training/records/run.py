"""The whole run: :func:`check_run` reads every record a command will read, before the command
writes anything, and checks that they agree (:func:`check_agreement`); :func:`is_run`, whether a
folder is a run of this project at all, by what its records say, and :func:`check_run_folder`,
whether a training may write into it."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning
from agnostophobia.losses import LOSSES
from agnostophobia.rundir import FIGURES, LOCK, RECORDS, SPLIT, ModelDir, RecordError, RunDir
from agnostophobia.training.fine_tune import trained_schedule
from agnostophobia.training.records._common import _ABSENT, _fail
from agnostophobia.training.records.calibration import read_calibration
from agnostophobia.training.records.detector_caches import read_detector_scores
from agnostophobia.training.records.last_layer import read_last_layer
from agnostophobia.training.records.network_state import read_trained_checkpoint
from agnostophobia.training.records.outputs import read_outputs
from agnostophobia.training.records.run_config import read_run_config, trained_differently
from agnostophobia.training.records.run_marker import RUN_ID_KEY, marked_run_id
from agnostophobia.training.records.run_meta import read_run_meta, version_mismatch
from agnostophobia.training.records.tuned_settings import read_tuned_settings


@dataclass
class RunRecords:
    """Everything :func:`check_run` read and checked; ``tuned`` is ``detector_settings.json``
    (:func:`read_tuned_settings`; None: never tuned), whose values the layer above checks against
    each detector's declaration (``detectors.stored.run_settings``)."""

    run_dir: Path
    config: Dict[str, Any]
    meta: Optional[Dict[str, Any]]
    models: List[Tuple[int, str, ModelDir]]
    calibration: Optional[Dict[str, Any]] = None
    checkpoint_configs: Dict[ModelDir, Dict[str, Any]] = field(default_factory=dict)
    tuned: Optional[Dict[str, Any]] = None

    def warn_versions(self, stacklevel: int = 1) -> None:
        """An :class:`~agnostophobia.errors.AgnostophobiaWarning` naming the libraries whose version
        differs from the run's (:func:`version_mismatch`); nothing where none does. ``stacklevel``
        counts from the caller, as :func:`warnings.warn`'s does."""
        mismatch = version_mismatch(self.run_dir, self.meta)
        if mismatch:
            warnings.warn(mismatch, AgnostophobiaWarning, stacklevel=stacklevel + 1)


def run_models(run_dir, command: Optional[str] = None) -> List[Tuple[int, str, ModelDir]]:
    """``(seed, approach, model)`` of every trained model of ``run_dir`` (:meth:`RunDir.models`);
    a one-line :class:`AgnostophobiaError` where the folder is missing or holds none (``command``:
    what then cannot be done, for the message)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AgnostophobiaError(f"run directory {run_dir} does not exist")
    models = RunDir(run_dir).models()
    if not models:
        nothing = f", nothing to {command}" if command else ""
        raise AgnostophobiaError(f"{run_dir} holds no trained run (seed*/<approach>/outputs.npz){nothing}; "
                                 f"train one with `agnostophobia reproduce` or `agnostophobia train`")
    return models


def check_run(run_dir, command: str = "evaluate") -> RunRecords:
    """Read and check every record of ``run_dir`` that ``evaluate``, ``plot``, ``calibrate`` and
    ``predict`` read, and that they agree; a :class:`RecordError` (one line) otherwise.

    Call it before a command writes anything into the run: a refused run stays as it was."""
    run_dir = Path(run_dir)
    models = run_models(run_dir, command)
    config = read_run_config(run_dir)
    meta = read_run_meta(run_dir)
    records = RunRecords(run_dir, config, meta, models, read_calibration(run_dir), tuned=read_tuned_settings(run_dir))
    for seed, approach, model in models:
        widths = {}
        for path in (model.outputs, model.fit_outputs, model.val_outputs):
            if path.exists() or path == model.outputs:
                for arrays in read_outputs(path).values():
                    _same_widths(path, arrays, widths)
        if model.scores.exists():
            read_detector_scores(model.scores)
        if model.last_layer.exists():
            read_last_layer(model.last_layer, widths.get("features"))
        if model.best.exists():  # its weights too: a command that loads them finds them sound
            records.checkpoint_configs[model] = read_trained_checkpoint(model)[0]
    check_agreement(records)
    return records


def _same_widths(path, arrays, widths) -> None:
    for name in ("logits", "features"):
        if widths.setdefault(name, arrays[name].shape[1]) != arrays[name].shape[1]:
            _fail(path, f"{arrays[name].shape[1]} columns, but the model's other stored outputs have "
                        f"{widths[name]}", name)


#: What run_meta.json and config.yaml both record, as (key in run_meta.json, key in config.yaml),
#: beside every key of run_meta.json's ``train_config``: every run record has held them all.
RECORDED_IN_BOTH = (("experiment", "name"), ("budget", "budget"), ("approaches", "approaches"), ("seeds", "seeds"))


def check_agreement(records: RunRecords) -> None:
    """The records of one run must agree; the rule:

    * ``run_meta.json`` (when present) and ``config.yaml`` were written by the same command:
      experiment name, budget, approaches, seeds, run id (where run_meta.json has one) and every
      key of ``train_config`` equal;
    * each model's checkpoint (``best.pt``) was trained as its folder says (``seed<N>/<approach>``)
      with the run's config: every key that changes what is trained equal to ``config.yaml``
      (all but :data:`RESUME_FREE_KEYS`; a key missing from ``config.yaml`` disagrees too);
    * the approach of every model folder is a registered approach.
    """
    config, meta = records.config, records.meta
    config_path = RunDir(records.run_dir).config
    if meta is not None:
        meta_path = RunDir(records.run_dir).run_meta
        pairs = [*RECORDED_IN_BOTH, (RUN_ID_KEY, RUN_ID_KEY)]
        pairs += [(f"train_config.{key}", key) for key in meta.get("train_config", {})]
        for meta_key, config_key in pairs:
            recorded = _lookup(meta, meta_key)
            if recorded is _ABSENT:
                continue
            if config.get(config_key, _ABSENT) != recorded:
                raise RecordError(f"{meta_path} and {config_path} disagree: {meta_key} is {recorded!r} in one and "
                                  f"{_shown(config.get(config_key, _ABSENT))} in the other; the run's records were "
                                  f"changed or the command that made it did not finish (run it again)")
    for seed, approach, model in records.models:
        if approach not in LOSSES:
            _fail(model, f"{approach!r} is not a registered approach")
        saved = records.checkpoint_configs.get(model)
        if saved is None:
            continue
        best = model.best
        if (saved["approach"], saved["seed"]) != (approach, seed):
            _fail(best, f"was trained as {RunDir.run_key(saved['seed'], saved['approach'])} but lies in {model}")
        schedule = trained_schedule(model, approach, config)  # a fine-tune's recipe as recorded
        difference = trained_differently(saved, {**config, **schedule}, one_model=False)
        if difference:
            key, value, other = difference
            raise RecordError(f"{best} and {config_path} disagree: the model was trained with {key}={value!r}, "
                              f"the run's config says {_shown(other)}")


def _lookup(mapping: Dict, dotted: str):
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _shown(value) -> str:
    return "missing" if value is _ABSENT else repr(value)


def is_run(run_dir) -> bool:
    """Whether ``run_dir`` holds a run of this project, by what its records say, never by the
    names of its files (a folder of the user's may hold a ``.lock``, a ``run_meta.json`` or a
    ``seed0/`` of its own):

    * its ``config.yaml`` carries the project's marker (:func:`~agnostophobia.training.records.run_marker.run_marker`,
      written before anything is trained), and its ``run_meta.json``, where there is one, is the
      record of the same run (the same id), or an old run's record (no marker) of a run being
      continued; a training killed before it wrote its ``run_meta.json`` is a run;
    * or it is an old run, made before the marker: its ``run_meta.json`` records what
      :func:`check_agreement` compares, and its ``config.yaml`` agrees with it.

    A record that cannot be read as one of this project's (the user's own ``config.yaml``) is no run."""
    try:
        config = read_run_config(run_dir, required=False)
        meta = read_run_meta(run_dir)
    except RecordError:
        return False
    run_id = marked_run_id(config)
    if meta is None:
        return run_id is not None  # a training in progress, or killed before its run_meta.json
    if marked_run_id(meta) is not None:
        return marked_run_id(meta) == run_id
    if not _records_the_agreement(meta):
        return False  # agreeing on nothing would prove nothing: a run_meta.json of the user's
    if run_id is not None:
        return True  # an old run being continued: its config.yaml is new, its run_meta.json comes at the end
    try:
        check_agreement(RunRecords(Path(run_dir), config, meta, models=[]))
    except RecordError:
        return False
    return True


def _records_the_agreement(meta: Dict[str, Any]) -> bool:
    """Whether a run_meta.json holds every key :func:`check_agreement` compares, as every run
    record of this project has since the first."""
    return all(meta_key in meta for meta_key, _ in RECORDED_IN_BOTH) and bool(meta.get("train_config"))


def check_run_folder(run_dir, option: str = "--out") -> None:
    """A training writes only into a new or empty folder or into a run of this project
    (:func:`is_run`): any other folder (``train --out .``, a folder of the user's files, even one
    that also holds a ``.lock``, a ``run_meta.json`` or a ``seed0/``) is refused in one line naming
    a file the run would have replaced, or one it holds, before anything is written. A folder
    holding nothing but an empty ``.lock`` counts as empty: a training killed before it wrote
    its ``config.yaml`` left it, and it holds nothing to lose."""
    root = Path(run_dir)
    if not os.path.lexists(root):
        return
    if not root.is_dir():
        raise AgnostophobiaError(f"{option} {root}: is a file, not a folder; choose a new or empty folder")
    entries = sorted(root.iterdir())
    if not entries or _only_an_empty_lock(root, entries) or is_run(root):
        return
    replaced = [p for p in (root / name for name in (*RECORDS, SPLIT, FIGURES)) if os.path.lexists(p)]
    if (root / SPLIT).is_dir():
        replaced = sorted((root / SPLIT).iterdir())[:1] or replaced
    shown = f"would replace {replaced[0]}" if replaced else f"holds {entries[0]}"
    raise AgnostophobiaError(f"{option} {root}: is a folder of other files, not a run of this project "
                             f"(it {shown}); train into a new or empty folder, or into a run to continue")


def _only_an_empty_lock(root: Path, entries: List[Path]) -> bool:
    lock = root / LOCK
    return entries == [lock] and lock.is_file() and not lock.is_symlink() and lock.stat().st_size == 0
