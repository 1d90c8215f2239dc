"""Every return value, raised error and class of the documented API is described, and every
example runs: the same objects as tests/test_docs_parameters.py (the ``__all__`` of each module a
reference page summarizes), and of each class the public methods and properties it writes itself
(what its page shows: not what it inherits, from torch's ``nn.Module`` or a base class).

The rules, each a test below:

- **Returns.** A function or method that returns something (a return annotation other than
  ``None``, or a ``return <value>`` in its own body, not in a function nested in it) has a
  ``Returns:`` section (numpydoc ``Returns`` is read too); a generator has ``Yields:`` (or
  ``Returns:``). A property is documented as an attribute (its page shows it as one, as
  scikit-learn shows its fitted attributes): a one-paragraph docstring, the phrase that says what
  the value is, describes it; a longer one has a ``Returns:`` section.
- **Raises.** A function or method whose own body raises an exception class of this package
  (``raise ConfigError(...)``, read with :mod:`ast` and resolved in its module) names that class
  in its ``Raises:`` section (``ConfigError:`` or ``~agnostophobia.errors.ConfigError:``). What
  it raises through the functions it calls is their documentation's.
- **Examples.** A public class (exceptions are not: they are raised, not made) and a public
  function have an ``Examples:`` section in their own docstring with a ``>>>`` example, and every
  example of the documented objects runs as a doctest (:func:`test_the_examples_run`), its
  numbers printed rounded or as shapes.

``NOT_YET`` lists, by name, the objects that may still break a rule: the gaps are counted there,
never skipped silently, and an object that is fixed must leave the list (the test fails on a
listed object that no longer breaks its rule). It holds 0 objects now
(``test_the_allow_list_is_counted`` checks that number against the list).

Run as a script, it prints the gaps per module and kind.
"""
from __future__ import annotations

import ast
import doctest
import functools
import inspect
import re
import textwrap
from collections import Counter
from typing import Dict, List, Tuple

import pytest

from tests.repository.test_docs_parameters import NUMPY_RULE, documented_api, refs, section_entries

RETURNS = re.compile(r"^(Returns?|Yields?):?\s*$")
RAISES = re.compile(r"^Raises:?\s*$")
EXAMPLES = re.compile(r"^Examples?:?\s*$")

# The objects that still break a rule, by kind; each must break it (a fixed one leaves the list).
NOT_YET: Dict[str, Tuple[str, ...]] = {
    "returns": (),
    "raises": (),
    "examples": (),
}


def has_section(docstring: str, section: re.Pattern) -> bool:
    """Whether ``docstring`` has a section headed as ``section`` matches: a Google heading
    (``Returns:``) at the docstring's left margin, or a numpydoc one (``Returns`` over dashes)."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    for i, line in enumerate(lines):
        if line == line.lstrip() and section.match(line.strip()):
            numpy = i + 1 < len(lines) and NUMPY_RULE.match(lines[i + 1].strip())
            if line.rstrip().endswith(":") or numpy:
                return True
    return False


def section_text(docstring: str, section: re.Pattern) -> str:
    """The text of the section of ``docstring`` that ``section`` heads (up to the next heading
    at the left margin, or in numpydoc form the next heading over dashes), or ''."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    for i, line in enumerate(lines):
        if line == line.lstrip() and section.match(line.strip()):
            if i + 1 < len(lines) and NUMPY_RULE.match(lines[i + 1].strip()):  # numpydoc: up to the next heading
                end = next((j for j in range(i + 2, len(lines) - 1) if NUMPY_RULE.match(lines[j + 1].strip())),
                           len(lines))
                return "\n".join(lines[i + 2:end])
            body = []
            for following in lines[i + 1:]:
                if following and following == following.lstrip() and not NUMPY_RULE.match(following):
                    break
                body.append(following)
            return "\n".join(body)
    return ""


def _own_nodes(function: ast.AST):
    """The nodes of ``function``'s own body: not those of a function, lambda or class nested in it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _tree(function) -> ast.AST:
    """The ast of a function's definition, or None when its source cannot be read (a made one)."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    return next((node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))),
                None)


