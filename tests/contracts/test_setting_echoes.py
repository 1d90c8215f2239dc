"""One spelling per setting: a loss's or detector's setting name is written where it is declared
(``k = Setting(int, 50, ...)`` in its class) and nowhere else in ``src/``. Its constructor, its
``settings()``, its repr, the config checks and the reference tables all come from the
declaration, so a second spelling -- a signature default, a ``_take_settings(k=k)``, a string
key in another module -- is an echo that can drift from it.

Two rules, read from the source with :mod:`ast`:

* outside the module that declares a setting, no string literal equals its name and no keyword
  argument is named after it (a keyword handed to another library's function, ``torch.addmm(
  alpha=...)``, is that library's name, not ours), but for :data:`ALLOWED`;
* inside a class that has the setting, the name is neither a parameter nor a keyword of its own
  construction (``cls(...)``, ``self._take_settings(...)``, ``super().__init__(...)``) nor a
  string literal: the made constructor takes it (a plugin may still write its own).
"""
from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import agnostophobia
from agnostophobia.detectors import Detector
from agnostophobia.losses import OpenSetLoss

PACKAGE = Path(agnostophobia.__file__).parent

#: ``(module path below the package, name)``: a string or keyword outside the declaring module
#: that is allowed, with why. Each is another concept that happens to share a setting's name,
#: or a reader of the declarations themselves.
_DATASET_FILES = "a DatasetInfo's candidate files, not VOS's candidates"
ALLOWED: Dict[Tuple[str, str], str] = {
    ("data/datasets/cifar.py", "candidates"): _DATASET_FILES,
    ("data/datasets/devanagari.py", "candidates"): _DATASET_FILES,
    ("data/datasets/letters.py", "candidates"): _DATASET_FILES,
    ("data/datasets/mnist.py", "candidates"): _DATASET_FILES,
    ("data/datasets/notmnist.py", "candidates"): _DATASET_FILES,
    ("data/datasets/svhn.py", "candidates"): _DATASET_FILES,
    ("detectors/vim.py", "alpha"): "ViM's fitted scale α, a buffer name in exported files, not OpenMax's alpha",
    ("detectors/stored.py", "top"): "the stored scores' record key of the top pairs, not GEN's top",
    ("training/records/detector_caches.py", "top"): "the stored scores' record key of the top pairs, not GEN's top",
    ("experiments/benchmark.py", "alpha"): "the significance level of the benchmark's tests, not OpenMax's alpha",
    ("experiments/benchmark.py", "margin"): "benchmark.json's key of the comparisons' margin, not Maximal Entropy's",
    ("experiments/benchmark_ranking.py", "candidates"): "benchmark.json's key of the ranking metric's candidates, "
                                                        "not VOS's",
    ("experiments/benchmark_report.py", "candidates"): "the ranking metric's candidates, read from benchmark.json, "
                                                       "not VOS's",
    ("experiments/tune_detectors.py", "candidates"): "the tuning record's key of the settings tried, not VOS's",
    ("plotting/panels.py", "alpha"): "matplotlib's transparency, not OpenMax's alpha",
    ("training/config.py", "xi"): "config reader: the old top-level key, still read and moved under loss:",
    ("training/config.py", "lambda_"): "config reader: the old top-level key, still read and moved under loss:",
}


def _subclasses(cls) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def declarations(package: Path = PACKAGE) -> Dict[str, Set[Tuple[Path, str]]]:
    """Every setting a loss or detector of the package declares: ``{name: {(file, class)}}``, the
    classes that have it (those that declare it and those that inherit it)."""
    found: Dict[str, Set[Tuple[Path, str]]] = {}
    for base in (OpenSetLoss, Detector):
        for cls in _subclasses(base):
            path = Path(inspect.getsourcefile(cls)).resolve()
            if package.resolve() not in path.parents:
                continue
            for name in cls.SETTINGS:
                found.setdefault(name, set()).add((path, cls.__name__))
    return found


def _declaring_files(owners: Set[Tuple[Path, str]]) -> Set[Path]:
    return {path for path, _ in owners}


