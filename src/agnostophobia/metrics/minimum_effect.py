"""The minimum-effect test: is a difference larger than the margin, not only larger than 0?

:func:`~agnostophobia.metrics.decide` calls a difference better or worse where its Holm-adjusted p
against 0 is below alpha and its observed mean reaches the margin. That is not a test that the true
difference reaches the margin: a mean of exactly the margin with a tight interval passes, though half
of its interval lies inside the margin. The minimum-effect test (Murphy & Myors 1999; the
counterpart of the equivalence test, Lakens, Scheel & Isager 2018) replaces the null hypothesis
"no difference" with "a difference no larger than the margin", :math:`|\\Delta| \\le m`, and rejects
it where the difference's two-sided :math:`1 - \\alpha` t interval lies wholly beyond
:math:`\\pm m`:

.. math:: p = \\min\\Big(1,\\ 2\\, P\\big(T_{n-1} > (|\\bar d| - m) / \\mathrm{se}\\big)\\Big),

Holm-adjusted over the family as :func:`~agnostophobia.metrics.decide` adjusts its p. Holm's
adjustment is monotone in every p, and this p is never below the test against 0, so a difference
beyond the margin is always also better or worse: the mark is a stricter reading of those calls,
never a new one.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
from scipy import stats

from .significance import PairedDifference, check_margin_and_alpha, holm


def minimum_effect_p(difference: PairedDifference, margin: float) -> float:
    """The two-sided p of the null hypothesis :math:`|\\Delta| \\le` ``margin`` for one difference
    (module docstring); 1 where the observed mean does not exceed the margin or there is no noise
    to read it against.

    Args:
        difference: a :class:`~agnostophobia.metrics.PairedDifference`.
        margin: the margin, >= 0, in the metric's units.

    Returns:
        The p-value, in [0, 1].

    Examples:
        >>> from agnostophobia.metrics import minimum_effect_p, paired_difference
        >>> d = paired_difference([0.80, 0.82, 0.81], [0.70, 0.71, 0.70], sample_se=0.002)
        >>> minimum_effect_p(d, margin=0.005) < 0.01
        True
        >>> minimum_effect_p(d, margin=0.2)
        1.0
    """
    if not (np.isfinite(margin) and margin >= 0):
        raise ValueError(f"minimum_effect_p: margin must be a number >= 0, got {margin!r}")
    excess = abs(difference.difference) - margin
    if excess <= 0 or not difference.se > 0:
        return 1.0
    return float(min(1.0, 2 * stats.t.sf(excess / difference.se, difference.df)))


def beyond_margin(differences: Sequence[PairedDifference], margin: float, alpha: float = 0.05) -> List[bool]:
    """For each difference of a family, whether it lies beyond ``margin``: its minimum-effect p
    (:func:`minimum_effect_p`), Holm-adjusted over the family, below ``alpha``.

    Args:
        differences: the family's :class:`~agnostophobia.metrics.PairedDifference` values (the
            family :func:`~agnostophobia.metrics.decide` decides).
        margin: the margin, > 0, in the metric's units.
        alpha: the family's level, in (0, 0.5).

    Returns:
        A list of booleans, in the order of ``differences``.

    Examples:
        >>> from agnostophobia.metrics import beyond_margin, paired_difference
        >>> family = [paired_difference([0.80, 0.82, 0.81], [0.70, 0.71, 0.70], sample_se=0.002),
        ...           paired_difference([0.716, 0.726, 0.736], [0.71, 0.72, 0.73], sample_se=0.0005)]
        >>> beyond_margin(family, margin=0.005)
        [True, False]
    """
    check_margin_and_alpha("beyond_margin", margin, alpha)
    if not differences:
        return []
    adjusted = holm([minimum_effect_p(d, margin) for d in differences])
    return [bool(p < alpha) for p in adjusted]
