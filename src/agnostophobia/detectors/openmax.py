r"""OpenMax (Bendale & Boult, "Towards Open Set Deep Networks", CVPR 2016), without libMR:
the detector ``openmax``, fitted once per trained model on its training knowns' logits.

OpenMax turns the C logits of a closed-set network into C+1 probabilities, the last
one being "unknown". It works on *activation vectors* (AVs): the logit vector
:math:`v(x) \in \mathbb{R}^C` of a sample, i.e. the input of the softmax, not its output.

Fitting (meta-recognition, one model per class :math:`c`):

1. Keep the training samples of class :math:`c` that the network classifies correctly
   (:math:`\arg\max_j v_j(x) = c`).
2. Their mean is the mean activation vector :math:`\mu_c` (MAV).
3. Compute each kept sample's distance :math:`d(v(x), \mu_c)` (see :data:`DISTANCES`).
4. Fit a Weibull to the ``tail_size`` largest of these distances with libMR's
   ``FitHigh`` semantics (see :func:`fit_high`): :math:`\rho_c = (k_c, \lambda_c, \ell_c)`.

Recalibration of a test AV :math:`v` (:meth:`OpenMax.predict_proba`):

* rank the classes by activation, rank 1 = largest :math:`v_i`;
* for the top-:math:`\alpha` classes,
  :math:`\omega_i = 1 - \frac{\alpha - r_i + 1}{\alpha}\,
  W_i\big(d(v, \mu_i)\big)` with :math:`W_i` the fitted Weibull CDF of class :math:`i`
  and :math:`r_i \in \{1..\alpha\}` its rank; all other classes have :math:`\omega_i = 1`;
* revised activations :math:`\hat v_i = v_i\,\omega_i` and unknown activation
  :math:`\hat v_0 = \sum_i v_i (1 - \omega_i)`;
* probabilities :math:`P = \mathrm{softmax}(\hat v_1, \dots, \hat v_C, \hat v_0)`: the
  unknown probability is the **last** column of the (N, C+1) result.

A property of the method worth knowing: the unknown activation
:math:`\sum_i v_i (1 - \omega_i)` has the sign of the top logits, so an input whose top-α
logits are all negative (far from every MAV, but "weak" everywhere) gets a *negative*
unknown activation and a small unknown probability. OpenMax flags inputs that are far
from the MAVs *and* strongly activate some class, which is what the paper intends.

Deviations from the authors' MNIST OpenMax (Vastlab/Reducing-Network-Agnostophobia,
``MNIST/openmax.py``), all deliberate:

* we feed logits, as OpenMax prescribes; the authors fed softmax values;
* the unknown activation is :math:`\sum_i v_i (1 - \omega_i)` only; the authors also mixed
  the class-0 score into it;
* MAVs and Weibull tails use only the *correctly classified* training samples, as in the
  OpenMax paper; the agnostophobia authors used all training samples;
* no libMR: the Weibull MLE is our own (:func:`~agnostophobia.detectors._evt.fit_weibull`), with libMR ``FitHigh``'s
  data transform reproduced exactly (:func:`fit_high`);
* everything is vectorised over samples (the public implementations loop per sample);
* Bendale's OSDN code averaged over 10 crops ("channels") of ImageNet images; a single AV
  per sample is used here, as in every MNIST / CIFAR use of OpenMax.
* Original OpenMax additionally rejects a sample as unknown when its largest probability is
  below a threshold; :meth:`OpenMax.predict` is the plain arg-max over the C+1 columns
  (-1 for the unknown column, the package's label for "unknown"), and
  :meth:`OpenMax.scores` gives the (N, C) known-class scores for OSCR, where the
  threshold is swept anyway.

**Tie-free scores** (score scale 2): the scores are the **log-odds** of the known-class
probabilities, :math:`\ln P_c - \ln(1 - P_c) = \hat v_c - \ln \sum_{j \ne c} e^{\hat v_j}` over the
C+1 revised activations (:func:`~agnostophobia.detectors.posthoc.softmax_log_odds`), as for the
``softmax`` detector: the same order as :math:`P_c`, which rounds to 1 (or 0) in float64 for
the large revised activations of confident networks. :meth:`OpenMax.predict_proba` gives the
probabilities (``scipy.special.expit`` of the scores).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import softmax

from agnostophobia._validation import check_scores, to_numpy
from agnostophobia.registry import Registry

from ._base import Detector, NotFittedError, Setting, check_training_data, register
from ._evt import fit_weibull, weibull_cdf
from .posthoc import softmax_log_odds

__all__ = [
    "DISTANCES",
    "EUCOS_EUCLIDEAN_DIVISOR",
    "LIBMR_TRANSLATE_AMOUNT",
    "OpenMax",
    "WeibullTail",
    "alpha_weights",
    "cosine_distance",
    "euclidean_distance",
    "eucos_distance",
    "fit_high",
]

#: Distance functions by name; each maps ``(x, m)``, two (N, D) arrays (or ``m`` of shape
#: (D,)), to the (N,) row-wise distances. Look up with ``DISTANCES.get(name)``.
DISTANCES: Registry[Callable[[np.ndarray, np.ndarray], np.ndarray]] = Registry("distance")

#: 'eucos' = euclidean / 200 + cosine distance. The constant 200 is from Bendale's OSDN
#: code (``openmax_utils.compute_distance``: ``spd.euclidean(...)/200. + spd.cosine(...)``),
#: chosen there so that euclidean distances of ImageNet fc8 AVs (hundreds) land on the
#: scale of the cosine distance ([0, 2]). We keep it for comparability; note that OSDN's
#: 'euclidean' option was also divided by 200, ours is the plain euclidean distance.
EUCOS_EUCLIDEAN_DIVISOR = 200.0

#: libMR's ``translate_amount`` as used by the original OpenMax code (the Python ``libmr.MR()``
#: default in Bendale's OSDN copy of libMR and in the pip ``libmr`` package).
LIBMR_TRANSLATE_AMOUNT = 10000.0


# --------------------------------------------------------------------------- distances

def _pair(x, m) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    return x, np.broadcast_to(m, x.shape)


@DISTANCES.register("euclidean")
def euclidean_distance(x, m) -> np.ndarray:
    r""":math:`\lVert x - m \rVert_2` per row."""
    x, m = _pair(x, m)
    return np.sqrt(np.einsum("nd,nd->n", x - m, x - m))


@DISTANCES.register("cosine")
def cosine_distance(x, m) -> np.ndarray:
    r""":math:`1 - \frac{x \cdot m}{\lVert x \rVert \lVert m \rVert}` per row, in [0, 2].

    A zero vector has no direction; its cosine distance to anything is defined as 1 (the
    value for orthogonal vectors) instead of scipy's NaN.
    """
    x, m = _pair(x, m)
    dot = np.einsum("nd,nd->n", x, m)
    norms = np.sqrt(np.einsum("nd,nd->n", x, x)) * np.sqrt(np.einsum("nd,nd->n", m, m))
    cos = np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)
    return np.clip(1.0 - cos, 0.0, 2.0)


@DISTANCES.register("eucos")
def eucos_distance(x, m) -> np.ndarray:
    r"""Bendale & Boult's hybrid: :math:`\lVert x - m \rVert / 200 + d_{\cos}(x, m)`.

    See :data:`EUCOS_EUCLIDEAN_DIVISOR` for the constant.
    """
    return euclidean_distance(x, m) / EUCOS_EUCLIDEAN_DIVISOR + cosine_distance(x, m)


# --------------------------------------------------------------------------- Weibull tails (libMR FitHigh)

def _check_positive_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


@dataclass(frozen=True)
class WeibullTail:
    r"""A fitted tail model: :math:`W(d) = F_{\mathrm{Weibull}}(d;\ k, \lambda, \ell)`.

    ``loc`` :math:`\ell` = smallest tail value − ``translate_amount``. ``small_score`` and
    ``translate_amount`` are kept for reference (libMR stores the same two numbers).
    """

    shape: float
    scale: float
    loc: float
    small_score: float
    translate_amount: float

    def cdf(self, d) -> np.ndarray:
        """W-score of distance(s) ``d``: the fitted Weibull CDF."""
        return weibull_cdf(d, self.shape, self.scale, self.loc)


def fit_high(values, tail_size: int, translate_amount: float = LIBMR_TRANSLATE_AMOUNT) -> WeibullTail:
    r"""libMR's ``MetaRecognition::FitHigh`` ("larger is better") without libMR.

    What FitHigh computes (read from Vastlab/libMR ``libMR/MetaRecognition.cpp``,
    ``EvtGeneric``/``CDF``, and ``libMR/weibull.c``, ``weibull_fit``/``weibull_cdf``):

    1. sort the values in decreasing order and keep the ``tail_size`` largest;
    2. ``small_score`` = the smallest kept value;
    3. translate: :math:`t_i = s_i + T - \text{small\_score}` with :math:`T` =
       ``translate_amount``, so the tail lies in :math:`[T, T + \text{range}]`, all positive;
    4. a two-parameter Weibull MLE (location 0) on the :math:`t_i` gives shape :math:`k`
       and scale :math:`\lambda` (:func:`~agnostophobia.detectors._evt.fit_weibull` here);
    5. ``W_score(x) = CDF(x) = weibull_cdf(x + T - small_score)``, which is 0 when the
       translated value is negative.

    Steps 3-5 are a three-parameter Weibull with its location *fixed* at
    :math:`\ell = \text{small\_score} - T`, i.e. ``scipy.stats.weibull_min(k, loc=ℓ,
    scale=λ)``, and the fit is ``weibull_min.fit(tail, floc=ℓ)`` (scipy's generic
    optimiser finds the same MLE on well-conditioned data but not for the shapes of
    order :math:`T / \text{range}` that the default :math:`T` gives, hence our own solver).

    :math:`T` = 10000 (default) is the value the original OpenMax code ran with (OSDN's
    ``libmr.MR()``). With a tail range :math:`r \ll T` the Weibull is then effectively a
    reversed Gumbel in the original units, whose CDF depends on :math:`T` only through
    :math:`O(r/T)`. Newer Vastlab libMR wrappers default to :math:`T = 1`, which maps the
    smallest tail value to 1 and gives a genuine Weibull shape. ``T`` must be > 0.

    Raises ``ValueError`` if there are fewer than ``tail_size`` values or the tail values
    are all equal.
    """
    tail_size = _check_positive_int(tail_size, "tail_size", 2)
    if not (isinstance(translate_amount, numbers.Real) and math.isfinite(translate_amount)
            and translate_amount > 0):
        raise ValueError(f"translate_amount must be a finite number > 0, got {translate_amount!r}")
    s = to_numpy(values, "values").astype(np.float64, copy=False).ravel()
    if not np.isfinite(s).all():
        raise ValueError("values contains non-finite values (NaN or inf)")
    if s.size < tail_size:
        raise ValueError(f"values has {s.size} entries, fewer than tail_size={tail_size}")
    tail = np.sort(s)[-tail_size:]
    small = float(tail[0])
    if tail[-1] == small:
        raise ValueError(f"the {tail_size} largest values are all equal ({small!r}); "
                         "a Weibull cannot be fitted")
    shape, scale = fit_weibull((tail - small) + translate_amount)
    return WeibullTail(shape=shape, scale=scale, loc=small - float(translate_amount),
                       small_score=small, translate_amount=float(translate_amount))


# --------------------------------------------------------------------------- OpenMax

def alpha_weights(alpha: int) -> np.ndarray:
    r"""Rank weights :math:`(\alpha - r + 1)/\alpha` for ranks :math:`r = 1..\alpha`.

    E.g. ``alpha_weights(3) = [1, 2/3, 1/3]``: the top class can lose all of its activation
    to the unknown class, the third one at most a third.
    """
    alpha = _check_positive_int(alpha, "alpha", 1)
    return (alpha - np.arange(alpha, dtype=np.float64)) / alpha


@register("openmax")
class OpenMax(Detector):
    r"""OpenMax recalibration of logit vectors (Bendale & Boult, CVPR 2016).

    A detector: :meth:`fit` on the training knowns' logits (features are not used),
    :meth:`scores` the (N, C) log-odds of the known-class OpenMax probabilities.

    Parameters
    ----------
    tail_size:
        Number of largest MAV distances per class used for the Weibull fit (>= 2; OSDN
        used 20, the agnostophobia authors 15). Every class needs at least this many
        correctly classified training samples.
    alpha:
        Number of top-ranked classes whose activations are revised (1 <= alpha <= C;
        OSDN used 10 of 1000 classes, the agnostophobia authors 5 of 10).
    distance:
        ``'eucos'`` (euclidean/200 + cosine, OSDN's default), ``'euclidean'`` or
        ``'cosine'``; see :data:`DISTANCES`.
    translate_amount:
        libMR's translation :math:`T` of the tail (see :func:`fit_high`); default 10000
        as in the original OpenMax code.

    Notes
    -----
    Attributes after :meth:`fit`: ``num_classes_`` (C), ``mav_`` (C, C) mean activation vectors, ``weibull_shape_``,
    ``weibull_scale_``, ``weibull_loc_`` (C,) Weibull parameters per class, ``tails_``
    (list of :class:`WeibullTail`), ``n_correct_`` (C,) correctly classified training
    samples per class.

    The formulas and our deviations from the authors' code are in the module docstring.

    Examples:
        >>> from agnostophobia.detectors import OpenMax, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = OpenMax().fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    FITTED_STATE = ("mav_", "weibull_shape_", "weibull_scale_", "weibull_loc_", "n_correct_", "num_classes_")
    keeps_prediction = False  # the alpha-rank recalibration can reorder the known classes
    NOT_EXPORTABLE = "its Weibull recalibration of the logits has no torch implementation here"
    title = "OpenMax"
    SCORE_SCALE = 2  # log-odds of the known-class probabilities (1: the probabilities, which tie at 0 and 1)
    report_note = (
        "Bendale & Boult (CVPR 2016) on each model's logits: mean activation vectors and Weibull tails "
        "(libMR FitHigh semantics, our own fit) from its correctly classified training knowns; alpha-rank "
        "recalibration; softmax over C+1. Deviations from the agnostophobia authors' OpenMax, all deliberate: "
        "logits instead of softmax values; the unknown activation is sum_i v_i (1 - w_i) without mixing in the "
        "class-0 score; only correctly classified samples (their code used all).")

    tail_size = Setting(int, 20, low=2, grid=(10, 20, 50))
    alpha = Setting(int, 3, low=1, grid=(1, 2, 3, 5))  # <= C, checked when fitted
    distance = Setting(str, "eucos", choices=tuple(DISTANCES.names()))
    translate_amount = Setting(float, LIBMR_TRANSLATE_AMOUNT, low=0, low_open=True)

    def __post_init__(self):
        self._distance_fn = DISTANCES.get(self.distance)
        self.num_classes_: int | None = None

    @classmethod
    def from_parameters(cls, mav, weibull_shape, weibull_scale, weibull_loc, **settings) -> "OpenMax":
        """An OpenMax from stored parameters: ``mav`` (C, C), Weibull shape/scale/loc (C,) each,
        and its ``settings`` as the constructor takes them.

        For reloading a fitted model (all attributes are plain arrays) and for tests with
        hand-chosen Weibulls. The tail size and the translate amount are only recorded.

        Returns:
            A fitted :class:`OpenMax`.
        """
        model = cls(**settings)
        mav = check_scores(mav, "mav")
        num_classes = mav.shape[0]
        if mav.shape != (num_classes, num_classes):
            raise ValueError(f"mav must have shape (C, C), got {mav.shape}")
        if model.alpha > num_classes:
            raise ValueError(f"alpha={model.alpha} exceeds the number of classes C={num_classes}")
        params = {}
        for name, value in (("weibull_shape", weibull_shape), ("weibull_scale", weibull_scale),
                            ("weibull_loc", weibull_loc)):
            arr = check_scores(value, name, ndim=1)
            if arr.shape != (num_classes,):
                raise ValueError(f"{name} must have shape ({num_classes},), got {arr.shape}")
            if name != "weibull_loc" and (arr <= 0).any():
                raise ValueError(f"{name} must be > 0, got {arr.tolist()}")
            params[name] = arr
        model.mav_ = mav
        model.weibull_shape_ = params["weibull_shape"]
        model.weibull_scale_ = params["weibull_scale"]
        model.weibull_loc_ = params["weibull_loc"]
        model.tails_ = model._tails()
        model.n_correct_ = None
        model.num_classes_ = num_classes
        model._fitted = True
        return model

    def _tails(self) -> list:
        """The per-class :class:`WeibullTail` records of the fitted Weibull parameters."""
        return [WeibullTail(float(k), float(s), float(l), float(l) + self.translate_amount, self.translate_amount)
                for k, s, l in zip(self.weibull_shape_, self.weibull_scale_, self.weibull_loc_)]

    def restore_fitted_state(self, state) -> "OpenMax":
        """This OpenMax as :meth:`fit` left it, from :meth:`fitted_state`'s arrays; its Weibull
        tails are rebuilt from them.

        Returns:
            The fitted detector itself, ``self``.
        """
        super().restore_fitted_state(state)
        self.tails_ = self._tails()  # derived: kept as numbers, rebuilt here
        return self

    # ------------------------------------------------------------------ fitting
    def fit(self, train_logits, train_features, train_labels) -> "OpenMax":
        """Fit MAVs and per-class Weibull tails on the training knowns' logits (N, C) (the
        activation vectors) and labels 0..C-1; ``train_features`` are not used (may be None).

        Returns:
            The fitted detector itself, ``self``.
        """
        av, _, y = check_training_data(train_logits, None, train_labels, need_features=False)
        num_classes = av.shape[1]
        if self.alpha > num_classes:
            raise ValueError(f"alpha={self.alpha} exceeds the number of classes C={num_classes} "
                             "(train_logits has that many columns)")
        correct = av.argmax(axis=1) == y
        mav = np.empty((num_classes, num_classes))
        tails: list[WeibullTail] = []
        n_correct = np.zeros(num_classes, dtype=np.int64)
        for c in range(num_classes):
            members = av[correct & (y == c)]
            n_correct[c] = members.shape[0]
            if members.shape[0] < self.tail_size:
                n_label = int((y == c).sum())
                raise ValueError(
                    f"class {c} has {members.shape[0]} correctly classified training sample(s) "
                    f"(of {n_label} labelled {c}), fewer than tail_size={self.tail_size}; "
                    "every class 0..C-1 needs at least tail_size of them (C = train_logits' columns)")
            mav[c] = members.mean(axis=0)
            dist = self._distance_fn(members, mav[c])
            try:
                tails.append(fit_high(dist, self.tail_size, self.translate_amount))
            except ValueError as exc:
                raise ValueError(f"class {c}: cannot fit the Weibull tail of its MAV distances: {exc}") from None
        self.mav_ = mav
        self.tails_ = tails
        self.weibull_shape_ = np.array([t.shape for t in tails])
        self.weibull_scale_ = np.array([t.scale for t in tails])
        self.weibull_loc_ = np.array([t.loc for t in tails])
        self.n_correct_ = n_correct
        self.num_classes_ = num_classes
        self._fitted = True
        return self

    # ------------------------------------------------------------------ prediction
    def _check_input(self, logits) -> np.ndarray:
        if not self._fitted:
            raise NotFittedError("detector 'openmax' is not fitted; call fit(train_logits, train_features, "
                                 "train_labels) on the training knowns first")
        av = check_scores(logits, "logits")
        if av.shape[1] != self.num_classes_:
            raise ValueError(f"logits has {av.shape[1]} columns but OpenMax was fitted on "
                             f"{self.num_classes_} classes")
        return av

    def revised_activations(self, logits) -> np.ndarray:
        r"""The (N, C+1) revised activations :math:`[\hat v_1..\hat v_C, \hat v_0]` (pre-softmax).

        Vectorised over samples; the only loop is over the :math:`\alpha` ranks.

        Returns:
            An (N, C+1) float64 NumPy array, the unknown's column last.
        """
        av = self._check_input(logits)
        n = av.shape[0]
        rows = np.arange(n)
        # Rank by activation, largest first; ties go to the lower class index.
        order = np.argsort(-av, axis=1, kind="stable")[:, : self.alpha]
        omega = np.ones_like(av)
        for r, weight in enumerate(alpha_weights(self.alpha)):
            cls = order[:, r]
            dist = self._distance_fn(av, self.mav_[cls])
            w = weibull_cdf(dist, self.weibull_shape_[cls], self.weibull_scale_[cls], self.weibull_loc_[cls])
            omega[rows, cls] = 1.0 - weight * w
        revised = np.empty((n, self.num_classes_ + 1))
        revised[:, :-1] = av * omega
        revised[:, -1] = (av * (1.0 - omega)).sum(axis=1)
        return revised

    def predict_proba(self, logits) -> np.ndarray:
        """(N, C+1) OpenMax probabilities; the last column is the unknown probability.

        Returns:
            An (N, C+1) float64 NumPy array whose rows sum to 1.
        """
        return softmax(self.revised_activations(logits), axis=1)

    def predict(self, logits) -> np.ndarray:
        """(N,) arg-max of :meth:`predict_proba`: a known class 0..C-1, or -1 for "unknown".

        Returns:
            An (N,) integer NumPy array of classes ``0..C-1``, -1 for unknown.
        """
        predicted = self.predict_proba(logits).argmax(axis=1)
        predicted[predicted == self.num_classes_] = -1
        return predicted

    def _scores(self, logits, features) -> np.ndarray:
        """(N, C) log-odds of the known-class OpenMax probabilities (the first C of the C+1
        columns), for OSCR evaluation: tie-free where the probabilities round to 0 or 1."""
        return softmax_log_odds(self.revised_activations(logits))[:, :-1]
