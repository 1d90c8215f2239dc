"""The run's marker: what a run's ``run_meta.json`` and ``config.yaml`` both carry, so that a folder
is known as a run of this project by what its records hold, never by the names of the files it
holds (issue 54): a folder of the user's files may hold a ``.lock``, a ``run_meta.json`` or a
``seed0/`` of its own, which a training into it would overwrite.

The marker is the project's name, the run format and the run's id. The id is random, chosen when
the run's ``config.yaml`` is first written (before anything is trained) and kept while the run
is continued; the ``run_meta.json`` written at the end carries the same id. Their writer is the
run record's (``experiments.run_record``); :func:`~agnostophobia.training.records.run.is_run`
reads them.
"""
from __future__ import annotations

import uuid
from typing import Any, Dict, Optional

from agnostophobia.training.records._common import _ABSENT, _fail

#: The keys of the marker, first in run_meta.json and in config.yaml.
PROJECT_KEY, RUN_FORMAT_KEY, RUN_ID_KEY = "project", "run_format", "run_id"
MARKER_KEYS = (PROJECT_KEY, RUN_FORMAT_KEY, RUN_ID_KEY)
#: The project's name in the marker.
PROJECT = "agnostophobia"
#: The format of the runs this code writes: raised when a run's layout or records change in a
#: way that older code would misread.
RUN_FORMAT = 1


def run_marker(run_id: str) -> Dict[str, Any]:
    """The marker of the run ``run_id``, as run_meta.json and config.yaml carry it."""
    return {PROJECT_KEY: PROJECT, RUN_FORMAT_KEY: RUN_FORMAT, RUN_ID_KEY: run_id}


def new_run_id() -> str:
    """A new run's id: random (uuid4), so that no two runs share one."""
    return uuid.uuid4().hex


def marked_run_id(record) -> Optional[str]:
    """The run id of a run's record (run_meta.json or config.yaml, as read) that carries this
    project's marker; None for any other (an old run's record, or one not of this project)."""
    if isinstance(record, dict) and record.get(PROJECT_KEY) == PROJECT and isinstance(record.get(RUN_ID_KEY), str):
        return record[RUN_ID_KEY] or None
    return None


def check_marker(record: Dict[str, Any], path) -> None:
    """The marker's keys in a run's record (config.yaml, run_meta.json), where it has them, of
    their kinds: the project a name, the run format a whole number of at least 1, the run id a
    non-empty string; a :class:`~agnostophobia.rundir.RecordError` naming the key otherwise."""
    kinds = {PROJECT_KEY: (str, "a name"), RUN_FORMAT_KEY: (int, "a whole number of at least 1"),
             RUN_ID_KEY: (str, "a non-empty string")}
    for key, (kind, what) in kinds.items():
        value = record.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if not isinstance(value, kind) or isinstance(value, bool) or not value or (kind is int and value < 1):
            _fail(path, f"must be {what}, got {value!r}", key)
