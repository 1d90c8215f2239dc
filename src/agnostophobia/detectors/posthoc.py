r"""Post-hoc detectors: scores computed from one sample's logits and deep features alone.

All work is done in float64 with numerically stable ``scipy.special`` routines; inputs
are torch tensors (any device, any float dtype) or numpy arrays / sequences, outputs
float64 numpy arrays. Notation: :math:`l \in \mathbb{R}^C` the known-class logits,
:math:`S_c = e^{l_c} / \sum_j e^{l_j}` the softmax, :math:`F` the deep feature vector.

============================  ==============================================  ===============================
name                          per-class score (larger = more known)            source
============================  ==============================================  ===============================
``softmax``                   :math:`\ln \frac{S_c}{1 - S_c}` (log-odds)  (†)  Sec. 3 (softmax thresholding);
                                                                               Hendrycks & Gimpel, ICLR 2017
``background``                log-odds of :math:`S_c` of the C+1 softmax,      Sec. 3 (background class)
                              c < C  (†)
``objectosphere-scaled``      :math:`S_c \cdot \lVert F \rVert`                Sec. 4.2, last paragraph
``max-logit``                 :math:`l_c`                                      Vaze et al., ICLR 2022 (MLS)
``entropy``                   :math:`-H(S) = \sum_c S_c \ln S_c`  (*, ‡)       Sec. 4.1, Table 1
``magnitude``                 :math:`\lVert F \rVert`  (*)                     Sec. 4.2, Table 1
``energy``                    :math:`T \ln \sum_c e^{l_c / T}`  (*)            Liu et al., NeurIPS 2020
``gen``                       :math:`-\sum_{j \le M} p_{(j)}^\gamma             Liu et al., CVPR 2023
                              (1 - p_{(j)})^\gamma`  (*, ‡)
============================  ==============================================  ===============================

(*) one number per sample, placed in the column of the predicted class
(:func:`~agnostophobia.detectors._base.place_in_predicted_column`).

**Tie-free scores** (score scale 2). A probability near 1 cannot be told apart in float64: the
max-softmax of a sample whose top logit leads by more than about 37 is exactly 1.0, and between
about 30 and 37 it takes only a few hundred values, so confident knowns and confident unknowns tie
and a threshold cannot separate them (LogitNorm's logits, norms in the thousands, tie for three
quarters of the images). Hence:

(†) the softmax scores are the **log-odds** :math:`\ln S_c - \ln(1 - S_c) = l_c - \ln \sum_{j \ne c}
e^{l_j}`, computed from the logits with ``logsumexp`` (:func:`softmax_log_odds`): a strictly
increasing function of :math:`S_c` (:math:`S_c` = ``scipy.special.expit`` of the score), so every
ranking, OSCR curve, CCR at FPR and AUROC is the one the exact max-softmax gives, and it is
exact for any logits. Thresholds are log-odds too (0 is a max-softmax of 1/2).

(‡) :math:`H` and :math:`G_\gamma` near 0 keep their resolution in float64 (its absolute
resolution grows as values shrink) until they underflow, for a top logit that leads by more than
about 745 (:math:`H`) or 745/:math:`\gamma` (:math:`G_\gamma`). The score keeps :math:`-H`
(:math:`-G_\gamma`) where it is a normal float64, and is :math:`-\ln H` (:math:`-\ln G_\gamma`,
> 708, so above every such score) where it would underflow, computed in log space
(:func:`log_softmax_entropy`, :func:`log_generalized_entropy`) with the top class's
:math:`\ln S` and :math:`\ln(1 - S)` from the log-odds, not from a :math:`\ln S` rounded to 0.
``objectosphere-scaled`` keeps :math:`S_c \lVert F \rVert` on its own scale: where :math:`S_c`
rounds to 1 the product still orders samples by :math:`\lVert F \rVert`.

Each detector writes its score twice, side by side: ``_scores`` in numpy/scipy for
evaluation, ``_torch_score`` in torch for ``export`` (the predicted class's value).
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import numpy as np
import torch
from scipy.special import log_softmax, logsumexp, softmax

from ._base import Detector, Setting, TorchScore, as_float64, picked, place_in_predicted_column, register

#: Below this a float64 loses precision (subnormal): where -H or -G would be smaller in size, the
#: ``entropy`` and ``gen`` scores are -ln H and -ln G instead (see the module docstring).
LOG_TINY = float(np.log(np.finfo(np.float64).tiny))


# ------------------------------------------------------------------ score functions

def softmax_scores(logits) -> np.ndarray:
    """Softmax over the logits' columns, (N, C): probabilities, for figures and ensembles; the
    ``softmax`` detector's scores are their log-odds (:func:`softmax_log_odds`).

    Args:
        logits: the logits, shape ``(N, C)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).

    Returns:
        The ``(N, C)`` float64 probabilities; each row sums to 1.

    Raises:
        ValueError: ``logits`` not of shape ``(N, C)``, empty, not real numbers or not finite.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import softmax_scores
        >>> softmax_scores(logits).round(4)
        array([[0.9647, 0.0177, 0.0177],
               [0.3333, 0.3333, 0.3333]])
    """
    return softmax(as_float64(logits, "logits"), axis=1)


def background_scores(logits) -> np.ndarray:
    """Known-class scores of a background-class network, (N, C).

    ``logits`` has C+1 columns, the last being the background class. The softmax runs
    over all C+1 outputs and only then is the background column dropped, so the rows
    sum to 1 - S_background (they do not sum to 1). Probabilities, for figures; the
    ``background`` detector's scores are their log-odds (:func:`softmax_log_odds` of all C+1
    columns, the background column dropped).

    Args:
        logits: the logits of a network trained with a background class (Sec. 3), shape
            ``(N, C+1)``, the background class last (a NumPy array or a torch tensor, finite).

    Returns:
        The ``(N, C)`` float64 probabilities of the known classes.

    Raises:
        ValueError: ``logits`` has fewer than 2 columns, is not 2-D, empty, or not finite.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import background_scores
        >>> logits = np.array([[3.0, 0.0, 0.0], [0.0, 0.0, 3.0]])  # the last column is the background class
        >>> background_scores(logits).round(4)  # the softmax over all C + 1 columns, the background dropped
        array([[0.9094, 0.0453],
               [0.0453, 0.0453]])
    """
    arr = as_float64(logits, "logits")
    if arr.shape[1] < 2:
        raise ValueError(f"logits must have C+1 >= 2 columns for background scores, got {arr.shape[1]}")
    return softmax(arr, axis=1)[:, :-1]


def feature_magnitude(features) -> np.ndarray:
    """Euclidean norm ||F|| of each deep feature vector, (N,).

    Computed in float64, so squares of float32-range values cannot overflow.

    Args:
        features: the deep features F (the input of the logit layer), shape ``(N, D)`` (a NumPy
            array or a torch tensor, finite).

    Returns:
        The ``(N,)`` float64 norms.

    Raises:
        ValueError: ``features`` not of shape ``(N, D)``, empty, not real numbers or not finite.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import feature_magnitude
        >>> feature_magnitude(np.array([[3.0, 4.0], [0.0, 0.5]]))
        array([5. , 0.5])
    """
    return np.linalg.norm(as_float64(features, "features"), axis=1)


def scaled_objectosphere_scores(logits, features) -> np.ndarray:
    """Softmax times deep feature magnitude, S_c(x) * ||F(x)|| (Sec. 4.2, last paragraph), (N, C).

    Args:
        logits: the logits, shape ``(N, C)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).
        features: the deep features F of the same samples, shape ``(N, D)``.

    Returns:
        The ``(N, C)`` float64 scores.

    Raises:
        ValueError: either is not 2-D, empty or not finite, or their numbers of rows differ.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import scaled_objectosphere_scores
        >>> features = np.array([[30.0, 40.0], [0.3, 0.4]])  # magnitudes 50 and 0.5
        >>> scaled_objectosphere_scores(logits, features).round(4)
        array([[48.2332,  0.8834,  0.8834],
               [ 0.1667,  0.1667,  0.1667]])
    """
    probs = softmax_scores(logits)
    magnitude = feature_magnitude(features)
    if magnitude.shape[0] != probs.shape[0]:
        raise ValueError(f"features has {magnitude.shape[0]} rows but logits has {probs.shape[0]}")
    return probs * magnitude[:, None]


def _top_rest(x: np.ndarray, top: np.ndarray) -> np.ndarray:
    r""":math:`a = \ln \sum_{j \ne t} e^{l_j - l_t}` per row, ``top`` t the arg-max column: minus the
    top class's log-odds, exact for any gap (the top column left out of a ``logsumexp``)."""
    rows = np.arange(len(x))
    shifted = x - x[rows, top][:, None]
    shifted[rows, top] = -np.inf
    return logsumexp(shifted, axis=1)


