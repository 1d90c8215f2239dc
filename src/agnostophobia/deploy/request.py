"""One request from the command line down: which models of a trained run a command reads.

The handlers of ``compare``, ``calibrate``, ``predict``, ``export`` (``deploy/cli.py``),
``evaluate`` and ``tune-detectors`` (``experiments/cli.py``) build one :class:`ModelRequest`
from the parsed command line; the library functions behind them take it whole, as the
training commands take a :class:`~agnostophobia.experiments.request.RunRequest`. So each
flag is read in one place, and a script asks with the same object::

    from agnostophobia.deploy.calibration import calibrate_run
    from agnostophobia.deploy.request import ModelRequest

    calibrate_run(ModelRequest("runs/lenet++-cpu", fpr=0.01, approaches=["entropic"]))
    calibrate_run(ModelRequest("runs/lenet++-cpu", fpr=0.01, detector="best"))  # as --detector best

:meth:`OpenSetClassifier.from_run <agnostophobia.deploy.OpenSetClassifier.from_run>` takes
the fields as keywords (``from_run(run, approach="entropic", fpr=0.1)``).
"""
from __future__ import annotations

import argparse
import dataclasses
import numbers
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from agnostophobia._validation import FPR_RULE, SEED_RULE, is_rate, is_seed
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning


