"""One panel per function, drawn from plain arrays (no run directory needed).

Every ``plot_*`` function draws into ``ax`` when one is given, otherwise into a new
figure from :func:`new_figure`, and returns the ``Axes`` (its figure is ``ax.figure``),
so callers can compose panels and tests can count what was drawn.

Only matplotlib's object-oriented API is used (``matplotlib.figure.Figure``, never
``pyplot``): figures are not registered in any global state, need no backend switch
and are freed when they go out of scope. Saving goes through the Agg renderer (PNG)
or the vector backends (PDF, SVG).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator

from agnostophobia._atomic import atomic_write
from agnostophobia._validation import int64_labels
from agnostophobia.plotting import style

#: Deep-feature plots show at most this many knowns and this many unknowns.
DEFAULT_MAX_POINTS = 5000
#: ``gid`` of the artists of a deep-feature plot, to find them again (tests, post-processing).
BORDER_GID = "class-border"
ORIGIN_AXIS_GID = "origin-axis"
SUBSAMPLE_NOTE_GID = "subsample-note"
#: Resolution of figures saved as raster (and of rasterised scatter layers in PDF/SVG).
DPI = 150


# --------------------------------------------------------------------------- figures

def new_figure(ncols: int = 1, nrows: int = 1, panel_size: Tuple[float, float] = (4.2, 3.6),
               **subplot_kw) -> Tuple[Figure, np.ndarray]:
    """A constrained-layout figure with ``nrows x ncols`` axes (always a 2-D array).

    Args:
        ncols: panels per row.
        nrows: rows of panels.
        panel_size: each panel's (width, height) in inches.
        **subplot_kw: keywords of every axes (``Figure.subplots``'s ``subplot_kw``).

    Returns:
        ``(figure, axes)``: the matplotlib Figure and a (nrows, ncols) object array of Axes.

    Examples:
        >>> from agnostophobia.plotting import new_figure
        >>> import matplotlib.pyplot as plt
        >>> fig, axes = new_figure(ncols=2)
        >>> axes.shape
        (1, 2)
        >>> plt.close(fig)
    """
    fig = Figure(figsize=(panel_size[0] * ncols, panel_size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, subplot_kw=subplot_kw or None)
    return fig, axes


def _axes(ax: Optional[Axes], panel_size=(4.6, 3.8)) -> Axes:
    if ax is not None:
        return ax
    return new_figure(panel_size=panel_size)[1][0, 0]


def save_figure(fig: Figure, stem: Union[str, Path], formats: Sequence[str] = ("png",),
                write: Callable[[Path, Callable[[str], None]], None] = atomic_write) -> List[Path]:
    """Write ``stem.<format>`` for each format.

    Args:
        fig: the figure.
        stem: the files' path without the extension; its folder is made if missing.
        formats: the file formats, each one file.
        write: writes a file through a temporary one, ``write(path, fill)`` (default: atomically,
            ``_atomic.atomic_write``; a run's figures through the run's writer).

    Returns:
        The paths written.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import new_figure, save_figure
        >>> fig, axes = new_figure()
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     [path.name for path in save_figure(fig, Path(folder) / "oscr", formats=["png", "svg"])]
        ...
        ['oscr.png', 'oscr.svg']
        >>> plt.close(fig)
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        # metadata=None keeps matplotlib's defaults; a fixed date would need per-format keys.
        write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=DPI))  # a killed run leaves no half figure
        paths.append(path)
    return paths


def supported_formats() -> List[str]:
    """File formats matplotlib can write here (``png``, ``pdf``, ``svg``, ...)."""
    return sorted(Figure().canvas.get_supported_filetypes())


# --------------------------------------------------------------------- deep features

