"""Intervals and decisions for comparing open-set methods: a number is reported with its 95 %
interval, and a difference with a decision that says what the data can and cannot tell.

* :func:`seed_interval`: the mean of one statistic over seeds (OSCR, CCR at an FPR, AUROC) and its
  confidence interval, a t interval (the seeds' networks are independent draws of the training's
  randomness; with 3-5 seeds a bootstrap over seeds cannot resolve a 95 % interval).
* :func:`paired_difference`: two methods evaluated on the same seeds and the same test samples:
  the mean paired difference over seeds, its standard error (the seeds' spread and the test
  samples' share from a paired bootstrap, added in quadrature, so that a constant difference is
  never "certain"), its t interval and two-sided p-value.
* :func:`decide`: a family of such differences, Holm-adjusted, and each one's decision against a
  margin declared before the run: ``better``/``worse`` (Holm-adjusted p below alpha *and* the
  difference at least the margin), ``equivalent`` (the 1 - 2 alpha interval, 90 % at alpha 0.05,
  inside plus or minus the margin: two one-sided tests, Schuirmann 1987), or ``not resolved``.
* :func:`smallest_resolved_difference`: the observed difference that a comparison with a given
  standard error, number of seeds and family size is sure to have called better or worse, the one
  that clears Holm's strictest step (0.05 over the family's size) and the margin; a smaller one can
  still pass at a later step (what an observed mean must reach; not a power calculation).
* :func:`resample_weights`, :func:`oscr_area_resamples`, :func:`resampled_se`: the paired
  bootstrap over test samples (Efron & Tibshirani 1993, ch. 16) of the OSCR area, with the same
  resamples for every method and seed, and the standard error of a mean difference over seeds it
  gives.
* :func:`paired_seed_test`: the paired t-test (``scipy.stats.ttest_rel``) or Wilcoxon's
  signed-rank test of per-seed values alone; it measures seed-to-seed noise only (two detectors on
  the same network move together, so a difference of 10⁻⁴ with a spread of 10⁻⁵ "passes").
* :func:`paired_bootstrap`: two scores of the same test samples within one seed (e.g. two detectors
  on one network), a paired bootstrap over the samples of any metric's difference: its interval
  and a two-sided p-value; :class:`Bootstrap` says how many resamples, from which seed, at which level.
* :func:`holm`: Holm's step-down adjustment of a family of p-values (Holm 1979): "below alpha
  after Holm" bounds the chance of any false rejection *within that family* by alpha. A report
  with several families (the benchmark's are its ``FAMILIES``) controls each at alpha, not the
  whole report.

Each function says in one line what it needs when given less (fewer than two seeds, unequal
lengths, p-values outside [0, 1]).
"""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence

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
    p_value: float  # the two-sided p-value (NaN where undefined: equal differences that are not 0)
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

    Examples:
        >>> from agnostophobia.metrics import seed_interval
        >>> interval = seed_interval([0.80, 0.82, 0.84])
        >>> round(interval.estimate, 4), round(interval.low, 4), round(interval.high, 4)
        (0.82, 0.7703, 0.8697)
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


#: A spread of paired differences at or below this is none (:func:`paired_seed_test`): what is left of a
#: constant difference after floating-point rounding (a - c - (b - c) need not equal a - b).
SPREAD_ROUNDING = 1e-12


