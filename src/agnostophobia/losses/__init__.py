"""Training losses: softmax, background class, Entropic Open-Set (Sec. 4.1, Eq. 1) and
Objectosphere (Sec. 4.2, Eq. 2) of Dhamija, Günther and Boult (NeurIPS 2018).

Every loss is an ``nn.Module`` with ``reduction`` in {'mean', 'sum', 'none'}, the
class attribute ``uses_features`` and the property ``num_outputs`` (C, or C+1 for the
background class), and one call form: a loss that does not read the features ignores them,
so a trainer can stay generic::

    loss = build_loss("objectosphere", 10)               # xi=50, lambda_=1e-4 (declared defaults)
    model = make_model(num_outputs=loss.num_outputs)
    value = loss(logits, labels, features=features, sample_weight=None)

Labels: ``>= 0`` known class, negative = known-unknown sample (D_b').

Sample weights: a loss called as above is unweighted; ``loss(logits, labels, sample_weight=w)``
weights it. The training pipeline passes the authors' inverse-frequency weights by default
(config key ``sample_weighting: true``; :mod:`.weights`), so a model trained by ``train`` or
``reproduce`` is weighted unless the config sets ``sample_weighting: false``.
"""
from __future__ import annotations

import inspect
from typing import Dict, Optional

from ..errors import ConfigError
from ..settings import Setting
from ._base import (LOSSES, PAPER_APPROACHES, REDUCTIONS, OpenSetLoss, known_columns, trained_on_negatives,
                    with_logit_layer)
from .recipes import FineTune, Provenance
from .baselines import BackgroundClassLoss, SoftmaxLoss
from .entropic import EntropicOpenSetLoss
from .objectosphere import ObjectosphereLoss
# the training peers (issue 34), registered after the paper's four
from .outlier_exposure import OutlierExposureLoss
from .energy_regularized import EnergyRegularizedLoss
from .mixoe import MixOELoss
from .maximal_entropy import MaximalEntropyLoss
from .logitnorm import LogitNormLoss
from .vos import VOSLoss
# the distance-based approaches (issue 59): their logit layer is their own (OpenSetLoss.logit_layer)
from .arpl import ARPLoss
from .cac import CACLoss
from .weights import inverse_frequency_class_weights, sample_weights

__all__ = [
    "LOSSES",
    "REDUCTIONS",
    "OpenSetLoss",
    "FineTune",
    "Provenance",
    "SoftmaxLoss",
    "BackgroundClassLoss",
    "EntropicOpenSetLoss",
    "ObjectosphereLoss",
    "OutlierExposureLoss",
    "EnergyRegularizedLoss",
    "MixOELoss",
    "MaximalEntropyLoss",
    "LogitNormLoss",
    "VOSLoss",
    "ARPLoss",
    "CACLoss",
    "build_loss",
    "known_columns",
    "trained_on_negatives",
    "with_logit_layer",
    "approach_logit_layer",
    "loss_settings",
    "every_loss_setting",
    "renamed_loss_settings",
    "current_setting_names",
    "setting_problem",
    "PAPER_APPROACHES",
    "inverse_frequency_class_weights",
    "sample_weights",
]


