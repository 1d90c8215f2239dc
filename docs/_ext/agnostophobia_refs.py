"""References generated from the package's declarations, never retyped.

Directives (used in docs/reference/*.md):

``.. loss-settings::``
    one section per registered loss (``agnostophobia.losses.LOSSES``, plugins included), with a
    table of its hyper-parameters from ``OpenSetLoss.hyperparameters()`` (``SETTINGS`` or inferred).
``.. detector-settings::``
    one section per registered detector (``agnostophobia.detectors.DETECTORS``) and its
    ``SETTINGS``: type, default, allowed values, tuning grid, meaning.
``.. config-keys::``
    every key of an experiment YAML: the fields of ``TrainConfig`` (their ``setting(...)``
    declarations, or annotation and default) and the experiment keys of ``ExperimentConfig``;
    a key's meaning is its declaration's ``doc`` or the comment written at its declaration.
    ``:which: protocol``: every key of a ``protocol:`` mapping (a protocol from files), from the
    declarations of ``FileProtocolSpec``'s fields: the types that take it, whether it is required.
``.. default-sources::``
    where each default of every registered loss comes from and what differs here: each
    setting's ``source`` and ``differs``, each loss's recipe (``fine_tune`` or ``scratch_recipe``)
    and other ``provenance``, and the values and fine-tuning epochs the shipped configs set
    (docs/training-peers.md, inside ``{eval-rst}``: its output is RST, as the others').
``.. api-summary:: agnostophobia.PACKAGE``
    the module page's tables of its public classes, functions and exceptions (the package's
    ``__all__``), each name linking to a page of its own (scikit-learn's layout). Those pages are
    written before the sources are read (:func:`write_api_pages`), by autosummary from the
    templates in ``docs/_templates/autosummary/``.

A loss or detector registered tomorrow appears without an edit here: the directives iterate the
registries.

Hooks into autodoc (the API pages):

- a loss's or detector's class entry ends with the table of its settings, rendered from its
  declarations (the same table as the settings reference), and the ``SETTINGS`` attribute itself,
  whose value would be printed as a ``Setting(type=<class 'float'>, ...)`` repr, is left out;
- what a class inherits from torch's ``nn.Module`` without writing its own (the docstring of
  ``forward`` that says "Define the computation performed at every call", ``extra_repr``) is
  left out;
- an attribute's ``#:`` comment is shown as written (napoleon would read "A (B: C)" as a type).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import re
import tempfile
import tokenize
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from agnostophobia.settings import Setting


def _code(text) -> str:
    return f"``{text}``" if text not in ("", None) else ""


def describe_allowed(setting: Setting) -> str:
    """The allowed values of a declared setting, in the words of the validation messages."""
    if setting.refusal.startswith("must be "):  # the words it is refused with say what it allows
        allowed = setting.refusal[len("must be "):]
    elif setting.choices:
        allowed = "one of " + ", ".join(_code(c) for c in setting.choices)
    elif setting.type in (int, float) and (setting.low is not None or setting.high is not None):
        allowed = _code(setting.describe_range())
    else:
        allowed = "any " + setting.type.__name__.lower()  # a Path: "any path"
    return allowed + (" or ``null``" if setting.nullable else "")


def _default(value) -> str:
    if value is None:
        return "``null``"
    if isinstance(value, bool):
        return _code(str(value).lower())
    return _code(repr(value) if isinstance(value, str) else value)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def settings_table(settings: Dict[str, Setting], key_names: Optional[Dict[str, str]] = None) -> List[str]:
    """An RST list-table of ``settings`` (name -> Setting)."""
    if not settings:
        return ["No settings: nothing to choose.", ""]
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 14 8 12 20 16 30", "",
             "   * - setting", "     - type", "     - default", "     - allowed", "     - tuned over",
             "     - meaning"]
    for name, s in settings.items():
        shown = (key_names or {}).get(name, name)
        lines += [f"   * - ``{shown}``", f"     - {s.type.__name__}", f"     - {_default(s.default)}",
                  f"     - {_cell(describe_allowed(s))}",
                  f"     - {', '.join(_code(g) for g in s.grid) if s.grid else ''}",
                  f"     - {_cell(s.doc)}"]
    return lines + [""]


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


class _Generated(SphinxDirective):
    has_content = False

    def render(self, rst: List[str]) -> List[nodes.Node]:
        # reStructuredText, whatever the page's parser (the pages that use these are .rst)
        container = nodes.section()
        self.state.nested_parse(StringList(rst, source="<agnostophobia_refs>"), self.content_offset, container,
                                match_titles=True)
        return container.children


class LossSettings(_Generated):
    def run(self):
        return self.render(loss_settings_rst())


def loss_settings_rst() -> List[str]:
    """One section per registered loss with the table of its hyper-parameters."""
    from agnostophobia.losses import LOSSES

    return _class_sections(LOSSES, lambda cls: settings_table(cls.hyperparameters(), yaml_names()))


def _class_sections(registry, table: Callable[[type], List[str]]) -> List[str]:
    """One section per class registered in ``registry``: its name as the heading, the first line
    of its docstring with a link to its class page (a class of this package), then ``table(cls)``."""
    rst: List[str] = []
    for name in registry.registered():
        cls = registry.get(name)
        target = f"{cls.__module__}.{cls.__qualname__}"
        rst += [f"``{name}``", "~" * (len(name) + 4), "",
                f"{_first_line(cls)} Class: :class:`~{target}`"
                if cls.__module__.startswith("agnostophobia.") else _first_line(cls), ""]
        rst += table(cls)
    return rst


class DetectorSettings(_Generated):
    def run(self):
        return self.render(detector_settings_rst())


def detector_settings_rst() -> List[str]:
    """One section per registered detector with the table of its declared settings."""
    from agnostophobia.detectors import DETECTORS

    return _class_sections(DETECTORS, lambda cls: settings_table(dict(getattr(cls, "SETTINGS", {}))))


class ExportableScores(_Generated):
    """``.. exportable-scores::``: which registered detectors ``export`` writes, and why each other
    one is refused, from the registry (a detector registered tomorrow appears without an edit)."""

    def run(self):
        return self.render(exportable_scores_rst())


def exportable_scores_rst() -> List[str]:
    """Two bullets: the exportable detectors by name and title, and each refused one with its reason."""
    from agnostophobia.detectors import DETECTORS

    names = DETECTORS.names()
    writes = [n for n in names if DETECTORS.get(n).why_not_exportable() is None]
    refused = [n for n in names if n not in writes]
    rst = ["- Exported: " + ", ".join(f"``{n}`` ({DETECTORS.get(n).title})" for n in writes) + "."]
    if refused:
        rst.append("- Refused in one line saying why: " + "; ".join(
            f"``{n}`` ({DETECTORS.get(n).why_not_exportable().rstrip('.')})" for n in refused) + ".")
    return rst + [""]


class SourceRow(NamedTuple):
    """One row of the table of where each default comes from: a setting (or a fact that is no
    setting: the loss, its recipe, its auxiliary outliers) of the ``approaches`` that share its
    declaration, the value used here, where it was read and what differs here."""

    approaches: List[str]
    what: str  # ``name`` of a setting, as a config's loss: writes it; *topic* of a Provenance
    ours: str
    source: str
    differs: str


def yaml_names() -> Dict[str, str]:
    """A loss setting's name as a config's ``loss:`` writes it, where it differs from the keyword
    (``lambda_`` is ``lambda``): :data:`agnostophobia.training.loss_keys.LOSS_ALIASES` reversed."""
    from agnostophobia.training.loss_keys import LOSS_ALIASES

    return {keyword: spelled for spelled, keyword in LOSS_ALIASES.items()}


def shipped_trains() -> List[tuple]:
    """``(where, top, train)`` for each budget of each config shipped with the package
    (``lenet++.yaml``, ...), and for its top level (``budget`` None): where it is, in words, and
    the :class:`~agnostophobia.training.TrainConfig` of its top level and its own. The configs
    are the facts that override the declarations' defaults."""
    from agnostophobia.training.config import CONFIG_DIR, load_experiment

    trains = []
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        experiment = load_experiment(path)
        trains.append((f"``{path.name}``", experiment.train, experiment.train))
        trains += [(f"``{path.name}``, budget ``{budget}``", experiment.train, experiment.for_budget(budget).train)
                   for budget in experiment.budgets]
    return trains


