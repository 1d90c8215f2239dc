"""The one interface every detector implements, and the registry that finds them by name.

A *detector* turns what a trained network outputs for a sample -- its logits and its deep
features F (the input of the logit layer) -- into per-class scores ``(N, C)``, larger =
more known, so that OSCR (Eq. 3), CCR at FPR and every figure work unchanged:

* ``fit(train_logits, train_features, train_labels)``: learns from the training knowns
  (k-NN, OpenMax); a no-op that returns ``self`` for post-hoc scores;
* ``scores(logits, features) -> (N, C)`` float64.

``logits`` are the C known-class logits; a network trained with a background class
(Sec. 3) has one more column, which only a detector with ``reads_background_column``
receives (the ``background`` score); every other detector sees its C known columns.

Scores are **tie-free**: distinct inputs get distinct scores, except where a detector declares
which inputs it scores alike (:meth:`Detector.ties`: ASH-B). A probability that float64 rounds
to 1 (or 0) would tie confident knowns with confident unknowns (a threshold cannot part them;
CCR at low FPR reads 0), so softmax-based scores are log-odds; a saturating map (a CDF) keeps the
order of the statistic beneath it where it saturates (``posthoc``, ``entropy``, ``_evt.gpd_score``); and a
clip that every entry reaches (ReAct) continues with the unclipped statistic
(:func:`continue_at_tie`). A detector's ``SCORE_SCALE`` numbers its score's scale: a threshold
chosen on another scale (``calibration.json`` records it) is chosen again.

A detector whose score is one number per sample s(x) (entropy, magnitude, energy, k-NN)
puts it in the column of the predicted class (the arg-max of the C known logits) and a
smaller finite value in every other column (:func:`place_in_predicted_column`), so the
prediction stays the network's and the threshold acts on s(x).

Adding a detector is one registered class (``@register("name")``) declaring its settings
(one :class:`Setting` class attribute each, ``k = Setting(int, 50, low=1, grid=...)``, with the
grid that ``tune-detectors`` searches; its constructor is made from them) and its score twice side by side, ``_scores`` in numpy for
evaluation and ``_torch_score`` in torch for ``export`` (or ``NOT_EXPORTABLE``: why not),
plus its tests, which are parametrised over :data:`DETECTORS`; a config then sets them under
``detectors: {name: {...}}`` with no config edit.
"""
from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from agnostophobia._validation import check_labels, check_scores
from agnostophobia.errors import AgnostophobiaError, ConfigError
from agnostophobia.losses import LOSSES
from agnostophobia.registry import Registry
from agnostophobia.settings import DeclaresSettings, Setting  # noqa: F401 (Setting: for the detector modules)

#: Detector classes by name; ``build_detector(name, **settings)`` makes one.
DETECTORS: Registry = Registry("detector", path_names=True)


def setting_grid(detector: str) -> List[Dict[str, Any]]:
    """Every point of the detector's declared tuning grid (the product of its settings'
    grids), as constructor keywords; empty when it declares nothing to tune.

    Args:
        detector: a name registered in :data:`~agnostophobia.detectors.DETECTORS`
            (``"knn"``, ...).

    Returns:
        One ``{setting: value}`` mapping per grid point, the settings without a grid left at
        their defaults (``[]``: nothing to tune).

    Raises:
        ConfigError: ``detector`` is not registered.

    Examples:
        >>> from agnostophobia.detectors import setting_grid
        >>> grid = setting_grid("knn")
        >>> len(grid), sorted(grid[0])
        (12, ['k', 'normalize'])
    """
    tuned = {key: setting.grid for key, setting in DETECTORS.get(detector).SETTINGS.items() if setting.grid}
    return [dict(zip(tuned, values)) for values in itertools.product(*tuned.values())] if tuned else []


class NotFittedError(AgnostophobiaError):
    """A detector that learns from training data was asked for scores before ``fit``."""


class NotExportable(AgnostophobiaError):
    """A detector without a torch score (:meth:`Detector.torch_score`) was asked for one."""