def softmax_log_odds(logits) -> np.ndarray:
    r"""(N, K) log-odds of the softmax over the logits' K >= 2 columns,
    :math:`\ln S_c - \ln(1 - S_c) = l_c - \ln \sum_{j \ne c} e^{l_j}`, exact where :math:`S_c`
    rounds to 1 (or 0) in float64; ``scipy.special.expit`` of it is the softmax.

    For a column other than the arg-max the sum includes the arg-max's term, so it is at least
    1 after shifting by the maximum and nothing cancels; the arg-max's own sum leaves it out in a
    ``logsumexp`` (``_top_rest``). One column (K = 1): 0, the log-odds of nothing to compare.

    Args:
        logits: the logits, shape ``(N, K)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).

    Returns:
        The ``(N, K)`` float64 log-odds.

    Raises:
        ValueError: ``logits`` not of shape ``(N, K)``, empty, not real numbers or not finite.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import softmax_log_odds
        >>> softmax_log_odds(logits).round(4)
        array([[ 3.3069, -4.0181, -4.0181],
               [-0.6931, -0.6931, -0.6931]])
    """
    x = as_float64(logits, "logits")
    n, k = x.shape
    if k == 1:
        return np.zeros_like(x)
    top = x.argmax(axis=1)
    rows = np.arange(n)
    peak = x[rows, top][:, None]
    terms = np.exp(x - peak)
    with np.errstate(divide="ignore"):  # the arg-max's rest may round to 0; replaced just below
        rest = np.log(terms.sum(axis=1, keepdims=True) - terms) + peak
    rest[rows, top] = _top_rest(x, top) + peak[:, 0]
    return x - rest