def paired_seed_test(first: Sequence[float], second: Sequence[float], test: str = "t") -> PairedTest:
    """Whether ``first`` and ``second`` (one value per seed each, the same seeds in the same order)
    differ: the paired t-test (``test="t"``) or Wilcoxon's signed-rank test (``"wilcoxon"``; with
    fewer than 6 seeds it cannot reach p < 0.05). Two identical lists give p = 1; differences
    that are all equal but not 0, to ``SPREAD_ROUNDING``, give p = NaN: without a spread the test
    is undefined (not 0: a constant difference of 10⁻⁵ is no evidence of anything).

    This test sees the seeds' noise only. Where the two methods share the test samples (two
    detectors on one network, two networks on one test set) use :func:`paired_difference` with
    the samples' share of the error (:func:`resampled_se`): a tiny difference with a still tinier
    spread over seeds gets a tiny p here.

    Args:
        first: one value per seed of the first method.
        second: one value per seed of the second, the same seeds in the same order.
        test: ``"t"`` or ``"wilcoxon"``.

    Returns:
        A :class:`PairedTest`: the mean difference, the two-sided p-value, the test and the
        number of pairs.

    Examples:
        >>> from agnostophobia.metrics import paired_seed_test
        >>> result = paired_seed_test([0.80, 0.82, 0.84], [0.78, 0.79, 0.83])
        >>> round(result.difference, 4), round(result.p_value, 4), result.test
        (0.02, 0.0742, 't')
    """
    a, b = _values(first, "paired_seed_test: first", 2), _values(second, "paired_seed_test: second", 2)
    if a.size != b.size:
        raise ValueError(f"paired_seed_test: one value per seed in both, got {a.size} and {b.size}")
    difference = a - b
    # no spread, or one at floating-point rounding (values shifted by a constant): t is undefined
    if np.ptp(difference) <= SPREAD_ROUNDING:
        p = 1.0 if np.all(difference == 0) else float("nan")
        return PairedTest(float(difference.mean()), p, test, int(a.size))
    if test == "t":
        p = stats.ttest_rel(a, b).pvalue
    elif test == "wilcoxon":
        p = stats.wilcoxon(a, b).pvalue
    else:
        raise ValueError(f"paired_seed_test: test must be 't' or 'wilcoxon', got {test!r}")
    return PairedTest(float(difference.mean()), float(p), test, int(a.size))


class Bootstrap(NamedTuple):
    """How a bootstrap over the test samples is drawn and read: ``resamples`` resamples drawn with
    replacement by ``numpy.random.default_rng(seed)`` (the same seed, the same resamples), and its
    interval at ``confidence``.

    Examples:
        >>> from agnostophobia.metrics import Bootstrap
        >>> Bootstrap(resamples=200)
        Bootstrap(resamples=200, confidence=0.95, seed=0)
    """

    resamples: int = 2000  # how many resamples (at least 100 for paired_bootstrap)
    confidence: float = 0.95  # the interval's level, in (0, 1)
    seed: int = 0  # the resampling's random seed


def paired_bootstrap(metric: Callable, first, second, labels, bootstrap: Bootstrap = Bootstrap()) -> tuple:
    """``(Interval of metric(first) - metric(second), two-sided p-value)`` by a paired bootstrap over
    the test samples: both scores are resampled with the same indices, so what the samples share
    cancels. The p-value is twice the smaller share of resampled differences on either side of 0
    (at least 1/resamples).

    Args:
        metric: ``metric(scores, labels) -> float``, e.g. CCR at one FPR.
        first: the first method's scores of the test samples (any shape with the samples first).
        second: the second method's scores of the same samples, in the same order.
        labels: the samples' labels (negative = unknown).
        bootstrap: how many resamples (at least 100), from which seed, and the interval's level,
            in (0, 1) (:class:`Bootstrap`).

    Returns:
        ``(Interval, p)``: the :class:`Interval` of the difference (its ``estimate`` is the
        difference on all samples) and the two-sided p-value, a float in (0, 1].

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import Bootstrap, paired_bootstrap
        >>> def separation(scores, labels):  # a metric: the knowns' mean score minus the unknowns'
        ...     return float(scores[labels >= 0].mean() - scores[labels < 0].mean())
        ...
        >>> rng = np.random.default_rng(0)
        >>> labels = np.repeat([0, -1], 50)
        >>> first = rng.normal(labels == 0, 1.0)  # knowns score 1 higher on average
        >>> second = rng.normal(0.0, 1.0, size=100)  # no separation
        >>> interval, p = paired_bootstrap(separation, first, second, labels, Bootstrap(resamples=200))
        >>> round(interval.estimate, 4), interval.low > 0, round(p, 4)
        (0.9409, True, 0.01)
    """
    first, second, labels = np.asarray(first), np.asarray(second), np.asarray(labels)
    if not len(first) == len(second) == len(labels):
        raise ValueError(f"paired_bootstrap: the same samples in both scores and the labels, got "
                         f"{len(first)}, {len(second)} and {len(labels)}")
    resamples, confidence, seed = bootstrap
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
    alpha for the whole family where its adjusted p-value is below alpha (as :func:`decide` reads it).

    Args:
        p_values: the family's p-values.

    Returns:
        A float64 NumPy array of the adjusted p-values, of ``p_values``' length and order.

    Examples:
        >>> from agnostophobia.metrics import holm
        >>> holm([0.01, 0.04, 0.03])
        array([0.03, 0.06, 0.06])
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


