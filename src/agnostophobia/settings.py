"""One declaration per setting: a :class:`Setting` is a typed knob declared beside the code that
reads it -- a detector's setting, a loss's hyper-parameter (e.g. Objectosphere's xi and lambda,
paper Sec. 4.2 Eq. 2), written once as a class attribute ``xi = Setting(float, 50.0, ...)`` and
collected into the class's ``SETTINGS`` -- with its type, default, allowed values, the grid that
tuning searches, whether a resumed run may change it and whether the run's records keep it. The
constructor (:class:`DeclaresSettings`), validation, tuning grids and records derive from the
declarations; nothing restates them.

A loss that writes its own constructor may leave a keyword undeclared: it is inferred from its
annotation and default (:func:`declared_settings`) and is tunable without a declaration.

A record's keys are declared the same way, as dataclass fields (:func:`setting`): an experiment's
keys (``TrainConfig``) and a ``protocol:`` mapping's (``FileProtocolSpec``), where a key may be
``required``, a path or a list, belong to some ``types`` of the record only, and be refused in words
of its own (``refusal``, ``rule``).

The lowest layer: it imports nothing of the package but its errors.
"""
from __future__ import annotations

import dataclasses
import inspect
import keyword
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, Iterable, Mapping, Optional, Tuple

from agnostophobia.errors import ConfigError

_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string", dict: "a mapping",
          Path: "a path", list: "a list"}
_INFERRED = (int, float, bool, str, dict)  # the kinds a constructor keyword's annotation or default declares
_TYPES_BY_NAME = {kind.__name__: kind for kind in _INFERRED}


def _is_kind(value, kind: type) -> bool:
    """Whether ``value`` is of ``kind``: numpy's integers count as int and its reals as float
    (an integer too), and a bool is never a number."""
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind is Path:  # a path as a config writes it: a string that is not empty
        return isinstance(value, str) and bool(value)
    return isinstance(value, kind)


