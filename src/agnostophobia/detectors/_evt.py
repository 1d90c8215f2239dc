r"""The extreme-value statistics the detectors share: Weibull fits and CDFs (OpenMax's tails,
the EVM's margins: :func:`fit_weibull_rows`, :func:`weibull_cdf`) and the generalized Pareto
distribution (PostMax's and GHOST's recalibration: :func:`fit_gpd`, :func:`gpd_cdf`, and
:func:`torch_gpd_cdf`, the same CDF in torch operations for ``export``; :func:`gpd_score` and
:func:`torch_gpd_score`, the CDF as a tie-free score).

Everything is float64; the fits raise ``ValueError`` naming what could not be fitted.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.stats
import torch
from scipy.special import logsumexp, softmax

from agnostophobia._validation import to_numpy

__all__ = ["MIN_GPD_VALUES", "fit_gpd", "fit_weibull", "fit_weibull_rows", "gpd_cdf", "gpd_score", "torch_gpd_cdf",
           "torch_gpd_score", "weibull_cdf"]


# --------------------------------------------------------------------------- Weibull

def fit_weibull(data) -> tuple[float, float]:
    r"""Maximum-likelihood fit of a two-parameter Weibull (location fixed at 0).

    Returns ``(shape k, scale λ)`` of :math:`F(x) = 1 - \exp(-(x/\lambda)^k)`, the
    parametrisation of ``scipy.stats.weibull_min(k, loc=0, scale=λ)``: the one row of
    :func:`fit_weibull_rows`.

    ``data`` must be positive, finite, and not all equal (a Weibull needs a spread).
    """
    x = to_numpy(data, "data").astype(np.float64, copy=False).ravel()
    if x.size < 2:
        raise ValueError(f"data must have at least 2 values to fit a Weibull, got {x.size}")
    shape, scale = fit_weibull_rows(x[None, :], name="data")
    return float(shape[0]), float(scale[0])


def _weibull_score(shape: np.ndarray, yc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The profile score g(k) and its derivative g'(k) per row (see :func:`fit_weibull_rows`)."""
    weights = softmax(shape[:, None] * yc, axis=1)
    mean = np.einsum("mn,mn->m", weights, yc)
    variance = np.einsum("mn,mn->m", weights, (yc - mean[:, None]) ** 2)
    return 1.0 / shape - mean, -1.0 / shape ** 2 - variance


def fit_weibull_rows(data, name: str = "data") -> tuple[np.ndarray, np.ndarray]:
    r"""Maximum-likelihood two-parameter Weibulls (location 0), one per row of ``data`` (M, n).

    Returns ``(shape k, scale λ)``, each (M,), of :math:`F(x) = 1 - \exp(-(x/\lambda)^k)`
    (``scipy.stats.weibull_min(k, loc=0, scale=λ)``). OpenMax fits C rows, the EVM one
    row per training sample; all rows are solved together.

    The MLE is computed on :math:`y = \log x`, where the Weibull becomes a (minimum)
    Gumbel with :math:`\sigma = 1/k`, exactly as libMR's ``weibull_fit`` does. The profile
    score equation for the shape,

    .. math:: g(k) = \frac{1}{k} + \bar y - \frac{\sum_i y_i e^{k y_i}}{\sum_i e^{k y_i}} = 0,

    is strictly decreasing in :math:`k` (:math:`g' = -1/k^2 - \mathrm{Var}_w(y) < 0`), from
    :math:`+\infty` to :math:`\bar y - \max_i y_i < 0`, so it has one root. It is
    bracketed (doubling the upper end), then found by Newton steps kept inside the
    bracket (a bisection step where Newton would leave it) until the bracket or the step
    is a few ulps wide: machine precision (libMR stops at a relative tolerance of 1e-6).
    The weighted mean is a softmax of :math:`k y`, so nothing overflows even for the very
    large shapes that libMR's translation produces. Then
    :math:`\lambda = \big(\tfrac{1}{n}\sum_i x_i^k\big)^{1/k}`, computed in log space.

    Every row must be positive, finite, and not all equal (a Weibull needs a spread).
    """
    x = to_numpy(data, name).astype(np.float64, copy=False)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 values per row to fit a Weibull, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    if (x <= 0).any():
        raise ValueError(f"{name} must be > 0 for a Weibull with location 0, got minimum {x.min()!r}")
    # y relative to each row's largest value, log(x_i / x_max) = log1p((x_i - x_max) / x_max):
    # the differences of y stay accurate when the data sit in a narrow band far from 0, as
    # libMR's translated tails do. g, and so the root, depend only on differences of y.
    ref = x.max(axis=1)
    y_rel = np.log1p((x - ref[:, None]) / ref[:, None])
    y_mean = y_rel.mean(axis=1)
    yc = y_rel - y_mean[:, None]
    top = yc.max(axis=1)
    if not (top > 0).all():
        row = int(np.argmax(~(top > 0)))
        where = "" if len(x) == 1 else f" in row {row}"
        raise ValueError(f"{name} values are all equal{where} ({x[row, 0]!r}); a Weibull cannot be fitted")
    lo, hi = 0.5 / top, 2.0 / top  # g(lo) >= 1/lo - max(yc) = top > 0
    rising = _weibull_score(hi, yc)[0] > 0
    while rising.any():  # g -> -max(yc) < 0, so this terminates
        lo[rising], hi[rising] = hi[rising], 2.0 * hi[rising]
        rising[rising] = _weibull_score(hi[rising], yc[rising])[0] > 0
    shape = 0.5 * (lo + hi)
    active = np.arange(len(x))
    eps = 4 * np.finfo(float).eps
    for _ in range(500):
        k = shape[active]
        g, slope = _weibull_score(k, yc[active])
        lo[active] = np.where(g > 0, k, lo[active])
        hi[active] = np.where(g < 0, k, hi[active])
        newton = k - g / slope
        inside = (newton > lo[active]) & (newton < hi[active])
        step = np.where(inside, newton, 0.5 * (lo[active] + hi[active]))
        shape[active] = step
        done = (g == 0) | (np.abs(step - k) <= eps * k) | (hi[active] - lo[active] <= eps * k)
        shape[active[g == 0]] = k[g == 0]
        active = active[~done]
        if not active.size:
            break
    # The last ulp: of k and its two neighbours, the one with the smallest |g| (the lower on
    # a tie), so that the root does not depend on the side Newton came from.
    candidates = np.stack([np.nextafter(shape, 0.0), shape, np.nextafter(shape, np.inf)])
    residual = np.abs(np.stack([_weibull_score(k, yc)[0] for k in candidates]))
    shape = candidates[np.argmin(residual, axis=0), np.arange(len(shape))]
    scale = ref * np.exp(y_mean + (logsumexp(shape[:, None] * yc, axis=1) - math.log(x.shape[1])) / shape)
    return shape, scale


