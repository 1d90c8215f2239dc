"""Shared machinery of the training losses: input checks, reduction, registry.

Label rule: ``label >= 0`` is a known class of D_c', a negative label marks a
known-unknown sample of D_b' (the paper's "known unknowns", Sec. 3).

Reduction, with optional per-sample weights ``w`` (Keras-style, as the authors trained):

* ``'none'``: the per-sample losses ``w_i * l_i`` (``l_i`` when unweighted), shape (N,).
* ``'sum'``:  ``sum_i w_i * l_i``.
* ``'mean'``: ``sum_i w_i * l_i / N`` -- divided by the number of samples, *not* by
  ``sum_i w_i``. This is what Keras' ``sample_weight`` did, so the weights' overall
  scale changes the loss scale. A loss that does not train on unknowns (:class:`SoftmaxLoss`)
  counts only known samples in N; one with ``mean_per_term`` (Outlier Exposure and its
  successors) divides the knowns' sum by their count and the unknowns' by theirs, an absent
  group adding 0.
"""
from __future__ import annotations

import inspect
import operator
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from .._validation import int64_labels
from ..errors import ConfigError
from ..registry import Registry
from ..settings import DeclaresSettings, Setting, declared_settings
from .recipes import FineTune, Provenance

#: Training losses by name; each entry is an ``nn.Module`` class taking
#: ``(num_classes, **kwargs)``. An approach of the paper (Sec. 3-4) *is* its loss: the
#: approach names are these names, in the paper's order (softmax, background, entropic,
#: objectosphere: the order of registration), and each class declares the facts the
#: trainer and the detectors need (``trains_on_unknowns``, ``background_class``).
LOSSES: Registry = Registry("loss", path_names=True)

REDUCTIONS = ("mean", "sum", "none")

#: The paper's four approaches (Sec. 3-4), in its order: what a config without ``approaches:``
#: trains and what the shipped reproductions compare. Further registered losses (the training
#: peers, plugins) train when a config names them.
PAPER_APPROACHES = ("softmax", "background", "entropic", "objectosphere")


def check_num_classes(num_classes) -> int:
    """A positive integer (numpy integers accepted, bools and floats refused)."""
    if isinstance(num_classes, bool):
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
    try:
        value = operator.index(num_classes)
    except TypeError:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}") from None
    if value < 1:
        raise ValueError(f"num_classes must be a positive integer, got {value}")
    return value


def check_reduction(reduction) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}; got {reduction!r}")
    return reduction


def check_tensor_storage(tensor: torch.Tensor, name: str, device=None) -> torch.Tensor:
    """A dense tensor that holds values, on ``device`` when one is given.

    A tensor on the meta device has a shape and no values, and a sparse one lacks the
    operations the losses use: either would fail deep inside torch. ``features`` carry
    gradients, so they are not moved to the logits' device behind the caller's back.
    """
    if tensor.is_meta:
        raise ValueError(f"{name} is on the meta device (a shape without values); create or load it on "
                         f"the device the model runs on")
    if tensor.layout != torch.strided:
        raise ValueError(f"{name} must be a dense tensor, got layout {tensor.layout}")
    if device is not None and tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device} but logits on {device}; move both to one device")
    return tensor


#: Integer dtypes whose every value fits an int64: such a tensor is converted where it lies.
_FITS_INT64 = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def int64_label_tensor(labels, name: str = "labels") -> torch.Tensor:
    """Labels as an int64 tensor, refused naming ``name`` unless every value is an integer that
    fits an int64 (:func:`agnostophobia._validation.int64_labels`; floats are refused: a loss
    takes class indices). A tensor of a narrower integer dtype stays on its device, unread."""
    if isinstance(labels, torch.Tensor):
        check_tensor_storage(labels, name)
        if labels.dtype in _FITS_INT64:
            return labels.long()
    return torch.as_tensor(int64_labels(labels, name, integral_floats=False))