def _config_values(trains: List[tuple], read) -> List[str]:
    """``where: VALUE`` for each shipped config's top level and each budget where ``read(train
    config)`` is set (not None), a budget only where it differs from its config's top level."""
    return [f"{where}: {_default(read(train))}" for where, top, train in trains
            if read(train) is not None and (train is top or read(train) != read(top))]


def _setting_row(approach: str, name: str, setting: Setting, trains: List[tuple]) -> SourceRow:
    """A setting's row: its declaration, and the values the shipped configs give it instead."""
    shipped = _config_values(trains, lambda train: train.loss.get(name))
    ours = "; ".join([_default(setting.default) + " (declared)" * bool(shipped)] + shipped)
    return SourceRow([approach], f"``{yaml_names().get(name, name)}``", ours, setting.source, setting.differs)


def _fine_tune_row(approach: str, recipe, trains: List[tuple], images: str = "") -> SourceRow:
    """A fine-tuning recipe's row (``images``: the kind of images it is for, "" for the declared
    one): its declaration, and the configs that change its epochs (``fine_tune_epochs``), read from them."""
    changed = [f"{where} epochs (``fine_tune_epochs``), not the recipe's {recipe.epochs}"
               for where in _config_values(trains, lambda train: train.fine_tune_epochs)]
    shared = recipe.schedule()  # the default: the run's shared batches (fine_tune_exact: false)
    ours = (f"fine-tuned from the same seed's ``{recipe.start}`` network: {recipe.epochs} epochs, "
            f"``{recipe.optimizer}`` at lr {recipe.lr:g}, ``{shared['scheduler']}``, weight decay "
            f"{recipe.weight_decay:g}; with ``fine_tune_exact: true`` ``{recipe.scheduler}`` and batches of "
            f"{recipe.batch[0]} knowns + {recipe.batch[1]} negatives")
    what = f"*recipe ({images})*" if images else "*recipe*"
    return SourceRow([approach], what, ours, recipe.source, "; ".join(filter(None, [recipe.departures(), *changed])))


