"""Errors shown to the user as one line (the CLI prints them without a traceback)."""
from typing import Optional


class AgnostophobiaError(ValueError):
    """Bad input, a missing or malformed file, a bad config value.

    Subclasses ``ValueError`` so library users can catch either.
    """


class RecordError(AgnostophobiaError):
    """A run record that is missing, unreadable, malformed or disagrees with another record."""


class DataError(AgnostophobiaError):
    """A dataset is missing, truncated or malformed; the message says how to get it."""


class ConfigError(AgnostophobiaError):
    """An unknown config key or a bad value; the message names it."""


class TrainingDiverged(AgnostophobiaError):
    """The training or validation loss became non-finite; the last good checkpoint is kept.

    Args:
        message: the one line the user reads (which run, which epoch, what became non-finite).
        approach: the approach whose run diverged, where known; kept as ``approach`` and through
            pickling, so a run trained in a child process reports it too.
    """

    def __init__(self, message: str, approach: Optional[str] = None):
        super().__init__(message)
        self.approach = approach

    def __reduce__(self):
        return type(self), (str(self), self.approach)


class AgnostophobiaWarning(UserWarning):
    """Something the user should know that does not stop the command (a threshold that rests on
    few validation negatives, a library version the run was not trained with); the CLI shows it
    as one line, ``agnostophobia: warning: ...``."""