def logit_weights(features, logits) -> Tuple[np.ndarray, float]:
    """Least-squares weights ``W`` (C, D) of a bias-free logit layer, ``logits ≈ features @ W.T``.

    The relative residual ``‖features @ W.T - logits‖ / ‖logits‖`` is about 1e-7 for float32
    outputs of a bias-free layer, large when the layer has a bias or is not linear in ``F``.

    Args:
        features: (N, D) deep features F.
        logits: (N, C) the logits computed from them.

    Returns:
        ``(W, relative_residual)``: the (C, D) float64 weights and a float.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import logit_weights
        >>> rng = np.random.default_rng(0)
        >>> features = rng.normal(size=(50, 2))
        >>> true_weights = np.array([[2.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
        >>> weights, residual = logit_weights(features, features @ true_weights.T)
        >>> np.allclose(weights, true_weights), round(residual, 4)  # recovered: no bias, no noise
        (True, 0.0)
    """
    features = np.asarray(features, dtype=np.float64)
    logits = np.asarray(logits, dtype=np.float64)
    if features.ndim != 2 or logits.ndim != 2 or len(features) != len(logits):
        raise ValueError(f"features (N, D) and logits (N, C) must have the same N, got "
                         f"{features.shape} and {logits.shape}")
    solution, *_ = np.linalg.lstsq(features, logits, rcond=None)
    norm = np.linalg.norm(logits)
    residual = float(np.linalg.norm(features @ solution - logits) / norm) if norm > 0 else 0.0
    return solution.T, residual


def class_borders(weights) -> np.ndarray:
    """Angles (radians, in [0, 2π), increasing) of the class borders of a 2-D bias-free logit layer.

    With ``l_c = W_c · F`` the predicted class of ``F = r (cos φ, sin φ)``, ``r > 0``, depends
    on ``φ`` only, so the borders -- where the two largest logits, and hence the softmax
    scores of neighbouring classes, are equal -- are rays from the origin. A border between
    classes ``a`` and ``b`` lies where ``(W_a - W_b) · (cos φ, sin φ) = 0``; every such
    angle is a candidate, and it is a border when the winning class differs on its two
    sides (evaluated half-way to the neighbouring candidates). Exact, no angle grid.

    Args:
        weights: (C, 2) weights of the logit layer (e.g. from :func:`logit_weights`).

    Returns:
        A (K,) float64 NumPy array of angles (K = C for C classes spread around the origin;
        empty where one class wins everywhere).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import class_borders
        >>> weights = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # three classes, 2-D features
        >>> np.degrees(class_borders(weights)).round(1)
        array([ 45., 135., 270.])
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != 2:
        raise ValueError(f"weights must have shape (C, 2), got {w.shape}")
    candidates = []
    for a in range(len(w)):
        for b in range(a + 1, len(w)):
            d = w[a] - w[b]
            if np.hypot(*d) <= 1e-12 * max(np.abs(w).max(), 1e-300):
                continue  # identical weight vectors never separate
            t = math.atan2(d[0], -d[1])  # direction perpendicular to d
            candidates += [t, t + math.pi]
    if not candidates:
        return np.empty(0)
    cand = np.unique(np.mod(candidates, 2 * math.pi))
    cand = cand[np.append(True, np.diff(cand) > 1e-12)]
    if len(cand) == 1:
        return np.empty(0)  # cannot happen for real pairs (they come in opposite pairs)
    nxt = np.append(cand[1:], cand[0] + 2 * math.pi)
    mids = (cand + nxt) / 2                         # mids[i] lies between cand[i] and cand[i+1]
    winners = np.argmax(np.stack([np.cos(mids), np.sin(mids)], 1) @ w.T, axis=1)
    before = np.roll(winners, 1)                    # the sector ending at cand[i]
    return cand[winners != before]


def subsample(n: int, max_points: Optional[int], seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``max_points`` of ``n`` samples, drawn without replacement (seeded).

    Args:
        n: how many samples there are.
        max_points: how many to keep at most (None: all).
        seed: the draw's random seed.

    Returns:
        A sorted int64 NumPy array of at most ``max_points`` indices in ``0..n-1``.

    Examples:
        >>> from agnostophobia.plotting import subsample
        >>> subsample(10, max_points=4), len(subsample(10, max_points=None))
        (array([2, 4, 5, 7]), 10)
    """
    if max_points is None or n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def subsample_note(shown_known: int, total_known: int, shown_unknown: int = 0,
                   total_unknown: int = 0) -> Optional[str]:
    """``"showing 5,000 of 10,000 knowns (random subsample)"``, or None when all are shown.

    With both kinds subsampled, the unknowns go on a second line (keeps panels narrow).

    Args:
        shown_known: knowns drawn.
        total_known: knowns there are.
        shown_unknown: unknowns drawn.
        total_unknown: unknowns there are.

    Returns:
        The note (one or two lines), or None.

    Examples:
        >>> from agnostophobia.plotting import subsample_note
        >>> subsample_note(5000, 10000), subsample_note(100, 100)
        ('showing 5,000 of 10,000 knowns (random subsample)', None)
    """
    parts = []
    if shown_known < total_known:
        parts.append(f"{shown_known:,} of {total_known:,} knowns")
    if shown_unknown < total_unknown:
        parts.append(f"{shown_unknown:,} of {total_unknown:,} unknowns")
    return "showing " + ",\n".join(parts) + " (random subsample)" if parts else None


