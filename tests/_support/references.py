"""Float64 references of the registered losses and detectors, each written beside its own tests.

A loss's test module (``tests/losses/test_<module>.py``, or a plugin's own test file) registers the
per-sample formula of its paper with :func:`loss_reference`; a detector's, its scores with
:func:`detector_reference`. The contract tests (``tests/contracts/``) check every registered loss
and detector against its reference, so that a new one needs its own test file and no other edit.
"""
from __future__ import annotations

import importlib
import math
from typing import Callable, Dict, NamedTuple

import numpy as np

#: loss name -> its reference; detector name -> its reference (filled by the test modules as they are imported)
LOSS_REFERENCES: Dict[str, "Reference"] = {}
DETECTOR_REFERENCES: Dict[str, "Reference"] = {}


class Reference(NamedTuple):
    formula: Callable
    settings: dict  # the settings the loss or detector is built with for the comparison


def loss_reference(name: str, **settings):
    """Register ``formula(loss, logits_row, features_row, label) -> per-sample term`` (float64, one
    sample at a time, straight from the paper) as loss ``name``'s reference, the loss built with ``settings``."""
    def register(formula):
        LOSS_REFERENCES[name] = Reference(formula, settings)
        return formula
    return register


def detector_reference(name: str, **settings):
    """Register ``formula(detector, logits, features) -> (N, C) scores`` (float64 numpy, written out
    from the paper) as detector ``name``'s reference, the detector built with ``settings``."""
    def register(formula):
        DETECTOR_REFERENCES[name] = Reference(formula, settings)
        return formula
    return register


#: what each registry holds -> the folder of tests/ where the package's classes have their test modules
LAYERS = {"loss": "losses", "detector": "detectors"}


def own_test_module(cls, kind: str) -> str:
    """``tests.losses.test_entropic`` for a loss of ``agnostophobia.losses.entropic``."""
    return f"tests.{LAYERS[kind]}.test_{cls.__module__.rpartition('.')[2].lstrip('_')}"


def find_reference(registry, references: Dict[str, Reference], kind: str, name: str) -> Reference:
    """The reference registered for ``name`` (a ``kind``: ``"loss"`` or ``"detector"``). A class of the
    package has it in its own test module, imported here when only the contract tests run; a subclass
    that changes no formula (a fine-tuning variant) is checked against the reference of the registered
    class it derives from."""
    for cls in registry.get(name).__mro__:
        for candidate in [n for n in registry.names() if registry.get(n) is cls]:
            if candidate not in references and cls.__module__.startswith("agnostophobia."):
                try:
                    importlib.import_module(own_test_module(cls, kind))
                except ModuleNotFoundError:
                    pass
            if candidate in references:
                return references[candidate]
    cls = registry.get(name)
    where = (f"{own_test_module(cls, kind).replace('.', '/')}.py" if cls.__module__.startswith("agnostophobia.")
             else "the test file that comes with it")
    raise LookupError(f"{kind} {name!r} has no float64 reference: register one with "
                      f"@{kind}_reference({name!r}) in {where}")


# ----------------------------------------------------------------- pieces the formulas share
def log_softmax_row(z):
    """log S_c = z_c - log sum_j exp(z_j), one row, written out (max subtracted, as any careful hand would)."""
    top = max(z.tolist())
    return z - (top + math.log(sum(math.exp(v - top) for v in z.tolist())))


def softmax_row(z):
    """S_c = exp(z_c) / sum_j exp(z_j), one row as a list of floats (max subtracted)."""
    e = [math.exp(v - max(z)) for v in z]
    return [v / sum(e) for v in e]


def per_row(logits, score):
    """A detector's reference scores: ``score`` of each row of ``logits`` (as a list), in float64."""
    return np.array([score(list(row)) for row in logits], dtype=np.float64)


def uniform_cross_entropy(z, num_classes: int):
    """H(U; S) = -1/C sum_c log S_c: the entropic term of an unknown sample over ``num_classes`` columns."""
    return -log_softmax_row(z)[:num_classes].sum() / num_classes
