"""The one validating reader of a run's records: every command reads them through here.

A run directory's layout, and the path of each record, is :class:`agnostophobia.rundir.RunDir`'s.

Each reader checks what it reads (a readable file, the expected keys, types, shapes, finite
numbers) and raises :class:`RecordError`, one line naming the file and the key path, instead
of a traceback from deep inside or a value silently replaced by a default.

:func:`check_run` reads every record a command will read, before the command writes
anything, and checks that they agree (:func:`check_agreement`): a run whose records
disagree is refused and nothing in it changes.
"""
from __future__ import annotations

import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from agnostophobia._validation import FPR_RULE, is_rate
from agnostophobia.data.preprocess import OURS
from agnostophobia.data.streaming import CROP_PADDING
from agnostophobia._log import log_info
from agnostophobia._reading import check_regular_file, read_input_text
from agnostophobia.data.fingerprint import changed_source
from agnostophobia.errors import AgnostophobiaError, ConfigError, DataError
from agnostophobia.losses import LOSSES
from agnostophobia.training.fine_tune import recipe_schedule
from agnostophobia.rundir import (DATA_NOTES, DATA_SOURCES, FIT_OUTPUTS, OUTPUTS, PREPROCESSING_NOTES, RUN_KEY,
                                  VAL_OUTPUTS, ModelDir, RecordError, RunDir, check_model_file)
from agnostophobia.settings import field_settings
from agnostophobia.training.precision import PRECISIONS
from agnostophobia.training.config import (TrainConfig, apply_overrides, check_approaches, check_seeds,
                                           comparable_config, read_yaml, with_loss_keys_moved)

FIELDS = ("logits", "features", "labels")
#: The one split each stored-outputs file other than outputs.npz holds.
SPLIT_OF = {FIT_OUTPUTS: "train", VAL_OUTPUTS: "val"}
#: The libraries whose versions a run records; a run re-read under others is named, not refused.
VERSIONED = ("torch", "torchvision", "numpy")

# Config keys that may differ between a model's checkpoint and the run's config.yaml: how and
# where the run was computed, and the detectors' settings (evaluation, not training; a resumed
# run may change them): the keys TrainConfig declares resumable. Every other key changes what was trained.
RESUME_FREE_KEYS = frozenset(key for key, declared in field_settings(TrainConfig).items() if declared.resumable)
# Keys that change results and came after runs were trained: a checkpoint without one was trained
# with this value.
# (crop-flip's padding was CROP_PADDING; a run from before onecycle never read warmup_fraction)
VALUE_WHEN_ABSENT = {"preprocessing": OURS, "crop_padding": CROP_PADDING,
                     "warmup_fraction": field_settings(TrainConfig)["warmup_fraction"].default}
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


def _fail(path, what: str, key: Optional[str] = None):
    raise RecordError(f"{path}: {key + ': ' if key else ''}{what}")


# ------------------------------------------------------------------------------- config
def parse_run_config(data, path) -> Dict[str, Any]:
    """A run's resolved config (``config.yaml``, or the config inside a checkpoint) checked by the
    one config parser (:mod:`agnostophobia.training.config`); returns the mapping as written."""
    if data is None:
        _fail(path, "is empty; it should hold the run's resolved configuration")
    if not isinstance(data, dict):
        _fail(path, f"top level must be a mapping of config keys, got {type(data).__name__}")
    values = dict(data)
    try:
        for key, check in (("approaches", check_approaches), ("seeds", check_seeds)):
            if key in values:
                check(values.pop(key))
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


# ------------------------------------------------------------------------------ run_meta
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


# ------------------------------------------------------------------------- stored outputs
def _open_npz(path):
    if os.path.lexists(path):  # a FIFO in a model file's place blocked calibrate, predict and evaluate forever
        try:
            check_regular_file(path, error=RecordError)
        except RecordError as exc:
            _fail(path, str(exc).removeprefix(f"{path}: "))
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        _fail(path, "missing")
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        _fail(path, f"not a readable npz archive, truncated or damaged ({type(exc).__name__}: "
                    f"{(str(exc).splitlines() or [''])[0]})")
    if not isinstance(data, np.lib.npyio.NpzFile):
        _fail(path, "is a single array, not an npz archive")
    return data


def _array(data, path, key: str) -> np.ndarray:
    try:
        return data[key]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
        _fail(path, f"cannot be read, truncated or damaged ({type(exc).__name__})", key)