# ------------------------------------------------------------------ differences, decisions, resolution
#: The decisions of :func:`decide`.
BETTER, WORSE, EQUIVALENT, NOT_RESOLVED = "better", "worse", "equivalent", "not resolved"


class PairedDifference(NamedTuple):
    """A mean paired difference over seeds (first minus second) and the noise it is read against.

    ``se`` is :math:`\\sqrt{\\mathrm{se\\_seeds}^2 + \\mathrm{se\\_samples}^2}`: ``se_seeds`` (the
    per-seed differences' standard deviation over :math:`\\sqrt n`, the paired t-test's) and
    ``se_samples`` (the test samples' share, from a paired bootstrap over them:
    :func:`resampled_se`; 0 where not given) added in quadrature; ``p_value`` is the
    two-sided p of :math:`t = \\bar d / \\mathrm{se}` with ``df`` = n - 1 degrees of freedom.
    Without any noise (``se`` = 0) p is 1 where every difference is 0 and NaN (undefined) otherwise.

    Examples:
        >>> from agnostophobia.metrics import paired_difference
        >>> d = paired_difference([0.7101, 0.7402, 0.7703], [0.71, 0.74, 0.77], sample_se=0.004)
        >>> round(d.difference, 4), round(d.se, 4), round(d.p_value, 2)  # the samples' share, not the seeds' 6e-5
        (0.0002, 0.004, 0.96)
        >>> print(d.interval(0.90))
        0.000 [-0.011, 0.012]
    """

    difference: float  # mean over seeds of first - second
    se: float  # the standard error read: sqrt(se_seeds**2 + se_samples**2)
    se_seeds: float  # the per-seed differences' standard deviation / sqrt(n)
    se_samples: float  # the test samples' share of the mean difference's error (0: not given)
    df: int  # degrees of freedom of t: n - 1
    p_value: float  # two-sided; NaN where undefined (se = 0, a difference not 0)
    n: int  # how many seeds

    def interval(self, confidence: float = 0.95) -> Interval:
        """The two-sided t interval of the difference at ``confidence``: :math:`\\bar d \\pm
        t_{(1+\\gamma)/2,\\,n-1}\\,\\mathrm{se}` (``[0, 0]`` where every difference and the noise are
        0; NaN ends where there is no noise but a difference).

        Args:
            confidence: the interval's level, in (0, 1).

        Returns:
            An :class:`Interval` of the difference.
        """
        d = self.difference
        if self.se == 0:
            ends = (d, d) if d == 0 else (float("nan"), float("nan"))
            return Interval(d, *ends, confidence, self.n)
        half = float(stats.t.ppf((1 + confidence) / 2, self.df)) * self.se
        return Interval(d, d - half, d + half, confidence, self.n)


def paired_difference(first: Sequence[float], second: Sequence[float],
                      sample_se: Optional[float] = None) -> PairedDifference:
    """The mean paired difference of ``first`` and ``second`` (one value per seed each, the same
    seeds in the same order) and its standard error: the seeds' spread and ``sample_se`` added in
    quadrature, :math:`\\sqrt{\\mathrm{se}_\\mathrm{seeds}^2 + \\mathrm{se}_\\mathrm{samples}^2}`.

    With ``sample_se`` None (or 0) this is the paired t-test (``scipy.stats.ttest_rel``): same p,
    same interval. The samples' share is what keeps a difference that barely moves from seed to
    seed (two detectors on one network, which move together) from being called certain: the test
    samples are a sample too, and a paired bootstrap over them (:func:`resampled_se`) says how
    much of the mean difference they alone could make. The two are added, not the larger taken:
    every seed is scored on the same test samples, so the seeds' spread leaves out the part of the
    samples' noise the seeds share. The sum counts the part they do not share twice, so it errs on
    the cautious side, by at most a factor :math:`\\sqrt 2` where the two are equal.

    Args:
        first: one value per seed of the first method.
        second: one value per seed of the second, the same seeds in the same order.
        sample_se: the standard error of the mean difference due to the test samples (e.g.
            :func:`resampled_se`), >= 0; None: not known (the seeds' spread alone).

    Returns:
        A :class:`PairedDifference`.

    Examples:
        >>> from agnostophobia.metrics import paired_difference
        >>> difference = paired_difference([0.80, 0.82, 0.84], [0.78, 0.79, 0.83])
        >>> round(difference.difference, 4), round(difference.se, 4), difference.n
        (0.02, 0.0058, 3)
    """
    a = _values(first, "paired_difference: first", 2)
    b = _values(second, "paired_difference: second", 2)
    if a.size != b.size:
        raise ValueError(f"paired_difference: one value per seed in both, got {a.size} and {b.size}")
    samples_se = 0.0 if sample_se is None else float(sample_se)
    if not (np.isfinite(samples_se) and samples_se >= 0):
        raise ValueError(f"paired_difference: sample_se must be a finite number >= 0, got {sample_se!r}")
    difference = a - b
    n = int(a.size)
    mean = float(difference.mean())
    # a spread at floating-point rounding is none (:func:`paired_seed_test`)
    se_seeds = 0.0 if np.ptp(difference) <= SPREAD_ROUNDING else float(difference.std(ddof=1) / np.sqrt(n))
    se = float(np.hypot(se_seeds, samples_se))
    if se == 0:
        p = 1.0 if np.all(difference == 0) else float("nan")
    else:
        p = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    return PairedDifference(mean, se, se_seeds, samples_se, n - 1, p, n)


