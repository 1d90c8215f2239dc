"""What a training recorded beside ``run_meta.json`` and a continued training reads back:
``timings.json``, ``wall_time.json``, ``classes.json``, ``data_notes.json`` and
``preprocessing_notes.json``, checked (:func:`check_training_records` before a resumed run writes
anything). Their writer is the run record's, above this layer (``experiments.run_record``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from agnostophobia.rundir import DATA_NOTES, PREPROCESSING_NOTES, RUN_KEY, RunDir
from agnostophobia.training.records._common import _fail, _is_count, _is_number, _is_strings, _optional_json


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


def check_training_records(run_dir) -> None:
    """Read and check what a continued training reads back (:data:`TIMINGS`, :data:`WALL_TIME`,
    :data:`CLASSES`, the notes): before anything is written into the run."""
    read_timings(run_dir)
    read_wall_time(run_dir)
    read_classes(run_dir)
    for name in (DATA_NOTES, PREPROCESSING_NOTES):
        read_notes(run_dir, name)