@dataclass(frozen=True)
class Setting:
    """One setting: its ``type`` (int, float, bool, str, dict; a record's key also Path or list),
    ``default``, allowed values
    (``low``..``high``, ``low`` excluded when ``low_open``; or ``choices``), the small ``grid``
    that tuning searches (empty: not tuned), whether a resumed run may change it
    (``resumable``: how a run is watched or where it runs, not what it learns) and whether the
    run's records keep it (``recorded``). ``doc`` says what it means, for the references;
    ``source`` where its default was read (the paper, the authors' code: repository, file and
    argument, pytorch-ood, OpenOOD) and ``differs`` what is different here ("": nothing), for the
    table of where each default comes from (docs/training-peers.md); ``formerly`` the names it had
    before (a config written with one still loads, read as this setting). A record's key (a field
    declared with :func:`setting`) may also be ``required`` (no default: a value must be given),
    belong to some ``types`` of its record only (a ``protocol:`` mapping's ``csv`` keys), list
    values of the ``items`` kinds (a ``list``), be refused in a phrase of its own (``refusal``) and
    obey a further ``rule``.

    Examples:
        >>> from agnostophobia.settings import Setting
        >>> tail = Setting(float, 0.5, low=0, high=1, low_open=True, doc="the share kept")
        >>> tail.describe_range(), tail.problem(0.0), tail.check(1, "tail")
        ('(0, 1]', 'must be a number in (0, 1]', 1.0)
    """

    type: type  # int, float, bool, str or dict
    default: Any  # the value where none is given
    low: Optional[float] = None  # the smallest allowed value of a number (None: no bound)
    high: Optional[float] = None  # the largest allowed value of a number (None: no bound)
    low_open: bool = False  # low itself is not allowed (> low instead of >= low)
    choices: Tuple = ()  # the allowed values (empty: any value of the type in the range)
    grid: Tuple = ()  # the values tuning searches (empty: not tuned)
    resumable: bool = False  # a resumed run may change it (how a run is watched or where it runs)
    recorded: bool = True  # the run's records keep it
    doc: str = ""  # what it means, for the references
    nullable: bool = False  # null (None) is a value: "not set, the library's default"
    # words allowed besides values of the type: ("auto",) for a switch decided where it runs
    words: Tuple[str, ...] = ()
    source: str = ""  # where the default was read (paper, authors' code, pytorch-ood, OpenOOD)
    differs: str = ""  # what is different here from that source ("": nothing)
    formerly: Tuple[str, ...] = ()  # the names it had before: an old config's key, read as this setting
    required: bool = False  # a value must be given (by a record of one of its ``types``): no default
    types: Tuple[str, ...] = ()  # the types of its record it belongs to, as a protocol's csv (empty: all)
    items: Tuple[type, ...] = ()  # a list's allowed item kinds (empty: any)
    refusal: str = ""  # the phrase a refused value gets instead of the derived one ("": derived)
    # a further check of a value of the right kind: what is wrong with it, or None
    rule: Optional[Callable[[Any], Optional[str]]] = None

    def problem(self, value) -> Optional[str]:
        """What is wrong with ``value`` for this setting (None: nothing).

        Returns:
            One phrase (``must be a number >= 0``), or None.
        """
        if value is None and self.nullable or isinstance(value, str) and value in self.words:
            return None
        problem = self._problem(value)
        if problem and self.refusal:
            return self.refusal
        if not problem and self.rule is not None:
            return self.rule(value)
        if problem and (self.nullable or self.words):
            allowed = ["null"] * self.nullable + list(self.words)
            return f"must be {', '.join(allowed)} or {problem[len('must be '):]}"
        return problem

    def _problem(self, value) -> Optional[str]:
        numeric = self.type in (int, float)
        if not _is_kind(value, self.type):
            return f"must be {_KINDS.get(self.type, self.type.__name__)}"
        if numeric and not math.isfinite(value):
            return "must be finite"
        if self.type is int and not -2**63 <= value < 2**63:  # numpy and torch hold no wider integer
            return "must be an integer that fits an int64 (-2**63..2**63-1)"
        if self.type is list and self.items and not all(any(_is_kind(v, k) for k in self.items) for v in value):
            return f"must be a list, each item {' or '.join(_KINDS.get(k, k.__name__) for k in self.items)}"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(map(str, self.choices))}"
        if numeric and (self.low is not None and (value < self.low or self.low_open and value == self.low)
                        or self.high is not None and value > self.high):
            return f"must be {_KINDS[self.type]} {self.describe_bounds()}"
        return None

    def check(self, value, name: str):
        """``value`` as this setting allows (an integer given for a float becomes a float); a
        ``ValueError`` naming ``name`` otherwise, as a constructor raises it.

        Args:
            value: the value given.
            name: the keyword or config key that gave it, named in the error.

        Returns:
            The value, a float for a float setting and an int for an int one.
        """
        problem = self.problem(value)
        if problem:
            raise ValueError(f"{name} {problem}, got {value!r}")
        return float(value) if self.type is float else int(value) if self.type is int else value

    def describe_bounds(self) -> str:
        """``>= 1``, ``> 0``, ``<= 1`` or ``in (0, 1]``: the allowed range in words.

        Returns:
            The range, e.g. ``>= 1``.
        """
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"<= {self.high:g}"
        return f"in {self.describe_range()}"

    def describe_range(self) -> str:
        """The allowed interval of a number in words: a bound not given is infinite, an open
        end in parentheses.

        Returns:
            The interval, e.g. ``[0, 1]`` or ``(0, inf)``.
        """
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.low_open or self.low is None else '['}{low}, {high}{']' if self.high is not None else ')'}"

    @classmethod
    def inferred(cls, parameter: inspect.Parameter) -> Optional["Setting"]:
        """The setting a keyword declares by its annotation and default (``temperature: float =
        1.0``), or None when neither names one of the four types.

        Args:
            parameter: a constructor keyword, from :func:`inspect.signature`.

        Returns:
            A :class:`Setting` of that type with that default (unbounded), or None.
        """
        kind = parameter.annotation
        if isinstance(kind, str):  # postponed annotations (``from __future__ import annotations``)
            kind = _TYPES_BY_NAME.get(kind.strip())
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        if kind not in _INFERRED:
            kind = type(default) if type(default) in _INFERRED else None
        return None if kind is None else cls(kind, default)


