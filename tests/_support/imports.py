"""A command run in a fresh process that reports which heavy libraries it imported: help, the
version, argument errors and the refusals that need no model and no image answer before any."""
from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "torchvision", "scipy", "sklearn", "matplotlib")


def modules_imported(args) -> tuple:
    """``(exit status, heavy modules imported, stderr lines)`` of ``agnostophobia ARGS`` in a fresh process."""
    probe = ("import json, sys\nfrom agnostophobia.cli import main\n"
             "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
             f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    result = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True,
                            timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    code, imported = json.loads(result.stdout.splitlines()[-1])  # the probe's line, after what the command printed
    return code, imported, result.stderr.strip().splitlines()
