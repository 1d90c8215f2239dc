r"""Which false positive rates a set of negatives can support: the one rule every ranking,
every tuning and every report table that reads CCR at an FPR follows.

:func:`~agnostophobia.metrics.ccr_at_fpr` returns a number at any FPR ``t >= 1/|D_a|`` (one
false positive allowed; the paper's "N/A" below that). With a handful of false positives
allowed, though, the threshold is the score of one of a handful of negatives, and the rate it
gives on new data varies widely (a binomial count of k has a relative standard error of about
:math:`1/\sqrt{k}`). A CCR is therefore *reported* -- used to choose a detector's settings
(``tune-detectors``), to rank detectors (``compare``), or shown in a report's detector matrix
-- only where the negatives allow at least :data:`MIN_FALSE_POSITIVES` false positives:

.. math::

    t \ge \frac{10}{|D_a|}.

``calibrate`` warns below the same line (its threshold still resolves from one false positive on).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence

#: False positives the negatives must allow at a target FPR before a CCR there is reported.
MIN_FALSE_POSITIVES = 10

#: The FPRs a comparison reads CCR at, where the negatives support them: 1, 2 and 5 per decade
#: from 1e-4 (the paper's smallest) to 0.5.
FPR_SERIES = tuple(float(f"{m}e{e}") for e in range(-4, 0) for m in (1, 2, 5))


def supports_fpr(fpr: float, num_negatives: int) -> bool:
    """Whether ``num_negatives`` negatives support a CCR at ``fpr``: ``fpr * n >= 10`` (rounded to
    9 decimals, so that 0.1 x 100 counts as 10).

    Args:
        fpr: the false-positive rate.
        num_negatives: how many negatives (unknown samples) it would be measured on.

    Returns:
        True where the CCR at ``fpr`` rests on at least 10 negatives.

    Examples:
        >>> from agnostophobia.metrics import supports_fpr
        >>> supports_fpr(0.01, num_negatives=1000), supports_fpr(0.001, num_negatives=1000)
        (True, False)
    """
    return num_negatives > 0 and round(float(fpr) * num_negatives, 9) >= MIN_FALSE_POSITIVES


def smallest_supported_fpr(num_negatives: int) -> float:
    """``10 / n``: the smallest FPR ``num_negatives`` negatives support (``inf`` without any; above 1
    with fewer than 10, i.e. none).

    Args:
        num_negatives: how many negatives (unknown samples).

    Returns:
        ``10 / num_negatives`` as a float (``inf`` for 0).

    Examples:
        >>> from agnostophobia.metrics import smallest_supported_fpr
        >>> smallest_supported_fpr(1000)
        0.01
    """
    return MIN_FALSE_POSITIVES / num_negatives if num_negatives > 0 else math.inf


def negatives_for(fpr: float) -> int:
    """Negatives needed to support ``fpr``: ``ceil(10 / fpr)``."""
    return math.ceil(round(MIN_FALSE_POSITIVES / float(fpr), 9))


def supported_fprs(num_negatives: int, candidates: Sequence[float] = FPR_SERIES) -> List[float]:
    """The ``candidates`` ``num_negatives`` negatives support, in their order.

    Args:
        num_negatives: how many negatives (unknown samples).
        candidates: the FPRs to try (default: :data:`FPR_SERIES`, 1e-4 ... 0.5).

    Returns:
        The supported candidates, in their order (possibly empty).

    Examples:
        >>> from agnostophobia.metrics import supported_fprs
        >>> supported_fprs(1000)
        [0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    """
    return [float(t) for t in candidates if supports_fpr(t, num_negatives)]


#: The target FPR a tuning or a ranking reads CCR at when none is given, where the negatives
#: support it (:func:`default_fpr`): 1 % false alarms, one of the four FPRs of the paper's
#: Table 2 (Sec. 5).
DEFAULT_FPR = 1e-2


def default_fpr(num_negatives: int) -> Optional[float]:
    """The target FPR when none is given: :data:`DEFAULT_FPR` where ``num_negatives`` negatives
    support it (:func:`supports_fpr`), else the smallest FPR of :data:`FPR_SERIES` they support.
    ``tune-detectors`` tunes at it and ``compare`` ranks at it, so that both, and ``--detector
    best``, read the same number.

    Args:
        num_negatives: how many validation negatives (the fewest of any model of a run).

    Returns:
        The FPR, or None where fewer than 20 negatives support no FPR of the series.

    Examples:
        >>> from agnostophobia.metrics import default_fpr
        >>> default_fpr(5000), default_fpr(200), default_fpr(5)
        (0.01, 0.05, None)
    """
    if supports_fpr(DEFAULT_FPR, num_negatives):
        return DEFAULT_FPR
    supported = supported_fprs(num_negatives)
    return min(supported) if supported else None


def reported_fprs(num_negatives: int) -> List[float]:
    """The FPR columns of a comparison on ``num_negatives`` negatives: the smallest value of
    :data:`FPR_SERIES` they support, then every supported decade above it (1e-4 ... 0.1).
    Empty where fewer than 20 negatives support none (0.5 is the series' largest).

    Args:
        num_negatives: how many negatives (unknown samples).

    Returns:
        The FPRs, ascending (possibly empty).

    Examples:
        >>> from agnostophobia.metrics import reported_fprs
        >>> reported_fprs(1000)
        [0.01, 0.1]
    """
    supported = supported_fprs(num_negatives)
    if not supported:
        return []
    decades = [t for t in supported[1:] if math.log10(t).is_integer()]
    return [supported[0], *decades]


def unsupported_fpr_message(fpr: float, num_negatives: int, what: str = "the validation split") -> str:
    """One line: why ``num_negatives`` negatives cannot support ``fpr``, the smallest FPR they do
    support, the supported values of :data:`FPR_SERIES`, and the negatives ``fpr`` would need.

    Args:
        fpr: the FPR asked for.
        num_negatives: how many negatives there are.
        what: where they are, in the message.

    Returns:
        The message, one line without a trailing newline.

    Examples:
        >>> from agnostophobia.metrics import unsupported_fpr_message
        >>> unsupported_fpr_message(0.001, num_negatives=1000).split("; ")[-1]
        'FPR 0.001 needs 10000 negatives'
    """
    supported = supported_fprs(num_negatives)
    smallest = smallest_supported_fpr(num_negatives)
    bound = (f"the smallest FPR they support is 10/{num_negatives} = {smallest:.3g}" if smallest <= 1
             else "they support no FPR (fewer than 10)")
    proposal = f"; supported: {', '.join(f'{t:g}' for t in supported)}" if supported else ""
    return (f"FPR {float(fpr):g} is below what {what} can support: it holds {num_negatives} negative(s) (label -1), "
            f"a CCR is read only at FPR >= {MIN_FALSE_POSITIVES}/#negatives (at least {MIN_FALSE_POSITIVES} false "
            f"positives allowed), so {bound}{proposal}; FPR {float(fpr):g} needs {negatives_for(fpr)} negatives")