def _foreign_aliases(tree: ast.Module) -> Set[str]:
    """Names bound by imports of other libraries (``np``, ``torch``, ``F``): a keyword handed to
    them is theirs. ``partial`` forwards its keywords to its first argument, so it is not."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("agnostophobia")}
        elif isinstance(node, ast.ImportFrom) and not node.level and not (node.module or "").startswith("agnostophobia"):
            aliases |= {a.asname or a.name for a in node.names}
    return aliases - {"partial", "functools"}


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _is_declaration(node: ast.Constant, parents: Dict[ast.AST, ast.AST]) -> bool:
    """A key of a ``SETTINGS = {...}`` mapping (the older spelling of a declaration)."""
    mapping = parents.get(node)
    statement = parents.get(mapping)
    return isinstance(mapping, ast.Dict) and node in mapping.keys and isinstance(statement, ast.Assign) \
        and any(isinstance(t, ast.Name) and t.id == "SETTINGS" for t in statement.targets)


#: Calls that construct the class or keep its settings: a keyword to one is a second spelling.
_OWN_CONSTRUCTION = ("cls", "type(self)", "self.__class__", "self._take_settings", "super().__init__")


def spellings(package: Path = PACKAGE, declared=None) -> Tuple[List[str], List[str]]:
    """``(outside, inside)``: each echo as ``path:line kind name``, by the two rules above."""
    declared = declarations(package) if declared is None else declared
    outside, inside = [], []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relative = path.relative_to(package).as_posix()
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        foreign = _foreign_aliases(tree)

        def classes_around(node) -> Set[str]:
            names = set()
            while node in parents:
                node = parents[node]
                if isinstance(node, ast.ClassDef):
                    names.add(node.name)
            return names

        def echo(node, name: str, kind: str, own_construction: bool = True) -> None:
            owners = declared[name]
            where = f"{relative}:{node.lineno} {kind} {name}"
            if path.resolve() not in _declaring_files(owners):
                if kind != "parameter" and (relative, name) not in ALLOWED:
                    outside.append(where)
            elif own_construction and classes_around(node) & {c for p, c in owners if p == path.resolve()}:
                inside.append(where)

        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in declared:
                if not _is_declaration(node, parents):
                    echo(node, node.value, "string")
            elif isinstance(node, ast.Call):
                callee = ast.unparse(node.func)
                for keyword in node.keywords:
                    if keyword.arg in declared and _root(node.func) not in foreign:
                        echo(keyword.value, keyword.arg, "keyword",
                             callee in _OWN_CONSTRUCTION or callee in {c for _, c in declared[keyword.arg]})
            elif isinstance(node, ast.arg) and node.arg in declared:
                echo(node, node.arg, "parameter")
    return outside, inside


def test_the_scan_finds_every_kind_of_echo(tmp_path):
    """The scanner itself: each spelling it must see, in a package laid out as ours."""
    (tmp_path / "detectors").mkdir()
    (tmp_path / "detectors" / "knob.py").write_text(
        "class Knob:\n"
        "    SETTINGS = {'depth': 1}\n"                      # the declaration: not an echo
        "    def __init__(self, depth=1):\n"                 # parameter
        "        self._take_settings(depth=depth)\n"         # keyword of its own construction
        "        self.label = 'depth'\n"                     # string
        "def formula(x, *, depth):\n"                       # the module's own helper: allowed
        "    return x\n")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "use.py").write_text(
        "import numpy as np\n"
        "def run(build):\n"
        "    np.full(3, depth=2)\n"                          # another library's keyword: allowed
        "    return build('knob', depth=2), {'depth': 3}\n")  # keyword, string
    declared = {"depth": {((tmp_path / "detectors" / "knob.py").resolve(), "Knob")}}
    outside, inside = spellings(tmp_path, declared)
    assert outside == ["experiments/use.py:4 keyword depth", "experiments/use.py:4 string depth"]
    assert sorted(inside) == ["detectors/knob.py:3 parameter depth", "detectors/knob.py:4 keyword depth",
                              "detectors/knob.py:5 string depth"]


@functools.lru_cache(maxsize=None)
def package_spellings() -> Tuple[List[str], List[str]]:
    return spellings()


def test_no_setting_name_is_spelled_outside_the_module_that_declares_it():
    outside, _ = package_spellings()
    assert outside == [], "a loss's or detector's setting spelled again (read it from its declaration):\n" + \
        "\n".join(outside)


def test_a_class_spells_each_of_its_settings_once():
    _, inside = package_spellings()
    assert inside == [], "a setting spelled again in its own class (the made constructor takes it):\n" + \
        "\n".join(inside)


def test_every_allowed_echo_is_still_there():
    """An entry of :data:`ALLOWED` whose spelling is gone is dropped, so that the list stays narrow."""
    declared = declarations()
    present = set()
    for (relative, name) in ALLOWED:
        text = (PACKAGE / relative).read_text(encoding="utf-8")
        if name in declared and (f"'{name}'" in text or f'"{name}"' in text or f"{name}=" in text):
            present.add((relative, name))
    assert present == set(ALLOWED)
