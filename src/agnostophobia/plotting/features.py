"""Deep-feature plots of a 2-D feature model (paper Fig. 1, top): the knowns coloured by class,
the unknowns in black, the axes crossing at the origin and the class borders of the bias-free logit
layer as dashed rays from it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from agnostophobia._validation import int64_labels
from agnostophobia.plotting import style
from agnostophobia.plotting.panels import panel_axes

#: Deep-feature plots show at most this many knowns and this many unknowns.
DEFAULT_MAX_POINTS = 5000
#: ``gid`` of the artists of a deep-feature plot, to find them again (tests, post-processing).
BORDER_GID = "class-border"
ORIGIN_AXIS_GID = "origin-axis"
SUBSAMPLE_NOTE_GID = "subsample-note"


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


@dataclass(frozen=True)
class Subsample:
    """How many points of each kind a deep-feature plot shows at most, and the seed of the draw
    (:func:`subsample`): the knowns are drawn with ``seed``, the unknowns with ``seed + 1``.

    Args:
        max_points: at most this many knowns and this many unknowns (None: all).
        seed: the draw's random seed.

    Examples:
        >>> from agnostophobia.plotting import Subsample
        >>> shown = Subsample(max_points=4)
        >>> shown.indices(10), len(shown.indices(3))  # knowns: seed 0; at most 4 of them
        (array([2, 4, 5, 7]), 3)
    """

    max_points: Optional[int] = DEFAULT_MAX_POINTS
    seed: int = 0

    def indices(self, n: int, stream: int = 0) -> np.ndarray:
        """The points shown of ``n``.

        Args:
            n: how many points of this kind there are.
            stream: 0 for the knowns, 1 for the unknowns (drawn with ``seed + stream``).

        Returns:
            A sorted int64 NumPy array of at most ``max_points`` indices in ``0..n-1``.
        """
        return subsample(n, self.max_points, self.seed + stream)


@dataclass(frozen=True)
class DeepFeatures:
    """What a deep-feature plot shows of a 2-D feature model (paper Fig. 1, top): the deep features
    of the knowns with their classes, those of the unknowns, and the weights of the bias-free logit
    layer whose class borders separate them. Checked and converted on construction (float64
    features, int64 labels, unknowns ``(M, 2)``).

    Args:
        known_features: (N, 2) deep features of D_c.
        known_labels: (N,) their classes 0..C-1.
        unknown_features: (M, 2) deep features of unknown samples, or None.
        weights: (C', 2) logit weights (e.g. from :func:`logit_weights`; a background class is
            one more row), or None: no borders.
        num_classes: number of class colours; default ``max(label) + 1``.
        unknown_label: the unknowns' legend text.

    Raises:
        ValueError: features that are not (N, 2), or a number of labels other than N.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.plotting import DeepFeatures
        >>> features = DeepFeatures(np.eye(2), [0, 1], unknown_features=np.zeros(2))
        >>> features.num_classes, features.unknown_features.shape
        (2, (1, 2))
    """

    known_features: Any
    known_labels: Any
    unknown_features: Any = None
    weights: Any = None
    num_classes: Optional[int] = None
    unknown_label: str = "unknowns"

    def __post_init__(self):
        known = np.asarray(self.known_features, dtype=np.float64)
        labels = int64_labels(self.known_labels, "known_labels")
        if known.ndim != 2 or known.shape[1] != 2:
            raise ValueError(f"deep-feature plots need 2-D features, got shape {known.shape}")
        if len(labels) != len(known):
            raise ValueError(f"{len(labels)} labels for {len(known)} known features")
        unknown = np.empty((0, 2)) if self.unknown_features is None else self.unknown_features
        num_classes = self.num_classes if self.num_classes is not None else (labels.max() + 1 if labels.size else 0)
        object.__setattr__(self, "known_features", known)
        object.__setattr__(self, "known_labels", labels)
        object.__setattr__(self, "unknown_features", np.asarray(unknown, dtype=np.float64).reshape(-1, 2))
        object.__setattr__(self, "num_classes", int(num_classes))


def plot_features(features: DeepFeatures, *, ax: Optional[Axes] = None, shown: Subsample = Subsample(),
                  title: Optional[str] = None, legend: bool = True, point_size: float = 1.5) -> Axes:
    """Deep-feature plot of a 2-D feature model (paper Fig. 1, top).

    Knowns are coloured by class (one scatter per class, ``tab10``), unknowns drawn as black
    points on top (one scatter), the axes cross at the origin (two lines, ``gid``
    :data:`ORIGIN_AXIS_GID`), and when ``features.weights`` (C, 2) of the bias-free logit layer
    are given the class borders are drawn as dashed rays (one line each, ``gid``
    :data:`BORDER_GID`, see :func:`class_borders`). More than ``shown.max_points`` knowns or
    unknowns are subsampled (seeded) and a note above the panel says so (``gid``
    :data:`SUBSAMPLE_NOTE_GID`).

    Args:
        features: the knowns, the unknowns and the logit layer's weights (:class:`DeepFeatures`).
        ax: the axes to draw on; default: a new figure's.
        shown: how many points of each kind are drawn at most, and the subsample's seed.
        title: the panel's title; default: none.
        legend: draw a legend (one entry per class and the unknowns).
        point_size: the markers' size, in points squared.

    Returns:
        The axes.

    Examples:
        >>> import numpy as np
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import DeepFeatures, plot_features
        >>> rng = np.random.default_rng(0)
        >>> known_labels = np.repeat([0, 1, 2], 20)
        >>> angles = 2 * np.pi * known_labels / 3
        >>> known = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 5 + rng.normal(size=(60, 2))
        >>> ax = plot_features(DeepFeatures(known, known_labels, unknown_features=rng.normal(size=(20, 2))))
        >>> len(ax.collections)  # one scatter per class, one for the unknowns
        4
        >>> plt.close(ax.figure)
    """
    ax = panel_axes(ax, panel_size=(6.4, 4.6) if legend else (4.6, 4.6))
    known_idx = shown.indices(len(features.known_features))
    unknown_idx = shown.indices(len(features.unknown_features), stream=1)
    _scatter(ax, features, known_idx, unknown_idx, point_size)
    extent = _extent(features.known_features[known_idx], features.unknown_features[unknown_idx])
    if features.weights is not None:
        _draw_borders(ax, class_borders(features.weights), extent)
    _frame_at_origin(ax, extent)
    note = subsample_note(len(known_idx), len(features.known_features), len(unknown_idx),
                          len(features.unknown_features))
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


def _scatter(ax: Axes, features: DeepFeatures, known_idx: np.ndarray, unknown_idx: np.ndarray,
             point_size: float) -> None:
    """The shown knowns, one scatter per class in its colour, and the unknowns on top (black)."""
    shown_known, shown_labels = features.known_features[known_idx], features.known_labels[known_idx]
    shown_unknown = features.unknown_features[unknown_idx]
    colors = style.class_colors(features.num_classes)
    for c in range(features.num_classes):
        pts = shown_known[shown_labels == c]
        ax.scatter(pts[:, 0], pts[:, 1], s=point_size, color=colors[c], label=str(c),
                   linewidths=0, rasterized=True, zorder=2)
    if len(features.unknown_features):
        ax.scatter(shown_unknown[:, 0], shown_unknown[:, 1], s=point_size, color=style.UNKNOWN_POINT_COLOR,
                   label=features.unknown_label, linewidths=0, rasterized=True, zorder=3)


def _extent(shown_known: np.ndarray, shown_unknown: np.ndarray) -> float:
    """Half the side of the square panel: from what is shown, always including the origin."""
    shown = np.concatenate([shown_known, shown_unknown]) if len(shown_unknown) else shown_known
    extent = float(np.abs(shown).max()) * 1.05 if shown.size else 1.0
    return extent if np.isfinite(extent) and extent > 0 else 1.0


def _draw_borders(ax: Axes, angles: np.ndarray, extent: float) -> None:
    for angle in angles:
        r = 2 * extent
        # Grey dashes with white gaps (the paper's "dashed gray-white lines"), above the
        # knowns but below the unknowns, which must stay visible at the origin.
        ax.plot([0, r * math.cos(angle)], [0, r * math.sin(angle)], linestyle=(0, (4, 3)),
                linewidth=0.8, color=style.BORDER_COLOR, gapcolor="white", zorder=2.5,
                gid=BORDER_GID)


def _frame_at_origin(ax: Axes, extent: float) -> None:
    """Square limits, so that angles look right, and the axes crossing at the origin."""
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
