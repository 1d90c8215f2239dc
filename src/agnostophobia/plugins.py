"""Losses, detectors, datasets, protocols and models registered from outside the package.

A package registers its own through one entry-point group, ``agnostophobia.plugins``: each
entry names a module (imported: its ``@LOSSES.register(...)``, ``@register(...)``,
``register_dataset(...)`` or ``@register_protocol(...)`` run) or a function of no arguments
(imported and called)::

    # the plugin's pyproject.toml
    [project.entry-points."agnostophobia.plugins"]
    my-losses = "my_package.losses"

The registries load them the first time they are asked for a name (:func:`load_plugins`, from
:class:`~agnostophobia.registry.Registry`), so ``train``, ``reproduce``, ``tune``, the Python API
and the processes ``concurrent_runs`` starts all see them by name. A plugin that fails to load
is one :class:`~agnostophobia.errors.ConfigError` naming it.

A shared helper: it imports nothing of the package but its errors (a plugin imports the
registries it adds to, when it is loaded).
"""
from __future__ import annotations

from importlib.metadata import entry_points

from agnostophobia.errors import ConfigError

__all__ = ["GROUP", "load_plugins"]

#: The entry-point group in which a plugin package names the module or function that registers its additions.
GROUP = "agnostophobia.plugins"

_state = {"loaded": False}


def load_plugins() -> None:
    """Load every plugin of :data:`GROUP` once per process (a second call does nothing, and a
    plugin's own registrations, which ask the registries again, do not recurse).

    Raises:
        ~agnostophobia.errors.ConfigError: a plugin failed to load (one line naming it and what
            it raised); the next call tries again.

    Examples:
        >>> from agnostophobia.plugins import load_plugins
        >>> load_plugins()  # once per process; a second call does nothing
        >>> load_plugins()
    """
    if _state["loaded"]:
        return
    _state["loaded"] = True
    for entry in entry_points(group=GROUP):
        try:
            loaded = entry.load()
            if callable(loaded):
                loaded()
        except Exception as exc:  # whatever the plugin raises: one line naming it
            _state["loaded"] = False  # asked again, it fails again, naming it again
            raise ConfigError(f"plugin {entry.name!r} ({entry.value}, entry point group {GROUP}) failed to "
                              f"load: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