def returns_value(function) -> str:
    """'yields' for a generator, 'returns' for a function that returns a value, '' otherwise."""
    tree = _tree(function)
    own = list(_own_nodes(tree)) if tree is not None else []
    if any(isinstance(node, (ast.Yield, ast.YieldFrom)) for node in own):
        return "yields"
    if any(isinstance(node, ast.Return) and node.value is not None
           and not (isinstance(node.value, ast.Constant) and node.value.value is None) for node in own):
        return "returns"
    try:
        annotation = inspect.signature(function).return_annotation
    except (TypeError, ValueError):
        return ""
    return "" if annotation in (inspect.Signature.empty, None, type(None), "None") else "returns"


def _resolve(node: ast.AST, namespace: dict):
    """The object a name or dotted attribute (``errors.ConfigError``) names in ``namespace``."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id, getattr(__builtins__, node.id, None) if not isinstance(__builtins__, dict)
                             else __builtins__.get(node.id))
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, namespace)
        return getattr(owner, node.attr, None) if owner is not None else None
    return None


@functools.lru_cache(maxsize=None)
def package_errors() -> Dict[str, type]:
    """This package's exception classes by name (the names are unique), for a name a function
    imports inside its body, where its module's namespace does not have it."""
    import agnostophobia.cli  # noqa: F401  (defines CommandFailed)

    documented_api()  # every documented module imported
    found, pending = {}, [BaseException]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("agnostophobia"):
            assert found.setdefault(cls.__name__, cls) is cls, f"two exceptions named {cls.__name__}"
    return found


def raised_errors(function) -> List[str]:
    """The names of this package's exception classes that ``function``'s own body raises."""
    tree = _tree(function)
    if tree is None:
        return []
    function = inspect.unwrap(function)
    namespace = {**getattr(function, "__globals__", {}),
                 **inspect.getclosurevars(function).nonlocals} if inspect.isfunction(function) else {}
    found = []
    for node in _own_nodes(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            error = _resolve(target, namespace)
            if error is None and isinstance(target, ast.Name):  # imported inside the function
                error = package_errors().get(target.id)
            if (inspect.isclass(error) and issubclass(error, BaseException)
                    and error.__module__.startswith("agnostophobia")):
                found.append(error.__name__)
    return sorted(set(found))


def named_errors(docstring: str) -> set:
    """The class names a ``Raises:`` section names (``~agnostophobia.errors.ConfigError`` is ``ConfigError``)."""
    return {name.strip("`~").rsplit(".", 1)[-1].rstrip("`") for name in section_entries(docstring, RAISES)}


def _members(cls) -> Dict[str, object]:
    """The public methods and properties a class writes itself, by name."""
    members = {}
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, (property, functools.cached_property)) or inspect.isfunction(value):
            members[name] = value
    return members


@functools.lru_cache(maxsize=None)
def routines() -> Dict[str, object]:
    """Every documented function, and every public method and property of a documented class, by
    dotted name."""
    found = {}
    for name, obj in documented_api().items():
        if inspect.isclass(obj):
            for member, value in _members(obj).items():
                found[f"{name}.{member}"] = value
        elif inspect.isroutine(obj):
            found[name] = obj
    return found


def _function_of(value):
    if isinstance(value, property):
        return value.fget
    if isinstance(value, functools.cached_property):
        return value.func
    return value


def return_gap(value) -> str:
    """Why ``value``'s docstring does not describe what it returns, or ''."""
    function = _function_of(value)
    doc = inspect.getdoc(value) or ""
    if isinstance(value, (property, functools.cached_property)):
        if not doc.strip():
            return "a property without a docstring"
        one_paragraph = "\n\n" not in doc.strip()
        return "" if one_paragraph or has_section(doc, RETURNS) else "no Returns section (a longer property docstring)"
    kind = returns_value(function)
    if kind and not has_section(doc, RETURNS):
        return f"{kind} a value: no {'Yields' if kind == 'yields' else 'Returns'} section"
    return ""


