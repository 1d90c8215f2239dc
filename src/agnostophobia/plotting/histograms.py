"""Histograms that set the knowns against the unknowns: the softmax probabilities with a
logarithmic count axis (paper Fig. 1, bottom) and the normalised deep-feature magnitudes ‖F‖
(paper Fig. 2). Each panel takes the two samples as one pair, ``(knowns, unknowns)``, and their
legend texts as another."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
from matplotlib.axes import Axes

from agnostophobia._validation import int64_labels
from agnostophobia.plotting import style
from agnostophobia.plotting.panels import label_panel, panel_axes

#: Legend texts of :func:`plot_softmax_histogram`'s knowns and unknowns.
SOFTMAX_LABELS = ("knowns (D_c): correct class", "unknowns: max known class")
#: Legend texts of :func:`plot_magnitude_histogram`'s knowns and unknowns.
MAGNITUDE_LABELS = ("knowns (D_c)", "unknowns")


def softmax_histogram_values(known_probs, known_labels, unknown_probs) -> Tuple[np.ndarray, np.ndarray]:
    """The two samples of the paper's Fig. 1 (bottom) histograms.

    Knowns: the probability of the correct class, ``P(y | x)``; unknowns: the highest
    probability of any known class, ``max_c P(c | x)``. ``*_probs`` are (N, C) known-class
    probabilities (for a background-class network: the C+1 softmax with the background
    column dropped, ``scores.background_scores``).

    Args:
        known_probs: (N, C) known-class probabilities of the known samples.
        known_labels: (N,) their classes.
        unknown_probs: (M, C) known-class probabilities of the unknown samples.

    Returns:
        ``(known_values, unknown_values)``, 1-D, for :func:`plot_softmax_histogram`.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import softmax_histogram_values
        >>> known_probs = np.array([[0.9, 0.1], [0.3, 0.7]])
        >>> unknown_probs = np.array([[0.6, 0.4]])
        >>> softmax_histogram_values(known_probs, np.array([0, 0]), unknown_probs)  # the correct class's, the max
        (array([0.9, 0.3]), array([0.6]))
    """
    known_probs = np.asarray(known_probs, dtype=np.float64)
    known_labels = int64_labels(known_labels, "known_labels")
    correct = known_probs[np.arange(len(known_labels)), known_labels]
    unknown_probs = np.asarray(unknown_probs, dtype=np.float64)
    return correct, unknown_probs.max(axis=1) if unknown_probs.size else np.empty(0)


def _histogram_pair(ax: Axes, values: Tuple, labels: Sequence[str], edges: np.ndarray, density: bool,
                    log: bool) -> None:
    """One filled step histogram per non-empty sample, knowns then unknowns, on shared ``edges``."""
    for sample, color, label in zip(values, (style.KNOWN_COLOR, style.UNKNOWN_COLOR), labels):
        sample = np.asarray(sample, dtype=np.float64).ravel()
        sample = sample[np.isfinite(sample)]
        if sample.size == 0:
            continue
        ax.hist(sample, bins=edges, density=density, log=log, histtype="stepfilled", alpha=0.45,
                facecolor=color, edgecolor=color, linewidth=1.2, label=f"{label} (n={sample.size:,})")


def plot_softmax_histogram(values: Tuple, *, ax: Optional[Axes] = None, bins: int = 50, title: Optional[str] = None,
                           labels: Sequence[str] = SOFTMAX_LABELS, legend: bool = True) -> Axes:
    """Histogram of softmax probabilities with a logarithmic count axis (paper Fig. 1, bottom).

    Draws one filled step histogram (one patch) per non-empty sample.

    Args:
        values: ``(known_values, unknown_values)``, as :func:`softmax_histogram_values` gives them:
            1-D softmax probabilities of the known samples' correct class, and the highest
            known-class probabilities of the unknown samples.
        ax: the axes to draw on; default: a new figure's.
        bins: the number of bins over [0, 1].
        title: the panel's title; default: none.
        labels: the knowns' and the unknowns' legend texts (default ``SOFTMAX_LABELS``).
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_softmax_histogram
        >>> rng = np.random.default_rng(0)
        >>> ax = plot_softmax_histogram((rng.uniform(0.8, 1.0, 100), rng.uniform(0.3, 1.0, 100)), bins=10)
        >>> ax.get_yscale()  # the counts on a log axis
        'log'
        >>> plt.close(ax.figure)
    """
    ax = panel_axes(ax)
    edges = np.linspace(0.0, 1.0, bins + 1)
    _histogram_pair(ax, values, labels, edges, density=False, log=True)
    ax.set_xlim(0, 1)
    if ax.patches:
        ax.set_ylim(bottom=0.5)  # same floor in every panel; a single count stays visible
    label_panel(ax, style.LABEL_PROBABILITY, style.LABEL_COUNT_LOG, title)
    if legend and ax.patches:
        ax.legend(fontsize=7, loc="upper center")
    return ax


def plot_magnitude_histogram(magnitudes: Tuple, *, ax: Optional[Axes] = None, bins: int = 60,
                             title: Optional[str] = None, labels: Sequence[str] = MAGNITUDE_LABELS,
                             legend: bool = True) -> Axes:
    """Normalised histograms (density) of deep-feature magnitudes ‖F‖ (paper Fig. 2).

    Both samples share the bin edges (0 to the largest magnitude), so the areas compare.

    Args:
        magnitudes: ``(known_magnitudes, unknown_magnitudes)``: 1-D magnitudes of the known and of
            the unknown samples' deep features.
        ax: the axes to draw on; default: a new figure's.
        bins: the number of bins.
        title: the panel's title; default: none.
        labels: the knowns' and the unknowns' legend texts (default ``MAGNITUDE_LABELS``).
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_magnitude_histogram
        >>> rng = np.random.default_rng(0)
        >>> ax = plot_magnitude_histogram((rng.normal(50, 5, 200), rng.normal(5, 2, 200)), bins=20)
        >>> ax.get_legend() is not None
        True
        >>> plt.close(ax.figure)
    """
    ax = panel_axes(ax)
    values = [np.asarray(v, dtype=np.float64).ravel() for v in magnitudes]
    finite = np.concatenate([v[np.isfinite(v)] for v in values])
    top = float(finite.max()) if finite.size else 1.0
    edges = np.linspace(0.0, top if top > 0 else 1.0, bins + 1)
    _histogram_pair(ax, values, labels, edges, density=True, log=False)
    ax.set_xlim(0, edges[-1])
    label_panel(ax, style.LABEL_MAGNITUDE, style.LABEL_DENSITY, title)
    if legend and ax.patches:
        ax.legend(fontsize=7, loc="upper right")
    return ax
