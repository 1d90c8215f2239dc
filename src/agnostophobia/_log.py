"""The library's one logger, ``logging.getLogger("agnostophobia")``.

A library function that reports progress takes ``log`` (a callable taking one line) and
defaults it to :func:`log_info`: the line goes to this logger at INFO, so a program that
configures no logging sees nothing, and one that does sees the lines where it routes them.
The command line (``agnostophobia ...``) adds the one handler that prints them as plain lines
(:func:`print_lines`). Warnings (a library version that differs from the run's) go through
:func:`warnings.warn` as :class:`~agnostophobia.errors.AgnostophobiaWarning`.

A shared helper: it imports nothing of the package.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from typing import Iterator

LOGGER = logging.getLogger("agnostophobia")
LOGGER.addHandler(logging.NullHandler())  # a library adds no output of its own (logging HOWTO)


def log_info(message: str) -> None:
    """One line of progress, at INFO on the ``agnostophobia`` logger."""
    LOGGER.info(message)


@contextlib.contextmanager
def print_lines() -> Iterator[None]:
    """While inside, the logger's lines are printed to stdout as they are (the command line's
    output); the logger's level, handlers and propagation are restored after."""
    handler = logging.StreamHandler(sys.stdout)  # the stdout of this moment (a test's capture included)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = LOGGER.level, LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False  # a root handler configured elsewhere would print each line twice
    try:
        yield
    finally:
        handler.flush()
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(saved[0])
        LOGGER.propagate = saved[1]