def plot_features(known_features, known_labels, unknown_features=None, *, weights=None,
                  ax: Optional[Axes] = None, num_classes: Optional[int] = None,
                  unknown_label: str = "unknowns", max_points: Optional[int] = DEFAULT_MAX_POINTS,
                  seed: int = 0, title: Optional[str] = None, legend: bool = True,
                  point_size: float = 1.5) -> Axes:
    """Deep-feature plot of a 2-D feature model (paper Fig. 1, top).

    Knowns are coloured by class (one scatter per class, ``tab10``), unknowns drawn as black
    points on top (one scatter), the axes cross at the origin (two lines, ``gid``
    :data:`ORIGIN_AXIS_GID`), and when ``weights`` (C, 2) of the bias-free logit layer are
    given the class borders are drawn as dashed rays (one line each, ``gid``
    :data:`BORDER_GID`, see :func:`class_borders`; a background class is one more row of
    ``weights``). More than ``max_points`` knowns or unknowns are subsampled (seeded) and a
    note above the panel says so (``gid`` :data:`SUBSAMPLE_NOTE_GID`).

    Args:
        known_features: (N, 2) deep features of D_c.
        known_labels: (N,) their classes 0..C-1.
        unknown_features: (M, 2) deep features of unknown samples, or None.
        weights: (C', 2) logit weights (e.g. from :func:`logit_weights`), or None: no borders.
        ax: the axes to draw on; default: a new figure's.
        num_classes: number of class colours; default ``max(label) + 1``.
        unknown_label: the unknowns' legend text.
        max_points: draw at most this many knowns and this many unknowns (None: all).
        seed: the subsample's random seed.
        title: the panel's title; default: none.
        legend: draw a legend (one entry per class and the unknowns).
        point_size: the markers' size, in points squared.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_features
        >>> rng = np.random.default_rng(0)
        >>> known_labels = np.repeat([0, 1, 2], 20)
        >>> angles = 2 * np.pi * known_labels / 3
        >>> known = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 5 + rng.normal(size=(60, 2))
        >>> ax = plot_features(known, known_labels, unknown_features=rng.normal(size=(20, 2)))
        >>> len(ax.collections)  # one scatter per class, one for the unknowns
        4
        >>> plt.close(ax.figure)
    """
    ax = _axes(ax, panel_size=(6.4, 4.6) if legend else (4.6, 4.6))
    known_features = np.asarray(known_features, dtype=np.float64)
    known_labels = int64_labels(known_labels, "known_labels")
    if known_features.ndim != 2 or known_features.shape[1] != 2:
        raise ValueError(f"deep-feature plots need 2-D features, got shape {known_features.shape}")
    if len(known_labels) != len(known_features):
        raise ValueError(f"{len(known_labels)} labels for {len(known_features)} known features")
    if unknown_features is None:
        unknown_features = np.empty((0, 2))
    unknown_features = np.asarray(unknown_features, dtype=np.float64).reshape(-1, 2)
    num_classes = int(num_classes if num_classes is not None else
                      (known_labels.max() + 1 if known_labels.size else 0))

    k_idx = subsample(len(known_features), max_points, seed)
    u_idx = subsample(len(unknown_features), max_points, seed + 1)
    shown_k, shown_u = known_features[k_idx], unknown_features[u_idx]
    shown_labels = known_labels[k_idx]

    colors = style.class_colors(num_classes)
    for c in range(num_classes):
        pts = shown_k[shown_labels == c]
        ax.scatter(pts[:, 0], pts[:, 1], s=point_size, color=colors[c], label=str(c),
                   linewidths=0, rasterized=True, zorder=2)
    if len(unknown_features):
        ax.scatter(shown_u[:, 0], shown_u[:, 1], s=point_size, color=style.UNKNOWN_POINT_COLOR,
                   label=unknown_label, linewidths=0, rasterized=True, zorder=3)

    # Limits from what is shown, always including the origin, square so angles look right.
    shown = np.concatenate([shown_k, shown_u]) if len(shown_u) else shown_k
    extent = float(np.abs(shown).max()) * 1.05 if shown.size else 1.0
    extent = extent if np.isfinite(extent) and extent > 0 else 1.0

    if weights is not None:
        for angle in class_borders(weights):
            r = 2 * extent
            # Grey dashes with white gaps (the paper's "dashed gray-white lines"), above the
            # knowns but below the unknowns, which must stay visible at the origin.
            ax.plot([0, r * math.cos(angle)], [0, r * math.sin(angle)], linestyle=(0, (4, 3)),
                    linewidth=0.8, color=style.BORDER_COLOR, gapcolor="white", zorder=2.5,
                    gid=BORDER_GID)

    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal", adjustable="box")
    # Axes crossing at the origin, drawn as lines so that the tick labels stay on the frame,
    # readable, instead of under the points.
    for horizontal in (True, False):
        line = ax.axhline if horizontal else ax.axvline
        line(0, color="black", linewidth=0.8, zorder=1, gid=ORIGIN_AXIS_GID)
    ax.xaxis.set_major_locator(MaxNLocator(5, symmetric=True))
    ax.yaxis.set_major_locator(MaxNLocator(5, symmetric=True))
    ax.tick_params(labelsize=7, direction="in", length=3)
    ax.set_xlabel("F₁ (deep feature 1)", fontsize=8, labelpad=1)
    ax.set_ylabel("F₂ (deep feature 2)", fontsize=8, labelpad=1)

    note = subsample_note(len(k_idx), len(known_features), len(u_idx), len(unknown_features))
    if note:
        ax.annotate(note, xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=6.5, color="0.3",
                    gid=SUBSAMPLE_NOTE_GID)
    if title:
        ax.set_title(title, fontsize=10, pad=4 + 8 * (note.count("\n") + 1) if note else 6)
    if legend:
        ax.legend(fontsize=7, markerscale=4, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, borderaxespad=0, handletextpad=0.2)
    return ax


