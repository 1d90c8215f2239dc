"""Package attributes imported on first use (PEP 562), so that importing a package (the
command line's parsers import ``data`` and ``deploy``) does not import torch behind it."""
from __future__ import annotations

import importlib
from typing import Callable, Dict, List, Tuple


def lazy_attributes(package: str, exports: Dict[str, str],
                    namespace: dict) -> Tuple[Callable[[str], object], Callable[[], List[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each public
    name to the submodule that defines it, imported the first time the name is asked for; the
    value is then kept in the package's ``namespace`` (its ``globals()``)."""
    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
