"""``RUN/data_sources.json``, what a run's protocol was built from (``data.fingerprint``), checked,
and the refusal of a protocol rebuilt from other data (:func:`check_data_sources`). Its writer is
the run record's, above this layer (``experiments.run_record.record_data_sources``)."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from agnostophobia._log import log_info
from agnostophobia.data.fingerprint import changed_source
from agnostophobia.errors import DataError
from agnostophobia.rundir import DATA_SOURCES, RunDir
from agnostophobia.training.records._common import _fail, _optional_json

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