def weibull_cdf(x, shape, scale, loc=0.0) -> np.ndarray:
    r"""Weibull CDF :math:`1 - \exp\big(-((x - \ell)/\lambda)^k\big)` for :math:`x > \ell`, else 0.

    Same function as ``scipy.stats.weibull_min.cdf(x, shape, loc, scale)``, broadcasting
    over all arguments. Evaluated as ``-expm1(-exp(k * log1p((x - ℓ - λ) / λ)))``, which
    stays accurate for the huge shapes (k ~ 10^4) that libMR's translation produces.
    """
    x = np.asarray(x, dtype=np.float64)
    shape = np.asarray(shape, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    z = x - np.asarray(loc, dtype=np.float64)  # translated value, > 0 inside the support
    positive = z > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_ratio = np.log1p(np.where(positive, (z - scale) / scale, 0.0))
        cdf = -np.expm1(-np.exp(shape * log_ratio))
    return np.where(positive, cdf, 0.0)


# --------------------------------------------------------------------------- generalized Pareto

#: Fewest values a GPD is fitted to.
MIN_GPD_VALUES = 10


def fit_gpd(values: np.ndarray, what: str) -> tuple[float, float, float]:
    """Maximum-likelihood ``(shape ξ, location μ, scale σ)`` of a generalized Pareto
    distribution (``scipy.stats.genpareto.fit``, all three free) to ``values``; ``what``
    names them in the error raised when they cannot be fitted."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < MIN_GPD_VALUES:
        raise ValueError(f"{what}: {values.size} value(s), a generalized Pareto fit needs at least "
                         f"{MIN_GPD_VALUES}")
    if values.min() == values.max():
        raise ValueError(f"{what}: all {values.size} values are equal ({values[0]!r}); "
                         "a generalized Pareto distribution cannot be fitted")
    with warnings.catch_warnings():  # scipy's optimiser warns on its way; the result is checked below
        warnings.simplefilter("ignore", RuntimeWarning)
        shape, loc, scale = scipy.stats.genpareto.fit(values)
    if not (np.isfinite([shape, loc, scale]).all() and scale > 0):
        raise ValueError(f"{what}: the generalized Pareto fit failed (shape {shape!r}, location {loc!r}, "
                         f"scale {scale!r})")
    return float(shape), float(loc), float(scale)


def gpd_cdf(values: np.ndarray, shape, loc, scale) -> np.ndarray:
    """The GPD CDF, broadcasting over the parameters (one per sample for GHOST's classes)."""
    return scipy.stats.genpareto.cdf(values, shape, loc=loc, scale=scale)


def torch_gpd_cdf(values: torch.Tensor, shape: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    r""":func:`gpd_cdf` (scipy's ``genpareto.cdf``) in torch operations, broadcasting over the
    parameters: :math:`1 - (1 + \xi z)^{-1/\xi}` (:math:`-\mathrm{expm1}(-z)` for :math:`\xi = 0`)
    with :math:`z = (v - \mu)/\sigma`, 0 below the support and 1 above it (:math:`\xi < 0`)."""
    z = ((values - loc) / scale).clamp_min(0.0)
    z = torch.where(shape < 0, torch.minimum(z, -1.0 / torch.where(shape < 0, shape, -1.0)), z)
    safe = torch.where(shape == 0, torch.ones_like(shape), shape)
    return torch.where(shape == 0, -torch.expm1(-z), -torch.expm1(-torch.log1p(safe * z) / safe))


#: The GPD CDF :math:`G = 1 - e^{-L}` (:math:`L`: its cumulative hazard) *saturates* where
#: :math:`1 - G < 2^{-26}`, :math:`L > 26 \ln 2`: float64 keeps fewer than 27 of its 53 bits of
#: :math:`1 - G` there (none once :math:`G` rounds to 1, at :math:`L > 53 \ln 2`), so nearby values
#: tie; at or below it :math:`G \le 1 - 2^{-26}`.
SATURATED_HAZARD = 26 * math.log(2.0)
#: The standardised values beyond which a score is held (a GHOST value may be infinite): finite
#: scores, and room for :func:`~agnostophobia.detectors._base.place_in_predicted_column`'s gap.
_Z_LIMIT = 1e300


def _gpd_pieces(z, shape, lib):
    """``(cdf, saturated)`` of the GPD at standardised ``z`` >= 0 (numpy or torch): the CDF, and
    where it saturates at 1 (its hazard above :data:`SATURATED_HAZARD`, or ``z`` at or beyond the
    upper end of a support bounded by ``shape`` < 0)."""
    zero = shape == 0
    safe = lib.where(zero, lib.ones_like(shape), shape)
    inside = 1 + safe * z
    beyond = (shape < 0) & (inside <= 0)
    hazard = lib.where(zero, z, lib.log1p(lib.where(beyond, lib.zeros_like(z), safe * z)) / safe)
    saturated = beyond | (hazard > SATURATED_HAZARD)
    return -lib.expm1(-lib.where(saturated, lib.zeros_like(hazard), hazard)), saturated


def gpd_score(values, shape, loc, scale) -> np.ndarray:
    r"""The GPD CDF :math:`G` as a tie-free score, broadcasting over the parameters: with
    :math:`z = (v - \mu) / \sigma`,

    .. math:: s(v) = z \ (z \le 0), \qquad G(v) \ (0 < G(v) \le 1 - 2^{-26}), \qquad 1 + z \
              \text{(where } G > 1 - 2^{-26} \text{)}.

    The CDF keeps its value wherever it does not saturate (to an ulp of scipy's
    ``genpareto.cdf``); where it saturates, at 0 below the location and near 1 (above the upper end
    of a bounded support, :math:`\xi < 0`, or where float64 holds too few bits of :math:`1 - G`:
    :data:`SATURATED_HAZARD`), the score goes on with :math:`z`, so the order of :math:`v`
    survives: below 0 (:math:`z \le 0`; :math:`G` starts with slope 1 in :math:`z`, so this is its
    linear continuation) and above 1 (:math:`1 + z > 1`). Strictly increasing in :math:`v`; :math:`z` is held within
    :math:`\pm 10^{300}` so that every score is finite."""
    values = np.asarray(values, dtype=np.float64)
    shape, loc, scale = (np.asarray(a, dtype=np.float64) for a in (shape, loc, scale))
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.clip((values - loc) / scale, -_Z_LIMIT, _Z_LIMIT)
    positive = np.maximum(z, 0.0)
    cdf, saturated = _gpd_pieces(positive, shape, np)
    return np.where(z <= 0, z, np.where(saturated, 1.0 + z, cdf))


def torch_gpd_score(values: torch.Tensor, shape: torch.Tensor, loc: torch.Tensor,
                    scale: torch.Tensor) -> torch.Tensor:
    """:func:`gpd_score` in torch operations (``export``)."""
    z = ((values - loc) / scale).clamp(-_Z_LIMIT, _Z_LIMIT)
    cdf, saturated = _gpd_pieces(z.clamp_min(0.0), shape, torch)
    return torch.where(z <= 0, z, torch.where(saturated, 1.0 + z, cdf))
