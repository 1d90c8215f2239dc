"""Curves over a threshold or a rate, one line per evaluation row: OSCR curves, CCR against the
FPR or the number of false positives on a logarithmic axis (paper Fig. 1d, Fig. 3c), and precision
or accuracy against the confidence threshold (paper Fig. 3b). Each line is a :class:`CurveSeries`;
its row name fixes its colour and line style (:mod:`.style`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import LogLocator

from agnostophobia.plotting import style
from agnostophobia.plotting.panels import label_panel, panel_axes


@dataclass
class CurveSeries:
    """One curve of an OSCR plot: ``y`` against ``x``, optionally with a band ``low``..``high``.

    ``name`` is the evaluation row (it fixes the colour and line style, see
    :mod:`.style`); ``label`` is the legend text (default: the row's display name).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import oscr_series, plot_oscr, new_figure
        >>> curve = (np.array([0.0, 0.25, 0.5, 1.0]), np.array([0.5, 0.75, 0.9, 0.9]))  # (fpr, ccr) of metrics.oscr
        >>> series = oscr_series("entropic", [curve], n_unknown=4)
        >>> series.name, series.seeds, series.low is None  # one seed: drawn exactly, no band
        ('entropic', 1, True)
        >>> figure, axes = new_figure()
        >>> ax = plot_oscr([series], ax=axes[0, 0])
        >>> len(ax.lines) >= 1, ax.get_xscale()
        (True, 'log')
    """

    name: str                 # the evaluation row: fixes the colour and line style
    x: np.ndarray             # FPRs (or false-positive counts), non-decreasing
    y: np.ndarray             # the CCR at each x
    low: Optional[np.ndarray] = None   # the band's lower edge at each x (None: no band)
    high: Optional[np.ndarray] = None  # the band's upper edge at each x
    label: Optional[str] = None        # the legend text (None: the row's display name)
    seeds: int = 1            # curves averaged into this one (named in the legend title)


def oscr_on_grid(fpr, ccr, grid) -> np.ndarray:
    """CCR of an OSCR curve at each ``grid`` value: the best CCR with FPR ≤ x (a step function).

    ``fpr``, ``ccr`` are the points of ``metrics.oscr`` (FPR non-decreasing); works the same
    for false-positive counts. Where no point has FPR ≤ x the CCR is 0 (reject everything).
    A relative tolerance of 1e-9 absorbs rounding between ``k / n`` and a grid value.

    Args:
        fpr: the curve's FPRs (or false-positive counts), non-decreasing.
        ccr: the CCR at each of them.
        grid: where to read the curve (e.g. :func:`oscr_grid`).

    Returns:
        A float64 NumPy array of CCRs, of ``grid``'s shape.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import oscr_on_grid
        >>> fpr, ccr = np.array([0.0, 0.1, 0.5, 1.0]), np.array([0.2, 0.6, 0.8, 0.9])
        >>> oscr_on_grid(fpr, ccr, grid=np.array([0.05, 0.1, 0.3, 1.0]))  # the best CCR with FPR <= x
        array([0.2, 0.6, 0.6, 0.9])
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    ccr = np.asarray(ccr, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    best = np.maximum.accumulate(ccr)  # already monotone for metrics.oscr; cheap insurance
    idx = np.searchsorted(fpr, grid * (1 + 1e-9), side="right") - 1
    return np.where(idx >= 0, best[np.clip(idx, 0, None)], 0.0)


def oscr_grid(n_unknown: int, counts: bool = False, points: int = 400) -> np.ndarray:
    """A log-spaced x grid common to several OSCR curves: from 1/n to 1 for rates, from 1 to n
    (integers) for counts.

    Args:
        n_unknown: the number n of unknown samples.
        counts: a grid of false-positive counts instead of rates.
        points: how many points (fewer for counts, where rounding merges them).

    Returns:
        A float64 NumPy array of at most ``points`` increasing values.

    Examples:
        >>> from agnostophobia.plotting import oscr_grid
        >>> grid = oscr_grid(n_unknown=100, points=5)
        >>> grid.round(4)  # from 1/100 to 1, log-spaced
        array([0.01  , 0.0316, 0.1   , 0.3162, 1.    ])
    """
    n_unknown = max(int(n_unknown), 1)
    if counts:
        return np.unique(np.round(np.geomspace(1, n_unknown, points)))
    grid = np.geomspace(1.0 / n_unknown, 1.0, points)
    grid[0], grid[-1] = 1.0 / n_unknown, 1.0
    return grid


def oscr_series(name: str, curves: Sequence[Tuple[np.ndarray, np.ndarray]], n_unknown: int,
                counts: bool = False, label: Optional[str] = None, points: int = 400) -> CurveSeries:
    """An OSCR :class:`CurveSeries` from one or several ``(fpr, ccr)`` curves (one per seed).

    One curve: drawn exactly, one step per distinct FPR from ``1/n_unknown`` (or 1 false
    positive) up. Several: the mean of the seeds' step functions on a common log-spaced
    grid (:func:`oscr_grid`), with a band of ± one standard deviation over seeds (clipped to
    [0, 1]); :func:`plot_oscr` names the number of seeds in the legend title.

    Args:
        name: the evaluation row (its colour, line style and display name).
        curves: one ``(fpr, ccr)`` curve per seed, as :func:`agnostophobia.metrics.oscr` gives them.
        n_unknown: the number of unknown samples (where a curve's steps start).
        counts: the curves' x is a number of false positives instead of a rate.
        label: the legend text; default: the row's display name.
        points: points of the common grid where several curves are averaged.

    Returns:
        A :class:`CurveSeries`: its x and y, the band where several seeds are averaged, and the
        row's style.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import oscr_series
        >>> first = (np.array([0.0, 0.1, 1.0]), np.array([0.5, 0.7, 0.9]))  # (fpr, ccr) of one seed
        >>> second = (np.array([0.0, 0.2, 1.0]), np.array([0.4, 0.8, 0.9]))
        >>> series = oscr_series("entropic", [first, second], n_unknown=10, points=4)
        >>> series.x.round(4), series.y.round(4), series.seeds  # the mean over the seeds, on a common grid
        (array([0.1   , 0.2154, 0.4642, 1.    ]), array([0.55, 0.75, 0.75, 0.9 ]), 2)
    """
    if not curves:
        raise ValueError(f"no OSCR curves for {name!r}")
    if len(curves) == 1:
        fpr, ccr = (np.asarray(a, dtype=np.float64) for a in curves[0])
        start = 1.0 if counts else 1.0 / max(n_unknown, 1)
        x = np.unique(np.concatenate([[start], fpr[fpr >= start * (1 - 1e-9)]]))
        return CurveSeries(name, x, oscr_on_grid(fpr, ccr, x), label=label)
    grid = oscr_grid(n_unknown, counts, points)
    ys = np.stack([oscr_on_grid(f, c, grid) for f, c in curves])
    mean, std = ys.mean(axis=0), ys.std(axis=0)
    return CurveSeries(name, grid, mean, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1),
                       label=label, seeds=len(curves))


def _as_series(item) -> CurveSeries:
    if isinstance(item, CurveSeries):
        return item
    name, x, y, *rest = item
    return CurveSeries(name, np.asarray(x), np.asarray(y), *rest)


def plot_oscr(series: Iterable[Union[CurveSeries, Tuple]], *, ax: Optional[Axes] = None,
              counts: bool = False, title: Optional[str] = None, xlim: Optional[Tuple[float, float]] = None,
              legend: bool = True) -> Axes:
    """OSCR curves, CCR against FPR (or the number of false positives), logarithmic x axis.

    Args:
        series: :class:`CurveSeries`, or tuples ``(row name, x, y[, low, high])``; draw one
            step line each (``where="post"``: the CCR at x holds until the next point),
            plus a filled band where ``low``/``high`` are given.
        ax: the axes to draw on; default: a new figure's.
        counts: x is a number of false positives instead of a rate (axis label only).
        title: the panel's title; default: none.
        xlim: default: from the smallest positive x to the largest x drawn.
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.metrics import oscr
        >>> from agnostophobia.plotting import oscr_series, plot_oscr
        >>> rng = np.random.default_rng(0)
        >>> labels = np.repeat([0, 1, -1], 50)
        >>> scores = rng.normal(size=(150, 2))
        >>> scores[:50, 0] += 2.0  # each known class scores high in its own column
        >>> scores[50:100, 1] += 2.0
        >>> curve = oscr(scores, labels)
        >>> ax = plot_oscr([oscr_series("softmax", [(curve.fpr, curve.ccr)], n_unknown=50)])
        >>> ax.get_xscale(), ax.get_ylabel()
        ('log', 'CCR (fraction of knowns correctly classified)')
        >>> plt.close(ax.figure)
    """
    ax = panel_axes(ax, panel_size=(7.2, 4.2))
    xs, seeds = [], set()
    for item in map(_as_series, series):
        x = np.asarray(item.x, dtype=np.float64)
        keep = x > 0
        x = x[keep]
        if x.size == 0:
            continue
        xs.append(x)
        color, ls = style.approach_color(item.name), style.approach_linestyle(item.name)
        ax.step(x, np.asarray(item.y)[keep], where="post", color=color, linestyle=ls, linewidth=1.6,
                label=item.label or style.approach_name(item.name), zorder=3)
        if item.low is not None and item.high is not None:
            seeds.add(item.seeds)
            ax.fill_between(x, np.asarray(item.low)[keep], np.asarray(item.high)[keep], step="post",
                            color=color, alpha=0.18, linewidth=0, zorder=2)
    ax.set_xscale("log")
    if xs:
        lo = min(float(x.min()) for x in xs)
        hi = max(float(x.max()) for x in xs)
        ax.set_xlim(xlim or (lo, hi if hi > lo else lo * 10))
    elif xlim:
        ax.set_xlim(xlim)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    label_panel(ax, style.LABEL_FP_COUNT if counts else style.LABEL_FPR, style.LABEL_CCR, title)
    if legend and ax.lines:
        # Outside the axes: inside, it would hide some curve wherever it went.
        band = None
        if seeds:
            n = seeds.pop() if len(seeds) == 1 else None
            band = f"mean over {n} seeds,\nshaded: ± 1 std" if n else "mean over seeds,\nshaded: ± 1 std"
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False,
                  title=band, title_fontsize=8, alignment="left")
    return ax