def read_outputs(path) -> Dict[str, Dict[str, np.ndarray]]:
    """A stored-outputs file (``outputs.npz``, ``fit_outputs.npz``, ``val_outputs.npz``):
    ``{split: {logits, features, labels}}``, checked: every split has all three arrays,
    float logits (N, C) and features (N, D) with finite values, integer labels (N,) below C,
    the same C and D in every split; ``outputs.npz`` holds the ``known`` split, the other two
    their one split, whose labels are training knowns (fit) or knowns and -1 (val)."""
    path = Path(path)
    check_model_file(path)  # not another model's file through a link
    with _open_npz(path) as data:
        result: Dict[str, Dict[str, np.ndarray]] = {}
        for key in data.files:
            split, sep, name = key.partition("__")
            if not sep or name not in FIELDS or not split:
                _fail(path, f"unexpected array (expected <split>__{{{','.join(FIELDS)}}})", key)
            result.setdefault(split, {})[name] = _array(data, path, key)
    expected = SPLIT_OF.get(path.name)
    # val_outputs.npz may add the same split computed in another arithmetic ("val_fp32", the deployed one)
    allowed = {expected} | ({f"val_{p}" for p in PRECISIONS if p != "auto"} if expected == "val" else set())
    # (a run calibrated before val_outputs.npz existed stores only the deployed arithmetic's split)
    required_missing = expected != "val" and expected not in result
    if expected is not None and (not result or not set(result) <= allowed or required_missing):
        _fail(path, f"must hold the split {expected!r}{' or val_<precision>' if expected == 'val' else ' alone'}, "
                    f"holds {sorted(result)}")
    if path.name == OUTPUTS and "known" not in result:
        _fail(path, "missing", "known (the known test set)")
    widths = {}
    for split, arrays in result.items():
        _check_split(path, split, arrays, widths)
    if expected == "train" and (result["train"]["labels"] < 0).any():
        _fail(path, "training knowns only: negative (unknown) labels found", "train__labels")
    return result


def _check_split(path, split: str, arrays: Dict[str, np.ndarray], widths: Dict[str, int]) -> None:
    for name in FIELDS:
        if name not in arrays:
            _fail(path, "missing", f"{split}__{name}")
    n = len(arrays["labels"])
    for name in ("logits", "features"):
        value = arrays[name]
        key = f"{split}__{name}"
        if value.ndim != 2 or not np.issubdtype(value.dtype, np.floating):
            _fail(path, f"must be a float array (N, width), got {value.dtype} {value.shape}", key)
        if len(value) != n:
            _fail(path, f"{len(value)} rows but {n} labels", key)
        if widths.setdefault(name, value.shape[1]) != value.shape[1]:
            _fail(path, f"{value.shape[1]} columns, other splits have {widths[name]}", key)
        if not np.isfinite(value).all():
            _fail(path, f"{int((~np.isfinite(value)).sum())} non-finite value(s)", key)
    labels = arrays["labels"]
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        _fail(path, f"must be integer labels (N,), got {labels.dtype} {labels.shape}", f"{split}__labels")
    if n and labels.max() >= arrays["logits"].shape[1]:
        _fail(path, f"label {int(labels.max())} but only {arrays['logits'].shape[1]} logit columns",
              f"{split}__labels")


