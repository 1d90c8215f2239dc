"""What every record's reader shares: the one-line :class:`RecordError` naming the file and the
key (:func:`_fail`), the bounded reads of a JSON record and of an npz archive, and the checks of
a value's kind (a finite number, a count, a list of strings)."""
from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from agnostophobia._reading import check_regular_file, read_input_text
from agnostophobia.rundir import RecordError


def _fail(path, what: str, key: Optional[str] = None):
    raise RecordError(f"{path}: {key + ': ' if key else ''}{what}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value, minimum: int) -> bool:
    """An integer (not a bool) >= ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_strings(value) -> bool:
    """A list of strings."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _number_or_null(value) -> bool:
    return value is None or _is_number(value)


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


def _read_format_1(path: Path) -> Optional[Dict[str, Any]]:
    """A JSON record that is a mapping with ``format: 1`` (calibration, tuned settings); None if absent."""
    data = _optional_json(path)
    if data is None:
        return None
    if data.get("format") != 1 or isinstance(data.get("format"), bool):
        _fail(path, f"must be 1 (the only format there is), got {data.get('format')!r}", "format")
    return data


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


class _Absent:
    def __repr__(self) -> str:
        return "nothing"


_ABSENT = _Absent()