def _provenance_row(approach: str, fact) -> SourceRow:
    return SourceRow([approach], f"*{fact.topic}*", fact.ours, fact.source, fact.differs)


def _loss_rows(approach: str, cls, trains: List[tuple]) -> List[tuple]:
    """``(declaration, row)`` for each fact of a loss: its settings, its recipe (its
    ``fine_tune``, or else its ``scratch_recipe``), its other ``provenance``."""
    rows = [(setting, _setting_row(approach, name, setting, trains))
            for name, setting in cls.hyperparameters().items()]
    if cls.fine_tune is not None:
        rows.append((cls.fine_tune, _fine_tune_row(approach, cls.fine_tune, trains)))
        if cls.fine_tune.glyphs is not None:
            rows.append((cls.fine_tune.glyphs, _fine_tune_row(approach, cls.fine_tune.glyphs, trains, "glyphs")))
    elif cls.scratch_recipe is not None:
        rows.append((cls.scratch_recipe, _provenance_row(approach, cls.scratch_recipe)))
    return rows + [(fact, _provenance_row(approach, fact)) for fact in cls.provenance]


def default_source_rows(trains: Optional[List[tuple]] = None) -> List[SourceRow]:
    """The rows of every registered loss, in the order of registration; approaches that share a
    declaration (``outlier-exposure-ft`` inherits ``outlier-exposure``'s settings) share its row.

    Args:
        trains: the shipped configs' train configs (:func:`shipped_trains`, read where None).
    """
    from agnostophobia.losses import LOSSES

    trains = shipped_trains() if trains is None else trains
    rows: Dict[int, SourceRow] = {}
    for approach in LOSSES.registered():
        for declaration, row in _loss_rows(approach, LOSSES.get(approach), trains):
            if id(declaration) in rows:
                rows[id(declaration)].approaches.append(approach)
            else:
                rows[id(declaration)] = row
    return list(rows.values())


class DefaultSources(_Generated):
    """``.. default-sources::``: the table of where each default of every registered loss comes
    from and what differs here (each setting's ``source`` and ``differs``, each recipe's and other
    fact's), with the shipped configs' values; a loss registered tomorrow appears without an edit."""

    def run(self):
        return self.render(default_sources_rst(default_source_rows()))


def default_sources_rst(rows: List[SourceRow]) -> List[str]:
    """An RST list-table of ``rows``: approach, setting, our default, source, what differs."""
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 12 12 14 40 22", "",
             "   * - approach", "     - setting", "     - our default", "     - source of the value",
             "     - what differs here"]
    for row in rows:
        lines += [f"   * - {', '.join(f'``{name}``' for name in row.approaches)}", f"     - {row.what}",
                  f"     - {_cell(row.ours) or ' '}", f"     - {_cell(row.source) or 'not stated'}",
                  f"     - {_cell(row.differs) or 'nothing'}"]
    return lines + [""]