class Decision(NamedTuple):
    """What :func:`decide` concludes of one difference of a family.

    ``verdict``: :data:`BETTER` or :data:`WORSE` (Holm-adjusted p below alpha and the difference at
    least the margin), :data:`EQUIVALENT` (the 1 - 2 alpha interval inside plus or minus the
    margin: both one-sided tests reject a difference of the margin or more), or
    :data:`NOT_RESOLVED` (neither: more seeds or samples are needed to say).

    Examples:
        >>> from agnostophobia.metrics import decide, paired_difference
        >>> family = [paired_difference([0.80, 0.82, 0.81], [0.70, 0.71, 0.70], sample_se=0.002),
        ...           paired_difference([0.7101, 0.7402, 0.7703], [0.71, 0.74, 0.77], sample_se=0.0005),
        ...           paired_difference([0.72, 0.75, 0.77], [0.71, 0.74, 0.77], sample_se=0.004)]
        >>> [d.verdict for d in decide(family, margin=0.005)]
        ['better', 'equivalent', 'not resolved']
    """

    verdict: str  # better, worse, equivalent or not resolved (BETTER, WORSE, EQUIVALENT, NOT_RESOLVED)
    p_holm: float  # the family's Holm-adjusted p-value (an undefined p counts as 1)
    equivalence: Interval  # the 1 - 2 alpha interval the equivalence test reads (90 % at alpha 0.05)