# ------------------------------------------------------------------------ histograms

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


def _histogram_pair(ax: Axes, known, unknown, bins, known_label, unknown_label, density, log):
    for values, color, label in ((known, style.KNOWN_COLOR, known_label),
                                 (unknown, style.UNKNOWN_COLOR, unknown_label)):
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        ax.hist(values, bins=bins, density=density, log=log, histtype="stepfilled", alpha=0.45,
                facecolor=color, edgecolor=color, linewidth=1.2, label=f"{label} (n={values.size:,})")


def plot_softmax_histogram(known_values, unknown_values, *, ax: Optional[Axes] = None, bins: int = 50,
                           title: Optional[str] = None, known_label: str = "knowns (D_c): correct class",
                           unknown_label: str = "unknowns: max known class", legend: bool = True) -> Axes:
    """Histogram of softmax probabilities with a logarithmic count axis (paper Fig. 1, bottom).

    ``known_values`` / ``unknown_values`` are 1-D probabilities, e.g. from
    :func:`softmax_histogram_values`. Draws one filled step histogram (one patch) per
    non-empty sample.

    Args:
        known_values: 1-D softmax probabilities of the known samples' correct class.
        unknown_values: 1-D highest known-class probabilities of the unknown samples.
        ax: the axes to draw on; default: a new figure's.
        bins: the number of bins over [0, 1].
        title: the panel's title; default: none.
        known_label: the knowns' legend text.
        unknown_label: the unknowns' legend text.
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_softmax_histogram
        >>> rng = np.random.default_rng(0)
        >>> ax = plot_softmax_histogram(rng.uniform(0.8, 1.0, 100), rng.uniform(0.3, 1.0, 100), bins=10)
        >>> ax.get_yscale()  # the counts on a log axis
        'log'
        >>> plt.close(ax.figure)
    """
    ax = _axes(ax)
    edges = np.linspace(0.0, 1.0, bins + 1)
    _histogram_pair(ax, known_values, unknown_values, edges, known_label, unknown_label,
                    density=False, log=True)
    ax.set_xlim(0, 1)
    if ax.patches:
        ax.set_ylim(bottom=0.5)  # same floor in every panel; a single count stays visible
    ax.set_xlabel(style.LABEL_PROBABILITY)
    ax.set_ylabel(style.LABEL_COUNT_LOG)
    if title:
        ax.set_title(title, fontsize=10)
    if legend and ax.patches:
        ax.legend(fontsize=7, loc="upper center")
    return ax