def field_comments(cls) -> Dict[str, str]:
    """The comments written at each field of a dataclass: the comment lines right above the field
    and the comment at the end of its line, by field name."""
    source = inspect.getsource(cls)
    comments: Dict[str, str] = {}
    pending: List[str] = []
    line_comment: Dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            line_comment[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    field = re.compile(r"^    (\w+)\s*:")
    current = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(line_comment.get(number, ""))
            continue
        match = field.match(line)
        if not match and current and line.startswith("     ") and number in line_comment:  # a continuation line
            comments[current] = " ".join(t for t in (comments[current], line_comment[number]) if t)
        if match:
            current = match.group(1)
            pending = [] if any(" below" in t for t in pending) else pending  # a comment introducing a group
            text = pending + ([line_comment[number]] if number in line_comment else [])
            comments[match.group(1)] = " ".join(t for t in text if t)
        if stripped.startswith("def "):
            break
        pending = [] if not stripped.startswith("#") else pending
    fields = set(getattr(cls, "__annotations__", {}))  # not a docstring's "Examples:" line
    return {name: text for name, text in comments.items() if name in fields} if fields else comments


def _annotation(field: dataclasses.Field) -> str:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    return str(kind).replace("typing.", "")


def config_rows(cls, skip=()) -> List[tuple]:
    """(key, type, default, allowed, resumable, meaning) per field of the dataclass ``cls``."""
    comments = field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        s: Optional[Setting] = f.metadata.get("setting")
        if s is not None:
            default, allowed = _default(s.default), describe_allowed(s)
            kind = s.type.__name__ + (" or null" if s.nullable else "")
            resumable = "yes" if s.resumable else "no"
            meaning = " ".join(t for t in (s.doc, comments.get(f.name, "")) if t)
        else:
            if f.default is not dataclasses.MISSING:
                default = _default(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = _default(f.default_factory())
            else:
                default = "(required)"
            kind, allowed, resumable, meaning = _annotation(f), "", "no", comments.get(f.name, "")
        rows.append((f.name, kind, default, allowed, resumable, meaning))
    return rows


def rows_table(rows: List[tuple]) -> List[str]:
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 16 12 14 18 8 32", "",
             "   * - key", "     - type", "     - default", "     - allowed", "     - a resume may change it",
             "     - meaning"]
    for key, kind, default, allowed, resumable, meaning in rows:
        lines += [f"   * - ``{key}``", f"     - {_cell(kind)}", f"     - {_cell(default)}", f"     - {_cell(allowed)}",
                  f"     - {resumable}", f"     - {_cell(meaning)}"]
    return lines + [""]


def protocol_rows() -> List[tuple]:
    """(key, types, type, default, allowed, meaning) per declared key of a ``protocol:`` mapping
    (``FileProtocolSpec``'s fields, in their order)."""
    from agnostophobia.data.file_protocols.spec import PROTOCOL_KEYS, TYPES

    rows = []
    for key, s in PROTOCOL_KEYS.items():
        kind = {list: "list of names"}.get(s.type, s.type.__name__.lower())
        default = "(required)" if s.required else "``[]``" if s.default == () else _default(s.default)
        rows.append((key, ", ".join(s.types or TYPES), kind, default, describe_allowed(s), s.doc))
    return rows


def protocol_table(rows: List[tuple]) -> List[str]:
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 16 16 10 10 20 28", "",
             "   * - key", "     - types", "     - type", "     - default", "     - allowed", "     - meaning"]
    for row in rows:
        key, rest = row[0], row[1:]
        lines += [f"   * - ``{key}``"] + [f"     - {_cell(cell) or ' '}" for cell in rest]
    return lines + [""]


class ConfigKeys(_Generated):
    option_spec = {"which": lambda text: text.strip()}

    def run(self):
        from agnostophobia.training.config import ExperimentConfig, TrainConfig

        which = self.options.get("which", "train")
        if which == "protocol":
            return self.render(protocol_table(protocol_rows()))
        if which == "train":
            return self.render(rows_table(config_rows(TrainConfig)))
        return self.render(rows_table(config_rows(ExperimentConfig, skip=("train",))))


def _describe(obj) -> str:
    """One line for a registered object: its docstring's first sentence, or its fields' summary."""
    doc = getattr(obj, "description", None) or getattr(obj, "title", None)
    if isinstance(doc, str) and doc:
        return _cell(doc)
    return _cell(_first_line(obj).split(". ")[0]) if inspect.getdoc(obj) else ""


class Registries(_Generated):
    """Every name of the package's registries (losses, detectors, models, datasets, protocols),
    and an API entry for each registered class that the package's ``__all__`` does not export."""

    def run(self):
        import agnostophobia.detectors as detectors
        import agnostophobia.losses as losses
        from agnostophobia.data import DATASETS, PROTOCOLS
        from agnostophobia.models import MODELS

        rst: List[str] = []
        for title, registry, package in (("Losses (``agnostophobia.losses.LOSSES``)", losses.LOSSES, losses),
                                         ("Detectors (``agnostophobia.detectors.DETECTORS``)", detectors.DETECTORS,
                                          detectors),
                                         ("Models (``agnostophobia.models.MODELS``)", MODELS, None),
                                         ("Datasets (``agnostophobia.data.DATASETS``)", DATASETS, None),
                                         ("Protocols (``agnostophobia.data.PROTOCOLS``)", PROTOCOLS, None)):
            names = registry.registered()
            shown = [n for n in names if not n.startswith("torchvision/")]
            module = title.split("``")[1].rsplit(".", 1)[0]  # short references in docstrings resolve there
            rst += [title, "-" * len(title), "", f".. currentmodule:: {module}", "", ".. list-table::", "   :header-rows: 1", "   :widths: 25 75", "",
                    "   * - name", "     - what it is"]
            for name in shown:
                rst += [f"   * - ``{name}``", f"     - {_describe(registry.get(name)) or ' '}"]
            rst.append("")
            others = len(names) - len(shown)
            if others:
                rst += [f"and {others} torchvision classification architectures as ``torchvision/<name>`` "
                        "(``torchvision.models.list_models``), each with the open-set head "
                        "(:class:`agnostophobia.models.TorchvisionBackbone`).", ""]
            if package is not None:
                for name in names:
                    cls = registry.get(name)
                    if inspect.isclass(cls) and cls.__name__ not in package.__all__:
                        rst += [f".. autoclass:: {cls.__module__}.{cls.__qualname__}", "   :members:",
                                "   :show-inheritance:", ""]
        return self.render(rst)


