"""The one YAML loader and dumper of the package (experiment configs, a run's config.yaml).

YAML as people write it: ``1e-3`` is a number (YAML 1.1, which PyYAML follows, wants
``1.0e-3`` and reads ``1e-3`` as the string "1e-3"). Anchors and aliases are refused at the
first one, so that an alias bomb (a few lines that expand to billions of nodes) costs nothing,
and a key given twice in one mapping is refused with its line (YAML would keep the last one
silently). Every refusal is a ``yaml.YAMLError`` with a mark; :func:`read_yaml_file` turns it
into one line naming the file and line.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from yaml.constructor import ConstructorError

from agnostophobia._reading import check_regular_file

FLOAT_TAG = "tag:yaml.org,2002:float"
MERGE_TAG = "tag:yaml.org,2002:merge"
#: YAML 1.1's float, plus an exponent without a dot (``1e-3``, ``-2E+5``).
FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                     |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                     |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                     |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                     |[-+]?\.(?:inf|Inf|INF)
                     |\.(?:nan|NaN|NAN))$""", re.X)


#: The deepest nesting of mappings and lists a YAML file of the package may hold (a config has
#: four or five levels; 3,000 ended in RecursionError).
MAX_DEPTH = 100


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors, aliases or repeated keys, with exponent floats."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ConstructorError(None, None, f"anchors and aliases (&{event.anchor}, *{event.anchor}) "
                                   "are not accepted; write the value out", event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:  # refused long before Python's recursion limit
                raise ConstructorError(None, None, f"nested more than {MAX_DEPTH} levels deep; a config is "
                                       f"a few levels of mappings and lists", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                raise ConstructorError(None, None, "merge keys (<<) are not accepted; write the keys out",
                                       key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: construct_mapping names it below
                break
            if repeated:
                raise ConstructorError(None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
StrictLoader.add_implicit_resolver(FLOAT_TAG, FLOAT, list("-+0123456789."))
StrictLoader.add_constructor("tag:yaml.org,2002:map", StrictLoader.construct_yaml_map)


class PlainDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that writes a value used twice out twice: the loader refuses aliases."""

    def ignore_aliases(self, data):
        return True


def load_yaml(text: str):
    """``text`` parsed by :class:`StrictLoader`."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader


def dump_yaml(data, flow: bool = False) -> str:
    """``data`` as YAML text :func:`load_yaml` reads back (no aliases); ``flow``: on one line."""
    return yaml.dump(data, Dumper=PlainDumper, sort_keys=False, default_flow_style=True if flow else False)


def read_yaml_file(path, error: type):
    """The contents of the YAML file ``path``; a FIFO or device, unreadable or unparsable text
    is a one-line ``error`` naming the file (and line)."""
    check_regular_file(path, "config", error)
    try:
        return load_yaml(Path(path).read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(f"config {path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"config {path}: cannot be read ({exc.strerror or exc})"
                    if isinstance(exc, OSError) else f"config {path}: not a text file") from None
