"""What every panel shares: the figure it is drawn into, its axis labels and title, and saving it.

One panel per function, drawn from plain arrays (no run directory needed), one module per kind
of panel: deep features (:mod:`.features`, paper Fig. 1 top), histograms (:mod:`.histograms`,
Fig. 1 bottom and Fig. 2) and curves (:mod:`.curves`, OSCR and the confidence curves of
Fig. 3b). Every ``plot_*`` function draws into ``ax`` when one is given, otherwise into a new
figure from :func:`new_figure`, and returns the ``Axes`` (its figure is ``ax.figure``), so
callers can compose panels and tests can count what was drawn.

Only matplotlib's object-oriented API is used (``matplotlib.figure.Figure``, never
``pyplot``): figures are not registered in any global state, need no backend switch
and are freed when they go out of scope. Saving goes through the Agg renderer (PNG)
or the vector backends (PDF, SVG).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from agnostophobia._atomic import atomic_write

#: Resolution of figures saved as raster (and of rasterised scatter layers in PDF/SVG).
DPI = 150


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


def panel_axes(ax: Optional[Axes], panel_size=(4.6, 3.8)) -> Axes:
    """``ax``, or the one axes of a new figure with panels of ``panel_size`` inches."""
    if ax is not None:
        return ax
    return new_figure(panel_size=panel_size)[1][0, 0]


def label_panel(ax: Axes, xlabel: str, ylabel: str, title: Optional[str]) -> None:
    """Name a panel's axes, and title it where ``title`` is given (every panel's title at one size)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)


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

