"""What a fresh pytest reported: the tests that add a loss and a detector to a copy of the package
run the suite there in a subprocess (with ``-rA``, one summary line per test) and read its outcome."""
from __future__ import annotations

import subprocess
from typing import Iterable


def assert_reported(result: subprocess.CompletedProcess, code: int, outcome: str, tests: Iterable[str]) -> None:
    """The fresh pytest exited with ``code`` and each of ``tests`` (a part of a test id) is on one of
    its summary lines of ``outcome`` (``PASSED`` or ``FAILED``)."""
    assert result.returncode == code, result.stdout[-6000:] + result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith(f"{outcome} ")]
    missing = [test for test in tests if not any(test in line for line in lines)]
    assert not missing, (missing, lines[:20])
