"""Small name -> object registries (timm's ``register_model`` style).

Models, datasets, approaches and protocols are looked up by name from configs and
the command line; tests are parametrised over ``registry.names()``.
"""
from __future__ import annotations

from typing import Callable, Dict, Generic, Iterator, List, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of factories or objects."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: Dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REG.register("name")`` adds the decorated object."""

        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "(none)"
            raise ValueError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def names(self) -> List[str]:
        return sorted(self._items)

    def registered(self) -> List[str]:
        """Names in the order they were registered (e.g. the paper's order of approaches)."""
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