class Constants(_Generated):
    """``.. constants:: agnostophobia.PACKAGE``: an entry for each public name (:func:`public_names`)
    that is neither a class, a function nor a module (autodoc's ``automodule`` passes over data
    that a package imports from its submodules), with the ``#:`` comment written where it is
    defined and its value where that is a plain one."""

    required_arguments = 1

    def run(self):
        import importlib
        import sys as _sys

        from sphinx.pycode import ModuleAnalyzer

        package = importlib.import_module(self.arguments[0])
        comments: Dict[str, List[str]] = {}
        for modname in sorted(m for m in list(_sys.modules) if m == package.__name__ or m.startswith(package.__name__ + ".")):
            try:
                found = ModuleAnalyzer.for_module(modname).find_attr_docs()
            except Exception:  # a compiled or source-less module documents nothing
                continue
            for (scope, name), lines in found.items():
                if scope == "" and getattr(_sys.modules[modname], name, None) is getattr(package, name, object()):
                    comments.setdefault(name, [line for line in lines if line.strip()])
        rst: List[str] = []
        for name in public_names(package.__name__):
            value = getattr(package, name)
            if inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value):
                continue
            plain = isinstance(value, (int, float, str, tuple, frozenset)) and len(repr(value)) < 200
            # the module as an option: a dotted name would be read as a class inside the current
            # module (agnostophobia.losses.agnostophobia.losses.LOSSES)
            rst += [f".. py:data:: {name}", f"   :module: {package.__name__}"]
            rst += [f"   :type: {type(value).__module__ + '.' if type(value).__module__ != 'builtins' else ''}"
                    f"{type(value).__qualname__}"]
            if plain:
                rst += [f"   :value: {value!r}"]
            rst += [""] + [f"   {line}" for line in comments.get(name, [])] + [""]
        return self.render(rst)


#: Where each object's own page is written, relative to docs/reference/ (git-ignored).
API_PAGES = "generated"
_API_SUMMARY = re.compile(r"^\.\. api-summary::\s*(\S+)\s*$", re.MULTILINE)
_KINDS = ("Classes", "Functions", "Exceptions")


def public_names(modname: str) -> List[str]:
    """The public names of a module: its ``__all__``, or (a module without one) the names it
    defines that do not start with an underscore."""
    module = importlib.import_module(modname)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name, value in vars(module).items()
                 if not name.startswith("_") and getattr(value, "__module__", None) == modname]
    return list(names)


def api_objects(modname: str) -> Dict[str, List[str]]:
    """The classes, functions and exceptions among a module's public names that get a page of
    their own, by kind, in the order of ``__all__``. A name re-exported from another part of the
    package (``detectors.Setting``, which is :class:`agnostophobia.settings.Setting`) has its page
    at home and is left out here; data (registries, constants) is on the module page.
    """
    module = importlib.import_module(modname)
    kinds: Dict[str, List[str]] = {kind: [] for kind in _KINDS}
    for name in public_names(modname):
        value = getattr(module, name)
        if not (inspect.isclass(value) or inspect.isroutine(value)):
            continue
        home = getattr(value, "__module__", "") or ""
        if home != modname and not home.startswith(modname + "."):
            continue
        kind = ("Exceptions" if inspect.isclass(value) and issubclass(value, BaseException)
                else "Classes" if inspect.isclass(value) else "Functions")
        kinds[kind].append(f"{modname}.{name}")
    return kinds


class ApiSummary(_Generated):
    """``.. api-summary:: agnostophobia.PACKAGE``: a section per kind (classes, functions,
    exceptions), each an autosummary table whose names link to their own pages."""

    required_arguments = 1

    def run(self):
        modname = self.arguments[0]
        rst: List[str] = [f".. currentmodule:: {modname}", ""]
        for kind, names in api_objects(modname).items():
            if names:
                rst += [kind, "-" * len(kind), "", ".. autosummary::", f"   :toctree: {API_PAGES}/",
                        "   :nosignatures:", ""] + [f"   {name[len(modname) + 1:]}" for name in names] + [""]
        return self.render(rst)


def documented_modules(reference: Path) -> List[str]:
    """The modules named by an ``api-summary`` directive in the reference pages."""
    return [match.group(1) for page in sorted(reference.glob("*.rst"))
            for match in _API_SUMMARY.finditer(page.read_text(encoding="utf-8"))]