def read_fitted_detectors(path) -> Dict[str, Dict[str, Any]]:
    """``fitted_detectors.npz``, checked: ``{entry: {"meta": {detector, settings, fit, digest},
    "state": {attribute: array}}}`` from arrays named ``<entry>__meta`` (a JSON mapping) and
    ``<entry>__<attribute>``. Whether an entry's state is whole and belongs to its detector is
    checked where it is restored (``detectors.stored``)."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    entries: Dict[str, Dict[str, Any]] = {}
    for key, value in arrays.items():
        entry, sep, name = key.partition("__")
        if not sep or not entry or not name:
            _fail(path, "unexpected array (expected <entry>__meta or <entry>__<attribute>)", key)
        if value.dtype == object:
            _fail(path, "must be a numeric array", key)
        slot = entries.setdefault(entry, {"meta": None, "state": {}})
        if name == "meta":
            try:
                meta = json.loads(str(value))
            except ValueError:
                meta = None
            if not isinstance(meta, dict) or not isinstance(meta.get("detector"), str) \
                    or not isinstance(meta.get("settings"), dict) or not isinstance(meta.get("fit"), str) \
                    or not isinstance(meta.get("digest"), str):
                _fail(path, "must be a JSON mapping with detector, settings, fit and digest", key)
            slot["meta"] = meta
        else:
            slot["state"][name] = value
    for entry, slot in entries.items():
        if slot["meta"] is None:
            _fail(path, "missing", f"{entry}__meta")
    return entries


def read_last_layer(path, feature_dim: Optional[int] = None) -> Dict[str, np.ndarray]:
    """``last_layer.npz``, checked: the logit layer on F as float64 ``{"weight": (K, D)}`` plus
    ``"bias": (K,)`` where the layer has one, finite; ``feature_dim``: the D the model's stored
    features have (a layer of another width belongs to another model)."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    for key in arrays:
        if key not in ("weight", "bias"):
            _fail(path, "unexpected array (expected weight and, where the layer has one, bias)", key)
    weight = arrays.get("weight")
    if weight is None:
        _fail(path, "missing", "weight")
    if weight.ndim != 2 or not np.issubdtype(weight.dtype, np.floating) or 0 in weight.shape:
        _fail(path, f"must be a float array (classes, D), got {weight.dtype} {weight.shape}", "weight")
    if feature_dim is not None and weight.shape[1] != feature_dim:
        _fail(path, f"{weight.shape[1]} columns, but the model's features have {feature_dim} dimensions", "weight")
    layer = {"weight": weight.astype(np.float64)}
    if "bias" in arrays:
        bias = arrays["bias"]
        if bias.shape != (weight.shape[0],) or not np.issubdtype(bias.dtype, np.floating):
            _fail(path, f"must be a float array ({weight.shape[0]},), got {bias.dtype} {bias.shape}", "bias")
        layer["bias"] = bias.astype(np.float64)
    for key, value in layer.items():
        if not np.isfinite(value).all():
            _fail(path, f"{int((~np.isfinite(value)).sum())} non-finite value(s)", key)
    return layer


def read_detector_scores(path) -> Dict[str, Any]:
    """``detector_scores.npz``, checked: ``{fingerprint, num_classes, notes, labels: {split},
    top: {detector: {split: (predicted, score)}}}`` with integer predictions below the number
    of classes, finite scores and one label per sample of every split."""
    path = Path(path)
    with _open_npz(path) as data:
        arrays = {key: _array(data, path, key) for key in data.files}
    for key in ("__fingerprint", "__num_classes", "__notes"):
        if key not in arrays:
            _fail(path, "missing", key)
    num_classes = arrays["__num_classes"]
    if num_classes.shape != () or not np.issubdtype(num_classes.dtype, np.integer) or int(num_classes) < 1:
        _fail(path, f"must be one integer >= 1, got {num_classes!r}", "__num_classes")
    try:
        notes = json.loads(str(arrays["__notes"]))
    except ValueError:
        notes = None
    if not isinstance(notes, dict):
        _fail(path, "must be a JSON mapping", "__notes")
    labels, top = {}, {}
    for key, value in arrays.items():
        parts = key.split("__")
        if key.startswith("__"):
            continue
        if parts[0] == "labels" and len(parts) == 2:
            if value.ndim != 1 or not np.issubdtype(value.dtype, np.integer):
                _fail(path, f"must be integer labels (N,), got {value.dtype} {value.shape}", key)
            labels[parts[1]] = value
        elif len(parts) == 3 and parts[2] in ("predicted", "score"):
            top.setdefault(parts[0], {}).setdefault(parts[1], {})[parts[2]] = value
        else:
            _fail(path, "unexpected array", key)
    pairs: Dict[str, Dict[str, Tuple[np.ndarray, np.ndarray]]] = {}
    for detector, splits in top.items():
        for split, got in splits.items():
            key = f"{detector}__{split}"
            if set(got) != {"predicted", "score"} or split not in labels:
                _fail(path, "needs __predicted, __score and labels__<split>", key)
            predicted, score = got["predicted"], got["score"]
            n = len(labels[split])
            if predicted.shape != (n,) or not np.issubdtype(predicted.dtype, np.integer) \
                    or (n and not 0 <= predicted.min() <= predicted.max() < int(num_classes)):
                _fail(path, f"must be {n} class indices below {int(num_classes)}", f"{key}__predicted")
            if score.shape != (n,) or not np.issubdtype(score.dtype, np.floating) or not np.isfinite(score).all():
                _fail(path, f"must be {n} finite float scores", f"{key}__score")
            pairs.setdefault(detector, {})[split] = (predicted, score)
    return {"fingerprint": str(arrays["__fingerprint"]), "num_classes": int(num_classes), "notes": notes,
            "labels": labels, "top": pairs}