# ------------------------------------------------------- confidence curves (Fig. 3b)

def _as_confidence_series(item) -> CurveSeries:
    if isinstance(item, CurveSeries):
        return item
    label, thresholds, values = item
    return CurveSeries(label, thresholds, values)


def plot_confidence_curves(curves: Iterable[Union[CurveSeries, Tuple[str, Sequence[float], Sequence[float]]]], *,
                           ax: Optional[Axes] = None, ylabel: str = "precision",
                           xlabel: str = style.LABEL_THRESHOLD, title: Optional[str] = None,
                           legend: bool = True) -> Axes:
    """Precision (or accuracy) against the confidence threshold, one line per curve (paper Fig. 3b).

    Args:
        curves: :class:`CurveSeries` (``x``: the thresholds, ``y``: the values), or tuples
            ``(label, thresholds, values)``, e.g. from ``metrics.precision_vs_confidence`` (NaN
            values, where nothing is accepted, leave a gap). A curve's ``name`` (a tuple's label)
            that is an approach / row name gets its fixed colour and display name; other names
            get a stable fallback colour. Where the legend text is free text, give it as the
            series' ``label`` and the style key as its ``name`` (e.g. ``"ensemble"`` for a curve
            labelled "MLP ensemble (squared)").
        ax: the axes to draw on; default: a new figure's.
        ylabel: the y axis's label.
        xlabel: the x axis's label.
        title: the panel's title; default: none.
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_confidence_curves
        >>> ax = plot_confidence_curves([("entropic", [0.1, 0.5, 0.9], [0.6, 0.8, 0.95])])
        >>> [line.get_label() for line in ax.get_lines()], ax.get_xlabel()
        (['Entropic Open-Set'], 'confidence threshold θ')
        >>> plt.close(ax.figure)
    """
    ax = panel_axes(ax)
    for item in map(_as_confidence_series, curves):
        ax.plot(np.asarray(item.x, dtype=np.float64), np.asarray(item.y, dtype=np.float64),
                color=style.approach_color(item.name), linestyle=style.approach_linestyle(item.name),
                linewidth=1.6, label=style.approach_name(item.label or item.name))
    ax.set_ylim(0, 1.01)
    ax.grid(True, linewidth=0.5, alpha=0.5)
    label_panel(ax, xlabel, ylabel, title)
    if legend and ax.lines:
        ax.legend(fontsize=8, loc="lower right")
    return ax