def raise_gap(value) -> List[str]:
    """The package's exceptions ``value`` raises that its ``Raises:`` section does not name."""
    function = _function_of(value)
    return [error for error in raised_errors(function) if error not in named_errors(inspect.getdoc(value) or "")]


def example_gap(obj) -> str:
    """Why a class's or function's own docstring has no runnable example, or ''."""
    doc = (obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__) or ""
    if not has_section(doc, EXAMPLES):
        return "no Examples section"
    if ">>>" not in section_text(doc, EXAMPLES):
        return "an Examples section without a >>> example"
    return ""


def public_classes() -> Dict[str, type]:
    return {name: obj for name, obj in documented_api().items()
            if inspect.isclass(obj) and not issubclass(obj, BaseException)}


def public_functions() -> Dict[str, object]:
    return {name: obj for name, obj in documented_api().items() if inspect.isroutine(obj)}


@functools.lru_cache(maxsize=None)
def gaps() -> Dict[str, Dict[str, str]]:
    """The objects that break a rule, by kind, each with why."""
    found = {"returns": {}, "raises": {}, "examples": {}}
    for name, value in routines().items():
        if why := return_gap(value):
            found["returns"][name] = why
        if missing := raise_gap(value):
            found["raises"][name] = "does not name " + ", ".join(missing)
    for name, obj in {**public_classes(), **public_functions()}.items():
        if why := example_gap(obj):
            found["examples"][name] = why
    return found


def counts_by_module(found: Dict[str, Dict[str, str]]) -> Counter:
    """The gaps counted by (kind, documented module)."""
    modules = {name: name.rsplit(".", 1)[0] for name in documented_api()}
    counts = Counter()
    for kind, names in found.items():
        for name in names:
            owner = name if name in modules else name.rsplit(".", 1)[0]
            counts[(kind, modules[owner])] += 1
    return counts


# --- the reader and the rules, on small cases ---------------------------------------------------

def test_the_reader_finds_returns_raises_and_examples_in_both_styles():
    google = """Summary.

    Returns:
        The (N,) scores.

    Raises:
        ~agnostophobia.errors.ConfigError: a bad name.
        DataError, ValueError: a bad file.

    Examples:
        >>> 1 + 1
        2
    """
    numpy = """Summary.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ConfigError
        a bad name.
    """
    assert has_section(google, RETURNS) and has_section(numpy, RETURNS)
    assert named_errors(google) == {"ConfigError", "DataError", "ValueError"}
    assert named_errors(numpy) == {"ConfigError"}
    assert ">>> 1 + 1" in section_text(google, EXAMPLES) and not section_text(numpy, EXAMPLES)
    numpy_example = numpy + """
    Examples
    --------
    >>> 1 + 1
    2

    Notes
    -----
    After the example.
    """
    assert section_text(numpy_example, EXAMPLES).split() == [">>>", "1", "+", "1", "2"]
    assert not has_section("Returns the scores.\n\nReturns nothing here either.", RETURNS)


def test_a_missing_return_or_raise_is_found():
    from agnostophobia.errors import ConfigError

    def silent(x) -> int:
        """Summary."""
        return x

    def computes(x):
        """Summary."""

        def nested():
            return 1
        if x is None:
            raise ConfigError("x is None")
        nested()

    def described(x):
        """Summary.

        Returns:
            The (N,) x.

        Raises:
            ConfigError: x is None.
        """
        if x is None:
            raise ConfigError("x is None")
        return x

    assert return_gap(silent) and not return_gap(computes) and not return_gap(described)
    assert raised_errors(computes) == ["ConfigError"]
    assert raise_gap(computes) == ["ConfigError"] and raise_gap(described) == []


def test_a_property_is_read_as_an_attribute():
    class Owner:
        @property
        def size(self) -> int:
            """The number of classes."""
            return 3

        @property
        def undocumented(self) -> int:
            return 3

    assert return_gap(Owner.__dict__["size"]) == ""
    assert return_gap(Owner.__dict__["undocumented"])


