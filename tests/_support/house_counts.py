"""The sizes the house keeps to (issue 58), counted from the source rather than trusted from notes:
modules over 600 lines, functions over 80 lines, functions with more than 6 parameters (without
``self``/``cls``; ``*args``/``**kwargs`` not counted), the places that wrap a model folder by hand
(``ModelDir(`` outside ``rundir.py``), and the pairs of places sharing runs of 6 or more identical or
same-shape lines. ``python tests/_support/house_counts.py`` prints them, each pair of places too;
``tests/repository/test_house.py`` holds each to its ceiling, so that a count can only go down.

How the shared runs are counted (the standard library only: ``tokenize`` and ``ast``):

- A line is a physical line of code, numbered as an editor numbers it. Comments, import statements
  and blank lines are not lines of code: they are passed over, so they neither count nor break a
  run. Docstrings (and other bare string statements) are not lines of code either, but a run stops
  at one: a docstring opens a new definition, so that the fields of two classes, each under its own
  docstring, do not run on from the ``class`` lines above them.
- A line's shape is its tokens with every identifier made one token, every string or number literal
  (an f-string whole) one token, keywords and operators kept and white space dropped: ``x = f(a, 1)``
  and ``y = g(b, 2)`` have the same shape, ``x = f(a)`` does not.
- Each window of 6 consecutive lines of code in a file is a place. A window is thin, and not counted,
  when most of its lines (4 of 6) carry no identifier (``)``, ``else:``, ``return``, a lone
  literal) or only text (a keyword argument that is one string, ``source="..."``, and the lines that
  continue the string: the provenance of a setting documents it, as a docstring would), or when its 6 lines are one shape over and over (a list of fields ``name: str``, rows
  of a table: alike by the grammar, not by a copy); a shape of window that stands in more than 8
  places is too common to count (a house idiom rather than a copy).
- Two places of one shape of window make a pair (two places in one file only when they do not
  overlap). The windows of one pair of files that overlap or touch on both sides merge into one pair
  of places, ``a.py:10-24 ~ b.py:40-54``, counted once.

How it differs from other tools: pylint's ``symilar`` counts only identical lines (same names, same
literals), so a copy with its names changed escapes it; here the shape is what counts. The
``duplicates`` command compares shapes too, but it reads files as text, so the lines of docstrings
count there (most of its rows in ``src`` pair the ``Examples`` sections of two docstrings, which
issue 58 sets aside); it reads the whole tree (tests, docs, examples), lists one row per pair of files
(the other runs as ``+N more runs``), passes lone punctuation over, and lists thin runs marked
``boilerplate`` where here they are not counted. The stop at a docstring and the rule of one shape
over and over are this count's own. Here each run is a pair of places, and only
``src/agnostophobia`` is read.

Dead functions (:func:`dead_functions`, issue 58; also ``python tests/_support/house_counts.py``): a
function or method of ``src/agnostophobia`` is reached when its name is used in the package's code (a
name or an attribute, anywhere in ``src/agnostophobia``), is exported (a string of an ``__all__`` or
``_EXPORTS`` table), is a public method of a class that an API page shows (a class exported by a
package that a ``docs/reference`` page summarizes with ``api-summary``), or is a word of the
documentation's sources (``docs/``, less what a build generates and the GPU check's records),
``examples/``, ``benchmarks/`` or the README. Dunders and the hooks a library calls by name
(:data:`HOOKS`) are reached. The tests do not reach anything: a function only tests call is dead (its
test's reference belongs to the tests). Names, not objects, are matched, so the count is a lower
bound: a dead function that shares its name with a live one (``evaluate``, also a command) is not
counted; a function reached only by a name built at run time would be, and none is."""
from __future__ import annotations

import ast
import bisect
import io
import itertools
import keyword
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, NamedTuple, Set, Tuple

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "agnostophobia"
MODULE_LINES, FUNCTION_LINES, PARAMETERS = 600, 80, 6
RUN_LINES, TOO_COMMON = 6, 8  # a window of 6 lines; in more than 8 places it is an idiom, not a copy
SHARED_RUNS = "pairs of places sharing runs of 6+ same-shape lines"
_FSTRING_START, _FSTRING_END = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -1)


class Finding(NamedTuple):
    where: str  # path:line (function), path (module) or path:a-b ~ path:c-d (a pair of places)
    size: int  # lines (module, function), parameters, or the run's lines of code on its first side


class CodeLine(NamedTuple):
    number: int  # as an editor numbers it
    shape: Tuple[str, ...]
    part: int  # how many docstrings stand above it: a run stays within one part


def _functions(tree: ast.AST):
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(function) -> int:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")])


