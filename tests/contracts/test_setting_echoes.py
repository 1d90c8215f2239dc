"""One spelling per setting: a loss's or detector's setting name is written where it is declared
(``k = Setting(int, 50, ...)`` in its class) and nowhere else in ``src/``. Its constructor, its
``settings()``, its repr, the config checks and the reference tables all come from the
declaration, so a second spelling -- a signature default, a ``_take_settings(k=k)``, a string
key in another module -- is an echo that can drift from it.

A setting is checked within its own family: a loss's among the losses, a detector's among the
detectors. A config sets them apart (``loss: {temperature: ...}``, ``detectors: {energy:
{temperature: ...}}``), so a loss's setting may share its name with a detector's, and neither needs
a prefix: a loss's setting name is not looked for in the detectors' modules, nor a detector's in
the losses'. Every other module (the layers that read both) is searched for both.

Two rules, read from the source with :mod:`ast`:

* outside the module that declares a setting, no string literal equals its name and no keyword
  argument is named after it, but for :data:`ALLOWED`; not an echo: a keyword handed to another
  library's function (``torch.addmm(alpha=...)``) or to a class of the package that declares no
  settings (a dataclass's field, ``WeibullTail(scale=...)``), and a registered name where it names
  the thing (``@register("scale")``, ``build_detector("scale")``: the SCALE detector, not a setting);
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
    ("experiments/benchmark_summary.py", "candidates"): "the ranking metric's candidates, read from benchmark.json, "
                                                        "not VOS's",
    ("experiments/tune_detectors.py", "candidates"): "the tuning record's key of the settings tried, not VOS's",
    ("plotting/curves.py", "alpha"): "matplotlib's transparency, not OpenMax's alpha",
    ("plotting/histograms.py", "alpha"): "matplotlib's transparency, not OpenMax's alpha",
    ("training/loss_keys.py", "xi"): "config reader: the old top-level key, still read and moved under loss:",
    ("training/loss_keys.py", "lambda_"): "config reader: the old top-level key, still read and moved under loss:",
}


#: Each family of things with settings: its base class and the folder of the package its members live in.
FAMILIES: Dict[str, Tuple[type, str]] = {"loss": (OpenSetLoss, "losses"), "detector": (Detector, "detectors")}

#: Calls whose first argument is a registered name (a detector called ``scale``), not a setting.
_NAMING_CALLS = ("register", "LOSSES.register", "DETECTORS.register", "LOSSES.get", "DETECTORS.get",
                 "build_loss", "build_detector")

Owners = Set[Tuple[Path, str]]


def _subclasses(cls) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def declarations(package: Path = PACKAGE) -> Dict[str, Dict[str, Owners]]:
    """Every setting a loss or detector of the package declares, by family: ``{family: {name:
    {(file, class)}}}``, the classes that have it (those that declare it and those that inherit it)."""
    found: Dict[str, Dict[str, Owners]] = {family: {} for family in FAMILIES}
    for family, (base, _) in FAMILIES.items():
        for cls in _subclasses(base):
            path = Path(inspect.getsourcefile(cls)).resolve()
            if package.resolve() not in path.parents:
                continue
            for name in cls.SETTINGS:
                found[family].setdefault(name, set()).add((path, cls.__name__))
    return found


def _declaring_files(owners: Owners) -> Set[Path]:
    return {path for path, _ in owners}


def _other_families_folders(family: str) -> Set[str]:
    return {folder for other, (_, folder) in FAMILIES.items() if other != family}


def _settings_free_classes(package: Path, declared: Dict[str, Dict[str, Owners]]) -> Set[str]:
    """The names of the package's classes that declare no settings (dataclasses, named tuples,
    helpers): a keyword handed to one is its own field."""
    with_settings = {cls for names in declared.values() for owners in names.values() for _, cls in owners}
    defined = {node.name for path in package.rglob("*.py") for node in ast.walk(ast.parse(path.read_text("utf-8")))
               if isinstance(node, ast.ClassDef)}
    return defined - with_settings


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


def _last_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _names_a_thing(node: ast.Constant, parents: Dict[ast.AST, ast.AST]) -> bool:
    """The first argument of a registration or look-up (``@register("scale")``): a registered name."""
    call = parents.get(node)
    return isinstance(call, ast.Call) and bool(call.args) and call.args[0] is node \
        and ast.unparse(call.func) in _NAMING_CALLS


def spellings(package: Path = PACKAGE, declared=None) -> Tuple[List[str], List[str]]:
    """``(outside, inside)``: each echo as ``path:line kind name (family setting)``, by the two rules
    above, each family's names looked for outside the other families' folders."""
    declared = declarations(package) if declared is None else declared
    plain_classes = _settings_free_classes(package, declared)
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

        for family, names in declared.items():
            if relative.split("/")[0] in _other_families_folders(family):
                continue  # a detector's module never reads a loss's settings, nor a loss's a detector's

            def echo(node, name: str, kind: str, own_construction: bool = True) -> None:
                owners = names[name]
                where = f"{relative}:{node.lineno} {kind} {name} ({family} setting)"
                if path.resolve() not in _declaring_files(owners):
                    if kind != "parameter" and (relative, name) not in ALLOWED:
                        outside.append(where)
                elif own_construction and classes_around(node) & {c for p, c in owners if p == path.resolve()}:
                    inside.append(where)

            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                    if not _is_declaration(node, parents) and not _names_a_thing(node, parents):
                        echo(node, node.value, "string")
                elif isinstance(node, ast.Call):
                    callee = ast.unparse(node.func)
                    for keyword in node.keywords:
                        if keyword.arg in names and _root(node.func) not in foreign \
                                and _last_name(node.func) not in plain_classes:
                            echo(keyword.value, keyword.arg, "keyword",
                                 callee in _OWN_CONSTRUCTION or callee in {c for _, c in names[keyword.arg]})
                elif isinstance(node, ast.arg) and node.arg in names:
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
    declared = {"detector": {"depth": {((tmp_path / "detectors" / "knob.py").resolve(), "Knob")}}, "loss": {}}
    outside, inside = spellings(tmp_path, declared)
    assert outside == ["experiments/use.py:4 keyword depth (detector setting)",
                       "experiments/use.py:4 string depth (detector setting)"]
    assert sorted(inside) == ["detectors/knob.py:3 parameter depth (detector setting)",
                              "detectors/knob.py:4 keyword depth (detector setting)",
                              "detectors/knob.py:5 string depth (detector setting)"]


def test_a_setting_is_looked_for_among_its_own_family_and_a_registered_name_is_no_echo(tmp_path):
    """A loss's ``depth`` and a detector's ``depth`` are two settings: the loss's name is not looked
    for in the detectors' modules nor the detector's in the losses'; the layers above are searched for
    both. A registered thing's name (``@register("depth")``, ``build_detector("depth")``) and a field of
    a class without settings (``Tail(depth=...)``) are not settings."""
    for folder in ("detectors", "losses", "deploy"):
        (tmp_path / folder).mkdir()
    (tmp_path / "detectors" / "knob.py").write_text(
        "class Knob:\n"
        "    SETTINGS = {'depth': 1}\n")
    (tmp_path / "detectors" / "deep.py").write_text(
        "@register('depth')\n"                               # a detector called depth: its name
        "class Deep:\n"
        "    SETTINGS = {'depth': 1}\n"
        "class Tail:\n"                                     # declares no settings: its fields are its own
        "    depth = 0\n")
    (tmp_path / "losses" / "sink.py").write_text(
        "class Sink:\n"
        "    SETTINGS = {'depth': 1}\n"
        "    mode = 'depth'\n")                              # in its own class: an echo of the loss's depth
    (tmp_path / "deploy" / "use.py").write_text(
        "def use(settings):\n"
        "    return settings['depth'], Tail(depth=2), build_detector('depth')\n")  # both families' depth
    knob = (tmp_path / "detectors" / "knob.py").resolve()
    declared = {"detector": {"depth": {(knob, "Knob"), ((tmp_path / "detectors" / "deep.py").resolve(), "Deep")}},
                "loss": {"depth": {((tmp_path / "losses" / "sink.py").resolve(), "Sink")}}}
    outside, inside = spellings(tmp_path, declared)
    assert sorted(outside) == ["deploy/use.py:2 string depth (detector setting)",
                               "deploy/use.py:2 string depth (loss setting)"]
    assert inside == ["losses/sink.py:3 string depth (loss setting)"]
    # the detector's modules are searched for the detector's depth: a spelling outside its declaring
    # modules is found there, the loss's depth is not looked for
    (tmp_path / "detectors" / "other.py").write_text("LABEL = 'depth'\n")
    outside, _ = spellings(tmp_path, declared)
    assert "detectors/other.py:1 string depth (detector setting)" in outside
    assert not any(line.startswith("detectors/") and "loss setting" in line for line in outside)


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
    declared = {name for names in declarations().values() for name in names}
    present = set()
    for (relative, name) in ALLOWED:
        text = (PACKAGE / relative).read_text(encoding="utf-8")
        if name in declared and (f"'{name}'" in text or f'"{name}"' in text or f"{name}=" in text):
            present.add((relative, name))
    assert present == set(ALLOWED)
