"""The flags of a sub-command that reach no request field: shared by the tests of the three
request objects (``RunRequest``, ``ModelRequest``, ``PlotRequest``)."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Dict, Set

from agnostophobia.cli import build_parser


def subparser(command: str) -> argparse.ArgumentParser:
    """The parser of ``agnostophobia COMMAND``."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def unread_flags(command: str, request_class, handler_only: Set[str] = frozenset(),
                 aliases: Dict[str, str] = None) -> Set[str]:
    """The destinations of ``command``'s flags that are no field of ``request_class`` (after
    ``aliases``: flag destination -> field) and that its handler does not read itself
    (``handler_only``): a flag parsed and then ignored."""
    fields = {field.name for field in dataclasses.fields(request_class)}
    dests = {action.dest for action in subparser(command)._actions if action.dest not in ("help", "func")}
    return {dest for dest in dests if (aliases or {}).get(dest, dest) not in fields} - set(handler_only)