def torch_log_odds(logits: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """The ``predicted`` column of :func:`softmax_log_odds` in torch operations, (N,)."""
    return -_torch_top_rest(logits, predicted)


def _torch_top_rest(logits: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """:func:`_top_rest` in torch operations (``predicted``: the arg-max column)."""
    top = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    shifted = (logits - picked(logits, predicted)[:, None]).masked_fill(top, float("-inf"))
    return torch.logsumexp(shifted, dim=1)


def _log_softplus(a):
    r""":math:`\ln \ln(1 + e^a)`, finite for every finite ``a`` (numpy or torch): :math:`a - e^a / 2`
    where :math:`e^a` is below 1e-13 (the series' next term is below 1e-26 of it)."""
    lib = torch if isinstance(a, torch.Tensor) else np
    far = a < -30.0
    safe = lib.where(far, lib.zeros_like(a), a)
    return lib.where(far, a - lib.exp(a) / 2, lib.log(lib.log1p(lib.exp(safe))))


def _log_probabilities(x, a, mask):
    r"""``(ln p, ln(1 - p))`` (N, K) of the softmax (numpy or torch), the top column's from
    :math:`a` (:func:`_top_rest`): :math:`\ln p_t = -\ln(1 + e^a)`, :math:`\ln(1 - p_t) = a - \ln(1 + e^a)`,
    where ``log_softmax`` would round :math:`\ln p_t` to 0. ``mask``: True in the top column."""
    lib = torch if isinstance(x, torch.Tensor) else np
    softplus = lib.log1p(lib.exp(a))[:, None]  # a <= ln(K - 1): no overflow
    log_p = (torch.log_softmax(x, dim=1) if lib is torch else log_softmax(x, axis=1))
    log_p = lib.where(mask, -softplus, log_p)
    other = lib.where(mask, lib.full_like(log_p, -1.0), log_p)  # the top column's is replaced below
    log_rest = lib.where(mask, a[:, None] - softplus, lib.log(-lib.expm1(other)))
    return log_p, log_rest


def _log_entropy_terms(x, a, mask):
    r""":math:`\ln(-p_j \ln p_j)` per column (numpy or torch), accurate at the top column."""
    lib = torch if isinstance(x, torch.Tensor) else np
    log_p, _ = _log_probabilities(x, a, mask)
    other = lib.where(mask, lib.full_like(log_p, -1.0), log_p)
    return lib.where(mask, (-lib.log1p(lib.exp(a)) + _log_softplus(a))[:, None], log_p + lib.log(-other))


def log_softmax_entropy(logits) -> np.ndarray:
    r""":math:`\ln H(S)` in nats, (N,), computed in log space: finite where :math:`H` underflows
    (a top logit leading by more than about 745), accurate where :math:`\ln S` of the top class
    rounds to 0 (its term :math:`-S_t \ln S_t` from the log-odds). One column: :math:`-\infty`.

    Args:
        logits: the logits, shape ``(N, C)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).

    Returns:
        The ``(N,)`` float64 :math:`\ln H`.

    Raises:
        ValueError: ``logits`` not of shape ``(N, C)``, empty, not real numbers or not finite.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import log_softmax_entropy
        >>> log_softmax_entropy(logits).round(4)  # ln ln 3 for the undecided sample
        array([-1.7298,  0.094 ])
    """
    x = as_float64(logits, "logits")
    if x.shape[1] == 1:
        return np.full(len(x), -np.inf)
    top = x.argmax(axis=1)
    mask = np.arange(x.shape[1])[None, :] == top[:, None]
    return logsumexp(_log_entropy_terms(x, _top_rest(x, top), mask), axis=1)


def softmax_entropy(logits) -> np.ndarray:
    """Entropy of the softmax in nats (natural log), (N,); at most ln C: Table 1's statistic.

    Uses log_softmax, so a probability that underflows to 0 contributes 0 * finite = 0. Where
    the top class's probability rounds to 1 its own term is 0, and where every other one
    underflows H is 0: the ``entropy`` detector scores from :func:`log_softmax_entropy` instead.

    Args:
        logits: the logits, shape ``(N, C)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).

    Returns:
        The ``(N,)`` float64 entropies, in [0, ln C].

    Raises:
        ValueError: ``logits`` not of shape ``(N, C)``, empty, not real numbers or not finite.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import softmax_entropy
        >>> softmax_entropy(logits).round(4)  # ln 3 = 1.0986 for the undecided sample
        array([0.1773, 1.0986])
    """
    log_p = log_softmax(as_float64(logits, "logits"), axis=1)
    return -(np.exp(log_p) * log_p).sum(axis=1)


def _tie_free_negative(log_value):
    r"""The score of a statistic :math:`V > 0` that is better when smaller, from :math:`\ln V`
    (numpy or torch): :math:`-V` where :math:`V` is a normal float64, :math:`-\ln V` (> 708, so
    above every :math:`-V`) where it is smaller: strictly decreasing in :math:`V`, finite."""
    lib = torch if isinstance(log_value, torch.Tensor) else np
    log_value = lib.clip(log_value, -1e300, None) if lib is np else log_value.clamp_min(-1e300)
    normal = log_value >= LOG_TINY
    return lib.where(normal, -lib.exp(lib.where(normal, log_value, lib.zeros_like(log_value))), -log_value)


def _torch_negative_entropy(logits, features, predicted):
    """The ``entropy`` detector's score in torch operations, (N,): its export."""
    if logits.shape[1] == 1:
        return torch.full((logits.shape[0],), 1e300, dtype=logits.dtype, device=logits.device)
    mask = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    terms = _log_entropy_terms(logits, _torch_top_rest(logits, predicted), mask)
    return _tie_free_negative(torch.logsumexp(terms, dim=1))


# ------------------------------------------------------------------ detectors

@register("softmax")
class SoftmaxDetector(Detector):
    r"""Maximum softmax probability :math:`S_c = e^{l_c} / \sum_j e^{l_j}` (Sec. 3, "softmax
    thresholding"; Hendrycks & Gimpel, ICLR 2017), scored as its log-odds
    :math:`\ln \frac{S_c}{1 - S_c} = l_c - \ln \sum_{j \ne c} e^{l_j}`, which orders samples as
    :math:`S_c` does and stays exact where :math:`S_c` rounds to 1
    (:func:`~agnostophobia.detectors.softmax_log_odds`); ``probabilities()`` gives :math:`S_c` itself.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> build_detector("softmax").scores(logits).max(axis=1).round(3)  # the log-odds of the top probability
        array([ 3.307, -0.693])
    """

    title = "max-softmax"
    SCORE_SCALE = 2  # log-odds (1: the probability, which ties where it rounds to 1)

    def _scores(self, logits, features):
        return softmax_log_odds(logits)

    def probabilities(self, logits, features=None) -> np.ndarray:
        """(N, C) softmax probabilities :math:`S_c` (``scipy.special.expit`` of the scores)."""
        return softmax_scores(logits)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: torch_log_odds(logits, predicted))


@register("background")
class BackgroundDetector(Detector):
    r"""Known-class columns of the C+1 softmax of a background-class network (Sec. 3):
    :math:`S_c = e^{l_c} / \sum_{j=1}^{C+1} e^{l_j}` for the C known classes, scored as their
    log-odds :math:`l_c - \ln \sum_{j \ne c}^{C+1} e^{l_j}` (as ``softmax``: tie-free).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 5.0]])  # C = 3 known + the background column
        >>> build_detector("background").scores(logits).max(axis=1).round(3)  # the second sample: background
        array([ 2.901, -5.013])
    """

    reads_background_column = True
    title = "background (C+1 softmax)"
    SCORE_SCALE = 2  # log-odds, as ``softmax``

    def _scores(self, logits, features):
        if logits.shape[1] < 2:
            raise ValueError(f"logits must have C+1 >= 2 columns for background scores, got {logits.shape[1]}")
        return softmax_log_odds(logits)[:, :-1]

    def probabilities(self, logits, features=None) -> np.ndarray:
        """(N, C) known-class probabilities of the C+1 softmax
        (:func:`~agnostophobia.detectors.background_scores`)."""
        return background_scores(logits)

    def _torch_score(self):  # the log-odds in the C+1 softmax, read at a known column
        return TorchScore(lambda logits, features, predicted: torch_log_odds(logits, predicted))


@register("objectosphere-scaled")
class ScaledObjectosphereDetector(Detector):
    r"""Softmax times deep-feature magnitude, :math:`S_c \cdot \lVert F \rVert`
    (Scaled Objectosphere, Sec. 4.2, last paragraph). A zero feature vector scores 0 for
    every class.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> features = np.array([[3.0, 4.0], [0.3, 0.4]])
        >>> build_detector("objectosphere-scaled").scores(logits, features).max(axis=1).round(3)
        array([4.823, 0.167])
    """

    needs_features = True
    title = "softmax·‖F‖"

    def _scores(self, logits, features):
        return scaled_objectosphere_scores(logits, features)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: picked(torch.softmax(logits, dim=1), predicted)
                          * torch.linalg.vector_norm(features, dim=1))


