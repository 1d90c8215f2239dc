"""Figures of the paper, drawn from any run's stored outputs (``agnostophobia plot RUN``).

* :func:`plot_run`: every figure of a run directory (see :mod:`.run`).
* Per-panel functions that take plain arrays, for reuse by baselines and other
  experiments (see :mod:`.panels`): :func:`plot_features` (:mod:`.features`),
  :func:`plot_softmax_histogram`, :func:`plot_magnitude_histogram` (:mod:`.histograms`),
  :func:`plot_oscr`, :func:`plot_confidence_curves` (:mod:`.curves`).
* Fixed colours and names: :mod:`.style`.

Attributes are imported on first use, so ``agnostophobia --help`` does not load matplotlib.
"""
from __future__ import annotations

from agnostophobia._lazy import lazy_attributes

_EXPORTS = {
    "plot_run": "run", "draw_run": "run", "iter_run_figures": "run", "RunFigure": "run",
    "check_formats": "run", "PlotRequest": "request",
    "plot_features": "features", "DeepFeatures": "features", "Subsample": "features",
    "logit_weights": "features", "class_borders": "features", "subsample": "features",
    "subsample_note": "features",
    "plot_softmax_histogram": "histograms", "plot_magnitude_histogram": "histograms",
    "softmax_histogram_values": "histograms",
    "plot_oscr": "curves", "plot_confidence_curves": "curves", "CurveSeries": "curves",
    "oscr_series": "curves", "oscr_on_grid": "curves", "oscr_grid": "curves",
    "new_figure": "panels", "save_figure": "panels",
    "approach_color": "style", "approach_name": "style", "APPROACH_COLORS": "style",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