def build_loss(name: str, num_classes: int, **kwargs) -> OpenSetLoss:
    """Instantiate the loss registered as ``name`` (see ``LOSSES.names()``).

    Keyword arguments go to the loss class (e.g. ``xi``, ``lambda_``, ``reduction``), a setting's
    former name (``Setting.formerly``) read as the setting; a missing or unexpected one raises
    :class:`~agnostophobia.errors.ConfigError` naming it, since these usually come from a config file.

    Args:
        name: a name registered in :data:`~agnostophobia.losses.LOSSES` (an approach:
            ``"objectosphere"``, ...).
        num_classes: C, the number of known classes.
        **kwargs: the loss's constructor keywords: ``reduction`` and its declared settings
            (:func:`loss_settings`).

    Returns:
        The loss module.

    Raises:
        ConfigError: ``name`` is not registered, or a keyword is missing or not taken by the loss.
        ValueError: ``num_classes`` is not a positive integer, or a value its declaration does
            not allow (naming the keyword).

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import build_loss
        >>> loss = build_loss("objectosphere", num_classes=3, xi=10.0)  # Sec. 4.2; keywords are its settings
        >>> logits, features = torch.zeros(2, 3), torch.ones(2, 4)
        >>> labels = torch.tensor([0, -1])  # a known of class 0, an unknown
        >>> round(float(loss(logits, labels, features=features)), 4)
        1.102
    """
    cls = LOSSES.get(name)
    kwargs = current_setting_names(kwargs, renamed_loss_settings(name), f"loss {name!r}")  # a former name builds it
    try:
        inspect.signature(cls).bind(num_classes, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"loss {name!r}: {exc}") from None
    return cls(num_classes, **kwargs)


def approach_logit_layer(model, approach: str, settings: Optional[Dict] = None):
    """``model`` with the logit layer the loss registered as ``approach`` trains it with
    (:func:`with_logit_layer`): a network of a trained run rebuilt as the run trained it (ARPL's
    reciprocal points, CAC's anchor distances), unchanged for a loss whose logits are linear in F or an
    approach not registered here.

    Args:
        model: a network just built (its ``logits`` the linear layer of the model's own).
        approach: the approach it was trained with (a run's config ``approach``).
        settings: the run's ``loss:`` settings (those the approach's loss does not read are left out,
            a former name read as its setting; None: the declared defaults).

    Returns:
        ``model`` itself.

    Examples:
        >>> from agnostophobia.losses import approach_logit_layer
        >>> from agnostophobia.models import build_model
        >>> model = approach_logit_layer(build_model("lenet++", num_outputs=10), "cac", {"cac_magnitude": 5.0})
        >>> model.logits.magnitude, type(approach_logit_layer(build_model("lenet++", num_outputs=10), "softmax").logits)
        (5.0, <class 'torch.nn.modules.linear.Linear'>)
    """
    if approach not in LOSSES or LOSSES.get(approach).linear_logits:
        return model
    own = loss_settings(approach)
    settings = current_setting_names(settings or {}, renamed_loss_settings(approach), "loss settings")  # a record's
    kwargs = {name: value for name, value in settings.items() if name in own}
    num_classes = LOSSES.get(approach).known_logits(int(model.logits.out_features))
    return with_logit_layer(model, build_loss(approach, num_classes, **kwargs))


def loss_settings(name: str) -> Dict[str, Setting]:
    """The hyper-parameters the loss registered as ``name`` reads, each with its
    :class:`~agnostophobia.settings.Setting`: ``xi`` and ``lambda_`` for Objectosphere (Eq. 2),
    none for the paper's other three. The trainer passes exactly these from the config, and
    ``tune`` tunes only approaches whose loss reads what it varies.

    Args:
        name: a name registered in :data:`~agnostophobia.losses.LOSSES`.

    Returns:
        The settings by keyword, in the constructor's order (empty when the loss has none).

    Raises:
        ConfigError: ``name`` is not a registered loss.

    Examples:
        >>> from agnostophobia.losses import loss_settings
        >>> sorted(loss_settings("objectosphere")), loss_settings("entropic")
        (['lambda_', 'xi'], {})
    """
    return LOSSES.get(name).hyperparameters()


def every_loss_setting() -> Dict[str, Dict[str, Setting]]:
    """Every hyper-parameter some registered loss reads, by keyword: the names a config's
    ``loss:`` may hold, each with the declaration of every loss that reads it, by approach. Two
    losses may declare one name with different types, ranges or defaults, so no declaration
    stands for the others: a value is checked against those of the approaches trained or tuned
    (:func:`setting_problem`).

    Returns:
        ``{keyword: {approach: Setting}}``, the keywords in the order the losses are registered.

    Examples:
        >>> from agnostophobia.losses import every_loss_setting
        >>> sorted(every_loss_setting()["xi"])  # the approaches whose loss reads xi
        ['objectosphere']
    """
    settings: Dict[str, Dict[str, Setting]] = {}
    for name in LOSSES.registered():
        for keyword, declared in loss_settings(name).items():
            settings.setdefault(keyword, {})[name] = declared
    return settings