@register("max-logit")
class MaxLogitDetector(Detector):
    r"""The logits themselves, :math:`l_c`: thresholding the largest one is the maximum
    logit score (MLS) of Vaze, Han, Vedaldi & Zisserman, "Open-Set Recognition: a Good
    Closed-Set Classifier is All You Need", ICLR 2022 (also Hendrycks et al., ICML 2022).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> build_detector("max-logit").scores(logits).max(axis=1).round(3)  # the largest logit
        array([4., 1.])
    """

    def _scores(self, logits, features):
        return logits.copy()

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: picked(logits, predicted))


@register("entropy")
class EntropyDetector(Detector):
    r"""Negative softmax entropy :math:`-H(S) = \sum_c S_c \ln S_c` in nats, in [-ln C, 0].

    The Entropic Open-Set loss (Sec. 4.1, Eq. 1) drives unknowns to maximal entropy ln C;
    Table 1 reports H. One number per sample, in the predicted class's column. Where :math:`H`
    would underflow float64 (a top logit leading by more than about 708) the score is
    :math:`-\ln H` (> 708) instead, so that such samples stay ordered (module docstring, ‡).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> build_detector("entropy").scores(logits).max(axis=1).round(3)  # the undecided sample: -ln 3
        array([-0.177, -1.099])
    """

    SCORE_SCALE = 2  # -ln H where H underflows (1: 0 there, a tie)

    def _scores(self, logits, features):
        return place_in_predicted_column(_tie_free_negative(log_softmax_entropy(logits)), logits)

    def _torch_score(self):
        return TorchScore(_torch_negative_entropy)