class DeclaresSettings:
    """A class whose constructor keywords are declared settings (a detector, a loss), written
    once, dataclass-style, as class attributes::

        class KNNDetector(Detector):
            k = Setting(int, 50, low=1, grid=(1, 5, 10, 20, 50, 100))

    The declarations are collected, in their order and after those a base class declares, into
    ``SETTINGS`` (a class may also assign that mapping itself), each attribute becoming its
    default. A class without an ``__init__`` of its own gets one made from them: the base's
    arguments (a loss's ``num_classes`` and ``reduction``) followed by the settings as
    keyword-only arguments with their defaults, a real signature that ``help``,
    :func:`inspect.signature` and the reference docs show. It checks each value against its
    declaration (:meth:`_take_settings`), keeps it as the attribute of its name, then calls
    ``__post_init__``. A class that needs its own ``__init__`` writes one and keeps its
    settings with :meth:`_take_settings`; its keyword defaults are checked against the
    declarations where the class is defined.

    Examples:
        >>> from agnostophobia.settings import DeclaresSettings, Setting
        >>> class Smoother(DeclaresSettings):
        ...     window = Setting(int, 3, low=1, grid=(1, 3, 5))
        ...
        >>> Smoother(window=5).settings()
        {'window': 5}
        >>> Smoother(window=0)
        Traceback (most recent call last):
            ...
        ValueError: window must be an integer >= 1, got 0
    """

    #: One :class:`Setting` per declared constructor keyword (none: nothing declared).
    SETTINGS: ClassVar[Dict[str, Setting]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.SETTINGS = _collected_settings(cls)
        if "__init__" in vars(cls):
            _check_defaults(cls)
        elif cls.SETTINGS:
            cls.__init__ = _made_init(cls)

    def __post_init__(self) -> None:
        """What a made constructor does once the settings are kept (derived state, checks that
        read two settings); nothing here."""

    def settings(self) -> Dict[str, Any]:
        """The recorded settings' values, for records (reports, caches): every declared setting
        but those that only change how fast a result is computed (``recorded=False``).

        Returns:
            ``{name: value}``, in the declarations' order.
        """
        return {name: getattr(self, name) for name, setting in self.SETTINGS.items() if setting.recorded}

    def _take_settings(self, **values) -> None:
        """Each keyword checked against its declaration in ``SETTINGS`` (a ``ValueError`` naming
        it) and kept as the attribute of its name."""
        for name, value in values.items():
            setattr(self, name, self.SETTINGS[name].check(value, name))


def _collected_settings(cls) -> Dict[str, Setting]:
    """The settings of ``cls``: its own ``SETTINGS`` mapping or else its base's, then each
    :class:`Setting` class attribute it declares (which becomes its default, as a dataclass's)."""
    settings = dict(vars(cls)["SETTINGS"] if "SETTINGS" in vars(cls) else super(cls, cls).SETTINGS)
    for name, declared in list(vars(cls).items()):
        if not isinstance(declared, Setting):
            continue
        if "SETTINGS" in vars(cls) and name in vars(cls)["SETTINGS"]:
            raise TypeError(f"{cls.__qualname__}: the setting {name!r} is declared twice (SETTINGS and attribute)")
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise TypeError(f"{cls.__qualname__}: a setting's name must be a public keyword, got {name!r}")
        settings[name] = declared
        setattr(cls, name, declared.default)
    return settings


def _check_defaults(cls) -> None:
    """A hand-written constructor's keyword default is its declaration's: a class whose signature
    says otherwise is refused where it is defined, so that the two can never drift apart."""
    parameters = inspect.signature(cls.__init__).parameters
    for name, declared in cls.SETTINGS.items():
        parameter = parameters.get(name)
        if parameter is not None and parameter.default is not inspect.Parameter.empty \
                and parameter.default != declared.default:
            raise TypeError(f"{cls.__qualname__}: the keyword {name}={parameter.default!r} differs from its "
                            f"declared default {declared.default!r} (SETTINGS[{name!r}])")


def foundation_class(cls):
    """The nearest class above ``cls`` whose ``__init__`` is hand-written (a loss's:
    :class:`~agnostophobia.losses.OpenSetLoss`): the constructor a made one hands its
    non-setting arguments on to; ``object`` where none is.

    Returns:
        That class, or ``object``.

    Examples:
        >>> from agnostophobia.losses import ObjectosphereLoss, OpenSetLoss
        >>> from agnostophobia.settings import foundation_class
        >>> foundation_class(ObjectosphereLoss) is OpenSetLoss  # its made constructor hands num_classes there
        True
    """
    return next(base for base in cls.__mro__[1:]
                if "__init__" in vars(base) and not getattr(vars(base)["__init__"], "_made_from_settings", False))


def _foundation(cls):
    """The foundation's ``__init__`` (:func:`foundation_class`) and its parameters after
    ``self``; ``object``'s takes none."""
    init = vars(foundation_class(cls))["__init__"]
    if init is object.__init__:
        return init, []
    return init, list(inspect.signature(init).parameters.values())[1:]


def _made_init(cls):
    """``cls.__init__`` made from its declarations: the foundation's parameters, then each setting
    the foundation does not take as a keyword-only one with its default. Written as source, as
    :mod:`dataclasses` does, so that the signature and the errors of a wrong call are Python's."""
    foundation, inherited = _foundation(cls)
    taken = {p.name for p in inherited}
    settings = {name: declared for name, declared in cls.SETTINGS.items() if name not in taken}
    P = inspect.Parameter
    parameters = [p for p in inherited if p.kind is not P.VAR_KEYWORD]
    if settings and not any(p.kind in (P.VAR_POSITIONAL, P.KEYWORD_ONLY) for p in parameters):
        parameters.append(None)  # the bare * before the keyword-only settings
    parameters += [P(name, P.KEYWORD_ONLY, default=declared.default, annotation=declared.type)
                   for name, declared in settings.items()]
    parameters += [p for p in inherited if p.kind is P.VAR_KEYWORD]
    spelled, defaults = _spelled_parameters(parameters)
    passed = [_passed_on(p) for p in parameters if p is not None and p.name not in settings]
    source = (f"def __init__(self, {', '.join(spelled)}):\n"
              f"    _foundation(self, {', '.join(passed)})\n"
              f"    self._take_settings({', '.join(f'{name}={name}' for name in settings)})\n"
              f"    self.__post_init__()\n")
    namespace = {"_foundation": foundation, **defaults}
    exec(source, namespace)  # noqa: S102 (names are checked identifiers; values travel as defaults)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**{p.name: p.annotation for p in inherited if p.annotation is not P.empty},
                            **{name: declared.type for name, declared in settings.items()}}
    init.__doc__ = (f"{cls.__name__}'s constructor, made from its declared settings (``SETTINGS``): each "
                    f"keyword is checked against its declaration and kept as the attribute of its name."
                    + _inherited_args(cls, [p for p in parameters if p is not None and p.name not in settings]))
    init._made_from_settings = True
    return init