@dataclasses.dataclass(frozen=True)
class ModelRequest:
    """What a command on a trained run asked for; every field but ``run`` may be left at its
    default.

    A command that reads one model (``predict``, ``export``,
    :meth:`~agnostophobia.deploy.OpenSetClassifier.from_run`) takes ``approach``; one that reads
    several (``compare``, ``calibrate``, ``tune-detectors``) takes ``approaches``; a request
    giving both is refused, and a field the command does not read must stay at its default
    (:meth:`check_reads`).

    Args:
        run: The run directory written by ``reproduce`` or ``train``.
        approach: The one trained approach (``--approach``); default: the run's first trained with negatives.
        approaches: Only these trained approaches (``--approach``, repeatable); default: every trained one.
        detector: A registered detector (``--detector``); default: each approach's paper score.
        detector_of: One detector per approach, ``{approach: detector}``, instead of ``detector``
            (``calibrate --detector best`` chooses them).
        seed: The one model's training seed (``--seed``, default 0).
        fpr: A target false-positive rate on the validation negatives, in (0, 1] (``--fpr``):
            ``calibrate`` chooses each threshold at it, ``predict`` and ``export`` calibrate first.
        data_dir: The datasets' folder, where validation outputs must be computed again (``--data-dir``;
            default: ``$AGNOSTOPHOBIA_DATA``).
        device: Where a network computes (``cpu``, ``cuda``, ``cuda:N``; ``--device``); default: the run's.
        precision: ``fp32`` (default) or ``bf16``: the one model's arithmetic.
        partial: Where some models get no threshold at ``fpr``, still write those that resolve
            (``--partial``).

    Each field is checked where the request is made: a ``TypeError`` names a field of the
    wrong kind (``partial="no"``, ``seed=True``), an
    :class:`~agnostophobia.errors.AgnostophobiaError` one out of its range (``fpr=0``).

    Examples:
        >>> from agnostophobia.deploy import ModelRequest
        >>> request = ModelRequest("runs/lenet++-cpu", fpr=0.01, approaches=["entropic", "objectosphere"])
        >>> request.chosen_approaches()
        ('entropic', 'objectosphere')
        >>> request.but(approaches=None, approach="softmax").chosen_approaches()
        ('softmax',)
        >>> ModelRequest("runs/lenet++-cpu", approach="softmax", approaches=["entropic"])
        Traceback (most recent call last):
        ...
        ValueError: give approach (one model) or approaches (several), not both
    """

    run: Any
    approach: Optional[str] = None
    approaches: Optional[Tuple[str, ...]] = None
    detector: Optional[str] = None
    detector_of: Optional[Mapping[str, str]] = None
    seed: int = 0
    fpr: Optional[float] = None
    data_dir: Any = None
    device: Optional[str] = None
    precision: Optional[str] = None
    partial: bool = False

    def __post_init__(self):
        if isinstance(self.approaches, str):
            raise ValueError(f"approaches must be a sequence of approach names, got the string {self.approaches!r}")
        if self.approaches is not None:  # a tuple: a frozen request holds no list a callee could change
            _expect("approaches", self.approaches, isinstance(self.approaches, Iterable), "a sequence of approach names")
            object.__setattr__(self, "approaches", tuple(self.approaches))
        self._check_fields()
        object.__setattr__(self, "run", Path(self.run))
        if self.detector_of is not None:
            object.__setattr__(self, "detector_of", dict(self.detector_of))
        if self.approach is not None and self.approaches is not None:
            raise ValueError("give approach (one model) or approaches (several), not both")
        if self.detector is not None and self.detector_of is not None:
            raise ValueError("give detector or detector_of, not both")

    def _check_fields(self) -> None:
        """Each field of its kind (a ``TypeError`` naming it) and in its range (an
        :class:`~agnostophobia.errors.AgnostophobiaError`): a request a script builds is refused
        where it is made, not followed with ``partial="no"`` read as true, or a seed of ``True``.
        (A device's name is checked where a network is placed on it, with the devices there.)"""
        self._check_kinds()
        for name, ok, rule in (("seed", is_seed(self.seed), SEED_RULE),
                               ("fpr", self.fpr is None or is_rate(self.fpr), FPR_RULE)):
            if not ok:
                raise AgnostophobiaError(f"ModelRequest.{name} {rule}, got {getattr(self, name)!r}")

    def _check_kinds(self) -> None:
        _expect("run", self.run, _is_path(self.run), "a path (str or os.PathLike)")
        for name in ("approach", "detector", "device", "precision"):
            value = getattr(self, name)
            _expect(name, value, value is None or isinstance(value, str), "a string or None")
        if self.approaches is not None:
            _expect("approaches", self.approaches, _is_names(self.approaches), "a sequence of approach names")
        if self.detector_of is not None:
            _expect("detector_of", self.detector_of, isinstance(self.detector_of, Mapping) and
                    _is_names(self.detector_of.keys()) and _is_names(self.detector_of.values()),
                    "a mapping of approach names to detector names, or None")
        _expect("seed", self.seed, _is_integer(self.seed), "an integer")
        _expect("fpr", self.fpr, self.fpr is None or _is_real(self.fpr), "a number or None")
        _expect("data_dir", self.data_dir, self.data_dir is None or _is_path(self.data_dir),
                "a path (str or os.PathLike) or None")
        _expect("partial", self.partial, isinstance(self.partial, bool), "true or false (a bool)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "ModelRequest":
        """The request of a parsed command line: ``--approach`` is ``approaches`` where the
        command repeats it (a list), else ``approach``; a flag the command lacks keeps the
        field's default.

        Args:
            args: the command's parsed arguments (``argparse.Namespace``).

        Returns:
            The :class:`ModelRequest`.
        """
        given = vars(args)
        values: Dict[str, Any] = {"run": given["run"]}
        chosen = given.get("approach")
        values["approaches" if isinstance(chosen, list) else "approach"] = chosen
        for field in dataclasses.fields(cls):
            if field.name not in ("run", "approach", "approaches") and given.get(field.name) is not None:
                values[field.name] = given[field.name]
        return cls(**values)

    def but(self, **changes) -> "ModelRequest":
        """A copy with ``changes`` (field names), e.g. the approach and detector filled in.

        Returns:
            The changed copy; this request is unchanged.
        """
        return dataclasses.replace(self, **changes)

    def chosen_approaches(self) -> Optional[Tuple[str, ...]]:
        """The approaches the request reads.

        Returns:
            ``approaches``, or the one ``approach`` as a tuple; None where it names none (every
            trained approach).
        """
        return self.approaches if self.approach is None else (self.approach,)

    def check_reads(self, command: str, *reads: str) -> None:
        """A ``ValueError`` naming ``command`` where a field other than ``run`` and ``reads`` (the
        fields it reads) was changed from its default: no request is half followed in silence, and
        a field added later is refused by every command that does not say it reads it.

        Args:
            command: the function named in the error (``export_run``).
            *reads: the fields the command reads, besides ``run``.
        """
        changed = [field.name for field in dataclasses.fields(self)
                   if field.name not in ("run", *reads) and getattr(self, field.name) != field.default]
        if changed:
            raise ValueError(f"{command} does not read {', '.join(changed)} of its ModelRequest; leave "
                             f"{'it' if len(changed) == 1 else 'them'} at the default")

    def warn_unused(self, why: str, *fields: str, stacklevel: int = 1) -> None:
        """One :class:`~agnostophobia.errors.AgnostophobiaWarning` naming those of ``fields`` that
        were given (not None) and had no effect, and ``why``: a flag a command did not need (a
        ``--device`` where no network ran) says so instead of being ignored without a word.
        ``stacklevel`` counts from the caller, as ``warnings.warn``'s does.

        Args:
            why: the reason they had no effect, ending the warning.
            *fields: the names of the fields the command did not use.
            stacklevel: which caller the warning points at, 1 the caller of this method.
        """
        given = [f"--{name.replace('_', '-')} {getattr(self, name)}" for name in fields
                 if getattr(self, name) is not None]
        if given:
            verb = "has" if len(given) == 1 else "have"
            warnings.warn(f"{' and '.join(given)} {verb} no effect: {why}", AgnostophobiaWarning,
                          stacklevel=stacklevel + 1)


def _expect(name: str, value, ok: bool, kind: str) -> None:
    if not ok:
        raise TypeError(f"ModelRequest.{name} must be {kind}, got {type(value).__name__} {value!r}")


def _is_path(value) -> bool:
    return isinstance(value, (str, os.PathLike))


def _is_names(values) -> bool:
    return all(isinstance(value, str) for value in values)


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