def write_api_pages(app) -> None:
    """Write one page per class, function and exception of every module that a reference page
    summarizes, from the autosummary templates (docs/_templates/autosummary/), before the
    sources are read; a page whose object left ``__all__`` is deleted (else it would be a page in
    no table of contents)."""
    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    reference = Path(app.srcdir) / "reference"
    target = reference / API_PAGES
    names = [name for modname in documented_modules(reference)
             for kind in api_objects(modname).values() for name in kind]
    with tempfile.TemporaryDirectory() as folder:
        listing = Path(folder) / "api.rst"
        listing.write_text("\n".join([".. autosummary::", f"   :toctree: {target}", ""]
                                     + [f"   {name}" for name in names]) + "\n", encoding="utf-8")
        generate_autosummary_docs([str(listing)], app=app, imported_members=True, overwrite=True)
    for stale in set(target.glob("*.rst")) - {target / f"{name}.rst" for name in names}:
        stale.unlink()


def _registered():
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    return {registry: set(registry.names()) for registry in (LOSSES, DETECTORS)}


#: The package's own losses and detectors (and installed plugins'), before any example ran.
_PACKAGE_NAMES = _registered()


def forget_example_registrations(gallery_conf, fname, when=None):
    """sphinx-gallery's reset after each example: an example that registers its own loss or
    detector (plot_own_loss_and_detector.py) does so in this process, and the reference pages
    list the package's registries, so what an example added is removed again."""
    for registry, names in _PACKAGE_NAMES.items():
        for name in set(registry.names()) - names:
            del registry._items[name]


def class_settings_table(cls) -> List[str]:
    """The settings table that ends a loss's or detector's API entry (empty for other classes)."""
    from agnostophobia.detectors import Detector
    from agnostophobia.losses import OpenSetLoss

    if not inspect.isclass(cls):
        return []
    if issubclass(cls, OpenSetLoss):
        settings, keys = cls.hyperparameters(), yaml_names()
        where = "Set under ``loss:`` in an experiment YAML"
    elif issubclass(cls, Detector):
        settings, keys = dict(getattr(cls, "SETTINGS", {})), None
        where = "Set under ``detectors.NAME:`` in an experiment YAML or as keywords of the constructor"
    else:
        return []
    if not settings:
        return ["", ".. rubric:: Settings", "", "None: nothing to choose.", ""]
    return (["", ".. rubric:: Settings", "",
             f"{where}; ``tune`` searches the \"tuned over\" values (:doc:`/reference/settings`).", ""]
            + made_constructor_note(cls) + settings_table(settings, keys))


def made_constructor_note(cls) -> List[str]:
    """Where a class's constructor is made from its settings, one sentence saying what its other
    arguments are and where they are described (the class it inherits them from)."""
    from agnostophobia.settings import foundation_class

    if not getattr(cls.__init__, "_made_from_settings", False):
        return []
    declared = set(getattr(cls, "SETTINGS", {}))
    others = [name for name in inspect.signature(cls).parameters if name not in declared]
    source = foundation_class(cls)
    if not others or source is object:
        return []
    names = ", ".join(f"``{name}``" for name in others)
    return [f"The constructor takes {names} as :class:`~{source.__module__.split('._')[0]}.{source.__name__}` "
            f"does, then these settings as keyword-only arguments.", ""]


def is_record(cls) -> bool:
    """A dataclass or a named tuple: a class whose constructor's parameters are its fields."""
    return inspect.isclass(cls) and (dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields")))


def _field_comment_as_docstring(app, what, name, obj, options, lines):
    """A field of a dataclass or named tuple is described by the comment written at it (as the
    configuration reference reads ``TrainConfig``'s): its entry shows that comment, where it has
    no docstring of its own (a named tuple's field has "Alias for field number N")."""
    if what not in ("attribute", "property") or (lines and not lines[0].startswith("Alias for field number")):
        return
    owner_name, _, field = name.rpartition(".")
    module_name, _, class_name = owner_name.rpartition(".")
    try:
        owner = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError):
        return
    comment = field_comments(owner).get(field) if is_record(owner) else None
    if comment:
        lines[:] = [_plain(comment), ""]


