"""The package's layers (README.md, section "Layout"): data flows one way, and a folder
imports only from folders below it and from the small shared helpers."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import agnostophobia

PACKAGE = Path(agnostophobia.__file__).parent
#: Lowest first: a module may import its own layer and the layers before it.
LAYERS = ("data", "models", "losses", "training", "detectors", "metrics", "baselines", "plotting", "deploy",
          "experiments")
#: Importable from anywhere (the package root only for ``__version__``).
SHARED = {"", "_atomic", "_validation", "registry", "errors", "_killpoints", "_runlock"}


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


def test_the_readme_layout_section_lists_the_layers_in_this_order():
    """The document this test cites, inside the repository: README.md, section "Layout"."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    folders = re.findall(r"^  (\w+)/ ", section, flags=re.MULTILINE)  # the tree under src/agnostophobia/
    assert [f for f in folders if f != "configs"] == list(LAYERS)
