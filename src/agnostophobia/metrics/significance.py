"""Intervals and significance for comparing open-set methods: a number is reported with its 95 %
interval, and a difference with a test that says whether seed-to-seed noise explains it.

* :func:`seed_interval`: the mean of one statistic over seeds (OSCR, CCR at an FPR, AUROC) and its
  confidence interval, a t interval (the seeds' networks are independent draws of the training's
  randomness; with 3-5 seeds a bootstrap over seeds cannot resolve a 95 % interval).
* :func:`paired_seed_test`: two methods evaluated on the same seeds, the paired t-test of their
  differences (``scipy.stats.ttest_rel``), or Wilcoxon's signed-rank test (``scipy.stats.wilcoxon``).
* :func:`paired_bootstrap`: two scores of the same test samples within one seed (e.g. two detectors
  on one network), a paired bootstrap over the samples of a metric's difference (Efron &
  Tibshirani 1993, ch. 16): its interval and a two-sided p-value.
* :func:`holm`: Holm's step-down adjustment of a family of p-values (Holm 1979), so that "marked
  significant at 0.05" holds for the whole table, not for each cell alone.

Each function says in one line what it needs when given less (fewer than two seeds, unequal
lengths, p-values outside [0, 1]).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np
from scipy import stats


class Interval(NamedTuple):
    """A statistic's estimate and its confidence interval (``low``, ``high``) at ``confidence``.

    Examples:
        >>> from agnostophobia.metrics import seed_interval
        >>> interval = seed_interval([0.71, 0.74, 0.77])  # one value per seed
        >>> print(interval)
        0.740 [0.665, 0.815]
        >>> interval.n, interval.confidence
        (3, 0.95)
    """

    estimate: float  # the statistic (a mean over seeds, or a difference of metrics)
    low: float  # the interval's lower end (NaN where there is no interval: one seed)
    high: float  # the interval's upper end (NaN where there is no interval)
    confidence: float  # the interval's confidence level, e.g. 0.95
    n: int  # how many values (seeds) or samples it rests on

    def __str__(self) -> str:  # e.g. "0.743 [0.712, 0.774]"
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


class PairedTest(NamedTuple):
    """A paired comparison: mean difference (first minus second), its p-value and the test's name.

    Examples:
        >>> from agnostophobia.metrics import paired_seed_test
        >>> result = paired_seed_test([0.71, 0.74, 0.77], [0.69, 0.70, 0.74])
        >>> round(result.difference, 4), round(result.p_value, 3), result.test, result.n
        (0.03, 0.035, 't', 3)
    """

    difference: float  # mean of first minus second over the pairs
    p_value: float  # the two-sided p-value
    test: str  # the test: "t" (paired t-test) or "wilcoxon" (signed-rank)
    n: int  # how many pairs (seeds)


def _values(values, name: str, at_least: int = 1) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size < at_least:
        raise ValueError(f"{name}: needs at least {at_least} values, got {array.size}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: every value must be finite, got {array.tolist()}")
    return array


def seed_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Mean of ``values`` (one per seed) with its two-sided t interval at ``confidence``.

    One seed has no interval: ``low`` and ``high`` are NaN. Identical values give a zero-width one.

    Args:
        values: one value per seed.
        confidence: the interval's level, in (0, 1).

    Returns:
        An :class:`Interval`: the mean (``estimate``), ``low``, ``high``, ``confidence`` and ``n``.
    """
    array = _values(values, "seed_interval")
    mean = float(array.mean())
    if array.size < 2:
        return Interval(mean, float("nan"), float("nan"), confidence, 1)
    sem = stats.sem(array)
    if sem == 0:
        return Interval(mean, mean, mean, confidence, int(array.size))
    low, high = stats.t.interval(confidence, array.size - 1, loc=mean, scale=sem)
    return Interval(mean, float(low), float(high), confidence, int(array.size))