def _lines_of(nodes) -> Set[int]:
    return {line for node in nodes for line in range(node.lineno, node.end_lineno + 1)}


def _docstrings(tree: ast.AST) -> List[ast.AST]:
    """Every bare string statement: the docstrings, and strings that stand as comments."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]


def _token_shape(token: tokenize.TokenInfo) -> str:
    """One token of a shape: identifiers and literals lose their spelling, keywords and operators keep it."""
    if token.type == tokenize.NAME:
        return token.string if keyword.iskeyword(token.string) else "name"
    if token.type in (tokenize.STRING, _FSTRING_START):
        return "string"
    if token.type == tokenize.NUMBER:
        return "number"
    return token.string if token.type == tokenize.OP else ""


def code_lines(text: str) -> List[CodeLine]:
    """The lines of code of a module with their shapes (the rules are in the module's docstring)."""
    tree = ast.parse(text)
    docstrings = sorted(node.lineno for node in _docstrings(tree))
    skipped = _lines_of(_docstrings(tree)) | _lines_of(
        node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))
    shapes: Dict[int, List[str]] = defaultdict(list)
    inside_fstring = 0  # Python 3.12 splits an f-string into tokens; it stays one literal here
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        shape = "" if inside_fstring else _token_shape(token)
        inside_fstring += (token.type == _FSTRING_START) - (token.type == _FSTRING_END)
        if shape and token.start[0] not in skipped:
            shapes[token.start[0]].append(shape)
    return [CodeLine(number, tuple(shapes[number]), part=bisect.bisect(docstrings, number))
            for number in sorted(shapes)]


#: The shapes of a line of text in a declaration: a keyword argument that is only a string
#: (``source="..."``, ``doc="..."``), or the string's next line. Such text documents, as a docstring does.
_TEXT_SHAPES = {("name", "=", "string"), ("string",)}


def _carries_no_name(line: CodeLine) -> bool:
    shape = line.shape
    while shape and shape[-1] in (",", ")"):
        shape = shape[:-1]
    return "name" not in shape or shape in _TEXT_SHAPES


def _thin(window: List[CodeLine]) -> bool:
    """Most lines without an identifier (or only text), or one shape of line over and over: nothing
    there to copy."""
    nameless = sum(_carries_no_name(line) for line in window)
    return nameless > len(window) // 2 or len({line.shape for line in window}) == 1


def _windows(files: Dict[str, List[CodeLine]]) -> Dict[tuple, List[Tuple[str, int]]]:
    """Each shape of window that is not thin -> its places (file, index of its first line of code)."""
    places: Dict[tuple, List[Tuple[str, int]]] = defaultdict(list)
    for name, lines in files.items():
        for first in range(len(lines) - RUN_LINES + 1):
            window = lines[first:first + RUN_LINES]
            if window[0].part == window[-1].part and not _thin(window):
                places[tuple(line.shape for line in window)].append((name, first))
    return places


def _touch(one: Tuple[int, int], other: Tuple[int, int]) -> bool:
    """Two matched windows (first lines on each side) overlap or touch on both sides."""
    return abs(one[0] - other[0]) <= RUN_LINES and abs(one[1] - other[1]) <= RUN_LINES


def _merged(matches: List[Tuple[int, int]]) -> List[List[Tuple[int, int]]]:
    """The matched windows of one pair of files, grouped into runs of windows that overlap or touch."""
    runs: List[List[Tuple[int, int]]] = []
    for match in sorted(matches):
        touching = [run for run in runs if any(_touch(match, window) for window in run)]
        runs = [run for run in runs if run not in touching] + [sum(touching, [match])]
    return runs


def _place(name: str, lines: List[CodeLine], firsts: List[int]) -> str:
    return f"{name}:{lines[min(firsts)].number}-{lines[max(firsts) + RUN_LINES - 1].number}"


def shared_runs(files: Dict[str, List[CodeLine]]) -> List[Finding]:
    """Each pair of places sharing a run of 6 or more same-shape lines, with the run's lines of code."""
    matches: Dict[Tuple[str, str], List[Tuple[int, int]]] = defaultdict(list)
    for places in _windows(files).values():
        if len(places) > TOO_COMMON:
            continue
        for (name, first), (other, other_first) in itertools.combinations(sorted(places), 2):
            if name != other or other_first - first >= RUN_LINES:
                matches[name, other].append((first, other_first))
    found = []
    for (name, other), pair_matches in sorted(matches.items()):
        for run in sorted(_merged(pair_matches)):
            firsts, other_firsts = [w[0] for w in run], [w[1] for w in run]
            found.append(Finding(f"{_place(name, files[name], firsts)} ~ "
                                 f"{_place(other, files[other], other_firsts)}",
                                 max(firsts) - min(firsts) + RUN_LINES))
    return found