def test_a_class_without_an_example_is_found():
    class Bare:
        """Summary."""

    class Shown:
        """Summary.

        Examples:
            >>> Shown is not None
            True
        """

    assert example_gap(Bare) and not example_gap(Shown)


def test_a_function_without_an_example_is_found():
    def bare():
        """Summary."""

    def shown():
        """Summary.

        Examples:
            >>> 1 + 1
            2
        """

    assert example_gap(bare) == "no Examples section" and not example_gap(shown)
    assert "agnostophobia.metrics.oscr" in public_functions()


# --- the documented API --------------------------------------------------------------------------

def test_every_method_of_a_documented_class_is_walked():
    from agnostophobia.losses import EntropicOpenSetLoss

    names = routines()
    assert "agnostophobia.losses.EntropicOpenSetLoss.forward" in names
    assert "agnostophobia.losses.EntropicOpenSetLoss.train" not in names  # nn.Module's, not written there
    assert "agnostophobia.losses.OpenSetLoss.num_outputs" in names  # a property
    assert not any(name.rsplit(".", 1)[-1].startswith("_") for name in names)
    assert EntropicOpenSetLoss.__module__.startswith("agnostophobia")


@pytest.mark.parametrize("kind", sorted(NOT_YET))
def test_every_object_of_the_documented_api_follows_the_rule(kind):
    found = gaps()[kind]
    listed = set(NOT_YET[kind])
    assert {name: why for name, why in found.items() if name not in listed} == {}
    assert sorted(listed - set(found)) == [], "fixed: take these out of NOT_YET"


def test_the_allow_list_is_counted():
    """The number of objects in NOT_YET is the one the module docstring states."""
    stated = re.search(r"It holds (\d+) objects", __doc__)
    assert stated and int(stated.group(1)) == sum(len(names) for names in NOT_YET.values())


def summary(obj) -> str:
    """The one-line summary the reference's tables show for ``obj``: what autosummary extracts
    from its docstring, with the citation abbreviations (``Sec.``) the docs build teaches it."""
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from sphinx.ext import autosummary

    refs._summaries_keep_citations()
    lines = inspect.cleandoc(inspect.getdoc(obj) or "").splitlines()
    return autosummary.extract_summary(lines, get_default_settings(Parser))


def test_a_summary_ending_in_a_colon_is_found():
    def lead_in():
        """The loss of Sec. 4.2, cross-entropy plus a term:

        .. math:: x
        """

    def stated():
        """The loss of Sec. 4.2, cross-entropy plus a term.

        .. math:: x
        """

    assert summary(lead_in).endswith(":.") and summary(stated).endswith("term.")


def test_no_summary_ends_in_a_colon():
    """A first paragraph that leads into a formula (``...:``) reads as ``...:.`` in the summary
    tables: the summary is a sentence of its own, and the formula follows it."""
    found = {name: summary(obj) for name, obj in documented_api().items()}
    assert {name: text for name, text in found.items() if text.rstrip(".").endswith(":")} == {}


def _examples() -> List[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for name, obj in documented_api().items():
        module = inspect.getmodule(obj)
        tests += [test for test in finder.find(obj, name, module=module, globs={}) if test.examples]
    return sorted(tests, key=lambda test: test.name)


@pytest.mark.parametrize("example", _examples(), ids=lambda test: test.name)
def test_the_examples_run(example):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: List[str] = []
    runner.run(example, out=report.append)
    assert runner.failures == 0, "".join(report)


if __name__ == "__main__":  # the gaps, one line each, and their counts per kind and module
    found = gaps()
    for kind, names in found.items():
        for name, why in sorted(names.items()):
            print(f"{kind}: {name}: {why}")
    for (kind, module), count in sorted(counts_by_module(found).items()):
        print(f"{kind:9} {module:28} {count}")
    print({kind: len(names) for kind, names in found.items()}, f"of {len(routines())} functions and methods, "
          f"{len(public_classes())} classes")