def paired_seed_test(first: Sequence[float], second: Sequence[float], test: str = "t") -> PairedTest:
    """Whether ``first`` and ``second`` (one value per seed each, the same seeds in the same order)
    differ: the paired t-test (``test="t"``) or Wilcoxon's signed-rank test (``"wilcoxon"``; with
    fewer than 6 seeds it cannot reach p < 0.05). Two identical lists give p = 1.

    Args:
        first: one value per seed of the first method.
        second: one value per seed of the second, the same seeds in the same order.
        test: ``"t"`` or ``"wilcoxon"``.

    Returns:
        A :class:`PairedTest`: the mean difference, the two-sided p-value, the test and the
        number of pairs.
    """
    a, b = _values(first, "paired_seed_test: first", 2), _values(second, "paired_seed_test: second", 2)
    if a.size != b.size:
        raise ValueError(f"paired_seed_test: one value per seed in both, got {a.size} and {b.size}")
    difference = a - b
    if np.all(difference == difference[0]):  # no spread: t is undefined
        p = 1.0 if difference[0] == 0 else 0.0
        return PairedTest(float(difference.mean()), p, test, int(a.size))
    if test == "t":
        p = stats.ttest_rel(a, b).pvalue
    elif test == "wilcoxon":
        p = stats.wilcoxon(a, b).pvalue
    else:
        raise ValueError(f"paired_seed_test: test must be 't' or 'wilcoxon', got {test!r}")
    return PairedTest(float(difference.mean()), float(p), test, int(a.size))


def paired_bootstrap(metric: Callable, first, second, labels, resamples: int = 2000,
                     confidence: float = 0.95, seed: int = 0) -> tuple:
    """``(Interval of metric(first) - metric(second), two-sided p-value)`` by a paired bootstrap over
    the test samples: both scores are resampled with the same indices, so what the samples share
    cancels. The p-value is twice the smaller share of resampled differences on either side of 0
    (at least 1/resamples).

    Args:
        metric: ``metric(scores, labels) -> float``, e.g. CCR at one FPR.
        first: the first method's scores of the test samples (any shape with the samples first).
        second: the second method's scores of the same samples, in the same order.
        labels: the samples' labels (negative = unknown).
        resamples: how many bootstrap resamples.
        confidence: the interval's level, in (0, 1).
        seed: the resampling's random seed.

    Returns:
        ``(Interval, p)``: the :class:`Interval` of the difference (its ``estimate`` is the
        difference on all samples) and the two-sided p-value, a float in (0, 1].
    """
    first, second, labels = np.asarray(first), np.asarray(second), np.asarray(labels)
    if not len(first) == len(second) == len(labels):
        raise ValueError(f"paired_bootstrap: the same samples in both scores and the labels, got "
                         f"{len(first)}, {len(second)} and {len(labels)}")
    if resamples < 100:
        raise ValueError(f"paired_bootstrap: resamples must be at least 100, got {resamples}")
    observed = float(metric(first, labels) - metric(second, labels))
    rng = np.random.default_rng(seed)
    differences = np.empty(resamples)
    for i in range(resamples):
        index = rng.integers(0, len(labels), len(labels))
        differences[i] = metric(first[index], labels[index]) - metric(second[index], labels[index])
    tail = (1 - confidence) / 2
    low, high = np.quantile(differences, [tail, 1 - tail])
    p = min(1.0, 2 * max(min((differences <= 0).mean(), (differences >= 0).mean()), 1 / resamples))
    return Interval(observed, float(low), float(high), confidence, len(labels)), p


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order given: the k-th smallest p is multiplied by
    (m - k + 1), made non-decreasing along that order, capped at 1. A cell is significant at level
    alpha for the whole family where its adjusted p-value is at most alpha.

    Args:
        p_values: the family's p-values.

    Returns:
        A float64 NumPy array of the adjusted p-values, of ``p_values``' length and order.
    """
    p = _values(p_values, "holm")
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"holm: p-values must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    m = p.size
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted
