"""Every parameter of the documented API is described: each public class and function that the API
reference gives a page (the names of the ``__all__`` of each module a reference page summarizes,
``docs/reference/*.rst``) describes every parameter of its signature.

The convention is Google style, as the package writes it (napoleon renders it): an ``Args:``
section (``Parameters`` in numpydoc form is read too) in the function's docstring, or for a class
in its docstring or its ``__init__``'s; one entry may describe several names (``scores, labels:
as for oscr``). A loss's or detector's constructor keyword declared in its ``SETTINGS`` is
described by the declaration's ``doc`` (the class page renders the declarations as a table), a
dataclass's or named tuple's field by the comment written at it (its page shows that comment as the attribute's
description), and a field of the experiment configuration (``TrainConfig``, ``ExperimentConfig``)
by its declaration or that comment (the configuration reference renders those).

A parameter with a type annotation is listed on its page with its type (``autodoc_typehints =
"description"``), and that entry has a description: its ``Args:`` entry in the docstring the page
shows (a class's own; the docs build adds what the class's declarations and the constructor's
docstring say, ``agnostophobia_refs.with_parameter_descriptions``), never the type alone.
``NOT_YET`` lists, by name, the objects whose page still lists one without: the gap is counted,
and a fixed object must leave the list. It holds 0 objects now (``test_the_allow_list_is_counted``
checks that number against the list).
"""
from __future__ import annotations

import functools
import inspect
import re
import sys
from typing import Dict, List, NamedTuple, Tuple
from repo_paths import REPO
from sphinx.ext.napoleon import Config as NapoleonConfig


ROOT = REPO
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
try:
    import agnostophobia_refs as refs
    from agnostophobia_refs import api_objects, config_rows, documented_modules, field_comments, is_record
finally:
    sys.path.remove(str(ROOT / "docs" / "_ext"))

# The objects whose page still lists a parameter with a type and no description; each must
# still do so (a fixed one leaves the list).
NOT_YET: Dict[str, Tuple[str, ...]] = {
    "descriptions": (),
}

SECTION = re.compile(r"^(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters):?\s*$")
NUMPY_RULE = re.compile(r"^-{3,}\s*$")


def section_entries(docstring: str, section: re.Pattern = SECTION) -> set:
    """The names a section's entries begin with: by default the parameter names of an ``Args:``
    (or numpydoc ``Parameters``) section of ``docstring``; ``section`` reads another (``Raises``).
    An entry names one or several (``scores, labels: ...``), plain or as a cross-reference
    (``~agnostophobia.errors.ConfigError:``, written as it is)."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    names, i = set(), 0
    while i < len(lines):
        if section.match(lines[i].strip()):
            numpy = i + 1 < len(lines) and NUMPY_RULE.match(lines[i + 1].strip())
            i += 2 if numpy else 1
            indent = None
            while i < len(lines):
                line = lines[i]
                if not line.strip():
                    i += 1
                    continue
                width = len(line) - len(line.lstrip())
                if numpy and i + 1 < len(lines) and NUMPY_RULE.match(lines[i + 1].strip()):
                    break  # the next numpydoc section
                if indent is None:
                    if not numpy and width == 0:
                        break
                    indent = width
                if width < indent:
                    break
                if width == indent:
                    head = line.strip().split(": ", 1)[0] if ": " in line or not numpy else line.strip()
                    head = re.sub(r"\(.*?\)", "", head).rstrip(":")  # "name (type)"
                    names.update(part.strip().lstrip("*") for part in head.split(",") if part.strip())
                i += 1
            continue
        i += 1
    return names


def described_in(docstring: str) -> set:
    """The parameter names an ``Args:`` (or numpydoc ``Parameters``) section of ``docstring`` describes."""
    return section_entries(docstring, SECTION)


def declared_docs(cls) -> Dict[str, str]:
    """The parameters a class's declarations describe: ``SETTINGS`` (losses, detectors), a
    record's field comments, and the experiment configuration's fields, whose declarations and
    comments the configuration reference renders (what the docs build adds to the class's page,
    ``agnostophobia_refs.declared_parameters``)."""
    return refs.declared_parameters(cls)


def parameters(obj) -> List[str]:
    """The parameters of a function's or class constructor's signature, without ``self``/``cls``."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without a signature
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def undescribed(obj) -> List[str]:
    """The parameters of ``obj`` that nothing describes."""
    described = described_in(inspect.getdoc(obj) or "")
    if inspect.isclass(obj):
        # the constructor's parameters are those of the class that writes __init__ (a loss without
        # one takes OpenSetLoss's): that class's docstring and its __init__'s describe them
        owner = next((k for k in obj.__mro__ if "__init__" in k.__dict__), obj)
        if owner is not object:
            described |= described_in(inspect.getdoc(owner) or "")
            described |= described_in(owner.__dict__["__init__"].__doc__ or "")
        described |= set(declared_docs(obj))
    return [name for name in parameters(obj) if name not in described]


@functools.lru_cache(maxsize=None)
def documented_api() -> Dict[str, object]:
    import importlib

    found = {}
    for modname in documented_modules(ROOT / "docs" / "reference"):
        for names in api_objects(modname).values():
            for name in names:
                module, _, short = name.rpartition(".")
                found[name] = getattr(importlib.import_module(module), short)
    return found


# napoleon as docs/conf.py configures it: Google and numpydoc docstrings both read
NAPOLEON = NapoleonConfig(napoleon_google_docstring=True, napoleon_numpy_docstring=True)


def page_lines(obj) -> List[str]:
    """The docstring of ``obj`` as its page renders it: napoleon's reStructuredText, and for a class
    (whose page shows the class docstring alone) with the parameter descriptions that the docs
    build adds from its declarations and constructor."""
    what = "class" if inspect.isclass(obj) else "function"
    lines = refs.napoleon_lines(inspect.getdoc(obj) or "", NAPOLEON, what)
    return refs.with_parameter_descriptions(obj, lines, NAPOLEON) if inspect.isclass(obj) else lines


def typed_without_description(obj) -> List[str]:
    """The parameters that the page of ``obj`` lists with a type and no description: each annotated
    one (``autodoc_typehints = "description"`` lists it with its type) that no ``:param:`` field
    of the rendered docstring describes with some text."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    fields = refs.parameter_fields(page_lines(obj))
    return [name for name, parameter in signature.parameters.items()
            if parameter.annotation is not parameter.empty and name not in ("self", "cls") and not fields.get(name)]


@functools.lru_cache(maxsize=None)
def rendered_gaps() -> Dict[str, List[str]]:
    """By name, the documented classes, functions and methods whose page lists a parameter with
    a type and no description, with those parameters."""
    from tests.repository.test_docs_returns import routines

    objects = {**documented_api(), **{name: value for name, value in routines().items() if inspect.isfunction(value)}}
    return {name: missing for name, obj in objects.items() if (missing := typed_without_description(obj))}


@functools.lru_cache(maxsize=None)
def gaps() -> Dict[str, List[str]]:
    return {name: missing for name, obj in documented_api().items() if (missing := undescribed(obj))}




def test_the_reader_finds_google_and_numpydoc_entries():
    google = """Summary.

    Args:
        scores, labels: as for :func:`oscr`.
        fpr_values (float): targets,
            continued here: not a name.
        **settings: keywords.

    Returns:
        x: not a parameter.
    """
    numpy = """Summary.

    Parameters
    ----------
    tail_size : int
        Number of distances.
    alpha:
        How many.

    Returns
    -------
    y
    """
    assert described_in(google) == {"scores", "labels", "fpr_values", "settings"}
    assert described_in(numpy) == {"tail_size", "alpha"}


def test_an_undescribed_parameter_is_found():
    def documented(a, b, *, c=1):
        """Summary.

        Args:
            a: one.
            c: three.
        """

    class Declared:
        """Summary."""

        SETTINGS = {}

        def __init__(self, x, y=2):
            """Summary.

            Args:
                x: the first.
            """

    class Inherits(Declared):
        """Summary; its constructor is Declared's."""

    assert undescribed(documented) == ["b"]
    assert undescribed(Declared) == ["y"]
    assert undescribed(Inherits) == ["y"]


def test_the_documented_api_includes_every_reference_module():
    modules = documented_modules(ROOT / "docs" / "reference")
    assert {"agnostophobia.losses", "agnostophobia.detectors", "agnostophobia.training",
            "agnostophobia.plotting", "agnostophobia.deploy"} <= set(modules)
    assert len(documented_api()) > 150


def test_every_parameter_of_the_documented_api_is_described():
    assert gaps() == {}


class Record(NamedTuple):
    """A record at a module's top level, as field_comments reads one."""

    x: int  # the first
    y: int


def test_a_typed_parameter_without_a_description_is_found():
    def listed(a: int, b: int, c: float, d, *, e: str = "") -> None:
        """Summary.

        Args:
            a: one.
            b (int):
            d: four.
        """

    assert typed_without_description(listed) == ["b", "c", "e"]
    assert typed_without_description(Record) == ["y"]
    assert any(line.startswith(":param x: the first") for line in page_lines(Record))


def test_a_loss_page_describes_the_constructor_parameters_it_inherits():
    """num_classes and reduction are OpenSetLoss's, written at its __init__; the loss's page shows
    its own docstring, with them added from there, and its settings' docs."""
    from agnostophobia.losses import ObjectosphereLoss

    fields = refs.parameter_fields(page_lines(ObjectosphereLoss))
    assert {"num_classes", "reduction", "xi"} <= {name for name, text in fields.items() if text}
    assert typed_without_description(ObjectosphereLoss) == []


def test_every_typed_parameter_of_the_documented_api_is_described():
    found = rendered_gaps()
    listed = set(NOT_YET["descriptions"])
    assert {name: missing for name, missing in found.items() if name not in listed} == {}
    assert sorted(listed - set(found)) == [], "fixed: take these out of NOT_YET"


def test_the_allow_list_is_counted():
    """The number of objects in NOT_YET is the one the module docstring states."""
    stated = re.search(r"It holds (\d+) objects", __doc__)
    assert stated and int(stated.group(1)) == sum(len(names) for names in NOT_YET.values())


def test_a_loss_with_settings_describes_the_constructor_parameters_it_inherits():
    """A loss whose constructor is made from its settings takes num_classes and reduction from
    OpenSetLoss: its made constructor refers them there, and a setting without a doc stays a gap."""
    from agnostophobia.losses import ObjectosphereLoss, OpenSetLoss
    from agnostophobia.settings import Setting

    class Undocumented(OpenSetLoss):
        weight = Setting(float, 1.0, low=0)

        def forward(self, logits, labels, sample_weight=None):
            return logits.sum()

    assert undescribed(ObjectosphereLoss) == []
    assert undescribed(Undocumented) == ["weight"]


if __name__ == "__main__":  # the gaps, one line each, and their count
    found = gaps()
    for name, missing in sorted(found.items()):
        print(f"{name}: {', '.join(missing)}")
    print(f"{sum(len(m) for m in found.values())} undescribed parameters in {len(found)} of "
          f"{len(documented_api())} classes and functions")
    for name, missing in sorted(rendered_gaps().items()):
        print(f"typed, no description: {name}: {', '.join(missing)}")
    print(f"{sum(len(m) for m in rendered_gaps().values())} parameters listed with a type and no description "
          f"in {len(rendered_gaps())} objects")
