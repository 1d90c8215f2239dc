r"""The entropy family of post-hoc detectors: scores that fall as the softmax spreads out,
kept tie-free in log space where the statistic underflows float64.

Notation as in ``detectors.posthoc``: :math:`l \in \mathbb{R}^C` the known-class logits,
:math:`S_c = e^{l_c} / \sum_j e^{l_j}` the softmax.

============================  ==============================================  ===============================
name                          per-class score (larger = more known)            source
============================  ==============================================  ===============================
``entropy``                   :math:`-H(S) = \sum_c S_c \ln S_c`  (*, ‡)       Sec. 4.1, Table 1
``gen``                       :math:`-\sum_{j \le M} p_{(j)}^\gamma             Liu et al., CVPR 2023
                              (1 - p_{(j)})^\gamma`  (*, ‡)
============================  ==============================================  ===============================

(*) one number per sample, placed in the column of the predicted class
(:func:`~agnostophobia.detectors._base.place_in_predicted_column`).

(‡) :math:`H` and :math:`G_\gamma` near 0 keep their resolution in float64 (its absolute
resolution grows as values shrink) until they underflow, for a top logit that leads by more than
about 745 (:math:`H`) or 745/:math:`\gamma` (:math:`G_\gamma`). The score keeps :math:`-H`
(:math:`-G_\gamma`) where it is a normal float64, and is :math:`-\ln H` (:math:`-\ln G_\gamma`,
> 708, so above every such score) where it would underflow, computed in log space
(:func:`log_softmax_entropy`, :func:`log_generalized_entropy`) with the top class's
:math:`\ln S` and :math:`\ln(1 - S)` from the log-odds (``detectors.posthoc``), not from a
:math:`\ln S` rounded to 0.

Each detector writes its score twice, side by side: ``_scores`` in numpy/scipy for
evaluation, ``_torch_score`` in torch for ``export`` (the predicted class's value).
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import numpy as np
import torch
from scipy.special import log_softmax, logsumexp

from ._base import Detector, Setting, TorchScore, as_float64, place_in_predicted_column, register
from .posthoc import _top_rest, _torch_top_rest


#: Below this a float64 loses precision (subnormal): where -H or -G would be smaller in size, the
#: ``entropy`` and ``gen`` scores are -ln H and -ln G instead (see the module docstring).
LOG_TINY = float(np.log(np.finfo(np.float64).tiny))


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