def _inherited_args(cls, inherited) -> str:
    """The ``Args:`` section of a made constructor for the parameters it hands on to the
    foundation's (a loss's ``num_classes`` and ``reduction``): described where that constructor is
    written, so they are referred there; the settings are described by their declarations."""
    if not inherited:
        return ""
    owner = foundation_class(cls)
    names = ", ".join({inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(p.kind, "")
                      + p.name for p in inherited)
    public = owner.__module__.split("._")[0]  # agnostophobia.losses._base: agnostophobia.losses
    return f"\n\nArgs:\n    {names}: as for :class:`~{public}.{owner.__qualname__}`.\n"


def _spelled_parameters(parameters) -> Tuple[list, Dict[str, Any]]:
    """The source of ``parameters`` (None: a bare ``*``) in a ``def``, with ``/`` where the
    positional-only ones end, and the defaults it names, ``{"_default_NAME": value}``."""
    P = inspect.Parameter
    spelled, defaults, last_kind = [], {}, None
    for parameter in parameters:
        kind = P.KEYWORD_ONLY if parameter is None else parameter.kind
        if last_kind is P.POSITIONAL_ONLY and kind is not P.POSITIONAL_ONLY:
            spelled.append("/")
        last_kind = kind
        if parameter is None:
            spelled.append("*")
            continue
        text = {P.VAR_POSITIONAL: "*", P.VAR_KEYWORD: "**"}.get(kind, "") + parameter.name
        if parameter.default is not P.empty:
            defaults[f"_default_{parameter.name}"] = parameter.default
            text += f"=_default_{parameter.name}"
        spelled.append(text)
    if last_kind is P.POSITIONAL_ONLY:
        spelled.append("/")
    return spelled, defaults


def _passed_on(parameter: inspect.Parameter) -> str:
    """How the made constructor hands ``parameter`` on to the foundation's."""
    P = inspect.Parameter
    return {P.POSITIONAL_ONLY: parameter.name, P.POSITIONAL_OR_KEYWORD: parameter.name,
            P.VAR_POSITIONAL: f"*{parameter.name}", P.VAR_KEYWORD: f"**{parameter.name}"}.get(
        parameter.kind, f"{parameter.name}={parameter.name}")


_NO_DEFAULT = object()  # setting() called without a default


def setting(kind: type, default: Any = _NO_DEFAULT, factory=None, **declared) -> Any:
    """A dataclass field declared by its :class:`Setting` (kept in the field's metadata): the
    field's default is the setting's, so the two are one declaration.

    Args:
        kind: the setting's type (int, float, bool, str, dict, Path or list).
        default: the field's default value: None where not given, and no default at all for a
            ``required=True`` setting (a field the constructor must be given; one that belongs to
            some ``types`` only gives its default for the others, ``None``).
        factory: makes a mutable default (a mapping) anew for each instance, instead of ``default``.
        **declared: the rest of the :class:`Setting` (``low``, ``high``, ``choices``, ``grid``,
            ``doc``, ``required``, ``types``, ...).

    Returns:
        A :func:`dataclasses.field` carrying the setting in its metadata.

    Examples:
        >>> from dataclasses import dataclass
        >>> from agnostophobia.settings import field_settings, setting
        >>> @dataclass
        ... class Schedule:
        ...     epochs: int = setting(int, 10, low=1)  # the field's default is the setting's
        ...
        >>> Schedule().epochs, field_settings(Schedule)["epochs"].describe_range()
        (10, '[1, inf)')
    """
    given = default is not _NO_DEFAULT
    default = default if given else None
    default_value = factory() if factory is not None else default
    metadata = {"setting": Setting(kind, default_value, **declared)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    if declared.get("required") and not given:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def field_settings(owner) -> Dict[str, Setting]:
    """The settings of a dataclass's fields declared with :func:`setting`, by field name.

    Args:
        owner: a dataclass (the class or an instance).

    Returns:
        ``{field name: Setting}``, in the fields' order.

    Examples:
        >>> from agnostophobia.settings import field_settings
        >>> from agnostophobia.training import TrainConfig
        >>> settings = field_settings(TrainConfig)
        >>> settings["epochs"].default, settings["optimizer"].choices
        (70, ('adam', 'sgd'))
    """
    return {f.name: f.metadata["setting"] for f in dataclasses.fields(owner) if "setting" in f.metadata}


def declared_settings(owner, declared: Mapping[str, Setting], skip: Iterable[str] = ()) -> Dict[str, Setting]:
    """Every setting of a class: its declared ones, in its constructor's order, and each other
    keyword of the constructor inferred from the signature (:meth:`Setting.inferred`).

    Args:
        owner: the class (a loss or a detector).
        declared: its declarations, by keyword (its ``SETTINGS``).
        skip: keywords that are no settings (``num_classes``, ``reduction``).

    Returns:
        The settings by name.

    Examples:
        >>> from agnostophobia.losses import ObjectosphereLoss
        >>> from agnostophobia.settings import declared_settings
        >>> sorted(declared_settings(ObjectosphereLoss, ObjectosphereLoss.SETTINGS, skip=("num_classes", "reduction")))
        ['lambda_', 'xi']
    """
    settings: Dict[str, Setting] = {}
    skipped = set(skip)
    for name, parameter in inspect.signature(owner).parameters.items():
        if name in skipped or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        setting = declared.get(name) or Setting.inferred(parameter)
        if setting is not None:
            settings[name] = setting
    for name, setting in declared.items():  # declared but read through **kwargs
        settings.setdefault(name, setting)
    return settings


def check_settings(declared: Mapping[str, Setting], values: Mapping[str, Any], where: str, owner: str) -> None:
    """Check that each of ``values`` is a declared setting with an allowed value.

    Args:
        declared: the declarations, by name.
        values: the values to check, by name (a config's mapping).
        where: the config key path the values sit under (``detectors.knn``), for the message.
        owner: what declares them (``detector knn``), for the message.

    Raises:
        ConfigError: an undeclared name or a value it does not allow, naming ``where.KEY``.

    Examples:
        >>> from agnostophobia.detectors import KNNDetector
        >>> from agnostophobia.errors import ConfigError
        >>> from agnostophobia.settings import check_settings
        >>> check_settings(KNNDetector.SETTINGS, {"k": 20}, where="detectors.knn", owner="detector knn")  # fine: nothing
        >>> try:
        ...     check_settings(KNNDetector.SETTINGS, {"k": 0}, where="detectors.knn", owner="detector knn")
        ... except ConfigError as error:
        ...     print(error)
        ...
        config key 'detectors.knn.k': must be an integer >= 1, got 0
    """
    for key, value in values.items():
        if key not in declared:
            raise ConfigError(f"config key {where + '.' + key!r}: {owner} has no setting {key!r}; "
                              f"its settings: {', '.join(declared) or 'none'}")
        problem = declared[key].problem(value)
        if problem:
            raise ConfigError(f"config key {where + '.' + key!r}: {problem}, got {value!r}")