def check_margin_and_alpha(caller: str, margin: float, alpha: float) -> None:
    """Refuses, naming ``caller``, a margin that is not a positive number or a level outside (0, 0.5)."""
    if not (np.isfinite(margin) and margin > 0):
        raise ValueError(f"{caller}: margin must be a positive number, got {margin!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"{caller}: alpha must lie in (0, 0.5), got {alpha!r}")


def decide(differences: Sequence[PairedDifference], margin: float, alpha: float = 0.05) -> List[Decision]:
    """Decisions for a family of differences against ``margin``, a difference declared before the
    data were seen as too small to matter (:class:`Decision`).

    Holm's adjustment (:func:`holm`) runs over this family alone; an undefined p (no noise, a
    difference) counts as 1 in it. The equivalence test is two one-sided t-tests at ``alpha``
    each (TOST, Schuirmann 1987), read as the 1 - 2 alpha interval inside
    :math:`(-\\mathrm{margin}, \\mathrm{margin})`; it is per difference, not adjusted. A
    difference cannot be both better (or worse) and equivalent: the first needs
    :math:`|\\bar d| \\ge` margin, the second :math:`|\\bar d| <` margin.

    Args:
        differences: the family's :class:`PairedDifference` values.
        margin: the smallest absolute difference that matters, > 0, in the metric's units.
        alpha: the level of each test, in (0, 0.5).

    Returns:
        A list of :class:`Decision`, in the order of ``differences``.

    Examples:
        >>> from agnostophobia.metrics import decide, paired_difference
        >>> difference = paired_difference([0.80, 0.82, 0.84, 0.81], [0.70, 0.71, 0.73, 0.72])
        >>> decide([difference], margin=0.01)[0].verdict
        'better'
    """
    check_margin_and_alpha("decide", margin, alpha)
    if not differences:
        return []
    p = [d.p_value if np.isfinite(d.p_value) else 1.0 for d in differences]
    decisions = []
    for d, p_holm in zip(differences, holm(p)):
        equivalence = d.interval(1 - 2 * alpha)
        if p_holm < alpha and abs(d.difference) >= margin:
            verdict = BETTER if d.difference > 0 else WORSE
        elif -margin < equivalence.low and equivalence.high < margin:  # NaN ends: never
            verdict = EQUIVALENT
        else:
            verdict = NOT_RESOLVED
        decisions.append(Decision(verdict, float(p_holm), equivalence))
    return decisions


def smallest_resolved_difference(se: float, n: int, alpha: float = 0.05, family_size: int = 1,
                                 margin: float = 0.0) -> float:
    """The smallest absolute observed mean difference that :func:`decide` calls better or worse,
    given its standard error ``se`` over ``n`` seeds in a family of ``family_size`` tests: at
    least the margin, and large enough that its two-sided p is below Holm's strictest step,
    alpha / ``family_size``, whatever the family's other p-values.

    .. math:: \\max\\big(\\mathrm{margin},\\ t_{1 - \\alpha / (2m),\\, n - 1}\\, \\mathrm{se}\\big).

    (A difference below it may still pass at a later step of Holm's, once smaller p-values of the
    family were rejected; at the last step the bound is :math:`t_{1-\\alpha/2,\\,n-1}\\,\\mathrm{se}`.)
    This is the difference an observed mean must reach, not a power calculation.

    Args:
        se: the difference's standard error (:attr:`PairedDifference.se`), >= 0.
        n: the number of seeds, >= 2.
        alpha: the family's level, in (0, 1).
        family_size: the number of tests in the family, >= 1.
        margin: the margin of :func:`decide` (0: none).

    Returns:
        The difference, a float >= 0.

    Examples:
        >>> from agnostophobia.metrics import smallest_resolved_difference
        >>> round(smallest_resolved_difference(se=0.01, n=5), 4)
        0.0278
    """
    if n < 2 or family_size < 1 or not 0 < alpha < 1 or not (np.isfinite(se) and se >= 0):
        raise ValueError(f"smallest_resolved_difference: needs se >= 0, n >= 2, family_size >= 1 and alpha in "
                         f"(0, 1), got se={se!r}, n={n!r}, family_size={family_size!r}, alpha={alpha!r}")
    return max(float(margin), float(stats.t.isf(alpha / (2 * family_size), n - 1)) * float(se))


# ------------------------------------------------------------------ the paired bootstrap over test samples
def resample_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` bootstrap weights: row b counts how often each of ``n`` samples is drawn
    when ``n`` are drawn with replacement (each row sums to ``n``). A weighted metric with these
    counts is the metric of the resample; the same ``seed`` and ``n`` give the same rows, so two
    methods scored on the same samples are resampled alike (paired).

    Args:
        n: how many samples, >= 1.
        resamples: how many resamples, >= 1.
        seed: the random seed (``numpy.random.default_rng``).

    Returns:
        An int64 array of shape ``(resamples, n)``.

    Examples:
        >>> from agnostophobia.metrics import resample_weights
        >>> weights = resample_weights(n=4, resamples=3, seed=0)
        >>> weights.shape, weights.sum(axis=1)
        ((3, 4), array([4, 4, 4]))
    """
    if n < 1 or resamples < 1:
        raise ValueError(f"resample_weights: needs n >= 1 and resamples >= 1, got n={n}, resamples={resamples}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, (resamples, n))
    offsets = (np.arange(resamples) * n)[:, None]
    return np.bincount((draws + offsets).ravel(), minlength=resamples * n).reshape(resamples, n)


def oscr_area_resamples(scores, labels, known_weights: np.ndarray, unknown_weights: np.ndarray, log_fpr: bool = False,
                        min_fpr: float = 1e-4) -> np.ndarray:
    r"""The area under the OSCR curve (:func:`~agnostophobia.metrics.oscr_area`, over a linear or a
    log FPR axis) of each bootstrap resample given as weights, without drawing a resample.

    A correct known :math:`i` counts towards CCR from the FPR that accepting it costs,
    :math:`g_{bi} = \sum_{j \in D_a} v_{bj} [s_j \ge s_i] / \sum_{j \in D_a} v_{bj}`, to 1; so

    .. math:: A_b = \frac{\sum_{i \in D_c} w_{bi}\, [\text{$i$ correct}]\, (1 - g_{bi})}{\sum_{i \in D_c} w_{bi}}

    on the linear axis (the share of (correct known, unknown) pairs the known wins), and on the log
    axis from ``min_fpr`` :math:`f_0` to 1, normalised (Sec. 4.1 reads CCR down to an FPR of 10⁻⁴),

    .. math:: A_b = \frac{\sum_{i \in D_c} w_{bi}\, [\text{$i$ correct}]\,
              \log_{10} \max(g_{bi}, f_0) / \log_{10} f_0}{\sum_{i \in D_c} w_{bi}}.

    With every weight 1 it is :func:`~agnostophobia.metrics.oscr_area` (same ``log_fpr`` and
    ``min_fpr``), and with integer weights the area of the resample drawn by them.

    Args:
        scores: (N, C) per-class scores (a detector's ``scores()``).
        labels: (N,) labels, >= 0 known, < 0 unknown; both kinds present.
        known_weights: (B, number of knowns) weights of the knowns, in their order in ``labels``
            (e.g. :func:`resample_weights`).
        unknown_weights: (B, number of unknowns) weights of the unknowns, likewise.
        log_fpr: the area over a log FPR axis (normalised) instead of a linear one.
        min_fpr: where the log axis starts, in (0, 1); the same for every resample (e.g. the smallest
            FPR the set itself resolves, :func:`~agnostophobia.metrics.smallest_supported_fpr`).

    Returns:
        A float64 array of the B areas.

    Examples:
        >>> import numpy as np
        >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.3, 0.5], [0.75, 0.25]])
        >>> labels = np.array([0, 1, 1, 0, -1, -1])  # >= 0 known, < 0 unknown
        >>> from agnostophobia.metrics import oscr_area, oscr_area_resamples
        >>> ones = oscr_area_resamples(scores, labels, np.ones((1, 4)), np.ones((1, 2)))
        >>> round(float(ones[0]), 4), round(oscr_area(scores, labels), 4)  # every weight 1: the area itself
        (0.625, 0.625)
    """
    from ._common import top_class
    from .resampled import check_resample_weights, weight_below

    top = top_class(scores, labels)
    known_weights, unknown_weights = check_resample_weights(known_weights, unknown_weights, int(top.known.sum()),
                                                            int((~top.known).sum()), "oscr_area_resamples")
    unknown, below = weight_below(top.score[~top.known].astype(np.float64), unknown_weights)
    correct = top.correct[top.known]
    beaten = np.searchsorted(unknown, top.score[top.known][correct].astype(np.float64), side="left")
    if not log_fpr:
        wins = (known_weights[:, correct] * below[:, beaten]).sum(axis=1)
        return wins / (known_weights.sum(axis=1) * below[:, -1])
    if not (isinstance(min_fpr, (int, float)) and 0 < min_fpr < 1):
        raise ValueError(f"oscr_area_resamples: min_fpr must be in (0, 1), got {min_fpr!r}")
    cost = 1.0 - below[:, beaten] / below[:, -1:]  # the FPR that accepting each correct known costs
    gains = np.log10(np.maximum(cost, min_fpr)) / np.log10(min_fpr)
    return (known_weights[:, correct] * gains).sum(axis=1) / known_weights.sum(axis=1)


def resampled_se(first: np.ndarray, second: np.ndarray) -> float:
    """The standard error, due to the test samples, of the mean over seeds of first minus second:
    the standard deviation over resamples of that mean, from (seeds, B) replicates of each method's
    metric on the same resamples (row s: seed s; column b: resample b, the same samples drawn for
    both methods and, where the seeds share the test samples, for every seed).

    Args:
        first: (seeds, B) replicates of the first method's metric (e.g. :func:`oscr_area_resamples`).
        second: (seeds, B) replicates of the second's, on the same resamples.

    Returns:
        The standard error, a float >= 0.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import resampled_se
        >>> first = np.array([[0.80, 0.82, 0.78], [0.81, 0.83, 0.80]])  # (seeds, resamples)
        >>> second = np.array([[0.79, 0.80, 0.78], [0.80, 0.80, 0.79]])
        >>> round(resampled_se(first, second), 4)
        0.0104
    """
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if first.shape != second.shape or first.ndim != 2 or first.shape[1] < 2:
        raise ValueError(f"resampled_se: two (seeds, B >= 2) arrays of one shape, got {first.shape} and "
                         f"{second.shape}")
    return float((first - second).mean(axis=0).std(ddof=1))