def renamed_loss_settings(approach: Optional[str] = None) -> Dict[str, str]:
    """The former names of the registered losses' settings (``Setting(..., formerly=...)``), each
    with the name it has now: a config that still writes one loads, read as the setting it became.

    Args:
        approach: one registered loss, whose settings' former names alone are given (None: every
            registered loss's).

    Returns:
        ``{former name: keyword}``.

    Raises:
        ConfigError: ``approach`` is not a registered loss.

    Examples:
        >>> from agnostophobia.losses import renamed_loss_settings
        >>> renamed_loss_settings("logitnorm")  # LogitNorm's τ, named without a prefix now
        {'logitnorm_temperature': 'temperature'}
    """
    approaches = LOSSES.registered() if approach is None else [approach]
    return {former: keyword for name in approaches for keyword, declared in loss_settings(name).items()
            for former in declared.formerly}


def current_setting_names(values: Dict, renamed: Dict[str, str], where: str) -> Dict:
    """``values`` (loss settings by name, a config's ``loss:`` or a constructor's keywords) with
    each former name replaced by the setting's name now.

    Args:
        values: ``{name: value}``, some names perhaps former ones.
        renamed: ``{former name: name}`` (:func:`renamed_loss_settings`, or one loss's).
        where: what holds ``values``, for the error (``"config key 'loss'"``).

    Returns:
        ``{name: value}``, in the order given.

    Raises:
        ConfigError: a setting given under its former name and its name with two values.

    Examples:
        >>> from agnostophobia.losses import current_setting_names, renamed_loss_settings
        >>> current_setting_names({"logitnorm_temperature": 0.1}, renamed_loss_settings(), "loss")
        {'temperature': 0.1}
    """
    out: Dict = {}
    given: Dict = {}
    for key, value in values.items():
        name = renamed.get(key, key)
        if name in out and out[name] != value:
            raise ConfigError(f"{where}: {given[name]!r} and {key!r} both set {name!r}, to {out[name]!r} and "
                              f"{value!r}; set it once, as {name!r}")
        out[name], given[name] = value, key
    return out


def setting_problem(keyword: str, value, approaches=None) -> Optional[str]:
    """What is wrong with ``value`` for the loss setting ``keyword``: checked against each of
    ``approaches`` whose loss reads it (the approaches trained or tuned), naming the approach
    whose declaration refuses it; without such an approach (a config key for a loss not trained
    here), refused only when no registered loss's declaration accepts it.

    Args:
        keyword: the setting's name, as a config's ``loss:`` writes it (``xi``, ``margin``, ...).
        value: the value to check.
        approaches: the registered approaches trained or tuned (None: none named).

    Returns:
        What is wrong, in words (``"must be a number >= 0 (as objectosphere's loss declares
        it)"``), or None when the value is acceptable.

    Examples:
        >>> from agnostophobia.losses import setting_problem
        >>> setting_problem("xi", 50.0, approaches=["objectosphere"]) is None
        True
        >>> print(setting_problem("xi", -1.0, approaches=["objectosphere"]))
        must be a number >= 0 (as objectosphere's loss declares it)
    """
    readers = [a for a in (approaches or ()) if keyword in loss_settings(a)]
    for approach in readers:
        problem = loss_settings(approach)[keyword].problem(value)
        if problem:
            return f"{problem} (as {approach}'s loss declares it)"
    if readers:
        return None
    problems = [declared[keyword].problem(value) for declared in map(loss_settings, LOSSES.registered())
                if keyword in declared]
    return problems[0] if problems and all(problems) else None