def _plain(text: str) -> str:
    """A comment, written as plain text, as reStructuredText: "|x|" or "a * b" is no markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")


def declared_parameters(cls) -> Dict[str, str]:
    """What a class's declarations say of its constructor's parameters, as reStructuredText, by
    name: a loss's or detector's ``SETTINGS`` (each declaration's ``doc``), a dataclass's or named
    tuple's fields (the comment written at each), and the experiment configuration's fields
    (``TrainConfig``, ``ExperimentConfig``: the meaning the configuration reference shows, the
    declaration's ``doc`` and the comment)."""
    from agnostophobia.training.config import ExperimentConfig, TrainConfig

    docs = {name: _cell(s.doc) for name, s in dict(getattr(cls, "SETTINGS", {}) or {}).items() if s.doc}
    if is_record(cls):
        docs.update({name: _plain(text) for name, text in field_comments(cls).items()})
    if cls in (TrainConfig, ExperimentConfig):
        docs.update({row[0]: _cell(row[5]) for row in config_rows(cls)})
    return {name: " ".join(doc.split()) for name, doc in docs.items() if doc.strip()}


def napoleon_lines(docstring: str, config, what: str = "class") -> List[str]:
    """A Google- or numpydoc-style docstring as napoleon gives it to autodoc (numpydoc read
    first, then Google, as its ``autodoc-process-docstring`` handler does)."""
    from sphinx.ext.napoleon.docstring import GoogleDocstring, NumpyDocstring

    lines = inspect.cleandoc(docstring or "").splitlines()
    if config.napoleon_numpy_docstring:
        lines = NumpyDocstring(lines, config, what=what).lines()
    if config.napoleon_google_docstring:
        lines = GoogleDocstring(lines, config, what=what).lines()
    return lines


_FIELD = re.compile(r"^:(param|type)\s+([^:]+):(.*)$")
_OTHER_FIELD = re.compile(r"^:(returns?|rtype|raises?|yields?|ytype|keyword|kwtype|var|ivar|cvar)\b[^:]*:")


def parameter_fields(lines: List[str]) -> Dict[str, str]:
    """The ``:param NAME: text`` fields of reStructuredText ``lines`` (what napoleon makes of an
    ``Args:`` section), by name as autodoc reads it: ``:param int x:`` is ``x``, and of
    ``:param a, b:`` only ``b`` (autodoc adds an empty entry for ``a``), and ``:param \\*\\*kw:``
    is ``kw``. The text joins the field's continuation lines."""
    fields: Dict[str, str] = {}
    current = None
    for line in lines:
        match = _FIELD.match(line)
        if match:
            current = None
            if match.group(1) == "param":
                parts = match.group(2).split()
                current = (parts[0] if len(parts) == 1 else " ".join(parts[1:])).replace("\\", "").lstrip("*")
                fields[current] = match.group(3).strip()
        elif current and line[:1].isspace() and line.strip():
            fields[current] = " ".join(t for t in (fields[current], line.strip()) if t)
        else:
            current = None
    return fields


def constructor_parameters(cls, config) -> Dict[str, str]:
    """What the class that writes a class's ``__init__`` says of its parameters (its ``__init__``'s
    ``Args:`` and, for a class that inherits the constructor, its own docstring's), by name: a
    class page shows the class docstring alone, so a loss's ``num_classes`` (written at
    :class:`~agnostophobia.losses.OpenSetLoss`'s ``__init__``) would show no description. A
    constructor made from settings takes its other parameters as the class it hands them to
    (``foundation_class``) does, and is described by that class."""
    from agnostophobia.settings import foundation_class

    owner = next((k for k in cls.__mro__ if "__init__" in k.__dict__), object)
    if getattr(owner.__dict__.get("__init__"), "_made_from_settings", False):
        owner = foundation_class(owner)  # a made constructor hands the others on to it
    if owner is object:
        return {}
    docs = [owner.__dict__["__init__"].__doc__] + ([inspect.getdoc(owner)] if owner is not cls else [])
    found: Dict[str, str] = {}
    for doc in docs:
        found.update({name: text for name, text in parameter_fields(napoleon_lines(doc, config)).items() if text})
    return found


def with_parameter_descriptions(cls, lines: List[str], config) -> List[str]:
    """A class docstring's lines (after napoleon) with a ``:param:`` field for each constructor
    parameter the docstring does not describe but the class's declarations or constructor do,
    next to the docstring's own (else at its end): autodoc (``autodoc_typehints =
    "description"``) would otherwise list each such parameter with its type and no description."""
    try:
        names = [name for name in inspect.signature(cls).parameters if name not in ("self", "cls")]
    except (TypeError, ValueError):
        return lines
    described = parameter_fields(lines)
    known = {**constructor_parameters(cls, config), **declared_parameters(cls)}
    # a trailing underscore (``lambda_``) is escaped: reStructuredText would read it as a link
    # reference, and autodoc would list the typed parameter a second time, without this text
    added = [f":param {name[:-1] + chr(92) + '_' if name.endswith('_') else name}: {known[name]}"
             for name in names if name not in described and name in known]
    if not added:
        return lines
    fields = [i for i, line in enumerate(lines) if _FIELD.match(line)]
    if fields:  # after the docstring's own, in their field list
        end = fields[-1] + 1
        while end < len(lines) and lines[end][:1].isspace() and lines[end].strip():
            end += 1
        return lines[:end] + added + lines[end:]
    others = [i for i, line in enumerate(lines) if _OTHER_FIELD.match(line)]
    if others:  # before its Returns or Raises, in their field list: autodoc completes each list
        return lines[:others[0]] + added + lines[others[0]:]
    return lines + [""] + added + [""]


def _parameters_on_the_class_page(app, what, name, obj, options, lines):
    if what == "class" and inspect.isclass(obj):
        lines[:] = with_parameter_descriptions(obj, lines, app.config)


def _settings_after_class_docstring(app, what, name, obj, options, lines):
    if what == "class":
        lines.extend(class_settings_table(obj))


def _torch_inherited(obj) -> bool:
    """A method whose docstring comes from torch: the class did not write it (``extra_repr``), or
    wrote it without a docstring and no class of this package above it documents it (a model's
    ``forward``; a loss's ``forward`` shows the contract :class:`~agnostophobia.losses.OpenSetLoss`
    documents)."""
    from torch import nn

    function = getattr(obj, "__func__", obj)
    if (getattr(function, "__module__", "") or "").startswith("torch."):
        return True
    name = getattr(function, "__name__", "")
    return name in ("forward", "extra_repr") and inspect.getdoc(function) in (
        None, "", inspect.getdoc(getattr(nn.Module, name)))


def _drop_torch_docstrings(app, what, name, obj, options, lines):
    if what == "method" and name.rsplit(".", 1)[-1] in ("forward", "extra_repr") and _torch_inherited(obj):
        lines[:] = []


def _skip_members(app, what, name, obj, skip, options):
    if name == "SETTINGS" and isinstance(obj, dict):
        return True  # the class entry's Settings table shows it (_settings_after_class_docstring)
    if name == "extra_repr" and _torch_inherited(obj):
        return True
    return None


def _attribute_comments_as_written() -> None:
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    def as_written(self) -> List[str]:
        return list(self._consume_to_end())

    GoogleDocstring._parse_attribute_docstring = as_written  # NumpyDocstring inherits it


_BACKLINK = re.compile(r'<a class="viewcode-back" href="[^"#]*#([^"]+)">([^<]*)</a>')


def _viewcode_backlinks(app, pagename, templatename, context, doctree):
    """viewcode keeps one documented module per source file for its "[docs]" links back from the
    code, so an object of ``detectors/posthoc.py`` documented on the registries page gets the anchor
    of ``agnostophobia.detectors`` that the functions of the same file have. Each link is pointed
    at the entry the object has, found by the source's module and the object's name; a link to an
    object with no entry (a member left out) is dropped."""
    if not pagename.startswith("_modules/") or "body" not in context:
        return
    objects = app.env.domains.python_domain.objects
    modname = pagename[len("_modules/"):].replace("/", ".")

    def point(match):
        anchor, text = match.groups()
        parts = anchor.split(".")
        candidates = [anchor] + [f"{modname}.{'.'.join(parts[k:])}" for k in range(1, len(parts))]
        for name in candidates:
            entry = objects.get(name)
            if entry is not None and not entry.aliased:
                return (f'<a class="viewcode-back" href="{app.builder.get_relative_uri(pagename, entry.docname)}'
                        f'#{entry.node_id}">{text}</a>')
        return ""

    context["body"] = _BACKLINK.sub(point, context["body"])


#: Abbreviations the docstrings cite the papers with: the summary of an API table ends at the first
#: sentence, and "Entropic Open-Set loss (Sec. 4.1, Eq. 1)." must not end at "(Sec.".
CITATION_ABBREVIATIONS = ("Sec.", "Secs.", "Eq.", "Eqs.", "Fig.", "Figs.", "cf.", "resp.", "approx.")


def _summaries_keep_citations() -> None:
    from sphinx.ext import autosummary

    autosummary.WELL_KNOWN_ABBREVIATIONS = tuple(dict.fromkeys(autosummary.WELL_KNOWN_ABBREVIATIONS
                                                               + CITATION_ABBREVIATIONS))


def setup(app):
    _attribute_comments_as_written()
    _summaries_keep_citations()
    app.connect("html-page-context", _viewcode_backlinks)
    app.connect("autodoc-process-docstring", _parameters_on_the_class_page)
    app.connect("autodoc-process-docstring", _settings_after_class_docstring)
    app.connect("autodoc-process-docstring", _drop_torch_docstrings)
    app.connect("autodoc-process-docstring", _field_comment_as_docstring)
    app.connect("autodoc-skip-member", _skip_members)
    app.add_directive("loss-settings", LossSettings)
    app.add_directive("detector-settings", DetectorSettings)
    app.add_directive("config-keys", ConfigKeys)
    app.add_directive("registries", Registries)
    app.add_directive("constants", Constants)
    app.add_directive("exportable-scores", ExportableScores)
    app.add_directive("default-sources", DefaultSources)
    app.add_directive("api-summary", ApiSummary)
    app.connect("builder-inited", write_api_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
