r"""Table 1 of the paper: mean and standard deviation of softmax entropy and deep feature
magnitude :math:`\|F(x)\|`, for known (D_c) and unknown (D_a) test samples.

The per-sample values come from :func:`agnostophobia.detectors.softmax_entropy` (nats) and
:func:`agnostophobia.detectors.feature_magnitude`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validation import check_labels, check_scores, split_known_unknown


class MeanStd(NamedTuple):
    """Mean and population standard deviation (``ddof=0``) of ``n`` values.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import entropy_magnitude_stats
        >>> stats = entropy_magnitude_stats(np.array([0.1, 0.3, 1.0, 1.2]), np.array([5.0, 7.0, 0.5, 1.5]),
        ...                                 np.array([0, 1, -1, -1]))
        >>> stats.known_magnitude
        MeanStd(mean=6.0, std=1.0, n=2)
        >>> print(stats.known_magnitude)  # as Table 1 writes it
        6.000 ± 1.000
    """

    mean: float  # the mean of the values
    std: float  # their population standard deviation (ddof=0)
    n: int  # how many values

    def __str__(self) -> str:  # Table 1 style, e.g. "0.015 ± 0.084"
        return f"{self.mean:.3f} ± {self.std:.3f}"


@dataclass(frozen=True)
class EntropyMagnitudeStats:
    """One row of Table 1.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import entropy_magnitude_stats
        >>> stats = entropy_magnitude_stats(np.array([0.1, 0.3, 1.0, 1.2]), np.array([5.0, 7.0, 0.5, 1.5]),
        ...                                 np.array([0, 1, -1, -1]))
        >>> print(stats.known_entropy, "|", stats.unknown_entropy)
        0.200 ± 0.100 | 1.100 ± 0.100
        >>> stats.unknown_magnitude.mean < stats.known_magnitude.mean
        True
    """

    known_entropy: MeanStd  # softmax entropy over the known samples (D_c)
    unknown_entropy: MeanStd  # softmax entropy over the unknown samples
    known_magnitude: MeanStd  # deep-feature magnitude ||F(x)|| over the known samples
    unknown_magnitude: MeanStd  # deep-feature magnitude over the unknown samples


def _mean_std(values: np.ndarray) -> MeanStd:
    return MeanStd(float(values.mean()), float(values.std()), int(values.size))


def entropy_magnitude_stats(entropy, magnitude, labels) -> EntropyMagnitudeStats:
    r"""Mean ± std of ``entropy`` and ``magnitude`` over knowns and over unknowns (Table 1).

    Per sample the entropy is :math:`H(x) = -\sum_c S_c(x) \log S_c(x)` and the magnitude
    :math:`\lVert F(x) \rVert` (Sec. 4.2); the table reports their mean and standard deviation
    over :math:`D_c` and over :math:`D_a`.

    Args:
        entropy: (N,) softmax entropy per sample, finite.
        magnitude: (N,) deep feature magnitude per sample, finite and >= 0.
        labels: (N,) integers, >= 0 known, < 0 unknown; both must be present.

    Returns:
        An :class:`EntropyMagnitudeStats`: the four :class:`MeanStd` of knowns' and unknowns'
        entropy and magnitude.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.metrics import entropy_magnitude_stats
        >>> entropy, magnitude = np.array([0.1, 0.3, 2.0, 1.8]), np.array([40.0, 60.0, 2.0, 4.0])
        >>> stats = entropy_magnitude_stats(entropy, magnitude, labels=np.array([0, 1, -1, -1]))
        >>> stats.known_magnitude.mean, stats.known_magnitude.std, round(stats.unknown_entropy.mean, 4)
        (50.0, 10.0, 1.9)
    """
    entropy = check_scores(entropy, "entropy", ndim=1)
    magnitude = check_scores(magnitude, "magnitude", ndim=1)
    if magnitude.shape != entropy.shape:
        raise ValueError(f"magnitude has {magnitude.shape[0]} entries but entropy has {entropy.shape[0]}")
    if (magnitude < 0).any():
        raise ValueError(f"magnitude must be >= 0 (a norm), got minimum {magnitude.min()}")
    labels = check_labels(labels, entropy.shape[0])
    known, unknown = split_known_unknown(labels, need_known=False, need_unknown=False)
    for mask, kind in ((known, "known (label >= 0)"), (unknown, "unknown (negative label)")):
        if not mask.any():
            raise ValueError(f"labels has no {kind} samples; Table 1 needs both")
    return EntropyMagnitudeStats(_mean_std(entropy[known]), _mean_std(entropy[unknown]),
                                 _mean_std(magnitude[known]), _mean_std(magnitude[unknown]))
