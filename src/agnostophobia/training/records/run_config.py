"""A run's configuration: ``RUN/config.yaml`` and the training config inside a model's checkpoint
(``best.pt``, ``last.pt``), checked by the one config parser, and the rule for which keys may
differ between them (:func:`trained_differently`: for a resume, and for the run's agreement).

Their writers are above this reader: ``config.yaml`` is the run record's
(``experiments.run_record.write_config``), a checkpoint the trainer's
(``training.checkpoint.save_checkpoint``, read back whole by ``load_checkpoint``)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from agnostophobia.data.preprocess import OURS
from agnostophobia.data.streaming import CROP_PADDING
from agnostophobia.errors import ConfigError
from agnostophobia.rundir import RecordError, RunDir
from agnostophobia.settings import field_settings
from agnostophobia.training.config import TrainConfig, apply_overrides, check_approaches, check_seeds, read_yaml
from agnostophobia.training.experiment_keys import check_first_seed
from agnostophobia.training.loss_keys import comparable_config, with_loss_keys_moved
from agnostophobia.training.records._common import _ABSENT, _fail
from agnostophobia.training.records.run_marker import MARKER_KEYS, check_marker

# Config keys that may differ between a model's checkpoint and the run's config.yaml: how and
# where the run was computed, and the detectors' settings (evaluation, not training; a resumed
# run may change them): the keys TrainConfig declares resumable. Every other key changes what was trained.
RESUME_FREE_KEYS = frozenset(key for key, declared in field_settings(TrainConfig).items() if declared.resumable)
# Keys that change results and came after runs were trained: a checkpoint without one was trained
# with this value.
# (crop-flip's padding was CROP_PADDING; a run from before onecycle never read warmup_fraction)
# (a run from before fine_tune_epochs: its recipes' epochs; before keep_checkpoint and
# crop_padding_mode: their defaults, the lowest validation loss and zero padding)
# (a run from before protocol_split trained on a protocol of one split: null)
VALUE_WHEN_ABSENT = {"preprocessing": OURS, "crop_padding": CROP_PADDING, "fine_tune_epochs": None,
                     "protocol_split": None,
                     **{key: field_settings(TrainConfig)[key].default
                        for key in ("warmup_fraction", "keep_checkpoint", "crop_padding_mode")}}
# Keys of a model's checkpoint config that belong to that model, not to the run.
PER_MODEL_KEYS = {"approach", "seed"}


def trained_differently(saved: Dict[str, Any], current: Dict[str, Any],
                        one_model: bool = True) -> Optional[Tuple[str, Any, Any]]:
    """The first key that changes what was trained on which a checkpoint's config (``saved``) and
    another config (``current``: config.yaml, or the config a run resumes with) differ, as
    ``(key, saved value, current value)``; None when they agree. Keys free to change on a resume
    are skipped, and the keys of one model (approach, seed) unless ``one_model`` (a resume
    continues one model: they must agree too); both sides are compared in one form (loss settings at
    home, defaults left out); a key older records lack has its :data:`VALUE_WHEN_ABSENT`."""
    saved, current = comparable_config(saved), comparable_config(current)
    for key, value in {**VALUE_WHEN_ABSENT, **saved}.items():
        if key in RESUME_FREE_KEYS or key in PER_MODEL_KEYS and not one_model:
            continue
        other = current.get(key, VALUE_WHEN_ABSENT.get(key, _ABSENT))
        if other != value:
            return key, value, other
    return None


def parse_run_config(data, path) -> Dict[str, Any]:
    """A run's resolved config (``config.yaml``, or the config inside a checkpoint) checked by the
    one config parser (:mod:`agnostophobia.training.config`); returns the mapping as written."""
    if data is None:
        _fail(path, "is empty; it should hold the run's resolved configuration")
    if not isinstance(data, dict):
        _fail(path, f"top level must be a mapping of config keys, got {type(data).__name__}")
    values = dict(data)
    check_marker(values, path)
    for key in MARKER_KEYS:  # the run's, not a training setting
        values.pop(key, None)
    try:
        for key, check in (("approaches", check_approaches), ("seeds", check_seeds)):
            if key in values:
                check(values.pop(key))
        if "first_seed" in values:
            check_first_seed(values.pop("first_seed"), 1)
        budget = values.pop("budget", None)
        if budget is not None and not isinstance(budget, str):
            raise ConfigError(f"config key 'budget': must be a budget name or null, got {budget!r}")
        apply_overrides(TrainConfig(), with_loss_keys_moved(values))
    except ConfigError as exc:
        raise RecordError(f"{path}: {exc}") from None
    return data


def read_run_config(run_dir, required: bool = True) -> Dict[str, Any]:
    """``RUN/config.yaml``, checked; {} for a missing file only when not ``required``."""
    path = RunDir(run_dir).config
    if not path.is_file():
        if required:
            _fail(path, "missing; every run written by train or reproduce has one (its configuration)")
        return {}
    try:
        data = read_yaml(path)
    except ConfigError as exc:
        raise RecordError(str(exc)) from None
    return parse_run_config(data, path)


def read_checkpoint_config(path) -> Dict[str, Any]:
    """The training config stored inside a checkpoint, checked like config.yaml."""
    from agnostophobia.training.checkpoint import load_checkpoint

    return checkpoint_config(load_checkpoint(path), path)


def checkpoint_config(state, path) -> Dict[str, Any]:
    """The config of a loaded checkpoint ``state`` (read from ``path``), checked."""
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
        _fail(path, "holds no training config (key 'config')")
    for key in PER_MODEL_KEYS:
        if key not in state["config"]:
            _fail(path, "missing", f"config.{key}")
    return parse_run_config(state["config"], f"{path} (its config)")