def plot_magnitude_histogram(known_magnitudes, unknown_magnitudes, *, ax: Optional[Axes] = None,
                             bins: int = 60, title: Optional[str] = None,
                             known_label: str = "knowns (D_c)", unknown_label: str = "unknowns",
                             legend: bool = True) -> Axes:
    """Normalised histograms (density) of deep-feature magnitudes ‖F‖ (paper Fig. 2).

    Both samples share the bin edges (0 to the largest magnitude), so the areas compare.

    Args:
        known_magnitudes: 1-D magnitudes of the known samples' deep features.
        unknown_magnitudes: 1-D magnitudes of the unknown samples' deep features.
        ax: the axes to draw on; default: a new figure's.
        bins: the number of bins.
        title: the panel's title; default: none.
        known_label: the knowns' legend text.
        unknown_label: the unknowns' legend text.
        legend: draw a legend.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import plot_magnitude_histogram
        >>> rng = np.random.default_rng(0)
        >>> ax = plot_magnitude_histogram(rng.normal(50, 5, 200), rng.normal(5, 2, 200), bins=20)
        >>> ax.get_legend() is not None
        True
        >>> plt.close(ax.figure)
    """
    ax = _axes(ax)
    values = [np.asarray(v, dtype=np.float64).ravel() for v in (known_magnitudes, unknown_magnitudes)]
    finite = np.concatenate([v[np.isfinite(v)] for v in values])
    top = float(finite.max()) if finite.size else 1.0
    edges = np.linspace(0.0, top if top > 0 else 1.0, bins + 1)
    _histogram_pair(ax, values[0], values[1], edges, known_label, unknown_label, density=True, log=False)
    ax.set_xlim(0, edges[-1])
    ax.set_xlabel(style.LABEL_MAGNITUDE)
    ax.set_ylabel(style.LABEL_DENSITY)
    if title:
        ax.set_title(title, fontsize=10)
    if legend and ax.patches:
        ax.legend(fontsize=7, loc="upper right")
    return ax


# ------------------------------------------------------------------------------ OSCR

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
    ax = _axes(ax, panel_size=(7.2, 4.2))
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
    ax.set_xlabel(style.LABEL_FP_COUNT if counts else style.LABEL_FPR)
    ax.set_ylabel(style.LABEL_CCR)
    if title:
        ax.set_title(title, fontsize=10)
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

def plot_confidence_curves(curves: Iterable[Tuple[str, Sequence[float], Sequence[float]]], *,
                           ax: Optional[Axes] = None, ylabel: str = "precision",
                           xlabel: str = style.LABEL_THRESHOLD, title: Optional[str] = None,
                           names: Optional[Sequence[str]] = None, legend: bool = True) -> Axes:
    """Precision (or accuracy) against the confidence threshold, one line per curve (paper Fig. 3b).

    Args:
        curves: ``(label, thresholds, values)`` each, e.g. from
            ``metrics.precision_vs_confidence`` (NaN values, where nothing is accepted, leave
            a gap). A label that is an approach / row name gets its fixed colour and display
            name; other labels get a stable fallback colour.
        names: optional style keys aligned with ``curves`` when the labels are free text
            (e.g. ``"ensemble"`` for a curve labelled "MLP ensemble (squared)").
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
    ax = _axes(ax)
    for i, (label, thresholds, values) in enumerate(curves):
        key = names[i] if names is not None else label
        ax.plot(np.asarray(thresholds, dtype=np.float64), np.asarray(values, dtype=np.float64),
                color=style.approach_color(key), linestyle=style.approach_linestyle(key), linewidth=1.6,
                label=style.approach_name(label))
    ax.set_ylim(0, 1.01)
    ax.grid(True, linewidth=0.5, alpha=0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if legend and ax.lines:
        ax.legend(fontsize=8, loc="lower right")
    return ax