def register(name: str):
    """Class decorator: register a :class:`Detector` subclass as ``name`` (its ``name`` attribute).

    Args:
        name: the name configs, :func:`build_detector` and the command line use (e.g.
            ``"knn"``; one path component, as it names files of a run); also the class's
            ``title`` where it declares none.

    Returns:
        The decorator, which returns the class it registers.

    Raises:
        ConfigError: ``name`` cannot be a path component (raised when the class is decorated).
        ValueError: a class is already registered as ``name`` (likewise).

    Examples:
        >>> from agnostophobia.detectors import Detector, register
        >>> try:  # a name is registered once: a second detector under "knn" is refused
        ...     @register("knn")
        ...     class AnotherKNN(Detector):
        ...         def scores(self, logits, features=None):
        ...             return logits
        ... except ValueError as error:
        ...     print(error)
        ...
        detector 'knn' is already registered
    """

    def add(cls):
        cls.name = name
        if "title" not in vars(cls):
            cls.title = name
        return DETECTORS.register(name)(cls)

    return add


def detector_applies(detector: str, approach: str) -> bool:
    """Whether the detector registered as ``detector`` can score a network trained with the
    loss registered as ``approach``: one that reads the background column needs a network
    with a background class (Sec. 3); one that reads the last layer as linear (``needs_last_layer``)
    logits linear in F (``OpenSetLoss.linear_logits``: not ARPL's or CAC's distances) or names the approach;
    one that names the ``approaches`` it scores, one of those. An unknown name of either raises one line naming it.

    Args:
        detector: a name registered in :data:`~agnostophobia.detectors.DETECTORS`.
        approach: a name registered in :data:`~agnostophobia.losses.LOSSES` (the loss the
            network was trained with).

    Returns:
        True where the detector can score such a network.

    Raises:
        ConfigError: either name is not registered.

    Examples:
        >>> from agnostophobia.detectors import detector_applies
        >>> detector_applies("background", "background"), detector_applies("background", "entropic")
        (True, False)
        >>> detector_applies("vim", "cac"), detector_applies("cac", "cac"), detector_applies("cac", "softmax")
        (False, True, False)
    """
    cls, loss = DETECTORS.get(detector), LOSSES.get(approach)
    return ((not cls.reads_background_column or loss.background_class)
            and (not cls.needs_last_layer or loss.linear_logits or approach in cls.approaches)
            and (not cls.approaches or approach in cls.approaches))


def as_float64(value, name: str, ndim: int = 2) -> np.ndarray:
    """Finite float64 array; torch tensors (any device, bfloat16 too) are upcast first."""
    if hasattr(value, "detach") and hasattr(value, "double"):
        value = value.detach().double()
    return check_scores(value, name, ndim=ndim)


def place_in_predicted_column(per_sample: np.ndarray, known_logits: np.ndarray) -> np.ndarray:
    r"""(N, C) scores holding ``per_sample`` s(x) in the column of the predicted class
    :math:`\arg\max_c l_c(x)` and :math:`s - 1 - |s|` (strictly smaller, finite) elsewhere.

    The gap of at least 1 and of the order of :math:`|s|` keeps the arg-max through any
    strictly increasing transform of the whole matrix that does not overflow.

    Args:
        per_sample: the per-sample score s(x), a float64 array of shape ``(N,)``, larger = more
            known.
        known_logits: the C known-class logits, a float array of shape ``(N, C)``; its row-wise
            arg-max is the predicted class.

    Returns:
        The ``(N, C)`` float64 scores.

    Raises:
        ValueError: ``per_sample`` is not of shape ``(N,)``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import place_in_predicted_column
        >>> place_in_predicted_column(np.array([0.5, 2.0]), np.array([[3.0, 1.0], [0.0, 1.0]]))
        array([[ 0.5, -1. ],
               [-1. ,  2. ]])
    """
    n, num_classes = known_logits.shape
    if per_sample.shape != (n,):
        raise ValueError(f"per-sample scores have shape {per_sample.shape}, expected ({n},)")
    return scores_from_top(known_logits.argmax(axis=1), per_sample, num_classes)


