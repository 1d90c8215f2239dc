"""The sizes the house keeps to (issue 58), counted from the source rather than trusted from notes:
modules over 600 lines, functions over 80 lines, functions with more than 6 parameters (without
``self``/``cls``; ``*args``/``**kwargs`` not counted), and the places that wrap a model folder by hand
(``ModelDir(`` outside ``rundir.py``). ``python tests/_support/house_counts.py`` prints them;
``tests/repository/test_house.py`` holds each to its ceiling, so that a count can only go down."""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

SRC = Path(__file__).resolve().parents[2] / "src" / "agnostophobia"
MODULE_LINES, FUNCTION_LINES, PARAMETERS = 600, 80, 6


class Finding(NamedTuple):
    where: str  # path:line (function) or path (module)
    size: int


def _functions(tree: ast.AST):
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(function) -> int:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")])


def counts(root: Path = SRC) -> Dict[str, List[Finding]]:
    found: Dict[str, List[Finding]] = {"modules over 600 lines": [], "functions over 80 lines": [],
                                       "functions over 6 parameters": [], "ModelDir( outside rundir.py": []}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root.parent).as_posix()
        lines = text.count("\n")
        if lines > MODULE_LINES:
            found["modules over 600 lines"].append(Finding(name, lines))
        for function in _functions(ast.parse(text)):
            length = function.end_lineno - function.lineno + 1
            if length > FUNCTION_LINES:
                found["functions over 80 lines"].append(Finding(f"{name}:{function.lineno} {function.name}", length))
            if _parameters(function) > PARAMETERS:
                found["functions over 6 parameters"].append(
                    Finding(f"{name}:{function.lineno} {function.name}", _parameters(function)))
        if path.name != "rundir.py":
            wraps = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id == "ModelDir"]
            found["ModelDir( outside rundir.py"] += [Finding(f"{name}:{n.lineno}", 1) for n in wraps]
    return found


def main() -> int:
    for kind, findings in counts().items():
        print(f"{kind}: {len(findings)}")
        for finding in findings:
            print(f"  {finding.where} ({finding.size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
