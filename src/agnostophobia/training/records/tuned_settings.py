"""``RUN/detector_settings.json``, the detector settings ``tune-detectors`` chose, checked. Its
writer is above this layer (``experiments.tune_detectors``); each value is checked against its
detector's declaration where it is read (``detectors.stored.run_settings``)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from agnostophobia._validation import FPR_RULE, is_rate
from agnostophobia.losses import LOSSES
from agnostophobia.rundir import RunDir
from agnostophobia.training.records._common import _fail, _is_number, _read_format_1


def read_tuned_settings(run_dir) -> Optional[Dict[str, Any]]:
    """``RUN/detector_settings.json`` (written by ``tune-detectors``), checked; None when the
    run's detector settings were never tuned: ``format`` 1, a ``target_fpr`` in (0, 1] and
    ``chosen`` as ``{approach: {detector: {setting: value}}}`` with known approaches and
    scalar values (each value is checked against its detector's declaration by its reader,
    ``detectors.stored.run_settings``)."""
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