def continue_at_tie(score, tied, tie_value, beneath):
    r"""A score that ties at one value :math:`s^*` inside its range (every sample of ``tied``
    scores :math:`s^*`: a clip reached in every entry), continued by the statistic ``beneath`` it
    (the unclipped one) as a second key, numpy or torch:

    .. math:: s' = s \ (s \le s^*), \qquad
              s^* + g\,\Big(\tfrac12 + \tfrac1\pi \arctan \operatorname{asinh}(b - s^*)\Big) \ \text{(tied)},
              \qquad s + g \ (s > s^*), \qquad g = 1 + |s^*|.

    Where the clipped scores differ their order is kept (a shift by g above :math:`s^*` is
    monotone: float64 rounding may merge two scores an ulp apart, never swap them); the tied
    samples fill the gap :math:`(s^*, s^* + g)` opened for them, ordered by ``beneath``: the
    arctan of the asinh maps every finite value into (0, 1) without saturating in float64 (two
    values of ``beneath`` that differ by 1e-12 of their size stay apart up to 1e8, by 1e-9 up to
    1e300). A sample not in
    ``tied`` that scores :math:`s^*` exactly stays there, below every tied one.

    Saturating maps that tie at an end of their range (a CDF at 0 and 1: :func:`~agnostophobia.
    detectors._evt.gpd_score`; a probability at 1: the log-odds) continue beyond that end and need
    no gap; this is the continuation for a value inside it (ReAct's: every entry of F at the clip).

    Args:
        score: (N,) the clipped score s.
        tied: (N,) bool, the samples that score :math:`s^*` because of the tie (not by chance).
        tie_value: :math:`s^*`, a float (a 0-d tensor in torch).
        beneath: (N,) the statistic beneath, read where ``tied`` (any finite value elsewhere).

    Returns:
        The (N,) continued score, float64, numpy or torch as ``score``.
    """
    lib = torch if isinstance(score, torch.Tensor) else np
    gap = 1.0 + abs(tie_value)
    key = 0.5 + lib.arctan(lib.arcsinh(beneath - tie_value)) / np.pi
    return lib.where(tied, tie_value + gap * key, lib.where(score > tie_value, score + gap, score))