@register("magnitude")
class MagnitudeDetector(Detector):
    r"""Deep-feature magnitude :math:`\lVert F \rVert` (Sec. 4.2: Objectosphere pushes
    unknowns' features towards 0; Table 1). One number per sample, in the predicted
    class's column.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> features = np.array([[3.0, 4.0], [0.3, 0.4]])
        >>> build_detector("magnitude").scores(logits, features).max(axis=1).round(3)  # each sample's ||F||
        array([5. , 0.5])
    """

    needs_features = True
    title = "‖F‖"

    def _scores(self, logits, features):
        return place_in_predicted_column(feature_magnitude(features), logits)

    def _torch_score(self):
        return TorchScore(lambda logits, features, predicted: torch.linalg.vector_norm(features, dim=1))


@register("energy")
class EnergyDetector(Detector):
    r"""Negative free energy :math:`-E(x; T) = T \ln \sum_c e^{l_c / T}` (Liu, Wang, Owens &
    Li, "Energy-based Out-of-distribution Detection", NeurIPS 2020, Eq. 5 with the sign
    flipped so that larger = more known). ``temperature`` T > 0, default 1 as in their
    evaluation. One number per sample, in the predicted class's column.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> build_detector("energy").scores(logits).max(axis=1).round(3)  # T ln sum exp(l / T), T = 1
        array([4.036, 2.099])
    """

    temperature = Setting(float, 1.0, low=0, low_open=True, doc="T, the temperature the logits are divided by")

    def _scores(self, logits, features: Optional[np.ndarray]):
        t = self.temperature
        return place_in_predicted_column(t * logsumexp(logits / t, axis=1), logits)

    def _torch_score(self):
        t = self.temperature
        return TorchScore(lambda logits, features, predicted: t * torch.logsumexp(logits / t, dim=1))