def counts(root: Path = SRC) -> Dict[str, List[Finding]]:
    found: Dict[str, List[Finding]] = {"modules over 600 lines": [], "functions over 80 lines": [],
                                       "functions over 6 parameters": [], "ModelDir( outside rundir.py": []}
    files: Dict[str, List[CodeLine]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root.parent).as_posix()
        tree = ast.parse(text)
        files[name] = code_lines(text)
        lines = text.count("\n")
        if lines > MODULE_LINES:
            found["modules over 600 lines"].append(Finding(name, lines))
        for function in _functions(tree):
            length = function.end_lineno - function.lineno + 1
            if length > FUNCTION_LINES:
                found["functions over 80 lines"].append(Finding(f"{name}:{function.lineno} {function.name}", length))
            if _parameters(function) > PARAMETERS:
                found["functions over 6 parameters"].append(
                    Finding(f"{name}:{function.lineno} {function.name}", _parameters(function)))
        if path.name != "rundir.py":
            wraps = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id == "ModelDir"]
            found["ModelDir( outside rundir.py"] += [Finding(f"{name}:{n.lineno}", 1) for n in wraps]
    found[SHARED_RUNS] = shared_runs(files)
    return found


#: Methods a library calls by name, never this package: each with its caller.
HOOKS = {"extra_repr": "torch.nn.Module.__repr__", "ignore_aliases": "yaml's Dumper, for every node it writes"}
#: The tables whose strings export a name: a module's ``__all__``, a lazy package's ``_EXPORTS``.
_EXPORT_TABLES = ("__all__", "_EXPORTS")
#: What the documentation's folder holds that is no source of it: a build's output, the GPU check's records.
_NOT_DOC_SOURCES = ("_build/", "gallery/", "reference/generated/", "gpu-runs/")
_API_SUMMARY = re.compile(r"^\.\. api-summary::\s*agnostophobia\.(\S+)\s*$", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _exported(tree: ast.AST) -> Set[str]:
    """The strings of a module's export tables."""
    found: Set[str] = set()
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id in _EXPORT_TABLES for t in targets) and node.value is not None:
            found |= {n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


def _doc_words(repo: Path) -> Set[str]:
    """Every word of the documentation's sources, the examples, the benchmarks and the README."""
    docs = [p for p in (repo / "docs").rglob("*") if p.suffix in (".md", ".rst", ".py")
            and not p.relative_to(repo / "docs").as_posix().startswith(_NOT_DOC_SOURCES)]
    files = docs + sorted((repo / "examples").rglob("*.py")) + sorted((repo / "benchmarks").rglob("*.py"))
    files += [repo / "README.md"] if (repo / "README.md").is_file() else []
    return {word for path in files for word in _WORD.findall(path.read_text(encoding="utf-8"))}


def _on_api_pages(repo: Path, trees: Dict[Path, ast.AST]) -> Set[str]:
    """The names exported by the packages that a reference page summarizes (each has an API page)."""
    src = repo / "src" / "agnostophobia"
    names: Set[str] = set()
    for page in sorted((repo / "docs" / "reference").glob("*.rst")):
        for module in _API_SUMMARY.findall(page.read_text(encoding="utf-8")):
            path = src.joinpath(*module.split("."))
            path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            names |= _exported(trees[path])
    return names


def dead_functions(repo: Path = REPO) -> List[Finding]:
    """Each function or method of ``src/agnostophobia`` that nothing reaches (the rule is in the
    module's docstring), as ``path:line name``."""
    src = repo / "src" / "agnostophobia"
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(src.rglob("*.py"))}
    reached = set(HOOKS) | _doc_words(repo)
    for tree in trees.values():
        reached |= _exported(tree)
        reached |= {n.id if isinstance(n, ast.Name) else n.attr
                    for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute))}
    shown = _on_api_pages(repo, trees)
    found = []
    for path, tree in trees.items():
        public_methods = {id(f) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) and cls.name in shown
                          for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and not f.name.startswith("_")}
        for function in _functions(tree):
            name = function.name
            if (name.startswith("__") and name.endswith("__")) or name in reached or id(function) in public_methods:
                continue
            found.append(Finding(f"{path.relative_to(src.parent).as_posix()}:{function.lineno} {name}", 1))
    return found


def main() -> int:
    for kind, findings in {**counts(), "dead functions": dead_functions()}.items():
        print(f"{kind}: {len(findings)}")
        for finding in findings:
            print(f"  {finding.where} ({finding.size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