class OpenSetLoss(DeclaresSettings, nn.Module):
    """Base class: one call form, input checks, the reduction, and the hooks a trainer calls.

    Every loss is called ``loss(logits, labels, features=None, sample_weight=None)`` (labels and
    an optional ``sample_weight`` may also be positional). A subclass writes ``forward(logits,
    labels, sample_weight=None)``, or ``forward(logits, labels, features=None,
    sample_weight=None)`` when it reads the deep features; which of the two is read from its
    signature once, when the class is defined, so that a loss whose ``forward`` does not take
    ``features`` (e.g. one written before this call form) is never handed them. The old
    Objectosphere form ``loss(logits, features, labels)`` is told apart by shape and dtype
    (features 2-D floats, labels 1-D integers) and still works, with one ``DeprecationWarning``.

    Subclasses declare: ``uses_features`` (whether ``forward`` reads the deep features),
    ``trains_on_unknowns`` (whether unknown samples of D_b' are trained on; softmax
    thresholding does not), ``background_class`` (one logit more than known classes, the
    background class, last), ``mean_per_term`` (``'mean'`` averages knowns and unknowns each over
    their own count, as Outlier Exposure and its successors do), ``default_detector`` (the score
    its paper thresholds), ``papers_other_detectors`` (other scores its paper reports as rows of their own),
    ``batches_over_seeds`` (False for a loss whose step keeps state or draws
    on the host: ``batched_seeds`` then trains its seeds one by one), ``replays_in_cuda_graph``
    (False where one captured step cannot stand for every step: ``cuda_graph: true`` is refused),
    ``fine_tune`` (a :class:`~agnostophobia.losses.FineTune` recipe where the approach starts from another approach's
    trained network, as its paper does; None: from scratch), ``scratch_recipe`` and ``provenance``
    (where its from-scratch recipe and its other facts come from,
    :class:`~agnostophobia.losses.Provenance`). Their hyper-parameters are
    declared once each as a class attribute, ``xi = Setting(float, 50.0, low=0, grid=...)`` (type,
    default, range, tuning grid): the constructor ``(num_classes, reduction='mean', *, xi=50.0)``
    is made from them (:class:`~agnostophobia.settings.DeclaresSettings`), with
    ``__post_init__`` for what a loss derives from
    them. A loss with its own ``__init__`` may also take undeclared keywords, inferred from their
    annotation and default (:meth:`hyperparameters`).

    Hooks the trainer calls, doing nothing here: :meth:`attach` (once, with the network it
    trains), :meth:`begin_epoch` (before each training epoch), :meth:`mix_batch` (on each
    training batch before the network sees it). A loss's parameters are trained with the
    network's, and its state dict is kept in the checkpoints.

    Args:
        num_classes: C, the number of known classes (a positive integer; numpy integers are
            accepted, bools and floats refused). Known labels are ``0..C-1``; the loss expects
            ``(N, C)`` logits, or ``(N, C+1)`` with a background class
            (:attr:`~agnostophobia.losses.OpenSetLoss.num_outputs`).
        reduction: ``'mean'``, ``'sum'`` or ``'none'`` (the per-sample losses, shape ``(N,)``);
            see the module docstring for how ``'mean'`` counts samples and weights.

    Raises:
        ValueError: ``num_classes`` is not a positive integer or ``reduction`` is not one of
            the three.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import OpenSetLoss
        >>> class Hinge(OpenSetLoss):  # the knowns' hinge on their true logit, nothing on unknowns
        ...     def forward(self, logits, labels, sample_weight=None):
        ...         logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        ...         known = labels >= 0
        ...         true = logits.gather(1, labels.clamp(min=0)[:, None])[:, 0]
        ...         hinge = torch.where(known, (1 - true).clamp(min=0), torch.zeros_like(true))
        ...         return self._reduce(hinge, labels, weight)
        ...
        >>> loss = Hinge(num_classes=3, reduction="none")
        >>> loss(torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]), torch.tensor([0, 1, -1]))
        tensor([0.0000, 0.5000, 0.0000])
    """

    uses_features: bool = False
    trains_on_unknowns: bool = True
    background_class: bool = False
    mean_per_term: bool = False
    default_detector: str = "softmax"
    #: Other scores the approach's paper reports as its own rows beside ``default_detector`` (e.g.
    #: objectosphere's Scaled Objectosphere, Table 2): the benchmark's primary family tests them too.
    papers_other_detectors: Tuple[str, ...] = ()
    batches_over_seeds: bool = True
    replays_in_cuda_graph: bool = True
    #: Where set (a :class:`~agnostophobia.losses.FineTune`), the approach fine-tunes the same seed's
    #: trained ``start`` network; None: it trains from scratch.
    fine_tune = None
    #: Where the recipe of an approach that trains from scratch comes from and what differs here
    #: (a :class:`~agnostophobia.losses.Provenance`; None: not stated). One that fine-tunes states
    #: it in ``fine_tune``.
    scratch_recipe = None
    #: Where the approach's other facts that are no setting come from (a
    #: :class:`~agnostophobia.losses.Provenance` each): the loss itself for an approach without
    #: settings, the auxiliary outliers its paper trains on.
    provenance: Tuple[Provenance, ...] = ()
    #: Whether the network's logits stay its linear layer on F, :math:`l = W F + b` (the rule). A
    #: distance-based loss (ARPL, CAC) sets False and replaces that layer by its own
    #: (:meth:`logit_layer`): the detectors that read the last layer as linear (ViM, ReAct, ASH,
    #: SCALE) then do not apply (``detectors.detector_applies``).
    linear_logits: bool = True
    #: Value checks that read a tensor back to the host (label range, weight finiteness), one
    #: synchronisation each per call. A trainer that checked its whole dataset once turns
    #: them off so that a GPU step never waits for the host; shape and dtype checks stay.
    check_values: bool = True
    #: Whether ``forward`` takes ``features=`` (from its signature, set for each subclass).
    _forward_takes_features: bool = False
    _warned_old_call: bool = False  # the old Objectosphere call form is warned about once per process

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        parameters = inspect.signature(cls.forward).parameters.values()
        cls._forward_takes_features = any(p.name == "features" or p.kind is p.VAR_KEYWORD for p in parameters)
        if cls.uses_features and not cls._forward_takes_features:
            raise TypeError(f"{cls.__name__} declares uses_features = True, but its forward takes no "
                            f"'features' argument; write forward(self, logits, labels, features=None, "
                            f"sample_weight=None)")

    def __call__(self, logits, *args, labels=None, features=None, sample_weight=None):
        labels, features, sample_weight = self._call_arguments(args, labels, features, sample_weight)
        if self._forward_takes_features:
            return super().__call__(logits, labels, features=features, sample_weight=sample_weight)
        return super().__call__(logits, labels, sample_weight=sample_weight)

    def _call_arguments(self, args: Tuple, labels, features, sample_weight):
        """``(labels, features, sample_weight)`` from the positional ``args`` after the logits."""
        name = type(self).__name__
        if labels is not None:
            args = (labels, *args)
        if not args:
            raise TypeError(f"{name}() needs labels: call loss(logits, labels, features=..., sample_weight=...)")
        if len(args) >= 2 and _is_features(args[0]) and _is_labels(args[1]):  # loss(logits, features, labels)
            if features is not None:
                raise TypeError(f"{name}(): features given twice (positionally, in the old form, and as features=)")
            self._warn_old_call()
            features, args = args[0], args[1:]
        if len(args) > 2 or (len(args) == 2 and sample_weight is not None):
            raise TypeError(f"{name}() takes (logits, labels, sample_weight) positionally, got {len(args) + 1} "
                            f"positional arguments; pass features=... and sample_weight=... by keyword")
        return args[0], features, (args[1] if len(args) == 2 else sample_weight)

    @classmethod
    def _warn_old_call(cls) -> None:
        if not OpenSetLoss._warned_old_call:
            OpenSetLoss._warned_old_call = True
            warnings.warn("loss(logits, features, labels) is deprecated; call loss(logits, labels, "
                          "features=features)", DeprecationWarning, stacklevel=4)

    # -- the network's logit layer, as this loss trains it -----------------------------------------
    def logit_layer(self, layer: nn.Module) -> nn.Module:
        """The logit layer of a network trained with this loss, given the network's own (an
        ``nn.Linear`` from the deep features F): that layer itself, for every loss whose logits are
        linear in F (:attr:`linear_logits`). A distance-based loss returns a module of its own in its
        place (ARPL: distances to reciprocal points; CAC: negated distances to class anchors), with a
        ``weight`` of the linear layer's shape, so that the network's state dict keeps its names and
        shapes and the network itself outputs the logits every detector, ``predict`` and ``export``
        read. Called where a network is built for the loss (:func:`with_logit_layer`: the trainer, and
        a trained network loaded back).

        Args:
            layer: the network's logit layer, ``model.logits``.

        Returns:
            The module the network computes its logits with; here ``layer``.
        """
        return layer

    # -- hooks of the training loop (none of the paper's four losses needs one) --------------------
    def attach(self, model: nn.Module) -> "OpenSetLoss":
        """Called once with the network this loss trains (VOS reads its logit layer).

        Args:
            model: the network the loss trains.

        Returns:
            The loss itself, ``self``.
        """
        return self

    def begin_epoch(self, epoch: int, epochs: int) -> None:
        """Called before training epoch ``epoch`` (from 0) of ``epochs``.

        Args:
            epoch: the epoch about to train, from 0.
            epochs: the run's number of epochs.
        """

    def mix_batch(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """A training batch's inputs as the network should see them (MixOE mixes its negatives
        with knowns here); called on training batches only, before the network.

        ``x`` is (N, C, H, W) and ``labels`` (N,), or, with seeds batched (``batched_seeds``), every
        seed's batch stacked: (S, N, C, H, W) and (S, N). A loss that overrides this for one batch
        only declares ``batches_over_seeds = False`` (MixOE does), and its seeds train one by one.

        Args:
            x: the training batch's inputs.
            labels: their labels, >= 0 known, < 0 negative.

        Returns:
            The inputs the network trains on, of ``x``'s shape; here ``x`` itself.
        """
        return x

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, features: Optional[torch.Tensor] = None,
                sample_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The loss of a batch; every subclass writes its own (its class docstring gives the
        formula) and shares this contract, called as ``loss(logits, labels, features=None,
        sample_weight=None)``.

        Args:
            logits: (N, C) float tensor, (N, C+1) for a loss with a background class.
            labels: (N,) integer tensor: a known class ``0..C-1``, or negative for an unknown.
            features: (N, D) float tensor of deep features, read by a loss that
                ``uses_features`` (Objectosphere, VOS), ignored by the others.
            sample_weight: None (unweighted) or an (N,) float tensor of per-sample weights.

        Returns:
            A 0-dim float tensor (``reduction`` ``'mean'`` or ``'sum'``), or the (N,) per-sample
            losses (``'none'``), differentiable with respect to ``logits`` (and ``features``).

        Raises:
            ValueError: a shape, dtype or label out of range, naming the input.
        """
        raise NotImplementedError(f"{type(self).__name__} writes no forward")

    @classmethod
    def hyperparameters(cls) -> Dict[str, Setting]:
        """Every hyper-parameter: the constructor's keywords besides ``num_classes`` and
        ``reduction``, declared (``SETTINGS``) or inferred (annotation and default).

        Returns:
            The :class:`~agnostophobia.settings.Setting` of each keyword, by name, in the
            constructor's order.
        """
        return declared_settings(cls, cls.SETTINGS, skip=("num_classes", "reduction"))

    def __init__(self, num_classes: int, reduction: str = "mean"):
        super().__init__()
        self.num_classes = check_num_classes(num_classes)
        self.reduction = check_reduction(reduction)

    @property
    def num_outputs(self) -> int:
        """Number of logit columns this loss expects (C; C+1 for the background class)."""
        return self.num_classes + int(self.background_class)

    @classmethod
    def known_logits(cls, width: int) -> int:
        """How many of ``width`` logit columns are known classes (C): all but the background
        class, when the loss has one.

        Args:
            width: the number of logit columns, the network's outputs.

        Returns:
            C, the number of known-class columns, ``width``, or ``width - 1`` with a background class.
        """
        return width - int(cls.background_class)

    def extra_repr(self) -> str:
        """What ``repr(loss)`` shows inside the parentheses.

        Returns:
            ``num_classes``, ``reduction`` and each declared setting, as ``name=value``.
        """
        settings = "".join(f", {name}={getattr(self, name)!r}" for name in self.SETTINGS if hasattr(self, name))
        return f"num_classes={self.num_classes}, reduction={self.reduction!r}{settings}"

    # -- input checks -----------------------------------------------------------------
    def _check_logits(self, logits) -> torch.Tensor:
        if not isinstance(logits, torch.Tensor):
            raise ValueError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
        check_tensor_storage(logits, "logits")
        if logits.dim() != 2:
            raise ValueError(f"logits must have shape (N, {self.num_outputs}), got shape {tuple(logits.shape)}")
        if not logits.is_floating_point():
            raise ValueError(f"logits must be floating point, got dtype {logits.dtype}")
        if logits.shape[0] == 0:
            raise ValueError("logits has 0 samples (empty batch)")
        if logits.shape[1] != self.num_outputs:
            raise ValueError(
                f"logits has {logits.shape[1]} columns, but {type(self).__name__}"
                f"(num_classes={self.num_classes}) expects {self.num_outputs}"
            )
        return logits

    def _check_inputs(self, logits, labels, sample_weight):
        """Validated ``(logits, labels, weight)``: the prologue of every ``forward``."""
        logits = self._check_logits(logits)
        return logits, self._check_labels(labels, logits), self._check_sample_weight(sample_weight, logits)

    def _check_labels(self, labels, logits: torch.Tensor) -> torch.Tensor:
        labels = int64_label_tensor(labels).to(logits.device)  # moved to the logits' device (no gradient)
        if labels.dim() != 1:
            raise ValueError(f"labels must have shape (N,), got shape {tuple(labels.shape)}")
        if labels.shape[0] != logits.shape[0]:
            raise ValueError(f"labels has {labels.shape[0]} entries but logits has {logits.shape[0]} rows")
        # One host sync per batch; worth it, since an out-of-range label would otherwise
        # be a device-side assert on CUDA or silently read another row's column.
        top = int(labels.max()) if self.check_values else -1
        if top >= self.num_classes:
            raise ValueError(
                f"labels contains {top}, but num_classes={self.num_classes} "
                f"(known labels must be 0..{self.num_classes - 1}; negative = unknown)"
            )
        return labels.long()

    def _check_sample_weight(self, sample_weight, logits: torch.Tensor):
        if sample_weight is None:
            return None
        if isinstance(sample_weight, torch.Tensor):
            check_tensor_storage(sample_weight, "sample_weight")
        weight = torch.as_tensor(sample_weight, device=logits.device)
        if weight.dim() != 1 or weight.shape[0] != logits.shape[0]:
            raise ValueError(
                f"sample_weight must have shape ({logits.shape[0]},) to match logits, got shape {tuple(weight.shape)}"
            )
        if weight.dtype == torch.bool or weight.is_complex():
            raise ValueError(f"sample_weight must be real numbers, got dtype {weight.dtype}")
        weight = weight.to(logits.dtype)
        if self.check_values and (~torch.isfinite(weight) | (weight < 0)).any():
            raise ValueError("sample_weight must be finite and >= 0")
        return weight

    def _check_features(self, features, logits: torch.Tensor) -> torch.Tensor:
        if not isinstance(features, torch.Tensor):
            raise ValueError(f"features must be a torch.Tensor, got {type(features).__name__}")
        check_tensor_storage(features, "features", logits.device)
        if features.dim() != 2:
            raise ValueError(f"features must have shape (N, M), got shape {tuple(features.shape)}")
        if not features.is_floating_point():
            raise ValueError(f"features must be floating point, got dtype {features.dtype}")
        if features.shape[0] != logits.shape[0]:
            raise ValueError(f"features has {features.shape[0]} rows but logits has {logits.shape[0]}")
        return features

    # -- reduction --------------------------------------------------------------------
    def _reduce(self, per_sample: torch.Tensor, labels: torch.Tensor, weight) -> torch.Tensor:
        if weight is not None:
            per_sample = per_sample * weight
        if self.reduction == "none":
            return per_sample
        total = per_sample.sum()
        if self.reduction == "sum":
            return total
        if self.mean_per_term:  # each term over its own count; an absent term adds 0, never 0/0
            return sum(torch.where(part, per_sample, torch.zeros_like(per_sample)).sum()
                       / part.sum().clamp(min=1).to(total.dtype) for part in (labels >= 0, labels < 0))
        if self.trains_on_unknowns:
            return total / per_sample.shape[0]
        # Unknowns are excluded, so average over knowns only; clamp so that a batch of
        # only unknowns gives 0 (still attached to the graph) instead of 0/0 = NaN.
        return total / (labels >= 0).sum().clamp(min=1).to(total.dtype)


def _is_features(value) -> bool:
    """A 2-D floating-point array: deep features, never labels (the old call form's second argument)."""
    return (isinstance(value, torch.Tensor) and value.dim() == 2 and value.is_floating_point())


def _is_labels(value) -> bool:
    """A 1-D array of integers: labels (the old call form's third argument)."""
    return isinstance(value, torch.Tensor) and value.dim() == 1 and not value.is_floating_point() \
        and not value.is_complex()


def with_logit_layer(model: nn.Module, loss: OpenSetLoss) -> nn.Module:
    """``model`` with its logit layer as ``loss`` trains it (:meth:`OpenSetLoss.logit_layer`): unchanged
    for a loss whose logits are linear in F, else ``model.logits`` replaced by the loss's layer.

    Args:
        model: a network with a logit layer ``logits`` (every registered model has one).
        loss: the loss it is trained, or was trained, with.

    Returns:
        ``model`` itself.

    Raises:
        ConfigError: the loss replaces the logit layer and ``model`` has none.

    Examples:
        >>> from agnostophobia.losses import build_loss, with_logit_layer
        >>> from agnostophobia.models import build_model
        >>> model = with_logit_layer(build_model("lenet++", num_outputs=10), build_loss("cac", 10))
        >>> type(model.logits).__name__, tuple(model.logits.weight.shape)
        ('AnchorDistances', (10, 2))
    """
    if loss.linear_logits:
        return model
    layer = getattr(model, "logits", None)
    if not isinstance(layer, nn.Module):
        raise ConfigError(f"{type(loss).__name__}: the model {type(model).__name__} has no logit layer 'logits', "
                          f"which this loss replaces by its own")
    model.logits = loss.logit_layer(layer)
    return model


def known_columns(approach: str, width: int) -> int:
    """The number of known-class logit columns (C) of a network ``width`` logits wide that
    was trained with the loss registered as ``approach``.

    Args:
        approach: a name registered in :data:`~agnostophobia.losses.LOSSES` (e.g. ``"background"``).
        width: the number of logit columns the network outputs.

    Returns:
        ``width - 1`` for a loss with a background class (its last column), else ``width``.

    Raises:
        ConfigError: ``approach`` is not a registered loss (from ``LOSSES.get``).

    Examples:
        >>> from agnostophobia.losses import known_columns
        >>> known_columns("entropic", 10), known_columns("background", 11)
        (10, 10)
    """
    return LOSSES.get(approach).known_logits(width)


def trained_on_negatives(approaches) -> list:
    """Those of ``approaches`` whose registered loss trains on negatives (known unknowns), in their
    order; a name that is not a registered loss (an approach a run recorded but this installation
    lacks) is left out.

    Args:
        approaches: approach names, as a run or a command lists them.

    Returns:
        A list of the names trained with negatives.

    Examples:
        >>> from agnostophobia.losses import trained_on_negatives
        >>> trained_on_negatives(["softmax", "entropic", "background", "not-a-loss"])
        ['entropic', 'background']
    """
    return [a for a in approaches if a in LOSSES and LOSSES.get(a).trains_on_unknowns]
