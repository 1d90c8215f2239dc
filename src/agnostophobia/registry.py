"""Small name -> object registries (timm's ``register_model`` style).

Models, datasets, approaches and protocols are looked up by name from configs and
the command line; tests are parametrised over ``registry.names()``. Packages outside this one
add to them through the ``agnostophobia.plugins`` entry points (:mod:`agnostophobia.plugins`),
loaded the first time a registry is asked.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from typing import Callable, Dict, Generic, Iterator, List, TypeVar

from agnostophobia.errors import AgnostophobiaError, ConfigError
from agnostophobia.rundir import check_path_name
from agnostophobia.plugins import load_plugins

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of factories or objects.

    Args:
        kind: what it holds, in messages (``loss``, ``detector``, ...).
        path_names: its names become components of a run's paths (an approach's folder, a set's
            figures), each checked when registered (``rundir.check_path_name``).

    Examples:
        >>> from agnostophobia.registry import Registry
        >>> SHAPES = Registry("shape")
        >>> @SHAPES.register("square")
        ... def square(side):
        ...     return side * side
        ...
        >>> SHAPES.get("square")(3), SHAPES.names()
        (9, ['square'])
        >>> SHAPES.get("squares")
        Traceback (most recent call last):
            ...
        agnostophobia.errors.ConfigError: unknown shape 'squares'; known: square
    """

    def __init__(self, kind: str, path_names: bool = False):
        self.kind = kind
        self.path_names = path_names
        self._items: Dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REG.register("name")`` adds the decorated object.

        Args:
            name: the name it is looked up by.

        Returns:
            The decorator, which registers the object and returns it unchanged.

        Raises:
            ~agnostophobia.errors.ConfigError: ``name`` cannot be a path component where the
                registry's names are (``path_names``).
        """

        if self.path_names:
            try:
                check_path_name(name, f"registering {self.kind}")
            except AgnostophobiaError as exc:
                raise ConfigError(str(exc)) from None

        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return add

    @property
    def _entries(self) -> Dict[str, T]:
        """What is registered, the plugins' registrations included (loaded on the first question)."""
        load_plugins()
        return self._items

    def get(self, name: str) -> T:
        """The object registered as ``name`` (plugins' registrations included).

        Args:
            name: a registered name.

        Returns:
            The registered object.

        Raises:
            ~agnostophobia.errors.ConfigError: ``name`` is not registered; the message lists the
                registered names, or the closest ones.
        """
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; {self.hint(name)}") from None

    def hint(self, name: str, listed: int = 12) -> str:
        """What to say about the unknown ``name``: every name of a short registry, the closest
        ones of a long one (the models hold every torchvision architecture).

        Args:
            name: the unknown name.
            listed: the largest registry whose names are all listed.

        Returns:
            One phrase, ``known: a, b, c`` or ``close: ...`` (without a trailing period).
        """
        names = self.names()
        if len(names) <= listed:
            return f"known: {', '.join(names) or '(none)'}"
        close = self.closest(name)
        return f"{'close: ' + ', '.join(close) if close else 'e.g. ' + ', '.join(names[:5])} ({len(names)} known)"

    def closest(self, name: str, n: int = 5, cutoff: float = 0.6) -> List[str]:
        """Up to ``n`` registered names most like ``name``, compared without a ``family/`` prefix
        (``resnet50`` finds ``torchvision/resnet50``, ``torchvision/foo`` no torchvision model).

        Args:
            name: the name looked for.
            n: the most names returned.
            cutoff: the least likeness a returned name has, in [0, 1] (``difflib``'s ratio).

        Returns:
            The names, most alike first, each at least ``cutoff`` alike (0..1).
        """
        family, _, member = str(name).rpartition("/")

        def likeness(candidate: str) -> float:  # a tie goes to the name's own family
            candidate_family, _, candidate_member = candidate.rpartition("/")
            return SequenceMatcher(None, member, candidate_member).ratio() + 0.01 * (family == candidate_family)

        scored = sorted(((likeness(c), c) for c in self._entries), key=lambda pair: (-pair[0], pair[1]))
        return [candidate for score, candidate in scored[:n] if score >= cutoff]

    def names(self) -> List[str]:
        """Every registered name, the plugins' included.

        Returns:
            The names, sorted.
        """
        return sorted(self._entries)

    def registered(self) -> List[str]:
        """Names in the order they were registered (e.g. the paper's order of approaches).

        Returns:
            The names, first registered first.
        """
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