def log_generalized_entropy(logits: np.ndarray, gamma: float, top: int) -> np.ndarray:
    r"""(N,) :math:`\ln G_\gamma` in log space (:func:`generalized_entropy`): finite where
    :math:`G_\gamma` underflows, with the top class's :math:`\ln p` and :math:`\ln(1 - p)` from its
    log-odds (a :math:`\ln p` rounded to 0 would drop its term).

    Args:
        logits: the logits, shape ``(N, C)`` (a NumPy array or a torch tensor on any device, any
            real dtype, every value finite).
        gamma: :math:`\gamma > 0`, the exponent of GEN (Liu et al., CVPR 2023, Eq. 6; theirs: 0.1).
        top: M, how many of the largest probabilities are summed, ``1 <= M <= C`` (theirs: 100;
            the ``gen`` detector clips its setting to C).

    Returns:
        The ``(N,)`` float64 :math:`\ln G_\gamma`; :math:`-\infty` for one column.

    Raises:
        ValueError: ``logits`` not of shape ``(N, C)``, empty, not real numbers or not finite;
            ``top`` not a whole number in ``[1, C]``; ``gamma`` not a positive number.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import log_generalized_entropy
        >>> log_generalized_entropy(logits, gamma=0.1, top=2).round(4)
        array([0.3221, 0.5427])
    """
    x = as_float64(logits, "logits")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or not 1 <= top <= x.shape[1]:
        raise ValueError(f"top: the number of largest probabilities summed must be a whole number in "
                         f"[1, {x.shape[1]}] (the logits' columns), got {top!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating)) or not gamma > 0:
        raise ValueError(f"gamma: GEN's exponent must be a number > 0, got {gamma!r}")
    if x.shape[1] == 1:
        return np.full(len(x), -np.inf)
    best = x.argmax(axis=1)
    mask = np.arange(x.shape[1])[None, :] == best[:, None]
    log_p, log_rest = _log_probabilities(x, _top_rest(x, best), mask)
    chosen = np.argpartition(-log_p, top - 1, axis=1)[:, :top]  # the M largest, in any order
    return logsumexp(gamma * np.take_along_axis(log_p + log_rest, chosen, axis=1), axis=1)


def generalized_entropy(logits: np.ndarray, gamma: float, top: int) -> np.ndarray:
    r"""(N,) :math:`G_\gamma = \sum_{j=1}^{M} p_{(j)}^\gamma (1 - p_{(j)})^\gamma` over the M = ``top``
    largest softmax probabilities; ``exp`` of :func:`log_generalized_entropy`, so a probability of
    exactly 0 contributes 0 (finite for every input), never a clamp, and a top probability that
    rounds to 1 still contributes its :math:`(1 - p)^\gamma`.

    Args:
        logits, gamma, top: as for :func:`log_generalized_entropy`.

    Returns:
        The ``(N,)`` float64 :math:`G_\gamma`.

    Raises:
        ValueError: as for :func:`log_generalized_entropy`.

    Examples:
        >>> import numpy as np
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> from agnostophobia.detectors import generalized_entropy
        >>> generalized_entropy(logits, gamma=0.1, top=2).round(4)  # larger for the undecided sample
        array([1.38  , 1.7207])
    """
    return np.exp(log_generalized_entropy(logits, gamma, top))


@register("gen")
class GENDetector(Detector):
    r"""GEN, the generalized entropy score (Liu, Lochman & Zach, "GEN: Pushing the Limits of
    Softmax-Based Out-of-Distribution Detection", CVPR 2023, Eq. 6):

    .. math:: s(x) = -G_\gamma(p) = -\sum_{j=1}^{M} p_{(j)}^\gamma \, (1 - p_{(j)})^\gamma,

    :math:`p_{(1)} \ge p_{(2)} \ge \dots` the sorted softmax probabilities; a confident sample has
    a small :math:`G_\gamma`. Their defaults: :math:`\gamma = 0.1`, M = 100 (ImageNet-1k);
    here M is clipped to the number of known classes C (a run with fewer classes sums all C, the
    report says so), and the grid spans :math:`\gamma` 0.01 to 1 and M 2, 5 and 100 (all C). Logits only.
    One number per sample, in the predicted class's column.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # a confident sample, an undecided one
        >>> build_detector("gen").scores(logits).max(axis=1).round(3)  # gamma 0.1, every class (C = 3 < M)
        array([-2.047, -2.581])
    """

    title = "GEN"
    SCORE_SCALE = 2  # -ln G where G underflows (1: 0 there, a tie)
    report_note = ("Liu et al. (CVPR 2023): minus the generalized entropy of the M largest softmax probabilities; "
                   "M is clipped to the number of known classes C.")
    gamma = Setting(float, 0.1, low=0, low_open=True, grid=(0.01, 0.1, 0.5, 1.0),
                    doc="γ, the exponent of the generalized entropy")
    top = Setting(int, 100, low=1, grid=(2, 5, 100), doc="M, how many of the largest probabilities are summed")

    def _scores(self, logits, features: Optional[np.ndarray]):
        log_g = log_generalized_entropy(logits, self.gamma, min(self.top, logits.shape[1]))
        return place_in_predicted_column(_tie_free_negative(log_g), logits)

    def _torch_score(self):
        return TorchScore(partial(_torch_gen, gamma=self.gamma, top=self.top))


def _torch_gen(logits, features, predicted, *, gamma: float, top: int):
    if logits.shape[1] == 1:
        return torch.full((logits.shape[0],), 1e300, dtype=logits.dtype, device=logits.device)
    mask = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    log_p, log_rest = _log_probabilities(logits, _torch_top_rest(logits, predicted), mask)
    chosen = torch.topk(log_p, min(top, logits.shape[1]), dim=1).indices
    return _tie_free_negative(torch.logsumexp(gamma * (log_p + log_rest).gather(1, chosen), dim=1))