def picked(values: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """The torch twin of reading an (N, C) score matrix at the predicted class: the value of
    each row's ``predicted`` column, (N,)."""
    return values.gather(1, predicted[:, None])[:, 0]


class TorchScore(nn.Module):
    """A fitted detector's per-sample score s(x) in torch operations, the module ``export``
    writes into a file: ``forward(logits, features, predicted) -> (N,)`` float64, larger = more
    known, from the float64 logits the detector reads (its C known columns, or all C+1 for one
    that ``reads_background_column``), the float64 features (N, D) and the predicted class (N,)
    (the arg-max of the C known logits). It equals the score in the predicted class's column
    of :meth:`Detector.scores`.

    ``formula(logits, features, predicted, **fitted)`` computes it; ``fitted``: the detector's
    fitted arrays it reads (numpy arrays or numbers, float64 or int64; or tensors), held as
    buffers so that they travel in the exported file. Settings are closed over by ``formula``.

    Args:
        formula: ``formula(logits, features, predicted, **fitted) -> (N,)``, the score in torch
            operations (a function or :func:`functools.partial` that closes over the settings).
        **fitted: the fitted arrays ``formula`` reads, by the keyword it reads them as: a tensor
            is kept as it is, an integer array or number becomes an int64 buffer, any other a
            float64 one.

    Examples:
        >>> import torch
        >>> from agnostophobia.detectors import TorchScore
        >>> def offset_max_logit(logits, features, predicted, offset):
        ...     return logits.gather(1, predicted[:, None])[:, 0] - offset
        ...
        >>> score = TorchScore(offset_max_logit, offset=0.5)
        >>> score(torch.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=torch.float64), torch.zeros(2, 4, dtype=torch.float64),
        ...       torch.tensor([0, 1]))
        tensor([1.5000, 2.5000], dtype=torch.float64)
    """

    def __init__(self, formula: Callable[..., torch.Tensor], **fitted):
        super().__init__()
        self.formula = formula
        self.fitted = tuple(fitted)
        for name, value in fitted.items():
            self.register_buffer(name, _as_buffer(value))

    def forward(self, logits: torch.Tensor, features: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        """The score of each sample.

        Args:
            logits: (N, C) float64 logits (C+1 for a detector that reads the background column).
            features: (N, D) float64 deep features.
            predicted: (N,) int64 predicted classes, the arg-max of the C known logits.

        Returns:
            An (N,) float64 tensor, larger = more known.
        """
        return self.formula(logits, features, predicted, **{name: getattr(self, name) for name in self.fitted})


def _as_buffer(value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    array = np.asarray(value)
    return torch.tensor(array, dtype=torch.int64 if np.issubdtype(array.dtype, np.integer) else torch.float64)


def scores_from_top(predicted: np.ndarray, score: np.ndarray, num_classes: int) -> np.ndarray:
    """(N, C) scores whose arg-max is ``predicted`` and whose maximum is ``score``: all an
    open-set metric reads of a score matrix (see :func:`place_in_predicted_column`)."""
    out = np.repeat((score - 1.0 - np.abs(score))[:, None], num_classes, axis=1)
    out[np.arange(len(score)), predicted] = score
    return out


class Detector(DeclaresSettings):
    """Base class: post-hoc by default (``fit`` does nothing).

    Class attributes a subclass sets (an instance may clear a flag its settings do not need: ``cac``):

    * ``needs_fit``: True when :meth:`fit` learns from training knowns; :meth:`scores`
      then raises :class:`NotFittedError` until it has been called;
    * ``needs_features``: True when :meth:`scores` reads the deep features;
    * ``reads_background_column``: True when ``logits`` must include a background
      class as the last column (applicable only to such networks);
    * ``keeps_prediction``: True when the arg-max of the scores is always the arg-max of
      the C known logits (False for OpenMax, whose recalibration may change it);
    * ``needs_last_layer``: True when the score reads the network's last layer on F, the
      logits' :math:`l = W F + b` (ViM, ReAct, ASH, SCALE; ``cac``: CAC's z): :meth:`use_last_layer` hands it over
      (its C known-class rows) before :meth:`fit` and :meth:`scores`;
    * ``approaches``: the approaches (registered losses) whose networks it scores, where its score
      reads their logits as something particular (``cac``: distances to class anchors); empty: every one;
    * its settings, each a :class:`Setting` class attribute (type, range, default, grid), collected
      into ``SETTINGS``: the constructor, keyword-only, is made from them
      (:class:`~agnostophobia.settings.DeclaresSettings`);
    * ``NOT_EXPORTABLE``: why ``export`` cannot write the score, for a detector that does not
      implement :meth:`_torch_score`; one that does leaves it empty;
    * ``title``: the name shown in reports; ``report_note``: what a report says about how
      the detector was applied (empty: nothing beyond its title and settings);
    * ``SCORE_SCALE``: the version of the score's scale, raised when a change of the score moves a threshold
      (2: tie-free ``softmax``, ``background``, ``openmax``, ``entropy``, ``gen``, ``postmax``, ``ghost``, ``react``;
      ``cac``'s anchor means); a threshold chosen on another is chosen again, the note saying ``SCALE_CHANGE``;
    * :meth:`ties`: which distinct inputs the detector, with its settings, scores alike (None: it
      does not, the rule), said by the detector and checked against its scores by the tests.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import Detector
        >>> class MaxLogit(Detector):  # a post-hoc score: each class's logit, larger = more known
        ...     name = title = "max-logit-example"
        ...     def _scores(self, logits, features):
        ...         return logits
        ...
        >>> detector = MaxLogit().fit(np.zeros((2, 3)), None, np.array([0, 1]))  # post-hoc: fit only checks
        >>> detector.scores(np.array([[2.0, 0.5, 0.0], [0.1, 0.2, 0.3]])).max(axis=1).tolist()
        [2.0, 0.3]
    """

    name: ClassVar[str] = "detector"
    needs_fit: ClassVar[bool] = False
    needs_features: ClassVar[bool] = False
    reads_background_column: ClassVar[bool] = False
    keeps_prediction: ClassVar[bool] = True
    needs_last_layer: ClassVar[bool] = False
    approaches: ClassVar[Tuple[str, ...]] = ()
    title: ClassVar[str] = "detector"
    report_note: ClassVar[str] = ""
    SCORE_SCALE: ClassVar[int] = 1
    SCALE_CHANGE: ClassVar[str] = "the detectors' scores were tie-free (max-softmax was a probability, now its log-odds)"
    #: The attributes :meth:`fit` sets that are the whole fitted detector (arrays and numbers):
    #: ``detectors.stored`` keeps them on disk per model so that a run's detectors are fitted once
    #: (:meth:`fitted_state`, :meth:`restore_fitted_state`). Empty: nothing worth keeping, fitting
    #: is as cheap as reading (k-NN's state is its training features). Export does not read it:
    #: :meth:`_torch_score` takes what the exported score needs from the fitted detector itself.
    FITTED_STATE: ClassVar[Tuple[str, ...]] = ()
    #: Why ``export`` cannot write this detector's score (one line), when it has no
    #: :meth:`_torch_score`; empty when it has one.
    NOT_EXPORTABLE: ClassVar[str] = ""

    _fitted: bool = False
    weight_: Optional[np.ndarray] = None  # the last layer (C, D) and its bias (C,): use_last_layer
    bias_: Optional[np.ndarray] = None

    @classmethod
    def not_applicable(cls, num_classes: int, feature_dim: int) -> Optional[str]:
        """Why the detector does not apply to a network with ``num_classes`` known classes and
        ``feature_dim``-dimensional features (one line), or None where it does.

        Args:
            num_classes: the number of known classes C.
            feature_dim: the width of the network's deep features.

        Returns:
            A one-line reason, or None.
        """
        return None

    def use_last_layer(self, weight, bias=None) -> "Detector":
        """Hand over the network's last layer on F: ``weight`` (C, D) and ``bias`` (C,) of the C
        known-class logits :math:`l = W F + b` (None: a bias-free layer, LeNet++, ResNet-18 and the
        torchvision backbones); a ``ValueError`` naming what is wrong otherwise. Returns ``self``.

        Returns:
            The detector itself, ``self``.
        """
        weight = as_float64(weight, "last layer weight")
        bias = np.zeros(weight.shape[0]) if bias is None else as_float64(bias, "last layer bias", ndim=1)
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"last layer bias has shape {bias.shape}, expected ({weight.shape[0]},) for a weight "
                             f"of shape {weight.shape}")
        self.weight_, self.bias_ = weight, bias
        return self

    def _check_last_layer(self, logits: np.ndarray, features: np.ndarray) -> None:
        """The last layer is there and has the inputs' classes and dimensions."""
        if self.weight_ is None:
            raise NotFittedError(f"detector {self.name!r} reads the network's last layer; call "
                                 "use_last_layer(weight, bias) first")
        check_columns(self, logits, features, *self.weight_.shape)

    def fit(self, train_logits, train_features, train_labels) -> "Detector":
        """Learn from the training knowns (labels ``0..C-1``); post-hoc detectors learn nothing
        and return ``self``, after the same check of what they were given.

        Args:
            train_logits: (N, C) float logits of the training knowns (C+1 for a detector that reads
                the background column).
            train_features: (N, D) float deep features, or None for a detector that does not read them.
            train_labels: (N,) integer labels ``0..C-1``.

        Returns:
            The fitted detector itself, ``self``.
        """
        check_training_data(train_logits, train_features, train_labels, need_features=False)
        return self

    def scores(self, logits, features=None) -> np.ndarray:
        """(N, C) float64 per-class scores, larger = more known, as a NumPy array whatever the input:
        ``logits`` (N, C) (C+1 for a detector that reads the background column) and ``features``
        (N, D) may be NumPy arrays or torch tensors on any device (the package's one convention:
        NumPy out; see :mod:`agnostophobia.metrics`, whose every metric takes this array).

        Returns:
            An (N, C) float64 NumPy array, larger = more known; its row-wise arg-max is the predicted
            class.

        Raises:
            NotFittedError: a detector that ``needs_fit`` before :meth:`fit`.
        """
        if self.needs_fit and not self._fitted:
            raise NotFittedError(f"detector {self.name!r} is not fitted; call fit(train_logits, train_features, "
                                 "train_labels) on the training knowns first")
        logits = as_float64(logits, "logits")
        if self.needs_features:  # a detector that does not read them ignores whatever is passed
            features = as_float64(features, "features")
            if features.shape[0] != logits.shape[0]:
                raise ValueError(f"features has {features.shape[0]} rows but logits has {logits.shape[0]}")
        if self.needs_last_layer:
            self._check_last_layer(logits, features)
        return self._scores(logits, features)

    def _scores(self, logits: np.ndarray, features: Optional[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def ties(self) -> Optional[str]:
        """Which distinct inputs this detector, with its settings, gives one and the same score (one
        line), or None where it gives distinct inputs distinct scores: where no region of inputs
        shares a score, saturating or clipped ones included (ties of inputs that differ only in what
        the score does not read, such as a feature vector's length for a cosine distance, or that
        fall on one level set of a continuous score, are not counted). The detectors' list of
        tie-free scores (docs/post-processors.md) is this method's, over the registry.

        Returns:
            None, or a one-line description of the inputs that tie.
        """
        return None

    def torch_score(self) -> TorchScore:
        """The per-sample score as a torch module (:class:`TorchScore`), built from this fitted
        detector: what ``export`` writes. :class:`NotExportable` (naming ``NOT_EXPORTABLE``'s
        reason) for a detector without one, :class:`NotFittedError` before :meth:`fit`.

        Returns:
            A :class:`TorchScore`, ``forward(logits, features, predicted) -> (N,)`` float64.

        Raises:
            NotExportable: the detector has no torch implementation of its score.
            NotFittedError: before :meth:`fit`, or before :meth:`use_last_layer` where it reads the
                last layer.
        """
        why = self.why_not_exportable()
        if why is not None:
            raise NotExportable(f"detector {self.name!r} is not exported: {why}")
        if self.needs_fit and not self._fitted:
            raise NotFittedError(f"detector {self.name!r} is not fitted; its torch score reads the fit")
        if self.needs_last_layer and self.weight_ is None:
            raise NotFittedError(f"detector {self.name!r} has no last layer; call use_last_layer(weight, bias)")
        return self._torch_score()

    def _torch_score(self) -> TorchScore:
        """The score of :meth:`_scores` in torch operations (see :class:`TorchScore`); a detector
        that cannot be exported leaves this out and sets ``NOT_EXPORTABLE``."""
        raise NotImplementedError

    @classmethod
    def why_not_exportable(cls) -> Optional[str]:
        """None when the detector writes its score in torch (it implements :meth:`_torch_score`),
        else why ``export`` refuses it (``NOT_EXPORTABLE``).

        Returns:
            None, or a one-line reason.
        """
        if cls._torch_score is not Detector._torch_score:
            return None
        return cls.NOT_EXPORTABLE or "it has no torch implementation (no _torch_score)"

    def fitted_state(self) -> Dict[str, np.ndarray]:
        """The fitted detector as arrays (its :data:`FITTED_STATE` attributes); {} before
        :meth:`fit` or when it declares none.

        Returns:
            ``{attribute: numpy.ndarray}``, one entry per name of ``FITTED_STATE``.
        """
        if not self._fitted or not self.FITTED_STATE:
            return {}
        return {name: np.asarray(getattr(self, name)) for name in self.FITTED_STATE}

    def restore_fitted_state(self, state: Dict[str, np.ndarray]) -> "Detector":
        """This detector as :meth:`fit` left it, from :meth:`fitted_state`'s arrays (a 0-d integer
        array becomes an int); a missing or extra name is a ``ValueError`` naming it.

        Args:
            state: the arrays :meth:`fitted_state` returned, by name.

        Returns:
            The fitted detector itself, ``self``.
        """
        names = set(self.FITTED_STATE)
        if not names or set(state) != names:
            raise ValueError(f"detector {self.name!r}: a fitted state holds {sorted(names)}, "
                             f"got {sorted(state)}")
        for name in self.FITTED_STATE:
            value = np.asarray(state[name])
            setattr(self, name, int(value) if value.ndim == 0 and np.issubdtype(value.dtype, np.integer) else value)
        self._fitted = True
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        return f"{type(self).__name__}({args})"


def check_training_data(train_logits, train_features, train_labels, need_features: bool):
    """Validated training knowns: logits (N, C), features (N, D) or None, labels 0..C-1."""
    logits = as_float64(train_logits, "train_logits")
    features = as_float64(train_features, "train_features") if need_features else None
    if features is not None and features.shape[0] != logits.shape[0]:
        raise ValueError(f"train_features has {features.shape[0]} rows but train_logits has {logits.shape[0]}")
    labels = check_labels(train_labels, logits.shape[0], num_classes=logits.shape[1], name="train_labels")
    if (labels < 0).any():
        raise ValueError(f"train_labels contains {int((labels < 0).sum())} negative (unknown) label(s); "
                         f"detectors are fitted on training knowns only, labels 0..{logits.shape[1] - 1}")
    return logits, features, labels


def check_columns(detector: Detector, logits: np.ndarray, features: np.ndarray, num_classes: int,
                  dimensions: int) -> None:
    """Test logits and features have the fitted detector's classes and feature dimensions."""
    if logits.shape[1] != num_classes:
        raise ValueError(f"logits has {logits.shape[1]} columns but the detector {detector.name!r} was fitted on "
                         f"{num_classes} classes")
    if features.shape[1] != dimensions:
        raise ValueError(f"features has {features.shape[1]} dimensions but the detector {detector.name!r} was "
                         f"fitted on {dimensions}")


def build_detector(name: str, **settings) -> Detector:
    """The detector registered as ``name`` (see ``DETECTORS.names()``) with ``settings``.

    A setting the detector does not take raises :class:`ConfigError` naming it, since
    settings usually come from a config file.

    Args:
        name: a name registered in :data:`~agnostophobia.detectors.DETECTORS` (``"knn"``,
            ``"openmax"``, ...).
        **settings: the detector's declared settings (its ``SETTINGS``, the table on its page);
            one left out takes its default.

    Returns:
        The detector, not yet fitted.

    Raises:
        ConfigError: ``name`` is not registered, or it takes no setting of a given name.
        ValueError: a value the setting's declaration does not allow (naming the setting).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> detector = build_detector("knn", k=2)  # settings as keywords: KNNDetector's k
        >>> rng = np.random.default_rng(0)
        >>> logits, features, labels = rng.normal(size=(20, 3)), rng.normal(size=(20, 4)), rng.integers(0, 3, 20)
        >>> detector = detector.fit(logits, features, labels)  # the training knowns' outputs
        >>> detector.scores(rng.normal(size=(5, 3)), features=rng.normal(size=(5, 4))).shape  # (N, C)
        (5, 3)
    """
    cls = DETECTORS.get(name)
    try:
        inspect.signature(cls).bind(**settings)
    except TypeError as exc:
        raise ConfigError(f"detector {name!r}: {exc}") from None
    return cls(**settings)
