r"""Post-hoc detectors: scores computed from one sample's logits and deep features alone.

The entropy family (``entropy``, ``gen``), whose scores stay tie-free in log space, is in
``detectors.entropy``; the softmax log-odds it builds on are here.

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
``magnitude``                 :math:`\lVert F \rVert`  (*)                     Sec. 4.2, Table 1
``energy``                    :math:`T \ln \sum_c e^{l_c / T}`  (*)            Liu et al., NeurIPS 2020
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

``objectosphere-scaled`` keeps :math:`S_c \lVert F \rVert` on its own scale: where :math:`S_c`
rounds to 1 the product still orders samples by :math:`\lVert F \rVert`.

Each detector writes its score twice, side by side: ``_scores`` in numpy/scipy for
evaluation, ``_torch_score`` in torch for ``export`` (the predicted class's value).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from scipy.special import logsumexp, softmax

from ._base import Detector, Setting, TorchScore, as_float64, picked, place_in_predicted_column, register


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


