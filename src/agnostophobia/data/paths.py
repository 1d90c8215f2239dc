"""Where data and caches live.

The data directory is chosen, in order, by an explicit ``data_dir`` argument (the
CLI's ``--data-dir``), the ``AGNOSTOPHOBIA_DATA`` environment variable, and finally a
per-user cache directory (``$XDG_CACHE_HOME/agnostophobia/data``, by default
``~/.cache/agnostophobia/data``). Derived files (decoded JPEGs) never go into the
data directory, which may be read-only or shared: they go to ``cache_dir()``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from agnostophobia.errors import DataError

PathLike = Union[str, "os.PathLike[str]"]

DATA_ENV = "AGNOSTOPHOBIA_DATA"
CACHE_ENV = "AGNOSTOPHOBIA_CACHE"
MIRROR_ENV = "AGNOSTOPHOBIA_MIRROR"


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/agnostophobia`` (``~/.cache/agnostophobia`` when unset)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "agnostophobia"


def data_dir(data_dir: Optional[PathLike] = None) -> Path:
    """Resolve the data directory (argument > $AGNOSTOPHOBIA_DATA > user cache).

    It need not exist yet (``fetch`` creates it), but a path that exists and is not a folder
    stops every command here, in one line, instead of every dataset being reported missing.

    Args:
        data_dir: the folder a command was given (``--data-dir``), or None.

    Returns:
        The directory's path, with ``~`` expanded (it need not exist yet).

    Raises:
        ~agnostophobia.errors.DataError: the path exists and is not a folder.

    Examples:
        >>> from pathlib import Path
        >>> from agnostophobia.data import data_dir
        >>> data_dir("/tmp/my-data") == Path("/tmp/my-data")  # an argument wins over $AGNOSTOPHOBIA_DATA
        True
    """
    if data_dir is not None and str(data_dir) != "":
        return _folder_or_nothing(Path(data_dir).expanduser(), "data directory")
    env = os.environ.get(DATA_ENV)
    if env:
        return _folder_or_nothing(Path(env).expanduser(), f"${DATA_ENV}")
    return _folder_or_nothing(user_cache_root() / "data", "data directory")


def _folder_or_nothing(path: Path, what: str) -> Path:
    if path.exists() and not path.is_dir():
        raise DataError(f"{what} {path} is not a folder")
    return path


def cache_dir() -> Path:
    """Directory for derived, re-creatable files ($AGNOSTOPHOBIA_CACHE overrides).

    Returns:
        The directory's path (not made here).

    Examples:
        >>> from agnostophobia.data import cache_dir
        >>> cache_dir().is_absolute()
        True
    """
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else user_cache_root() / "decoded"
