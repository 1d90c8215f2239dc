"""Figures that compare evaluation rows on one unknown set, drawn from their scores: the
precision and the accuracy of the accepted samples against the confidence threshold (the
curves the paper argues against, Fig. 3b) and the OSCR curves (Fig. 3c)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from matplotlib.figure import Figure

from agnostophobia.metrics import oscr
from agnostophobia.metrics.ood import CONFIDENCE_GRID, mean_confidence_curves
from agnostophobia.plotting.curves import CurveSeries, oscr_series, plot_confidence_curves, plot_oscr
from agnostophobia.plotting.panels import new_figure, save_figure


@dataclass
class ComparedRow:
    """One row to compare: ``name`` picks its colour and line style, ``label`` is its legend
    text, ``scores`` holds one ``(scores (N, C), labels (N,))`` pair per seed."""

    name: str
    label: str
    scores: List[Tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Comparison:
    """Rows compared on one unknown set, as the figures show them.

    ``unknowns`` is the set's title; ``underlay`` names a row whose OSCR curve is expected to
    coincide with another's (e.g. a monotonic rescaling of its scores): it is drawn wide and pale
    beneath, so both show; ``note`` ends every figure title (e.g. a smoke budget's caveat).
    """

    rows: Sequence[ComparedRow]
    unknowns: str
    underlay: Optional[str] = None
    note: str = ""

    def ordered(self) -> List[ComparedRow]:
        """The rows, the underlay first (drawn beneath the rest)."""
        return sorted(self.rows, key=lambda r: r.name != self.underlay)


def comparison_figures(comparison: Comparison, out_dir: Path, *, stems=("confidence", "oscr"),
                       titles=("Precision and accuracy vs confidence threshold", "OSCR curves"),
                       relative_to: Optional[Path] = None, formats: Sequence[str] = ("png",)) -> Dict[str, List[str]]:
    """Write the confidence-curve figure and the OSCR figure; ``{title: [paths]}``.

    Paths are relative to ``relative_to`` when given.
    """
    out_dir = Path(out_dir)
    paths: Dict[str, List[str]] = {}
    for draw, stem, title in zip((confidence_figure, oscr_figure), stems, titles):
        written = save_figure(draw(comparison, title), out_dir / stem, formats)
        paths[title] = [str(p.relative_to(relative_to)) if relative_to else str(p) for p in written]
    return paths


def confidence_figure(comparison: Comparison, title: str) -> Figure:
    """Precision and accuracy against the confidence threshold, one panel each (Fig. 3b)."""
    rows, unknowns = comparison.ordered(), comparison.unknowns
    fig, axes = new_figure(ncols=2, panel_size=(4.8, 3.9))
    curves = {row.name: mean_confidence_curves(row.scores, CONFIDENCE_GRID) for row in rows}
    for ax, kind in zip(axes[0], ("precision", "accuracy")):
        plot_confidence_curves([CurveSeries(row.name, CONFIDENCE_GRID, curves[row.name][kind], label=row.label)
                                for row in rows], ax=ax, ylabel=f"{kind} (knowns + {unknowns})",
                               title=f"{kind.capitalize()} vs confidence")
        ax.set_xlim(0, 1)
    fig.suptitle(f"{title}: unknowns {unknowns}{comparison.note}", fontsize=10)
    return fig


def oscr_figure(comparison: Comparison, title: str) -> Figure:
    """The rows' OSCR curves (Fig. 3c), the underlay wide and pale beneath the rest."""
    rows, underlay = comparison.ordered(), comparison.underlay
    fig, axes = new_figure(panel_size=(7.4, 4.2))
    ax = axes[0, 0]
    series = []
    for row in rows:
        fprs = [oscr(scores, labels) for scores, labels in row.scores]
        n_unknown = max(int((labels < 0).sum()) for _, labels in row.scores)
        label = row.label + (" (identical)" if row.name == underlay else "")
        series.append(oscr_series(row.name, [(c.fpr, c.ccr) for c in fprs], n_unknown, label=label))
    plot_oscr(series, ax=ax, title=f"{title}: unknowns {comparison.unknowns}{comparison.note}")
    if underlay is not None and rows and rows[0].name == underlay:
        ax.lines[0].set_linewidth(4.5)
        ax.lines[0].set_alpha(0.45)
        old = ax.get_legend()
        legend_title = old.get_title().get_text() if old is not None else None
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False,
                  title=legend_title or None, title_fontsize=8, alignment="left")
    return fig