# ------------------------------------------------------------------------ calibration.json
def _read_format_1(path: Path) -> Optional[Dict[str, Any]]:
    """A JSON record that is a mapping with ``format: 1`` (calibration, tuned settings); None if absent."""
    data = _optional_json(path)
    if data is None:
        return None
    if data.get("format") != 1 or isinstance(data.get("format"), bool):
        _fail(path, f"must be 1 (the only format there is), got {data.get('format')!r}", "format")
    return data


def read_calibration(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/calibration.json``, checked (None when the run was not calibrated): ``format`` 1,
    ``class_names`` strings, every entry a known approach, a detector name, a seed >= 0, a
    target FPR in (0, 1] and a finite threshold, or null with a reason, and a ``score_scale``
    >= 1 where there is one (an entry written before it was recorded has none: scale 1)."""
    path = RunDir(run_dir).calibration
    data = _read_format_1(path)
    if data is None:
        return None
    names = data.get("class_names")
    if names is not None and not _is_strings(names):
        _fail(path, "must be a list of strings", "class_names")
    entries = data.get("entries")
    if not isinstance(entries, list):
        _fail(path, "must be a list", "entries")
    for i, entry in enumerate(entries):
        _check_entry(path, f"entries[{i}]", entry)
    return data


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value, minimum: int) -> bool:
    """An integer (not a bool) >= ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_strings(value) -> bool:
    """A list of strings."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def read_tuned_settings(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/detector_settings.json`` (written by ``tune-detectors``), checked; None when the
    run's detector settings were never tuned: ``format`` 1, a ``target_fpr`` in (0, 1] and
    ``chosen`` as ``{approach: {detector: {setting: value}}}`` with known approaches and
    scalar values (each value is checked against its detector's declaration by its reader,
    ``detectors.stored.run_tuned_settings``)."""
    path = RunDir(run_dir).tuned_settings
    data = _read_format_1(path)
    if data is None:
        return None
    fpr = data.get("target_fpr")
    if not is_rate(fpr):
        _fail(path, f"{FPR_RULE}, got {fpr!r}", "target_fpr")
    chosen = data.get("chosen")
    if not isinstance(chosen, dict):
        _fail(path, "must be a mapping {approach: {detector: {setting: value}}}", "chosen")
    for approach, detectors in chosen.items():
        if approach not in LOSSES:
            _fail(path, f"unknown approach {approach!r}", f"chosen.{approach}")
        if not isinstance(detectors, dict):
            _fail(path, "must be a mapping {detector: {setting: value}}", f"chosen.{approach}")
        for detector, values in detectors.items():
            where = f"chosen.{approach}.{detector}"
            if not isinstance(values, dict) or not all(
                    isinstance(key, str) and (isinstance(v, (bool, str)) or _is_number(v)) for key, v in values.items()):
                _fail(path, f"must be a mapping of setting to a number, true/false or a name, got {values!r}", where)
    return data


def _check_entry(path, where: str, entry) -> None:
    if not isinstance(entry, dict):
        _fail(path, "must be a mapping", where)
    for key in ("approach", "detector"):
        if not isinstance(entry.get(key), str):
            _fail(path, f"must be a name, got {entry.get(key)!r}", f"{where}.{key}")
    if entry["approach"] not in LOSSES:
        _fail(path, f"unknown approach {entry['approach']!r}", f"{where}.approach")
    seed = entry.get("seed")
    if not _is_count(seed, 0):
        _fail(path, f"must be an integer >= 0, got {seed!r}", f"{where}.seed")
    fpr = entry.get("target_fpr")
    if not is_rate(fpr):
        _fail(path, f"{FPR_RULE}, got {fpr!r}", f"{where}.target_fpr")
    threshold = entry.get("threshold")
    if threshold is None:
        if not isinstance(entry.get("reason"), str):
            _fail(path, "a null threshold needs a reason (a string)", f"{where}.reason")
    elif not _is_number(threshold):
        _fail(path, f"must be a finite number (or null with a reason), got {threshold!r}", f"{where}.threshold")
    for key in ("val_fpr", "val_ccr"):
        if entry.get(key) is not None and not _is_number(entry[key]):
            _fail(path, f"must be a finite number or null, got {entry[key]!r}", f"{where}.{key}")
    if "score_scale" in entry and not _is_count(entry["score_scale"], 1):  # absent: scale 1 (before it was recorded)
        _fail(path, f"must be an integer >= 1, got {entry['score_scale']!r}", f"{where}.score_scale")


def _read_json(path):
    """A run's JSON record: a regular file (a FIFO in a record's place blocked the command forever;
    refused by :func:`~agnostophobia._reading.read_input_text` before it is opened), of a bounded
    size and nesting (JSON nested thousands deep ended in RecursionError)."""
    try:
        text = read_input_text(path, error=RecordError)
    except RecordError as exc:
        _fail(path, str(exc).removeprefix(f"{path}: "))
    try:
        return json.loads(text)
    except ValueError as exc:
        _fail(path, f"not valid JSON ({exc})")
    except RecursionError:
        _fail(path, "not valid JSON (nested too deep for a run record)")


def _optional_json(path: Path, kind: Optional[type] = dict, what: str = "a mapping"):
    """The JSON record at ``path``, None when there is none; its top level must be a ``kind``
    (``what`` names it in the error; None: any)."""
    if not path.exists():
        return None
    data = _read_json(path)
    if kind is not None and not isinstance(data, kind):
        _fail(path, f"top level must be {what}, got {type(data).__name__}")
    return data


# ------------------------------------------------------- what training recorded beside run_meta
def read_timings(run_dir) -> Dict[str, float]:
    """``RUN/timings.json``, checked ({} when absent): seconds of training per run, a mapping
    of ``seed<N>/<approach>`` to a finite number >= 0."""
    path = RunDir(run_dir).timings
    data = _optional_json(path, what="a mapping of seed<N>/<approach> to seconds")
    if data is None:
        return {}
    for key, value in data.items():
        if not RUN_KEY.fullmatch(key):
            _fail(path, "not a run name (seed<N>/<approach>)", key)
        if not _is_number(value) or value < 0:
            _fail(path, f"must be a finite number of seconds >= 0, got {value!r}", key)
    return data


def read_wall_time(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/wall_time.json``, checked (None when absent): ``training_s`` a finite number >= 0,
    ``concurrent_runs`` an integer >= 1, ``batched_seeds`` (when present) true or false."""
    path = RunDir(run_dir).wall_time
    data = _optional_json(path)
    if data is None:
        return None
    if not _is_number(data.get("training_s")) or data["training_s"] < 0:
        _fail(path, f"must be a finite number of seconds >= 0, got {data.get('training_s')!r}", "training_s")
    runs = data.get("concurrent_runs")
    if not _is_count(runs, 1):
        _fail(path, f"must be an integer >= 1, got {runs!r}", "concurrent_runs")
    if not isinstance(data.get("batched_seeds", False), bool):
        _fail(path, f"must be true or false, got {data['batched_seeds']!r}", "batched_seeds")
    return data


def read_classes(run_dir) -> Optional[Dict[str, List[str]]]:
    """``RUN/classes.json``, checked (None when absent): ``class_names`` and, where the protocol
    has negatives, ``negative_class_names``, each a list of strings."""
    path = RunDir(run_dir).classes
    data = _optional_json(path, kind=None)
    if data is None:
        return None
    if not isinstance(data, dict) or "class_names" not in data:
        _fail(path, "must be a mapping with class_names")
    for key, value in data.items():
        if key not in ("class_names", "negative_class_names"):
            _fail(path, "unexpected key", key)
        if not _is_strings(value):
            _fail(path, "must be a list of strings", key)
    return data


_SOURCE_FIELDS = {"path": str, "size": int, "sha256": str, "files": int, "listing": str}


def read_data_sources(run_dir) -> Optional[Dict[str, Dict[str, Any]]]:
    """``RUN/data_sources.json``, checked (None when absent: a run from before it): what the
    run's protocol was built from, a mapping of a source (``mnist/train``, ``images``) to its
    fingerprint (``data.fingerprint``: ``path`` with ``size`` and ``sha256``, or ``files`` and
    ``listing``)."""
    path = RunDir(run_dir).data_sources
    data = _optional_json(path, what="a mapping of a dataset split to its fingerprint")
    if data is None:
        return None
    for what, source in data.items():
        if not isinstance(source, dict) or not isinstance(source.get("path"), str) or not (
                {"size", "sha256"} <= set(source) or {"files", "listing"} <= set(source)):
            _fail(path, "must be a mapping with path and size + sha256 (a file) or files + listing (a folder)", what)
        for key, value in source.items():
            kind = _SOURCE_FIELDS.get(key)
            if kind is None or not isinstance(value, kind) or isinstance(value, bool):
                _fail(path, f"unexpected or malformed field {key!r}: {json.dumps(value)[:80]}", what)
    return data


def check_data_sources(run_dir, protocol, log=log_info) -> None:
    """Refuse, in one line naming the file, a protocol rebuilt for the run ``run_dir`` from data
    other than the run was built from (``data_sources.json``; issue 31): its split would be
    another one. A run from before the record works as before, and ``log`` says so."""
    recorded = read_data_sources(run_dir)
    if recorded is None:
        log(f"{run_dir}: no record of the data it was built from ({DATA_SOURCES}, a run from before it); "
            f"its split is rebuilt from the current files unchecked")
        return
    changed = changed_source(recorded, protocol.sources)
    if changed is not None:
        file, why = changed
        raise DataError(f"{file}: {why}; restore the data the run was built from (or point --data-dir at it), or train a new run")


def read_notes(run_dir, name: str) -> Optional[List[str]]:
    """``RUN/<name>`` (``data_notes.json`` or ``preprocessing_notes.json``), checked: a list of
    strings; None when absent."""
    path = Path(run_dir) / name
    data = _optional_json(path, kind=None)
    if data is None:
        return None
    if not _is_strings(data):
        _fail(path, f"must be a list of strings, got {json.dumps(data)[:80]}")
    return data


def _number_or_null(value) -> bool:
    return value is None or _is_number(value)


def read_metrics(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/metrics.json`` (written by ``evaluate``/``reproduce``), checked where other commands
    read it (None when absent): ``seeds`` an integer >= 1, ``approaches`` strings, ``results`` rows
    each with ``row`` and ``unknowns`` (strings), ``ccr_at_fpr`` (and ``ccr_at_fpr_std``) mappings
    of FPR to a number or null, and ``closed_set_accuracy`` a number or null."""
    path = RunDir(run_dir).metrics
    data = _optional_json(path)
    if data is None:
        return None
    if not _is_count(data.get("seeds"), 1):
        _fail(path, f"must be an integer >= 1, got {data.get('seeds')!r}", "seeds")
    if not _is_strings(data.get("approaches")):
        _fail(path, "must be a list of strings", "approaches")
    if not isinstance(data.get("results"), list):
        _fail(path, "must be a list of result rows", "results")
    for i, row in enumerate(data["results"]):
        where = f"results[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("row"), str) or not isinstance(row.get("unknowns"), str):
            _fail(path, "must be a mapping with row and unknowns (strings)", where)
        for key, required in (("ccr_at_fpr", True), ("ccr_at_fpr_std", False)):
            values = row.get(key)
            if values is None and not required:  # one seed: no spread
                continue
            if not isinstance(values, dict) or not all(_number_or_null(v) for v in values.values()):
                _fail(path, "must be a mapping of FPR to a number or null", f"{where}.{key}")
        for key in ("closed_set_accuracy", "closed_set_accuracy_std"):
            if not _number_or_null(row.get(key)):
                _fail(path, f"must be a number or null, got {row.get(key)!r}", f"{where}.{key}")
    return data


def check_training_records(run_dir) -> None:
    """Read and check what a continued training reads back (:data:`TIMINGS`, :data:`WALL_TIME`,
    :data:`CLASSES`, the notes): before anything is written into the run."""
    read_timings(run_dir)
    read_wall_time(run_dir)
    read_classes(run_dir)
    for name in (DATA_NOTES, PREPROCESSING_NOTES):
        read_notes(run_dir, name)


# ---------------------------------------------------------------------- the whole run
@dataclass
class RunRecords:
    """Everything :func:`check_run` read and checked."""

    run_dir: Path
    config: Dict[str, Any]
    meta: Optional[Dict[str, Any]]
    models: List[Tuple[int, str, Path]]
    calibration: Optional[Dict[str, Any]] = None
    checkpoint_configs: Dict[Path, Dict[str, Any]] = field(default_factory=dict)

    def version_warning(self) -> Optional[str]:
        return version_mismatch(self.run_dir, self.meta)


def check_run(run_dir, command: str = "evaluate") -> RunRecords:
    """Read and check every record of ``run_dir`` that ``evaluate``, ``plot``, ``calibrate`` and
    ``predict`` read, and that they agree; a :class:`RecordError` (one line) otherwise.

    Call it before a command writes anything into the run: a refused run stays as it was."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AgnostophobiaError(f"run directory {run_dir} does not exist")
    models = RunDir(run_dir).models()
    if not models:
        raise AgnostophobiaError(f"{run_dir} holds no trained run (seed*/<approach>/outputs.npz), nothing to "
                                 f"{command}; train one with `agnostophobia reproduce` or `agnostophobia train`")
    config = read_run_config(run_dir)
    meta = read_run_meta(run_dir)
    records = RunRecords(run_dir, config, meta, models, read_calibration(run_dir))
    read_tuned_settings(run_dir)
    for seed, approach, model_dir in models:
        widths = {}
        folder = ModelDir(model_dir)
        for path in (folder.outputs, folder.fit_outputs, folder.val_outputs):
            if path.exists() or path == folder.outputs:
                for arrays in read_outputs(path).values():
                    _same_widths(path, arrays, widths)
        if ModelDir(model_dir).scores.exists():
            read_detector_scores(ModelDir(model_dir).scores)
        if ModelDir(model_dir).last_layer.exists():
            read_last_layer(ModelDir(model_dir).last_layer, widths.get("features"))
        if ModelDir(model_dir).best.exists():
            records.checkpoint_configs[model_dir] = read_checkpoint_config(ModelDir(model_dir).best)
    check_agreement(records)
    return records


def _same_widths(path, arrays, widths) -> None:
    for name in ("logits", "features"):
        if widths.setdefault(name, arrays[name].shape[1]) != arrays[name].shape[1]:
            _fail(path, f"{arrays[name].shape[1]} columns, but the model's other stored outputs have "
                        f"{widths[name]}", name)


def check_agreement(records: RunRecords) -> None:
    """The records of one run must agree; the rule:

    * ``run_meta.json`` (when present) and ``config.yaml`` were written by the same command:
      experiment name, budget, approaches, seeds and every key of ``train_config`` equal;
    * each model's checkpoint (``best.pt``) was trained as its folder says (``seed<N>/<approach>``)
      with the run's config: every key that changes what is trained equal to ``config.yaml``
      (all but :data:`RESUME_FREE_KEYS`; a key missing from ``config.yaml`` disagrees too);
    * the approach of every model folder is a registered approach.
    """
    config, meta = records.config, records.meta
    config_path = RunDir(records.run_dir).config
    if meta is not None:
        meta_path = RunDir(records.run_dir).run_meta
        pairs = [("experiment", "name"), ("budget", "budget"), ("approaches", "approaches"), ("seeds", "seeds")]
        pairs += [(f"train_config.{key}", key) for key in meta.get("train_config", {})]
        for meta_key, config_key in pairs:
            recorded = _lookup(meta, meta_key)
            if recorded is _ABSENT:
                continue
            if config.get(config_key, _ABSENT) != recorded:
                raise RecordError(f"{meta_path} and {config_path} disagree: {meta_key} is {recorded!r} in one and "
                                  f"{_shown(config.get(config_key, _ABSENT))} in the other; the run's records were "
                                  f"changed or the command that made it did not finish (run it again)")
    for seed, approach, model_dir in records.models:
        if approach not in LOSSES:
            _fail(model_dir, f"{approach!r} is not a registered approach")
        saved = records.checkpoint_configs.get(model_dir)
        if saved is None:
            continue
        best = ModelDir(model_dir).best
        if (saved["approach"], saved["seed"]) != (approach, seed):
            _fail(best, f"was trained as {RunDir.run_key(saved['seed'], saved['approach'])} but lies in {model_dir}")
        difference = trained_differently(saved, {**config, **recipe_schedule(approach)}, one_model=False)
        if difference:
            key, value, other = difference
            raise RecordError(f"{best} and {config_path} disagree: the model was trained with {key}={value!r}, "
                              f"the run's config says {_shown(other)}")


class _Absent:
    def __repr__(self) -> str:
        return "nothing"


_ABSENT = _Absent()


def _lookup(mapping: Dict, dotted: str):
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _shown(value) -> str:
    return "missing" if value is _ABSENT else repr(value)
