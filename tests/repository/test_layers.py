"""The package's layers (docs/architecture.md, sections "Layers" and "Layout"): data flows one way, and a folder
imports only from folders below it and from the small shared helpers."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import agnostophobia
from repo_paths import REPO

PACKAGE = Path(agnostophobia.__file__).parent
#: Lowest first: a module may import its own layer and the layers before it.
LAYERS = ("data", "models", "losses", "training", "detectors", "metrics", "baselines", "plotting", "deploy",
          "experiments")
#: Importable from anywhere (the package root only for ``__version__``).
SHARED = {"", "_atomic", "_runpath", "_journal", "_log", "_validation", "registry", "errors", "_killpoints", "_runlock", "rundir", "settings",
          "plugins", "_yaml", "_reading", "_lazy"}


def imported_parts(path: Path):
    """The first component below ``agnostophobia`` of every import in ``path`` (lazy ones too)."""
    module = path.relative_to(PACKAGE).with_suffix("").parts
    package = module[:-1] if module[-1] != "__init__" else module[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = package[:len(package) - node.level + 1]
                names = [".".join(("agnostophobia", *base, node.module or "")).rstrip(".")]
                if not node.module:
                    names = [".".join(("agnostophobia", *base, alias.name)) for alias in node.names]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "agnostophobia":
                yield node.lineno, parts[1] if len(parts) > 1 else ""


def test_no_module_imports_from_a_higher_layer():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:  # cli.py, __main__.py and the shared helpers sit at the top
            continue
        layer = LAYERS.index(parts[0])
        for line, target in imported_parts(path):
            if target in SHARED or target == parts[0]:
                continue
            if target not in LAYERS or LAYERS.index(target) > layer:
                offenders.append(f"{path.relative_to(PACKAGE)}:{line} imports agnostophobia.{target}")
    assert offenders == []


def test_every_folder_is_a_known_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= set(LAYERS)


def test_the_layout_section_lists_the_layers_in_this_order():
    """The document this test cites, inside the repository: docs/architecture.md, section "Layout"
    (the README's until the README became a short entry into the documentation site)."""
    readme = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    folders = re.findall(r"^  (\w+)/ ", section, flags=re.MULTILINE)  # the tree under src/agnostophobia/
    assert [f for f in folders if f != "configs"] == list(LAYERS)


def module_name(path: Path) -> str:
    """``agnostophobia.data.protocols`` for ``data/protocols.py``; a package is its ``__init__``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("agnostophobia", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def imported_modules(path: Path):
    """Every agnostophobia module ``path`` imports, at any depth (lazy imports too): the most
    specific module each import names, so ``from agnostophobia.models import lenetpp`` imports
    the submodule and ``from agnostophobia.models import MODELS`` the package's ``__init__``."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != "agnostophobia":
                continue
            while not is_module(target):  # ``import agnostophobia.x.y`` where y is a name, not a module
                target = target.rpartition(".")[0]
            if target != own:
                yield node.lineno, target


def import_cycles(graph):
    """Each strongly connected group of modules (Tarjan), as one cycle through all of it, sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def cycle_through(graph, group):
    """One import path that starts and ends at the group's first module, for the message."""
    start, members = group[0], set(group)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for target in sorted(graph[path[-1]]):
            if target == start:
                return " -> ".join(path + [start])
            if target in members and target not in seen:
                seen.add(target)
                paths.append(path + [target])
    return " <-> ".join(group)


def import_graph():
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph.setdefault(module_name(path), {}).update(
            {target: line for line, target in imported_modules(path)})
    return graph


def test_no_import_cycle():
    """A cycle (lazy imports included, and a package ``__init__`` importing a submodule that
    imports the package back) makes import order matter and hides which module is below which."""
    graph = import_graph()
    assert [describe_cycle(graph, group) for group in import_cycles(graph)] == []


def describe_cycle(graph, group) -> str:
    """One cycle of the group, then every import between its modules (``module:line -> module``)."""
    edges = [f"{source}:{graph[source][target]} -> {target}"
             for source in group for target in sorted(graph[source]) if target in group]
    return f"{cycle_through(graph, group)} (imports within the group: {'; '.join(edges)})"


def test_the_import_graph_sees_lazy_imports_submodules_and_cycles():
    graph = {"agnostophobia.a": {"agnostophobia.b": 1}, "agnostophobia.b": {"agnostophobia.c": 1},
             "agnostophobia.c": {"agnostophobia.a": 1}, "agnostophobia.d": {"agnostophobia.a": 1}}
    assert import_cycles(graph) == [["agnostophobia.a", "agnostophobia.b", "agnostophobia.c"]]
    assert cycle_through(graph, ["agnostophobia.a", "agnostophobia.b", "agnostophobia.c"]) == \
        "agnostophobia.a -> agnostophobia.b -> agnostophobia.c -> agnostophobia.a"
    # a package __init__ importing its submodules relatively (data/__init__ imports none: it is lazy)
    imports = dict((target, line) for line, target in imported_modules(PACKAGE / "losses" / "__init__.py"))
    assert "agnostophobia.losses.entropic" in imports and "agnostophobia.losses" not in imports
    lazy = {target for _, target in imported_modules(PACKAGE / "experiments" / "reproduce.py")}
    assert "agnostophobia.data.fetch" in lazy  # imported inside reproduce(), not at the top
