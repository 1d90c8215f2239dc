"""Figures that compare evaluation rows on one unknown set, drawn from their scores: the
precision and the accuracy of the accepted samples against the confidence threshold (the
curves the paper argues against, Fig. 3b) and the OSCR curves (Fig. 3c)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

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


def comparison_figures(rows: Sequence[ComparedRow], out_dir: Path, unknowns: str, *, stems=("confidence", "oscr"),
                       titles=("Precision and accuracy vs confidence threshold", "OSCR curves"), note: str = "",
                       underlay: Optional[str] = None, relative_to: Optional[Path] = None,
                       formats: Sequence[str] = ("png",)) -> Dict[str, List[str]]:
    """Write the confidence-curve figure and the OSCR figure; ``{title: [paths]}``.

    ``underlay`` names a row whose OSCR curve is expected to coincide with another's (e.g.
    a monotonic rescaling of its scores): it is drawn wide and pale beneath, so both show.
    Paths are relative to ``relative_to`` when given.
    """
    out_dir = Path(out_dir)
    rows = sorted(rows, key=lambda r: r.name != underlay)  # the underlay first, beneath the rest
    paths: Dict[str, List[str]] = {}

    def saved(fig, stem):
        written = save_figure(fig, out_dir / stem, formats)
        return [str(p.relative_to(relative_to)) if relative_to else str(p) for p in written]

    fig, axes = new_figure(ncols=2, panel_size=(4.8, 3.9))
    curves = {row.name: mean_confidence_curves(row.scores, CONFIDENCE_GRID) for row in rows}
    for ax, kind in zip(axes[0], ("precision", "accuracy")):
        plot_confidence_curves([CurveSeries(row.name, CONFIDENCE_GRID, curves[row.name][kind], label=row.label)
                                for row in rows], ax=ax, ylabel=f"{kind} (knowns + {unknowns})",
                               title=f"{kind.capitalize()} vs confidence")
        ax.set_xlim(0, 1)
    fig.suptitle(f"{titles[0]}: unknowns {unknowns}{note}", fontsize=10)
    paths[titles[0]] = saved(fig, stems[0])

    fig, axes = new_figure(panel_size=(7.4, 4.2))
    ax = axes[0, 0]
    series = []
    for row in rows:
        fprs = [oscr(scores, labels) for scores, labels in row.scores]
        n_unknown = max(int((labels < 0).sum()) for _, labels in row.scores)
        label = row.label + (" (identical)" if row.name == underlay else "")
        series.append(oscr_series(row.name, [(c.fpr, c.ccr) for c in fprs], n_unknown, label=label))
    plot_oscr(series, ax=ax, title=f"{titles[1]}: unknowns {unknowns}{note}")
    if underlay is not None and rows and rows[0].name == underlay:
        ax.lines[0].set_linewidth(4.5)
        ax.lines[0].set_alpha(0.45)
        old = ax.get_legend()
        title = old.get_title().get_text() if old is not None else None
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False,
                  title=title or None, title_fontsize=8, alignment="left")
    paths[titles[1]] = saved(ax.figure, stems[1])
    return paths
