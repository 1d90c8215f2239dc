"""``RUN/metrics.json``, checked where another command reads it (``ablate``). Its writer is above
this layer (``experiments.report.write_metrics``)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from agnostophobia.rundir import RunDir
from agnostophobia.training.records._common import _fail, _is_count, _is_strings, _number_or_null, _optional_json


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
